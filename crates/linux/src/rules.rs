//! The system-wide service's configuration (`/etc/ptb/ptb.toml`): which processes it manages
//! and how, numad-style.
//!
//! Problem: `ptb daemon` must take every process an administrator wants placed (a user, a
//! command, a cgroup, big enough to matter) and never one they did not ask for; a config file
//! is input like any other (bounded, every field checked, errors naming the field and line).
//!
//! Approach: a `[daemon]` table (scan period, defaults), an ordered list of `[[rule]]`s and,
//! like `--config`, one `[POLICY]` table of parameters per policy. A process is managed when
//! the first rule it matches is not an `exclude` rule; a rule matches when every criterion it
//! gives holds (users, commands, cgroups, at least `min_threads` threads and `min_rss_mib`
//! MiB resident). Matching is a pure function of a [`ProcFacts`] (tested and fuzzed without a
//! machine); reading the facts is the service's job.
//!
//! ```toml
//! [daemon]
//! scan_ms = 2000
//! policy = "ptb"
//!
//! [[rule]]
//! name = "databases"
//! user = ["postgres"]
//! command = ["postgres"]
//! min_threads = 4
//! min_rss_mib = 512
//!
//! [ptb]
//! payback = 3
//! ```

use ptb_topology::input::{self, cap};
use serde::Deserialize;
use std::path::Path;

/// The `[daemon]` table.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DaemonTable {
    /// How often /proc is scanned for processes to take, ms.
    #[serde(default = "default_scan_ms")]
    pub scan_ms: u64,
    /// Policy of programs whose rule names none.
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Kernel node ids programs may use (default: all).
    #[serde(default)]
    pub nodes: Option<String>,
    /// Machine file with this machine's Bandwidth Graph (from `ptb characterize`).
    #[serde(default)]
    pub machine: Option<String>,
    /// Loopback address of the one metrics endpoint for all programs.
    #[serde(default)]
    pub metrics_addr: Option<String>,
    /// Decide and report only.
    #[serde(default)]
    pub dry_run: bool,
    /// Sample source (auto, ibs-op, pebs-loads, spe, page-faults, none).
    #[serde(default = "default_source")]
    pub source: String,
    /// Cycle length of every program, ms (default: the policy's).
    #[serde(default)]
    pub cycle_ms: Option<u64>,
    /// Migration budget of each program, MB/s.
    #[serde(default)]
    pub budget_mbps: Option<f64>,
    /// Most programs managed at once (more matching processes wait for a free slot).
    #[serde(default = "default_max_programs")]
    pub max_programs: usize,
    /// Turn the kernel's NUMA balancing off while the service runs.
    #[serde(default)]
    pub disable_kernel_balancing: bool,
    /// One summary line per program and cycle on stderr (the journal).
    #[serde(default)]
    pub log_cycles: bool,
}

fn default_scan_ms() -> u64 {
    2000
}
fn default_policy() -> String {
    "ptb".into()
}
fn default_source() -> String {
    "auto".into()
}
fn default_max_programs() -> usize {
    64
}

impl Default for DaemonTable {
    fn default() -> Self {
        DaemonTable {
            scan_ms: default_scan_ms(),
            policy: default_policy(),
            nodes: None,
            machine: None,
            metrics_addr: None,
            dry_run: false,
            source: default_source(),
            cycle_ms: None,
            budget_mbps: None,
            max_programs: default_max_programs(),
            disable_kernel_balancing: false,
            log_cycles: false,
        }
    }
}

/// A user named in a rule: a name (looked up in /etc/passwd) or a uid.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum UserRef {
    Uid(u32),
    Name(String),
}

/// One `[[rule]]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Shown by `ptb status` and in the metrics' `rule` label.
    pub name: String,
    /// Owners (real uid) the rule takes; absent: any user.
    #[serde(default)]
    pub user: Option<Vec<UserRef>>,
    /// Command names: the kernel's `comm` or the file name of the first argument; a trailing
    /// `*` matches a prefix. Absent: any command.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// cgroup paths: the process's cgroup is one of them or below one. Absent: any.
    #[serde(default)]
    pub cgroup: Option<Vec<String>>,
    /// At least this many threads.
    #[serde(default = "one")]
    pub min_threads: u32,
    /// At least this much resident memory, MiB.
    #[serde(default)]
    pub min_rss_mib: u64,
    /// Processes that match are never managed (and no later rule is tried).
    #[serde(default)]
    pub exclude: bool,
    /// Policy of the programs this rule takes (default: the `[daemon]` policy).
    #[serde(default)]
    pub policy: Option<String>,
    /// Kernel node ids they may use (default: the `[daemon]` nodes).
    #[serde(default)]
    pub nodes: Option<String>,
}

