//! Daemon statistics: one typed definition, exported as JSON and as Prometheus text.
//!
//! Problem: the metric list was a hand copy of the stats struct, and it drifted
//! (`threads_failed` never reached Prometheus). A slow or half-open client could also stall
//! the metrics endpoint.
//!
//! Approach: the [`stats!`] macro writes each statistic once (doc = help text, kind, name,
//! type) and derives from that one list the struct (serialised as JSON by serde) and its
//! OpenMetrics encoding through `prometheus-client`, so a field cannot be in one and not the
//! other. Several sets of stats (the programs of the system-wide service) share one
//! exposition, each sample labelled. The HTTP side is a small server on loopback: one thread
//! per connection, at most [`MAX_CONNECTIONS`] at once, each with a deadline of
//! [`CONN_DEADLINE`] for its whole request and answer, so idle or trickling clients cannot
//! keep the endpoint from answering others.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Labels of one set of stats in a shared exposition (e.g. `pid`, `command`, `rule`).
pub type Labels = Vec<(String, String)>;

/// Encode one field of one kind for every labelled row.
macro_rules! encode_field {
    (counter, $enc:ident, $name:expr, $help:expr, $rows:ident, $f:ident) => {{
        let mut m = $enc.encode_descriptor($name, $help, None, prometheus_client::metrics::MetricType::Counter)?;
        match $rows {
            // One unlabelled set: `name 3`, not `name{} 3`.
            [(l, s)] if l.is_empty() => ConstCounter::new(s.$f as u64).encode(m)?,
            _ => {
                for (labels, s) in $rows {
                    ConstCounter::new(s.$f as u64).encode(m.encode_family(labels)?)?;
                }
            }
        }
    }};
    (gauge, $enc:ident, $name:expr, $help:expr, $rows:ident, $f:ident) => {{
        let mut m = $enc.encode_descriptor($name, $help, None, prometheus_client::metrics::MetricType::Gauge)?;
        match $rows {
            [(l, s)] if l.is_empty() => ConstGauge::new(s.$f as f64).encode(m)?,
            _ => {
                for (labels, s) in $rows {
                    ConstGauge::new(s.$f as f64).encode(m.encode_family(labels)?)?;
                }
            }
        }
    }};
    (by_reason, $enc:ident, $name:expr, $help:expr, $rows:ident, $f:ident) => {{
        let mut m = $enc.encode_descriptor($name, $help, None, prometheus_client::metrics::MetricType::Counter)?;
        for (labels, s) in $rows {
            for (reason, v) in &s.$f {
                let mut l = labels.clone();
                l.push(("reason".to_string(), reason.clone()));
                ConstCounter::new(*v).encode(m.encode_family(&l)?)?;
            }
        }
    }};
    // Moves a dry run did not make: only the rows of real runs (a dry run exports no `_moved_`).
    (moved, $enc:ident, $name:expr, $help:expr, $rows:ident, $f:ident) => {{
        let live: Vec<(Labels, Stats)> = $rows.iter().filter(|(_, s)| !s.dry_run).cloned().collect();
        if !live.is_empty() {
            let live = live.as_slice();
            encode_field!(counter, $enc, $name, $help, live, $f);
        }
    }};
    // What a dry run would have moved: only the rows of dry runs.
    (would, $enc:ident, $name:expr, $help:expr, $rows:ident, $f:ident) => {{
        let dry: Vec<(Labels, Stats)> = $rows.iter().filter(|(_, s)| s.dry_run).cloned().collect();
        if !dry.is_empty() {
            let dry = dry.as_slice();
            encode_field!(counter, $enc, $name, $help, dry, $f);
        }
    }};
    (info, $enc:ident, $name:expr, $help:expr, $rows:ident, $f:ident) => {{}};
}

