//! `ptb daemon`: the system-wide service. It watches the machine, takes every process the
//! config's rules select, and lets each go when it exits.
//!
//! ```text
//!  every scan_ms:  /proc/[0-9]* ─▶ facts (uid, threads, RSS, comm, argv0, cgroup) ─▶ rules
//!                     │ Manage(rule) and not yet managed and a slot free
//!                     ▼
//!                  check_target ─▶ identity (pidfd) ─▶ thread: daemon::run(one target,
//!                                   its own policy instance, the rule's nodes)
//!  every scan:     finished threads joined (detached); metrics and `ptb status` updated
//!  SIGINT/SIGTERM: every program loop stops and puts its threads' affinities back; joined
//! ```
//!
//! Until ptb places several programs together, each program gets its own policy instance on
//! the nodes its rule allows. Never managed, whatever the rules say: pid 1, kernel threads,
//! ptb itself, processes ptb may not manage, `ptb` processes and their children (those are
//! managed by `ptb run`).

use crate::actuator::{ActuatorConfig, DryRunActuator, LinuxActuator};
use crate::control;
use crate::daemon::{self, Act, Config, Target};
use crate::metrics::{Labels, ServiceStats, Source, Stats};
use crate::procfs::ProcRoot;
use crate::rules::{ProcFacts, Rule, ServiceConfig, Verdict};
use crate::safety::{self, Caller};
use ptb_policy::{build, Params, PolicySpec};
use ptb_topology::{Machine, NodeSet};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A managed program's metric labels and its live stats.
type ProgramRow = (Labels, Arc<Mutex<Stats>>);

/// The service's metrics: its own counters and one labelled set per managed program.
#[derive(Default)]
pub struct ServiceMetrics {
    pub service: Mutex<ServiceStats>,
    programs: Mutex<BTreeMap<u32, ProgramRow>>,
}