fn one() -> u32 {
    1
}

/// The whole file.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceConfig {
    pub daemon: DaemonTable,
    pub rules: Vec<Rule>,
    /// The policy tables (`[ptb]`, ...), as TOML text for `Params::add_toml`.
    pub policy_toml: String,
    /// The file, for messages and `ptb status`.
    pub origin: String,
}

/// What the service knows of a process when it applies the rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcFacts {
    pub uid: u32,
    /// `/proc/PID/comm`.
    pub comm: String,
    /// File name of the first argument (`/proc/PID/cmdline`).
    pub argv0: String,
    /// cgroup path (v2, or the first v1 hierarchy).
    pub cgroup: String,
    pub threads: u32,
    pub rss_kib: u64,
}

/// What the rules say about a process.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict<'a> {
    /// Manage it as `rule` says.
    Manage(&'a Rule),
    /// An exclude rule matched (named).
    Excluded(&'a str),
    /// No rule matched.
    NoRule,
}

/// Most rules a file may have, and most entries in one list of a rule.
pub const MAX_RULES: usize = 1024;
pub const MAX_LIST: usize = 4096;

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

impl ServiceConfig {
    /// Read and check a config file (a regular file of at most 1 MiB). User names are
    /// resolved against `passwd` (the text of /etc/passwd).
    pub fn load(path: &Path, passwd: &str) -> Result<ServiceConfig, String> {
        let text = input::read_text(path, "daemon config", cap::CONFIG).map_err(|e| e.to_string())?;
        ServiceConfig::parse(&text, &path.display().to_string(), passwd)
    }

    /// Parse and check the text of a config file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str, passwd: &str) -> Result<ServiceConfig, String> {
        let at =
            |e: &toml::de::Error| e.span().map(|s| format!(" (line {})", line_of(text, s.start))).unwrap_or_default();
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| format!("{origin}: not valid TOML{}: {}", at(&e), e.message()))?;
        let field = |name: &str, e: serde_path_to_error::Error<toml::de::Error>| {
            let p = e.path().to_string();
            let inner = e.into_inner();
            let f = if p == "." { name.to_string() } else { format!("{name}.{p}") };
            format!("{origin}: field `{f}`: {}", inner.message())
        };
        let daemon: DaemonTable = match table.remove("daemon") {
            None => DaemonTable::default(),
            Some(v) => serde_path_to_error::deserialize(v).map_err(|e| field("daemon", e))?,
        };
        let rules: Vec<Rule> = match table.remove("rule") {
            None => vec![],
            Some(v) => serde_path_to_error::deserialize(v).map_err(|e| field("rule", e))?,
        };
        let cfg = ServiceConfig {
            daemon,
            rules,
            policy_toml: toml::to_string(&table).map_err(|e| format!("{origin}: {e}"))?,
            origin: origin.to_string(),
        };
        cfg.check(passwd)?;
        Ok(cfg)
    }

    /// Every field in range; every user name known; every policy name a policy.
    fn check(&self, passwd: &str) -> Result<(), String> {
        let o = &self.origin;
        let d = &self.daemon;
        let bad = |f: &str, why: String| Err(format!("{o}: field `{f}`: {why}"));
        if !(100..=3_600_000).contains(&d.scan_ms) {
            return bad("daemon.scan_ms", format!("{} is outside 100..=3600000", d.scan_ms));
        }
        if !(1..=4096).contains(&d.max_programs) {
            return bad("daemon.max_programs", format!("{} is outside 1..=4096", d.max_programs));
        }
        if let Some(c) = d.cycle_ms {
            if !(10..=3_600_000).contains(&c) {
                return bad("daemon.cycle_ms", format!("{c} is outside 10..=3600000"));
            }
        }
        if let Some(b) = d.budget_mbps {
            if !b.is_finite() || b <= 0.0 {
                return bad("daemon.budget_mbps", format!("{b} is not a finite number above 0"));
            }
        }
        if !["auto", "ibs-op", "pebs-loads", "spe", "page-faults", "none"].contains(&d.source.as_str()) {
            return bad(
                "daemon.source",
                format!("`{}`: one of auto, ibs-op, pebs-loads, spe, page-faults, none", d.source),
            );
        }
        if let Some(a) = &d.metrics_addr {
            crate::metrics::check_addr(a, false).map_err(|e| format!("{o}: field `daemon.metrics_addr`: {e}"))?;
        }
        check_policy(&d.policy).map_err(|e| format!("{o}: field `daemon.policy`: {e}"))?;
        if let Some(n) = &d.nodes {
            check_nodes(n).map_err(|e| format!("{o}: field `daemon.nodes`: {e}"))?;
        }
        if self.rules.is_empty() {
            return bad("rule", "no [[rule]]: the daemon would manage nothing".into());
        }
        if self.rules.len() > MAX_RULES {
            return bad("rule", format!("{} rules, at most {MAX_RULES}", self.rules.len()));
        }
        for (i, r) in self.rules.iter().enumerate() {
            let f = |k: &str| format!("rule[{i}].{k}");
            if r.name.trim().is_empty() || r.name.len() > 128 {
                return bad(&f("name"), "give a name of 1 to 128 characters".into());
            }
            if let Some(j) = self.rules[..i].iter().position(|p| p.name == r.name) {
                return bad(&f("name"), format!("`{}` is also the name of rule[{j}]", r.name));
            }
            for (k, len) in [
                ("user", r.user.as_ref().map(Vec::len)),
                ("command", r.command.as_ref().map(Vec::len)),
                ("cgroup", r.cgroup.as_ref().map(Vec::len)),
            ] {
                match len {
                    Some(0) => return bad(&f(k), "an empty list matches nothing; leave it out to match any".into()),
                    Some(n) if n > MAX_LIST => return bad(&f(k), format!("{n} entries, at most {MAX_LIST}")),
                    _ => {}
                }
            }
            for (j, u) in r.user.iter().flatten().enumerate() {
                if let UserRef::Name(n) = u {
                    if uid_of(passwd, n).is_none() {
                        return bad(&format!("rule[{i}].user[{j}]"), format!("no user `{n}` in /etc/passwd"));
                    }
                }
            }
            for (j, c) in r.command.iter().flatten().enumerate() {
                if c.is_empty() || c.contains('/') {
                    return bad(&format!("rule[{i}].command[{j}]"), format!("`{c}`: a command name (no `/`)"));
                }
            }
            for (j, c) in r.cgroup.iter().flatten().enumerate() {
                if !c.starts_with('/') {
                    return bad(&format!("rule[{i}].cgroup[{j}]"), format!("`{c}`: a cgroup path starts with `/`"));
                }
            }
            if r.min_threads > 1 << 22 {
                return bad(&f("min_threads"), format!("{} is more threads than Linux allows", r.min_threads));
            }
            if r.min_rss_mib > 1 << 40 {
                return bad(&f("min_rss_mib"), format!("{} MiB is more memory than a machine has", r.min_rss_mib));
            }
            if r.exclude && (r.policy.is_some() || r.nodes.is_some()) {
                return bad(&f("exclude"), "an exclude rule takes no policy or nodes".into());
            }
            if let Some(p) = &r.policy {
                check_policy(p).map_err(|e| format!("{o}: field `rule[{i}].policy`: {e}"))?;
            }
            if let Some(n) = &r.nodes {
                check_nodes(n).map_err(|e| format!("{o}: field `rule[{i}].nodes`: {e}"))?;
            }
        }
        Ok(())
    }

    /// The rules' verdict on a process.
    pub fn verdict(&self, f: &ProcFacts, passwd: &str) -> Verdict<'_> {
        for r in &self.rules {
            if matches(r, f, passwd) {
                return if r.exclude { Verdict::Excluded(&r.name) } else { Verdict::Manage(r) };
            }
        }
        Verdict::NoRule
    }

    /// True when some rule reads the process's cgroup or command line (so the service reads them).
    pub fn needs_cgroup(&self) -> bool {
        self.rules.iter().any(|r| r.cgroup.is_some())
    }
}