/// The value of an `info` field as a label of the `<prefix>info` metric.
macro_rules! info_label {
    (info, $s:ident, $f:ident, $out:ident) => {
        $out.push((stringify!($f).to_string(), $s.$f.to_string()))
    };
    ($other:ident, $s:ident, $f:ident, $out:ident) => {};
}

/// Define a stats struct once: `kind name: Type` with a doc comment (the help text).
/// Kinds: `counter` (a total), `gauge` (a value now), `by_reason` (totals per reason, a
/// `BTreeMap<String, u64>`, labelled `reason`), `info` (text, a label of `<prefix>info`).
/// Metric names are the prefix and the field name (counters get `_total`).
macro_rules! stats {
    ($(#[$sm:meta])* pub struct $S:ident prefix $prefix:literal {
        $( $(#[doc = $doc:literal])+ $kind:ident $f:ident : $t:ty, )*
    }) => {
        $(#[$sm])*
        #[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
        // A field a newer ptb added reads as its default from an older one's status.
        #[serde(default)]
        pub struct $S {
            $( $(#[doc = $doc])+ pub $f: $t, )*
        }

        impl $S {
            /// Every field's name, kind and help text (the one list both exports come from).
            pub const FIELDS: &'static [(&'static str, &'static str, &'static str)] =
                &[$( (stringify!($f), stringify!($kind), concat!($($doc),+)), )*];

            /// Encode `rows` (labels, stats) as OpenMetrics descriptors and samples.
            #[allow(clippy::vec_init_then_push)]
            pub fn encode_rows(rows: &[(Labels, $S)], mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
                $( encode_field!($kind, enc, concat!($prefix, stringify!($f)), concat!($($doc),+).trim(), rows, $f); )*
                let infos: Vec<(&Labels, Labels)> = rows
                    .iter()
                    .map(|(labels, s)| {
                        #[allow(unused_mut)]
                        let mut info: Labels = Vec::new();
                        $( info_label!($kind, s, $f, info); )*
                        let _ = s;
                        (labels, info)
                    })
                    .filter(|(_, info)| !info.is_empty())
                    .collect();
                if !infos.is_empty() {
                    let mut m = enc.encode_descriptor(
                        concat!($prefix, "run"),
                        "Text facts of the run",
                        None,
                        prometheus_client::metrics::MetricType::Info,
                    )?;
                    match infos.as_slice() {
                        [(l, info)] if l.is_empty() => m.encode_info(info)?,
                        _ => {
                            for (labels, info) in &infos {
                                m.encode_family(*labels)?.encode_info(info)?;
                            }
                        }
                    }
                }
                Ok(())
            }
        }
    };
}

stats! {
    /// Counters of a daemon run (totals since start, plus the last cycle's figures).
    pub struct Stats prefix "ptb_" {
        /// Policy name.
        info policy: String,
        /// Sample source description.
        info source: String,
        /// True when nothing is moved.
        info dry_run: bool,
        /// Decision cycles run.
        counter cycles: u64,
        /// Samples delivered by the sample source.
        counter samples: u64,
        /// Samples the kernel reported lost.
        counter samples_lost: u64,
        /// Samples of cache hits dropped: the policy asked for memory accesses and the source
        /// samples every op (IBS counting ops, SPE).
        counter samples_cache_hits: u64,
        /// Thread moves applied.
        moved threads_moved: u64,
        /// Base pages migrated.
        moved pages_moved: u64,
        /// Huge pages migrated whole (transparent huge pages, hugetlbfs pages).
        moved huge_pages_moved: u64,
        /// Dry run: thread moves the plans asked for (none applied).
        would threads_would_move: u64,
        /// Dry run: pages the plans asked to move (none moved).
        would pages_would_move: u64,
        /// Page moves tried again after a failure that may pass (ENOENT, EBUSY, EAGAIN).
        counter pages_retried: u64,
        /// Pages not moved, by reason.
        by_reason pages_failed: BTreeMap<String, u64>,
        /// Thread moves that failed, by reason.
        by_reason threads_failed: BTreeMap<String, u64>,
        /// Plans refused by validation.
        counter plans_refused: u64,
        /// Cycles skipped because the region of interest was off.
        counter cycles_paused: u64,
        /// Policy decision time of the last cycle, milliseconds.
        gauge last_decision_ms: f64,
        /// Events per sample now, as the policy's plan asked unless `--period` fixed it (0: not sampling).
        gauge sampling_period: u64,
        /// Cycle length now, milliseconds (the policy's unless `--cycle-ms` fixed it).
        gauge cycle_ms: f64,
        /// Changes of the sampling period, mode or cycle length made at the policy's request.
        counter sampling_changes: u64,
        /// Threads of the managed processes.
        gauge threads_managed: u64,
        /// Managed processes still running.
        gauge targets_alive: u64,
    }
}

stats! {
    /// Counters of the system-wide service (`ptb daemon`) itself.
    pub struct ServiceStats prefix "ptb_daemon_" {
        /// Processes that matched a rule and were taken.
        counter attached: u64,
        /// Managed processes let go (they exited, or the daemon stops).
        counter detached: u64,
        /// Processes that matched a rule but could not be taken (refused, exited, limit reached).
        by_reason skipped: BTreeMap<String, u64>,
        /// Processes managed now.
        gauge programs: u64,
        /// Scans of /proc.
        counter scans: u64,
        /// Resident memory of the daemon, bytes.
        gauge rss_bytes: u64,
    }
}

/// Where the metrics endpoint gets its figures, read at every scrape.
pub trait Source: Send + Sync {
    /// OpenMetrics text.
    fn text(&self) -> String;
    /// The same figures as JSON.
    fn json(&self) -> String;
}

/// OpenMetrics text of rows of [`Stats`] (and, for the service, its own [`ServiceStats`]).
pub fn openmetrics(rows: &[(Labels, Stats)], service: Option<&ServiceStats>) -> String {
    #[derive(Debug)]
    struct Rows(Vec<(Labels, Stats)>);
    impl prometheus_client::collector::Collector for Rows {
        fn encode(&self, enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            Stats::encode_rows(&self.0, enc)
        }
    }
    #[derive(Debug)]
    struct Service(ServiceStats);
    impl prometheus_client::collector::Collector for Service {
        fn encode(&self, enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            ServiceStats::encode_rows(&[(Vec::new(), self.0.clone())], enc)
        }
    }
    let mut reg = prometheus_client::registry::Registry::default();
    if let Some(s) = service {
        reg.register_collector(Box::new(Service(s.clone())));
    }
    reg.register_collector(Box::new(Rows(rows.to_vec())));
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

/// Prometheus text of one run's stats (no labels).
pub fn prometheus_text(s: &Stats) -> String {
    openmetrics(&[(Vec::new(), s.clone())], None)
}

impl Source for Mutex<Stats> {
    fn text(&self) -> String {
        prometheus_text(&self.lock().map(|g| g.clone()).unwrap_or_default())
    }
    fn json(&self) -> String {
        serde_json::to_string_pretty(&*self.lock().unwrap_or_else(|e| e.into_inner())).unwrap_or_default()
    }
}

/// Most connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Time a connection has for its whole request and answer.
pub const CONN_DEADLINE: Duration = Duration::from_secs(2);
/// Largest request head read.
const MAX_HEAD: usize = 8192;

/// Check a `--metrics-addr`: an IP:PORT, on loopback unless `allow_remote`.
pub fn check_addr(addr: &str, allow_remote: bool) -> Result<std::net::SocketAddr, String> {
    let sock: std::net::SocketAddr =
        addr.parse().map_err(|_| format!("--metrics-addr `{addr}`: expected IP:PORT such as 127.0.0.1:9464"))?;
    if !sock.ip().is_loopback() && !allow_remote {
        return Err(format!(
            "--metrics-addr {addr} is not a loopback address; metrics are served on loopback only (use 127.0.0.1:PORT)"
        ));
    }
    Ok(sock)
}

/// Serve `/metrics` (OpenMetrics text) and `/stats.json` on `addr` from background threads.
/// Returns the bound address.
pub fn serve(addr: &str, src: Arc<dyn Source>, allow_remote: bool) -> Result<String, String> {
    let sock = check_addr(addr, allow_remote)?;
    let listener = std::net::TcpListener::bind(sock).map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    let bound = listener.local_addr().map_or(addr.to_string(), |a| a.to_string());
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("ptb-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    drop(conn);
                    continue;
                }
                active.fetch_add(1, Ordering::SeqCst);
                let (src, active) = (src.clone(), active.clone());
                let spawned = std::thread::Builder::new().name("ptb-metrics-conn".into()).spawn(move || {
                    answer(conn, src.as_ref());
                    active.fetch_sub(1, Ordering::SeqCst);
                });
                if spawned.is_err() {
                    tracing::warn!("metrics: cannot start a connection thread");
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(bound)
}

/// Read one request head within the deadline and answer it; then close.
fn answer(mut c: std::net::TcpStream, src: &dyn Source) {
    let t0 = Instant::now();
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let left = CONN_DEADLINE.saturating_sub(t0.elapsed());
        if left.is_zero() || head.len() > MAX_HEAD || c.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let (status, ctype, body) = match path {
        "/" | "/metrics" => ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", src.text()),
        "/stats.json" => ("200 OK", "application/json", src.json()),
        _ => ("404 Not Found", "text/plain", "not found: try /metrics or /stats.json\n".to_string()),
    };
    let left = CONN_DEADLINE.saturating_sub(t0.elapsed()).max(Duration::from_millis(100));
    let _ = c.set_write_timeout(Some(left));
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = c.write_all(resp.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn get(addr: &str, path: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).unwrap();
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        body
    }

    #[test]
    fn text_format_has_help_type_and_labels() {
        let mut s = Stats { pages_moved: 12, policy: "ptb".into(), ..Default::default() };
        s.pages_failed.insert("EBUSY".into(), 3);
        let t = prometheus_text(&s);
        assert!(t.contains("# TYPE ptb_pages_moved counter\nptb_pages_moved_total 12\n"), "{t}");
        assert!(t.contains("ptb_pages_failed_total{reason=\"EBUSY\"} 3"), "{t}");
        assert!(t.contains("ptb_run_info{policy=\"ptb\""), "{t}");
        assert!(t.ends_with("# EOF\n"));
    }

    /// The Prometheus output was a hand copy of `Stats` and lacked `threads_failed`: every
    /// field of the JSON now has its metric, because both come from one definition.
    #[test]
    fn every_json_field_is_a_metric() {
        let mut s = Stats::default();
        s.threads_failed.insert("ESRCH".into(), 2);
        s.pages_failed.insert("EBUSY".into(), 1);
        let t = prometheus_text(&s);
        let json = serde_json::to_value(&s).unwrap();
        for (k, _) in json.as_object().unwrap() {
            let (_, kind, _) = Stats::FIELDS.iter().find(|(n, _, _)| n == k).unwrap();
            let present = match *kind {
                "info" => t.contains(&format!("{k}=\"")),
                // A real run exports no dry-run figures (and a dry run no moves).
                "would" => !t.contains(&format!("ptb_{k}")),
                _ => t.contains(&format!("ptb_{k}")),
            };
            assert!(present, "`{k}` is in the JSON but not in the metrics:\n{t}");
        }
        assert!(t.contains("ptb_threads_failed_total{reason=\"ESRCH\"} 2"), "{t}");
    }

    #[test]
    fn rows_share_one_descriptor_and_differ_by_labels() {
        let a = (vec![("pid".to_string(), "1".to_string())], Stats { cycles: 3, ..Default::default() });
        let b = (vec![("pid".to_string(), "2".to_string())], Stats { cycles: 4, ..Default::default() });
        let svc = ServiceStats { programs: 2, ..Default::default() };
        let t = openmetrics(&[a, b], Some(&svc));
        assert_eq!(t.matches("# TYPE ptb_cycles counter").count(), 1, "{t}");
        assert!(t.contains("ptb_cycles_total{pid=\"1\"} 3") && t.contains("ptb_cycles_total{pid=\"2\"} 4"), "{t}");
        assert!(t.contains("ptb_daemon_programs 2"), "{t}");
    }

    #[test]
    fn a_dry_run_reports_would_move_and_never_moved() {
        let s = Stats { dry_run: true, pages_would_move: 61168, threads_would_move: 3, ..Default::default() };
        let t = prometheus_text(&s);
        assert!(t.contains("ptb_pages_would_move_total 61168") && t.contains("dry_run=\"true\""), "{t}");
        assert!(!t.contains("_moved_"), "{t}");
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"pages_would_move\":61168") && j.contains("\"pages_moved\":0"), "{j}");
        let real = prometheus_text(&Stats { pages_moved: 5, ..Default::default() });
        assert!(!real.contains("would") && real.contains("ptb_pages_moved_total 5"), "{real}");
    }

    #[test]
    fn serves_on_loopback_and_refuses_remote() {
        let stats: Arc<Mutex<Stats>> = Arc::new(Mutex::new(Stats { cycles: 5, ..Default::default() }));
        assert!(serve("0.0.0.0:0", stats.clone(), false).unwrap_err().contains("loopback"));
        assert!(check_addr("garbage", false).unwrap_err().contains("IP:PORT"));
        let addr = serve("127.0.0.1:0", stats, false).unwrap();
        let body = get(&addr, "/metrics");
        assert!(body.contains("ptb_cycles_total 5"), "{body}");
        assert!(get(&addr, "/stats.json").contains("\"cycles\": 5"));
        assert!(get(&addr, "/nope").starts_with("HTTP/1.1 404"));
    }

    fn get_within(addr: &str, limit: Duration) -> Option<Duration> {
        let t = Instant::now();
        while t.elapsed() < limit {
            if let Ok(mut c) = TcpStream::connect(addr) {
                c.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
                let _ = c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
                let mut body = String::new();
                if c.read_to_string(&mut body).is_ok() && body.contains("ptb_cycles_total 1") {
                    return Some(t.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn idle_clients(addr: &str, n: usize) -> Vec<TcpStream> {
        (0..n)
            .map(|i| {
                let mut c = TcpStream::connect(addr).unwrap();
                if i % 2 == 0 {
                    c.write_all(b"GET /metr").unwrap(); // half a request, then silence
                }
                c
            })
            .collect()
    }

    /// `/metrics` stopped answering for more than 3 s while idle, half-sent connections were
    /// open (20 of them kept tiny_http's server from answering for over 10 s): each
    /// connection now has its own thread and deadline.
    #[test]
    fn slow_and_idle_clients_do_not_stall_the_endpoint() {
        let stats: Arc<Mutex<Stats>> = Arc::new(Mutex::new(Stats { cycles: 1, ..Default::default() }));
        let addr = serve("127.0.0.1:0", stats, false).unwrap();
        let idle = idle_clients(&addr, 20);
        let t = get_within(&addr, Duration::from_secs(3)).expect("no answer with 20 idle clients");
        assert!(t < Duration::from_secs(1), "answered only after {t:?} with 20 idle clients");
        // More idle clients than the cap: answered at the latest once their deadline passed.
        let more = idle_clients(&addr, MAX_CONNECTIONS);
        let t = get_within(&addr, CONN_DEADLINE * 3).expect("no answer above the cap");
        assert!(t <= CONN_DEADLINE + Duration::from_secs(1), "answered only after {t:?} above the cap");
        drop((idle, more));
    }
}