impl ServiceMetrics {
    fn rows(&self) -> Vec<(Labels, Stats)> {
        let g = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        g.values().map(|(l, s)| (l.clone(), s.lock().map(|x| x.clone()).unwrap_or_default())).collect()
    }
    fn service(&self) -> ServiceStats {
        self.service.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Source for ServiceMetrics {
    fn text(&self) -> String {
        crate::metrics::openmetrics(&self.rows(), Some(&self.service()))
    }
    fn json(&self) -> String {
        let programs: Vec<serde_json::Value> = self
            .rows()
            .into_iter()
            .map(|(l, s)| {
                let mut v = serde_json::json!({ "stats": s });
                for (k, val) in l {
                    v[k] = serde_json::Value::String(val);
                }
                v
            })
            .collect();
        serde_json::to_string_pretty(&serde_json::json!({ "daemon": self.service(), "programs": programs }))
            .unwrap_or_default()
    }
}

/// Everything the service needs, checked by the caller.
pub struct Setup {
    pub root: ProcRoot,
    /// This machine's model (with a matching machine file's Bandwidth Graph, if given).
    pub machine: Machine,
    pub dry_run: bool,
    pub config: ServiceConfig,
    /// Text of /etc/passwd (user names in rules).
    pub passwd: String,
    /// Policy parameters from the config's policy tables.
    pub params: Params,
    pub control: Option<Arc<control::Shared>>,
    pub metrics: Arc<ServiceMetrics>,
}

/// A program being managed: its loop's thread and stop flag.
struct Running {
    thread: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

/// How the service ended.
#[derive(Debug, Default)]
pub struct Summary {
    pub attached: u64,
    pub detached: u64,
    pub scans: u64,
}

/// The dense node set of kernel node ids `list` (all nodes when None).
pub fn allowed_nodes(m: &Machine, list: Option<&str>) -> Result<NodeSet, String> {
    let Some(list) = list else { return Ok(m.all_nodes()) };
    let ids = NodeSet::parse_list(list).map_err(|e| e.to_string())?;
    let mut dense = NodeSet::new();
    for id in ids.iter_raw() {
        let ix = m
            .node_idx(ptb_topology::NodeId(id))
            .ok_or_else(|| format!("node {id} does not exist here (nodes: {})", m.node_id_list()))?;
        dense.insert_raw(ix.0 as u32);
    }
    if dense.is_empty() {
        return Err(format!("`{list}` names no node"));
    }
    Ok(dense)
}

/// Check that every rule's policy builds with the config's parameters and its nodes exist.
pub fn check(setup: &Setup) -> Result<(), String> {
    let c = &setup.config;
    let d = &c.daemon;
    // Every policy table, also of a policy no rule uses now (as `--config` of run/attach).
    ptb_policy::check_params(&setup.params).map_err(|e| e.to_string())?;
    allowed_nodes(&setup.machine, d.nodes.as_deref())
        .map_err(|e| format!("{}: field `daemon.nodes`: {e}", c.origin))?;
    for (i, r) in c.rules.iter().enumerate().filter(|(_, r)| !r.exclude) {
        let spec: PolicySpec =
            r.policy.as_deref().unwrap_or(&d.policy).parse().map_err(|e: ptb_policy::PolicyError| e.to_string())?;
        build(spec, &setup.params).map_err(|e| format!("{}: rule[{i}] ({}): {e}", c.origin, r.name))?;
        allowed_nodes(&setup.machine, r.nodes.as_deref().or(d.nodes.as_deref()))
            .map_err(|e| format!("{}: field `rule[{i}].nodes`: {e}", c.origin))?;
    }
    Ok(())
}

/// What the service reads of a process, or None for one it never manages (kernel threads,
/// zombies, ptb and its children, processes gone meanwhile).
fn facts(root: &ProcRoot, pid: u32, cfg: &ServiceConfig, me: u32) -> Option<ProcFacts> {
    if pid <= 2 || pid == me {
        return None;
    }
    let st = root.status(pid).ok()?;
    if st.kthread == Some(true) || st.ppid == 2 || st.tgid != pid || st.vm_rss_kb == 0 {
        return None;
    }
    if st.name == "ptb" || root.status(st.ppid).is_ok_and(|p| p.name == "ptb") {
        return None;
    }
    let min_threads = cfg.rules.iter().map(|r| r.min_threads).min().unwrap_or(1);
    let min_rss = cfg.rules.iter().map(|r| r.min_rss_mib).min().unwrap_or(0).saturating_mul(1024);
    let any_exclude = cfg.rules.iter().any(|r| r.exclude);
    if !any_exclude && (st.threads < min_threads || st.vm_rss_kb < min_rss) {
        return None;
    }
    let argv0 =
        if cfg.rules.iter().any(|r| r.command.is_some()) { root.cmdline_name(pid).ok()? } else { String::new() };
    let cgroup = if cfg.needs_cgroup() { root.cgroup(pid).ok()? } else { String::new() };
    Some(ProcFacts { uid: st.uid[0], comm: st.name, argv0, cgroup, threads: st.threads, rss_kib: st.vm_rss_kb })
}

fn rss_bytes(root: &ProcRoot) -> u64 {
    root.status(std::process::id()).map_or(0, |s| s.vm_rss_kb * 1024)
}

/// Run the service until SIGINT/SIGTERM.
pub fn run(setup: Setup) -> Result<Summary, String> {
    let Setup { root, machine, dry_run, config, passwd, params, control, metrics } = setup;
    let caller = Caller::current(&root);
    let me = std::process::id();
    let d = &config.daemon;
    let mut running: BTreeMap<u32, Running> = BTreeMap::new();
    // (pid, start time) already reported as skipped, so a process is logged once, not every scan.
    let mut noted: BTreeSet<(u32, u64)> = BTreeSet::new();
    let mut sum = Summary::default();
    let scan = Duration::from_millis(d.scan_ms);
    let bump = |k: &str| {
        if let Ok(mut s) = metrics.service.lock() {
            *s.skipped.entry(k.to_string()).or_default() += 1;
        }
    };
    while safety::stop_requested().is_none() {
        let t0 = Instant::now();
        // Programs whose target exited (or whose loop ended) are let go.
        let done: Vec<u32> = running.iter().filter(|(_, r)| r.thread.is_finished()).map(|(p, _)| *p).collect();
        for pid in done {
            if let Some(r) = running.remove(&pid) {
                if r.thread.join().is_err() {
                    say!("ptb daemon: the loop of pid {pid} failed (a bug, please report it); its affinities were put back");
                }
                metrics.programs.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
                sum.detached += 1;
                say!("ptb daemon: let go of pid {pid}");
            }
        }
        let pids = root.pids().map_err(|e| e.to_string())?;
        let present: BTreeSet<u32> = pids.iter().copied().collect();
        noted.retain(|(p, _)| present.contains(p));
        for pid in pids {
            if running.contains_key(&pid) || safety::stop_requested().is_some() {
                continue;
            }
            // The start time is read before the facts: the process taken must be the one the
            // rules judged (see `take`), not one that got the pid in between.
            let Ok(start) = root.task_stat(pid, pid).map(|s| s.starttime) else { continue };
            let Some(f) = facts(&root, pid, &config, me) else { continue };
            let rule = match config.verdict(&f, &passwd) {
                Verdict::Manage(r) => r,
                Verdict::Excluded(_) | Verdict::NoRule => continue,
            };
            if noted.contains(&(pid, start)) {
                continue;
            }
            if running.len() >= d.max_programs {
                noted.insert((pid, start));
                bump("limit");
                say!(
                    "ptb daemon: pid {pid} ({}) matches rule `{}` but {} programs are managed already (max_programs)",
                    f.comm,
                    rule.name,
                    running.len()
                );
                continue;
            }
            if let Err(e) = safety::check_target(&root, &caller, pid) {
                noted.insert((pid, start));
                bump("refused");
                say!("ptb daemon: not taking pid {pid} ({}): {e}", f.comm);
                continue;
            }
            match take(&root, &machine, dry_run, &config, rule, &params, &control, &metrics, (pid, start), &f) {
                Ok(r) => {
                    running.insert(pid, r);
                    sum.attached += 1;
                }
                Err(e) => {
                    noted.insert((pid, start));
                    bump("failed");
                    say!("ptb daemon: not taking pid {pid} ({}): {e}", f.comm);
                }
            }
        }
        sum.scans += 1;
        if let Ok(mut s) = metrics.service.lock() {
            s.scans = sum.scans;
            s.attached = sum.attached;
            s.detached = sum.detached;
            s.programs = running.len() as u64;
            s.rss_bytes = rss_bytes(&root);
        }
        while t0.elapsed() < scan && safety::stop_requested().is_none() {
            std::thread::sleep(Duration::from_millis(20).min(scan.saturating_sub(t0.elapsed())));
        }
    }
    say!("ptb daemon: stopping: letting go of {} programs", running.len());
    for r in running.values() {
        r.stop.store(true, Ordering::SeqCst);
    }
    for (pid, r) in running {
        if r.thread.join().is_err() {
            say!("ptb daemon: the loop of pid {pid} failed (a bug, please report it)");
        }
        sum.detached += 1;
        say!("ptb daemon: let go of pid {pid}");
    }
    Ok(sum)
}

/// Start managing `pid` under `rule`: its own policy instance and loop thread.
#[allow(clippy::too_many_arguments)]
fn take(
    root: &ProcRoot,
    machine: &Machine,
    dry_run: bool,
    config: &ServiceConfig,
    rule: &Rule,
    params: &Params,
    control: &Option<Arc<control::Shared>>,
    metrics: &Arc<ServiceMetrics>,
    (pid, start): (u32, u64),
    f: &ProcFacts,
) -> Result<Running, String> {
    let d = &config.daemon;
    let spec: PolicySpec =
        rule.policy.as_deref().unwrap_or(&d.policy).parse().map_err(|e: ptb_policy::PolicyError| e.to_string())?;
    let mut policy = build(spec, params).map_err(|e| e.to_string())?;
    let allowed = allowed_nodes(machine, rule.nodes.as_deref().or(d.nodes.as_deref()))?;
    let target = Target::attach(root, pid)?;
    if target.id.starttime != start {
        return Err(format!(
            "pid {pid} is now another process (started at tick {}, the one the rules selected at tick {start})",
            target.id.starttime
        ));
    }
    let act = if dry_run {
        Act::DryRun(DryRunActuator::default())
    } else {
        Act::Real(Box::new(LinuxActuator::new(machine.clone(), root.clone(), ActuatorConfig::default())?))
    };
    let stats = Arc::new(Mutex::new(Stats::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let nodes = allowed.iter_raw().map(|n| machine.nodes[n as usize].id.0.to_string()).collect::<Vec<_>>().join(",");
    let labels: Labels =
        vec![("pid".into(), pid.to_string()), ("command".into(), f.comm.clone()), ("rule".into(), rule.name.clone())];
    metrics.programs.lock().unwrap_or_else(|e| e.into_inner()).insert(pid, (labels, stats.clone()));
    say!(
        "ptb daemon: taking pid {pid} ({}, uid {}, {}, {} MiB): rule `{}`, policy {}, nodes {nodes}{}",
        f.comm,
        f.uid,
        ptb_topology::render::plural(f.threads, "thread", "threads"),
        f.rss_kib >> 10,
        rule.name,
        policy.name(),
        if dry_run { " (dry run)" } else { "" }
    );
    let cfg = Config {
        cycle: d.cycle_ms.map(Duration::from_millis),
        period: None,
        budget_mbps: d.budget_mbps,
        allowed,
        source: d.source.clone(),
        roi_wait: false,
        control: control.clone(),
        rule: Some(rule.name.clone()),
        stop: Some(stop.clone()),
        label: format!("ptb[{pid}]"),
        alloc_applied: false,
        max_time: None,
        summary_lines: d.log_cycles,
        stats,
        plan_log: None,
    };
    let (root, machine) = (root.clone(), machine.clone());
    let thread = std::thread::Builder::new()
        .name(format!("ptb-{pid}"))
        .spawn(move || {
            if let Err(e) = daemon::run(&root, &machine, policy.as_mut(), None, vec![target], act, &cfg) {
                say!("ptb daemon: pid {pid}: {e}");
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok(Running { thread, stop })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node list in a message reads as the README writes node lists (`0, 2, 4, 6`), never
    /// as Rust debug text (`[0, 2, 4, 6]`).
    #[test]
    fn an_unknown_node_is_named_with_the_machines_kernel_ids() {
        let m = ptb_topology::resolve("opteron6272-4n").unwrap();
        let e = allowed_nodes(&m, Some("1")).unwrap_err();
        assert_eq!(e, "node 1 does not exist here (nodes: 0, 2, 4, 6)");
        assert_eq!(allowed_nodes(&m, Some("2,6")).unwrap().iter_raw().collect::<Vec<_>>(), [1, 3]);
    }

    fn fake(root: &std::path::Path, pid: u32, name: &str, uid: u32, ppid: u32, threads: u32, rss_kb: u64) {
        let d = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("status"),
            format!(
                "Name:\t{name}\nTgid:\t{pid}\nPPid:\t{ppid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nVmRSS:\t{rss_kb} kB\nThreads:\t{threads}\n"
            ),
        )
        .unwrap();
        std::fs::write(d.join("cmdline"), format!("/usr/bin/{name}\0--x\0")).unwrap();
        std::fs::write(d.join("cgroup"), "0::/system.slice/app.service\n").unwrap();
    }

    /// Facts come from /proc; kernel threads, ptb and ptb's children are never candidates.
    #[test]
    fn facts_leave_out_what_is_never_managed() {
        let d = tempfile::tempdir().unwrap();
        let r = ProcRoot::new(d.path());
        let cfg = ServiceConfig::parse(
            "[[rule]]\nname = \"app\"\ncommand = [\"app\"]\ncgroup = [\"/system.slice\"]\nmin_threads = 2\n",
            "t.toml",
            "",
        )
        .unwrap();
        fake(d.path(), 100, "app", 1000, 50, 4, 2048);
        fake(d.path(), 101, "app", 1000, 50, 1, 2048);
        fake(d.path(), 102, "kworker", 0, 2, 1, 0);
        fake(d.path(), 103, "ptb", 0, 1, 4, 2048);
        fake(d.path(), 104, "app", 0, 103, 4, 2048);
        let f = facts(&r, 100, &cfg, 1).unwrap();
        assert_eq!(
            (f.comm.as_str(), f.argv0.as_str(), f.cgroup.as_str(), f.threads),
            ("app", "app", "/system.slice/app.service", 4)
        );
        assert!(matches!(cfg.verdict(&f, ""), Verdict::Manage(_)));
        assert!(facts(&r, 101, &cfg, 1).is_none(), "too few threads for any rule");
        assert!(facts(&r, 102, &cfg, 1).is_none(), "kernel thread");
        assert!(facts(&r, 103, &cfg, 1).is_none(), "ptb itself");
        assert!(facts(&r, 104, &cfg, 1).is_none(), "a child of ptb run");
        assert!(facts(&r, 100, &cfg, 100).is_none(), "the daemon itself");
    }

    /// /proc/PID/task/PID/stat with start time `start`.
    fn fake_stat(root: &std::path::Path, pid: u32, start: u64) {
        let d = root.join(format!("proc/{pid}/task/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut stat = format!("{pid} (app) S 1 {pid} 1 0 -1 0");
        stat.extend((0..12).map(|i| format!(" {i}")));
        stat.push_str(&format!(" {start}"));
        stat.extend((0..20).map(|_| " 0".to_string()));
        std::fs::write(d.join("stat"), stat).unwrap();
    }

    /// The rules judged the process that had the pid at one start time; if the pid names
    /// another process by the time it is taken, that one is left alone (before, it was taken
    /// with the other's rule, whatever the rules said of it).
    #[test]
    fn a_pid_reused_between_the_rules_and_the_take_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let r = ProcRoot::new(d.path());
        let cfg = ServiceConfig::parse("[[rule]]\nname = \"app\"\ncommand = [\"app\"]\n", "t.toml", "").unwrap();
        fake(d.path(), 100, "app", 1000, 50, 4, 2048);
        fake_stat(d.path(), 100, 7);
        let f = facts(&r, 100, &cfg, 1).unwrap();
        let Verdict::Manage(rule) = cfg.verdict(&f, "") else { panic!("not selected") };
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=1").unwrap();
        let metrics = Arc::new(ServiceMetrics::default());
        let e = take(&r, &m, true, &cfg, rule, &Params::new(), &None, &metrics, (100, 5), &f).err().unwrap();
        assert!(e.contains("now another process"), "{e}");
        assert!(metrics.rows().is_empty(), "nothing is registered for it");
        let ok = take(&r, &m, true, &cfg, rule, &Params::new(), &None, &metrics, (100, 7), &f).unwrap();
        ok.stop.store(true, Ordering::SeqCst);
        ok.thread.join().unwrap();
    }
}