fn check_policy(name: &str) -> Result<(), String> {
    name.parse::<ptb_policy::PolicySpec>().map(|_| ()).map_err(|e| e.to_string())
}

fn check_nodes(list: &str) -> Result<(), String> {
    let s = ptb_topology::NodeSet::parse_list(list).map_err(|e| e.to_string())?;
    if s.is_empty() {
        return Err(format!("`{list}` names no node"));
    }
    Ok(())
}

/// The uid of user `name` in the text of /etc/passwd (`name:x:uid:...`).
pub fn uid_of(passwd: &str, name: &str) -> Option<u32> {
    passwd.lines().find_map(|l| {
        let mut it = l.split(':');
        (it.next()? == name).then_some(())?;
        it.next()?;
        it.next()?.parse().ok()
    })
}

fn matches(r: &Rule, f: &ProcFacts, passwd: &str) -> bool {
    if let Some(users) = &r.user {
        let hit = users.iter().any(|u| match u {
            UserRef::Uid(id) => *id == f.uid,
            UserRef::Name(n) => uid_of(passwd, n) == Some(f.uid),
        });
        if !hit {
            return false;
        }
    }
    if let Some(cmds) = &r.command {
        let hit = cmds.iter().any(|c| match c.strip_suffix('*') {
            Some(prefix) => f.comm.starts_with(prefix) || f.argv0.starts_with(prefix),
            None => f.comm == *c || f.argv0 == *c,
        });
        if !hit {
            return false;
        }
    }
    if let Some(cgs) = &r.cgroup {
        let hit = cgs.iter().any(|c| {
            let c = c.trim_end_matches('/');
            c.is_empty() || f.cgroup == c || f.cgroup.strip_prefix(c).is_some_and(|rest| rest.starts_with('/'))
        });
        if !hit {
            return false;
        }
    }
    f.threads >= r.min_threads && f.rss_kib >= r.min_rss_mib.saturating_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\npostgres:x:105:110::/var/lib/postgresql:/bin/sh\n";

    const GOOD: &str = r#"
[daemon]
scan_ms = 500
policy = "interleave"
nodes = "0-3"
metrics_addr = "127.0.0.1:9464"

[[rule]]
name = "no-backups"
command = ["pg_dump"]
exclude = true

[[rule]]
name = "db"
user = ["postgres", 1001]
command = ["postgres", "java*"]
cgroup = ["/system.slice/postgresql.service"]
min_threads = 4
min_rss_mib = 64
policy = "ptb"
nodes = "0-1"

[ptb]
payback = 3
"#;

    fn facts() -> ProcFacts {
        ProcFacts {
            uid: 105,
            comm: "postgres".into(),
            argv0: "postgres".into(),
            cgroup: "/system.slice/postgresql.service/main".into(),
            threads: 8,
            rss_kib: 128 << 10,
        }
    }

    #[test]
    fn a_good_file_parses_and_rules_decide_in_order() {
        let c = ServiceConfig::parse(GOOD, "ptb.toml", PASSWD).unwrap();
        assert_eq!(c.daemon.scan_ms, 500);
        assert_eq!(c.rules.len(), 2);
        assert!(c.policy_toml.contains("payback = 3"), "{}", c.policy_toml);
        assert!(matches!(c.verdict(&facts(), PASSWD), Verdict::Manage(r) if r.name == "db"));
        let small = ProcFacts { threads: 2, ..facts() };
        assert_eq!(c.verdict(&small, PASSWD), Verdict::NoRule);
        let lean = ProcFacts { rss_kib: 1 << 10, ..facts() };
        assert_eq!(c.verdict(&lean, PASSWD), Verdict::NoRule);
        let other = ProcFacts { uid: 1000, ..facts() };
        assert_eq!(c.verdict(&other, PASSWD), Verdict::NoRule);
        let by_uid = ProcFacts { uid: 1001, comm: "java".into(), argv0: "java".into(), ..facts() };
        assert!(matches!(c.verdict(&by_uid, PASSWD), Verdict::Manage(_)));
        let elsewhere = ProcFacts { cgroup: "/system.slice/postgresql.service2".into(), ..facts() };
        assert_eq!(c.verdict(&elsewhere, PASSWD), Verdict::NoRule);
        let dump = ProcFacts { comm: "pg_dump".into(), ..facts() };
        assert_eq!(c.verdict(&dump, PASSWD), Verdict::Excluded("no-backups"));
    }

    #[test]
    fn bad_files_name_the_field() {
        let cases = [
            (GOOD.replace("scan_ms = 500", "scan_ms = 0"), "daemon.scan_ms"),
            (GOOD.replace("scan_ms = 500", "scan_ms = \"x\""), "daemon.scan_ms"),
            (GOOD.replace("scan_ms = 500", "scna_ms = 5"), "daemon"),
            (GOOD.replace("\"postgres\", 1001", "\"nobody-here\""), "rule[1].user[0]"),
            (GOOD.replace("min_threads = 4", "min_thread = 4"), "rule"),
            (GOOD.replace("policy = \"ptb\"", "policy = \"ptbb\""), "rule[1].policy"),
            (GOOD.replace("nodes = \"0-1\"", "nodes = \"\""), "rule[1].nodes"),
            (GOOD.replace("127.0.0.1:9464", "0.0.0.0:9464"), "daemon.metrics_addr"),
            (GOOD.replace("[\"pg_dump\"]", "[]"), "rule[0].command"),
            (GOOD.replace("\"/system.slice/", "\"system.slice/"), "rule[1].cgroup[0]"),
            (GOOD.replace("name = \"db\"", "name = \"no-backups\""), "rule[1].name"),
            (GOOD.replace("exclude = true", "exclude = true\npolicy = \"ptb\""), "rule[0].exclude"),
            (GOOD.replace("source", "x").replace("[daemon]", "[daemon]\nsource = \"perf\""), "daemon.source"),
        ];
        for (text, want) in cases {
            let e = ServiceConfig::parse(&text, "ptb.toml", PASSWD).unwrap_err();
            assert!(e.contains("ptb.toml") && e.contains(want), "{want}: {e}");
        }
        let e = ServiceConfig::parse("[daemon]\n", "ptb.toml", PASSWD).unwrap_err();
        assert!(e.contains("no [[rule]]"), "{e}");
        let e = ServiceConfig::parse("[daemon\n", "ptb.toml", PASSWD).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn passwd_lookup() {
        assert_eq!(uid_of(PASSWD, "postgres"), Some(105));
        assert_eq!(uid_of(PASSWD, "post"), None);
        assert_eq!(uid_of("broken\n::\n", "broken"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// Fuzz target of the daemon config: the good file with bytes inserted, cut or
        /// replaced parses or fails with the file's name, never panics.
        #[test]
        fn mutated_configs_never_panic(edits in proptest::collection::vec((0.0f64..1.0, 0u8..3, "[a-z0-9=\\[\\]\"\n.*_ -]{0,8}"), 1..5)) {
            let t = ptb_topology::input::mutate(GOOD, &edits);
            if let Err(e) = ServiceConfig::parse(&t, "fuzz.toml", PASSWD) {
                prop_assert!(e.contains("fuzz.toml"), "{}", e);
            }
        }

        /// Fuzz target of the /etc/passwd lookup: any text is read without a panic, and a
        /// user's line among arbitrary other lines gives its uid.
        #[test]
        fn passwd_lines_are_found_among_any_others(
            junk in proptest::collection::vec("[a-z0-9:x/ \t-]{0,30}", 0..8),
            at in any::<prop::sample::Index>(), uid in any::<u32>(),
        ) {
            let mut lines: Vec<String> = junk.into_iter().filter(|l| !l.starts_with("ptbuser:")).collect();
            let _ = uid_of(&lines.join("\n"), "ptbuser");
            lines.insert(at.index(lines.len() + 1), format!("ptbuser:x:{uid}:{uid}::/home/ptbuser:/bin/sh"));
            prop_assert_eq!(uid_of(&lines.join("\n"), "ptbuser"), Some(uid));
        }

        /// Matching is a pure function: a rule without criteria takes any process with enough
        /// threads and memory, and never one with fewer.
        #[test]
        fn thresholds_decide(threads in 0u32..64, rss in 0u64..1 << 20, min_t in 1u32..64, min_m in 0u64..1024) {
            let r = Rule { name: "r".into(), user: None, command: None, cgroup: None, min_threads: min_t,
                           min_rss_mib: min_m, exclude: false, policy: None, nodes: None };
            let f = ProcFacts { threads, rss_kib: rss, ..Default::default() };
            prop_assert_eq!(matches(&r, &f, ""), threads >= min_t && rss >= min_m * 1024);
        }
    }
}
