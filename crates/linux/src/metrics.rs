//! Daemon statistics: one typed struct, exported as JSON and as Prometheus text
//! (`--metrics-addr`, served by tiny_http on a background thread, loopback by default).

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Counters of a daemon run (totals since start, plus the last cycle's figures).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    /// Policy name.
    pub policy: String,
    /// Sample source description.
    pub source: String,
    pub dry_run: bool,
    pub cycles: u64,
    pub samples: u64,
    pub samples_lost: u64,
    pub threads_moved: u64,
    /// Base (4 KiB) pages migrated one by one.
    pub pages_moved: u64,
    /// Huge pages migrated whole (transparent huge pages, hugetlbfs pages).
    pub huge_pages_moved: u64,
    /// Page moves tried again after a failure that may pass (ENOENT, EBUSY, EAGAIN).
    pub pages_retried: u64,
    /// Pages not moved, by reason.
    pub pages_failed: BTreeMap<String, u64>,
    /// Thread moves that failed, by reason.
    pub threads_failed: BTreeMap<String, u64>,
    /// Plans refused by validation.
    pub plans_refused: u64,
    /// Cycles skipped because the region of interest was off.
    pub cycles_paused: u64,
    pub last_decision_ms: f64,
    pub threads_managed: u64,
    pub targets_alive: u64,
}

/// (name, help, value) of every numeric metric.
fn metrics(s: &Stats) -> Vec<(&'static str, &'static str, f64)> {
    vec![
        ("ptb_cycles_total", "Decision cycles run", s.cycles as f64),
        ("ptb_samples_total", "Samples delivered by the sample source", s.samples as f64),
        ("ptb_samples_lost_total", "Samples the kernel reported lost", s.samples_lost as f64),
        ("ptb_threads_moved_total", "Thread moves applied", s.threads_moved as f64),
        ("ptb_pages_moved_total", "Base pages migrated", s.pages_moved as f64),
        ("ptb_huge_pages_moved_total", "Huge pages migrated whole", s.huge_pages_moved as f64),
        ("ptb_pages_retried_total", "Page moves tried again after a failure that may pass", s.pages_retried as f64),
        ("ptb_plans_refused_total", "Plans refused by validation", s.plans_refused as f64),
        ("ptb_cycles_paused_total", "Cycles skipped outside the region of interest", s.cycles_paused as f64),
        ("ptb_decision_seconds", "Policy decision time of the last cycle", s.last_decision_ms / 1000.0),
        ("ptb_threads_managed", "Threads of the managed processes", s.threads_managed as f64),
        ("ptb_targets_alive", "Managed processes still running", s.targets_alive as f64),
    ]
}

/// Prometheus text exposition format (version 0.0.4).
pub fn prometheus_text(s: &Stats) -> String {
    let mut out = String::new();
    for (name, help, v) in metrics(s) {
        let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"));
    }
    out.push_str("# HELP ptb_pages_failed_total Pages not moved, by reason\n# TYPE ptb_pages_failed_total counter\n");
    for (k, v) in &s.pages_failed {
        out.push_str(&format!("ptb_pages_failed_total{{reason=\"{k}\"}} {v}\n"));
    }
    out
}

/// Serve `/metrics` (Prometheus text) and `/stats.json` on `addr` from a background thread.
/// Addresses that are not loopback are refused unless `allow_remote`.
pub fn serve(addr: &str, stats: Arc<Mutex<Stats>>, allow_remote: bool) -> Result<String, String> {
    let sock: std::net::SocketAddr =
        addr.parse().map_err(|_| format!("--metrics-addr `{addr}`: expected IP:PORT such as 127.0.0.1:9464"))?;
    if !sock.ip().is_loopback() && !allow_remote {
        return Err(format!(
            "--metrics-addr {addr} is not a loopback address; metrics are served on loopback only (use 127.0.0.1:PORT)"
        ));
    }
    let server = tiny_http::Server::http(sock).map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    let bound = server.server_addr().to_ip().map_or(addr.to_string(), |a| a.to_string());
    std::thread::Builder::new()
        .name("ptb-metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let s = stats.lock().map(|g| g.clone()).unwrap_or_default();
                let (body, ctype) = match req.url() {
                    "/stats.json" => (serde_json::to_string_pretty(&s).unwrap_or_default(), "application/json"),
                    _ => (prometheus_text(&s), "text/plain; version=0.0.4"),
                };
                let mut resp = tiny_http::Response::from_string(body);
                if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", ctype) {
                    resp = resp.with_header(h);
                }
                let _ = req.respond(resp);
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn text_format_has_help_type_and_labels() {
        let mut s = Stats { pages_moved: 12, ..Default::default() };
        s.pages_failed.insert("EBUSY".into(), 3);
        let t = prometheus_text(&s);
        assert!(t.contains("# TYPE ptb_pages_moved_total counter\nptb_pages_moved_total 12\n"), "{t}");
        assert!(t.contains("ptb_pages_failed_total{reason=\"EBUSY\"} 3"));
        assert!(t.lines().filter(|l| !l.starts_with('#')).all(|l| l.split(' ').count() == 2));
    }

    #[test]
    fn serves_on_loopback_and_refuses_remote() {
        let stats = Arc::new(Mutex::new(Stats { cycles: 5, ..Default::default() }));
        assert!(serve("0.0.0.0:0", stats.clone(), false).unwrap_err().contains("loopback"));
        let addr = serve("127.0.0.1:0", stats, false).unwrap();
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        assert!(body.contains("ptb_cycles_total 5"), "{body}");
    }
}
