//! Workload models: what a program does to memory, as data (TOML files; schema in
//! `docs/workload-file.md`).
//!
//! A workload has threads, memory objects (size, which threads first-touch them), and phases.
//! Each phase gives every active thread an amount of work (instructions), a memory intensity
//! (accesses per kilo-instruction), a read/write mix, memory-level parallelism, and a
//! distribution of its accesses over the objects (private slice, neighbours, uniform shared,
//! hot set, streaming, all-to-all). Phases are separated by barriers; the phase list repeats
//! `iterations` times.

pub mod suite;

use crate::error::SimError;
use ptb_topology::CpuSet;
use serde::{Deserialize, Serialize};

/// How many threads a workload runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Threads {
    /// A fixed number.
    Count(u32),
    /// `"per-cpu"`: one per CPU of the allowed nodes.
    Named(String),
}

impl Default for Threads {
    fn default() -> Self {
        Threads::Named("per-cpu".into())
    }
}

/// A memory object (an array, a heap region).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Object {
    pub name: String,
    /// Size in MiB (rounded up to whole pages).
    pub size_mib: f64,
    /// Who first-touches it: `thread:N` (one thread writes it all), `threads:LIST` (those
    /// threads each write an equal slice), or `parallel` (every thread writes its own slice).
    #[serde(default = "default_init")]
    pub init: String,
    /// Backed by transparent huge pages (2 MiB): allocated and migrated in whole huge pages.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub huge_pages: bool,
}

fn default_init() -> String {
    "thread:0".into()
}

/// How a thread's accesses to an object are distributed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Uniform over the thread's own slice (object split evenly among the app's threads).
    Private,
    /// Own slice, plus `neighbour_share` of the accesses split over the two adjacent slices.
    Neighbours,
    /// Uniform over the whole object (every thread may touch any element).
    Uniform,
    /// Uniform over the first `hot_fraction` of the object (a hot set shared by all).
    Hot,
    /// A window sweeping the thread's own slice once per phase (touched once, no reuse).
    Stream,
    /// Reads uniform over every thread's slice, writes to the own slice (transposes).
    AllToAll,
    /// Part `j` of every thread's slice: the object is laid out by one dimension (the slices,
    /// as initialised) and swept by another, as NPB LU's arrays, first touched by k-planes and
    /// swept by blocks of j-rows of every plane. Each page has one such accessor, on every node.
    Transposed,
}

/// One component of a phase's access distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    pub object: String,
    pub pattern: Pattern,
    /// Relative share of the phase's accesses (normalised over the phase's entries).
    #[serde(default = "one")]
    pub weight: f64,
    /// `hot` only: fraction of the object that is hot (default 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_fraction: Option<f64>,
    /// `neighbours` only: share of accesses to the two neighbour slices (default 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbour_share: Option<f64>,
    /// `stream` only: fraction of the slice in the active window (default 1/16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_fraction: Option<f64>,
    /// Only these app threads make this entry's accesses (a list such as `0-3`); all active
    /// threads when absent. A thread's entries are weighted relative to each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<String>,
}

fn one() -> f64 {
    1.0
}

/// A phase: every active thread executes `work_ginstr` giga-instructions, then waits at a barrier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    pub name: String,
    /// Work per active thread, giga-instructions.
    pub work_ginstr: f64,
    /// Memory accesses (last-level-cache misses) per kilo-instruction.
    pub apki: f64,
    /// Share of accesses that are writes (0..1).
    #[serde(default = "default_write")]
    pub write_share: f64,
    /// Memory-level parallelism: misses a thread overlaps (>= 1 typical; 1 = pointer chasing).
    #[serde(default = "default_mlp")]
    pub mlp: f64,
    /// Core speed when never stalled, giga-instructions per second.
    #[serde(default = "default_ips")]
    pub ips: f64,
    /// Memory operations (loads and stores, cache hits included) per kilo-instruction: what an
    /// op sampler (IBS op, SPE) sees. Default [`DEFAULT_MEM_OPS_PKI`], and never below `apki`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_ops_pki: Option<f64>,
    /// Threads active in this phase (app thread indices as a list, e.g. `0` or `0-3`); all
    /// when absent. Inactive threads wait at the barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<String>,
    /// Relative work of each app thread in this phase (thread `i` gets entry `i` modulo the
    /// list's length, divided by the mean over the app's threads); 0 leaves a thread idle.
    /// Every thread does `work_ginstr` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_work: Option<Vec<f64>>,
    /// Access distribution (at least one entry when `apki > 0`).
    #[serde(default)]
    pub access: Vec<Access>,
    /// The phase is a pipeline whose threads wait for their neighbour by spinning on a flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin: Option<Spin>,
    /// Loads that hit the cache, by the object they read ([`Hit`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<Hit>,
}

/// A share of a phase's memory ops that read one object and hit the cache: a hot structure
/// that stays cached while the phase streams other data past it (NPB CG's gathered vector,
/// 1.2 MB in class C, read once per nonzero beside the matrix's `a` and `colidx`). They put no
/// traffic on memory and no time beyond the phase's own, but an op sampler (IBS op, SPE) tags
/// them like any other op, at random over the object's pages. Part of the memory ops
/// (`mem_ops_pki`), not added to them; the accesses of `access` are the phase's DRAM traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hit {
    /// The object read.
    pub object: String,
    /// Share of the phase's memory ops (loads and stores, cache hits included), in (0, 1].
    pub share: f64,
}

/// A pipelined phase's spin-wait (NPB LU's lower and upper triangular sweeps): thread `t`
/// starts a sweep `t` stages after thread 0 and ends `T - 1 - t` stages before the last, so
/// each of `T` threads waits `(T - 1) / (stages + T - 1)` of the sweep, spinning on a flag of
/// `object` (LU's `sync_left` and `sync_right` loop on `isync` with `!$omp flush`). The spin
/// loop's loads hit the cache: they put no traffic on memory, but an op sampler (IBS op, SPE)
/// tags them like any other op, on the page that holds the flags. Part of the phase's time
/// and memory ops, not added to them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spin {
    /// The object holding the flags (where its first toucher put it).
    pub object: String,
    /// Stages a sweep passes through (LU: the k-planes it visits, `nz - 2`).
    pub stages: f64,
    /// Share of the phase's work done in the pipeline (default 1: all of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipelined: Option<f64>,
}

impl Spin {
    /// Share of the phase's time (and memory ops) each of `threads` threads spends spinning.
    pub fn share(&self, threads: usize) -> f64 {
        let t = threads.saturating_sub(1) as f64;
        let piped = self.pipelined.unwrap_or(1.0);
        if t <= 0.0 || !self.stages.is_finite() || self.stages <= 0.0 || !(0.0..=1.0).contains(&piped) {
            return 0.0;
        }
        piped * t / (self.stages + t)
    }
}

/// Loads and stores per kilo-instruction when a phase does not say: about a third of the
/// instructions of typical programs are memory operations (Hennessy & Patterson's
/// instruction-mix tables: loads ~25%, stores ~10% on SPEC integer and floating-point codes).
pub const DEFAULT_MEM_OPS_PKI: f64 = 350.0;

fn default_write() -> f64 {
    0.3
}
fn default_mlp() -> f64 {
    4.0
}
fn default_ips() -> f64 {
    2.0
}

/// A workload model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// What the parameters are based on.
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub threads: Threads,
    /// Seed of this workload's random draws (combined with the run's seed).
    #[serde(default)]
    pub seed: u64,
    /// The phase list is executed this many times.
    #[serde(default = "one_u32")]
    pub iterations: u32,
    #[serde(rename = "object", default)]
    pub objects: Vec<Object>,
    #[serde(rename = "phase", default)]
    pub phases: Vec<Phase>,
}

fn one_u32() -> u32 {
    1
}

/// Who initialises an object (parsed form of [`Object::init`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Init {
    Thread(u32),
    Threads(Vec<u32>),
    Parallel,
}

/// Upper bounds that keep a run bounded in memory and time.
pub const MAX_THREADS: u32 = 4096;
pub const MAX_OBJECT_MIB: f64 = 1024.0 * 1024.0;

impl Workload {
    /// Parse and validate a workload from TOML text; `origin` (a file name) goes into errors.
    pub fn parse(text: &str, origin: &str) -> Result<Workload, SimError> {
        let toml_err = |e: &toml::de::Error, field: Option<String>| {
            let msg = e.message().to_string();
            let at = e.span().map(|s| line_of(text, s.start)).map(|l| format!(" (line {l})")).unwrap_or_default();
            let field = field.or_else(|| field_of(&msg)).unwrap_or_else(|| "(syntax)".into());
            SimError::workload(origin, field, format!("{msg}{at}"))
        };
        let de = toml::Deserializer::parse(text).map_err(|e| toml_err(&e, None))?;
        // The path of the value that failed (`object[0].size_mib`), not just serde's message.
        let w: Workload = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let field = (path != ".").then_some(path);
            toml_err(e.inner(), field)
        })?;
        w.validate(origin)?;
        Ok(w)
    }

    /// Load from a file (a regular file of at most 4 MiB).
    pub fn load(path: &std::path::Path) -> Result<Workload, SimError> {
        let text = ptb_topology::input::read_text(path, "workload file", ptb_topology::input::cap::WORKLOAD)
            .map_err(|e| SimError::Io { path: path.display().to_string(), reason: e.reason })?;
        Workload::parse(&text, &path.display().to_string())
    }

    /// TOML text of this workload.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Resolved thread count (`per_cpu` = CPUs available).
    pub fn thread_count(&self, per_cpu: usize) -> usize {
        match &self.threads {
            Threads::Count(n) => *n as usize,
            Threads::Named(_) => per_cpu,
        }
    }

    /// Check every field; errors name the field and the reason.
    pub fn validate(&self, origin: &str) -> Result<(), SimError> {
        let bad = |field: String, reason: String| Err(SimError::workload(origin, field, reason));
        if self.name.trim().is_empty() {
            return bad("name".into(), "must not be empty".into());
        }
        match &self.threads {
            Threads::Count(n) if *n == 0 || *n > MAX_THREADS => {
                return bad("threads".into(), format!("{n} is not in 1..={MAX_THREADS}"))
            }
            Threads::Named(s) if s != "per-cpu" => {
                return bad("threads".into(), format!("`{s}`: expected a number or \"per-cpu\""))
            }
            _ => {}
        }
        if self.iterations == 0 || self.iterations > 100_000 {
            return bad("iterations".into(), format!("{} is not in 1..=100000", self.iterations));
        }
        if self.objects.is_empty() {
            return bad("object".into(), "a workload needs at least one [[object]]".into());
        }
        if self.phases.is_empty() {
            return bad("phase".into(), "a workload needs at least one [[phase]]".into());
        }
        for (i, o) in self.objects.iter().enumerate() {
            let f = |k: &str| format!("object[{i}].{k}");
            if o.name.trim().is_empty() {
                return bad(f("name"), "must not be empty".into());
            }
            if self.objects[..i].iter().any(|p| p.name == o.name) {
                return bad(f("name"), format!("`{}` is used by two objects", o.name));
            }
            if !o.size_mib.is_finite() || o.size_mib <= 0.0 || o.size_mib > MAX_OBJECT_MIB {
                return bad(f("size_mib"), format!("{} is not in (0, {MAX_OBJECT_MIB}]", o.size_mib));
            }
            parse_init(&o.init).map_err(|r| SimError::workload(origin, f("init"), r))?;
        }
        // A phase's reference to an object names one of the workload's.
        let known = |name: &str, field: String| -> Result<(), SimError> {
            if self.objects.iter().any(|o| o.name == name) {
                return Ok(());
            }
            let names: Vec<String> = self.objects.iter().map(|o| format!("`{}`", o.name)).collect();
            Err(SimError::workload(origin, field, format!("no object named `{name}` (objects: {})", names.join(", "))))
        };
        for (i, p) in self.phases.iter().enumerate() {
            let f = |k: &str| format!("phase[{i}].{k}");
            if p.name.trim().is_empty() {
                return bad(f("name"), "must not be empty".into());
            }
            let pos = |v: f64, k: &str, lo: f64, hi: f64| -> Result<(), SimError> {
                if !v.is_finite() || v < lo || v > hi {
                    return Err(SimError::workload(origin, f(k), format!("{v} is not in [{lo}, {hi}]")));
                }
                Ok(())
            };
            pos(p.work_ginstr, "work_ginstr", 0.0, 1e6)?;
            pos(p.apki, "apki", 0.0, 1000.0)?;
            pos(p.write_share, "write_share", 0.0, 1.0)?;
            pos(p.mlp, "mlp", 0.1, 1024.0)?;
            pos(p.ips, "ips", 1e-3, 100.0)?;
            if let Some(x) = p.mem_ops_pki {
                pos(x, "mem_ops_pki", p.apki, 1000.0)?;
            }
            if let Some(t) = &p.threads {
                CpuSet::parse_list(t).map_err(|e| SimError::workload(origin, f("threads"), e.to_string()))?;
            }
            if let Some(tw) = &p.thread_work {
                if tw.is_empty() || tw.len() > MAX_THREADS as usize {
                    return bad(f("thread_work"), format!("wants 1..={MAX_THREADS} numbers, got {}", tw.len()));
                }
                if let Some(x) = tw.iter().find(|x| !x.is_finite() || **x < 0.0 || **x > 1e6) {
                    return bad(f("thread_work"), format!("{x} is not in [0, 1e6]"));
                }
                if tw.iter().all(|x| *x == 0.0) {
                    return bad(f("thread_work"), "at least one thread must have work".into());
                }
            }
            if let Some(sp) = &p.spin {
                known(&sp.object, f("spin.object"))?;
                pos(sp.stages, "spin.stages", 1.0, 1e9)?;
                if let Some(x) = sp.pipelined {
                    pos(x, "spin.pipelined", 0.0, 1.0)?;
                }
            }
            for (j, h) in p.hits.iter().enumerate() {
                let g = |k: &str| format!("phase[{i}].hits[{j}].{k}");
                known(&h.object, g("object"))?;
                if !h.share.is_finite() || h.share <= 0.0 || h.share > 1.0 {
                    return bad(g("share"), format!("{} is not in (0, 1]", h.share));
                }
            }
            let hit_share: f64 = p.hits.iter().map(|h| h.share).sum();
            if hit_share > 1.0 {
                return bad(f("hits"), format!("the shares add up to {hit_share}, more than all of the memory ops"));
            }
            if p.apki > 0.0 && p.access.is_empty() {
                return bad(f("access"), "a phase with apki > 0 needs at least one access entry".into());
            }
            for (j, a) in p.access.iter().enumerate() {
                let g = |k: &str| format!("phase[{i}].access[{j}].{k}");
                known(&a.object, g("object"))?;
                if !a.weight.is_finite() || a.weight <= 0.0 || a.weight > 1e6 {
                    return bad(g("weight"), format!("{} must be > 0", a.weight));
                }
                let frac = |v: Option<f64>, k: &str, ok: bool| -> Result<(), SimError> {
                    match v {
                        None => Ok(()),
                        Some(_) if !ok => Err(SimError::workload(
                            origin,
                            g(k),
                            format!("only allowed with pattern {k_pat}", k_pat = pattern_for(k)),
                        )),
                        Some(x) if !x.is_finite() || x <= 0.0 || x > 1.0 => {
                            Err(SimError::workload(origin, g(k), format!("{x} is not in (0, 1]")))
                        }
                        Some(_) => Ok(()),
                    }
                };
                frac(a.hot_fraction, "hot_fraction", a.pattern == Pattern::Hot)?;
                frac(a.neighbour_share, "neighbour_share", a.pattern == Pattern::Neighbours)?;
                frac(a.window_fraction, "window_fraction", a.pattern == Pattern::Stream)?;
                if let Some(t) = &a.threads {
                    let set =
                        CpuSet::parse_list(t).map_err(|e| SimError::workload(origin, g("threads"), e.to_string()))?;
                    if set.is_empty() {
                        return bad(g("threads"), "empty thread list".into());
                    }
                }
            }
        }
        Ok(())
    }
}

fn pattern_for(k: &str) -> &'static str {
    match k {
        "hot_fraction" => "`hot`",
        "neighbour_share" => "`neighbours`",
        _ => "`stream`",
    }
}

/// Parse an object's `init` text.
pub fn parse_init(s: &str) -> Result<Init, String> {
    let s = s.trim();
    if s == "parallel" {
        return Ok(Init::Parallel);
    }
    if let Some(n) = s.strip_prefix("thread:") {
        return n.trim().parse().map(Init::Thread).map_err(|_| format!("`{s}`: `thread:` wants a thread index"));
    }
    if let Some(l) = s.strip_prefix("threads:") {
        let set = CpuSet::parse_list(l).map_err(|e| format!("`{s}`: {e}"))?;
        if set.is_empty() {
            return Err(format!("`{s}`: empty thread list"));
        }
        return Ok(Init::Threads(set.iter_raw().collect()));
    }
    Err(format!("`{s}`: expected `thread:N`, `threads:LIST` or `parallel`"))
}

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Pull the field name out of a serde message such as "missing field `apki`".
fn field_of(msg: &str) -> Option<String> {
    let mut it = msg.split('`');
    match (it.next(), it.next()) {
        (Some(_), Some(f)) if !f.is_empty() && f.len() < 40 => Some(f.to_string()),
        _ => None,
    }
}

/// A workload argument: a built-in name or a TOML file path.
pub fn resolve(arg: &str) -> Result<Workload, SimError> {
    let arg = arg.trim();
    if let Some(w) = suite::get(arg) {
        return w;
    }
    let path = std::path::Path::new(arg);
    if path.symlink_metadata().is_ok() {
        return Workload::load(path);
    }
    Err(SimError::UnknownWorkload(arg.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOOD: &str = r#"
name = "t"
threads = 4
[[object]]
name = "a"
size_mib = 8
[[phase]]
name = "p"
work_ginstr = 0.1
apki = 10
access = [{ object = "a", pattern = "uniform" }]
"#;

    #[test]
    fn parses_a_minimal_workload() {
        let w = Workload::parse(GOOD, "t.toml").unwrap();
        assert_eq!(w.thread_count(64), 4);
        assert_eq!(w.phases[0].mlp, 4.0);
        assert_eq!(parse_init(&w.objects[0].init).unwrap(), Init::Thread(0));
    }

    /// GOOD with a `spin` on its phase.
    fn spin(value: &str) -> String {
        format!("{GOOD}spin = {value}\n")
    }

    /// GOOD with `hits` on its phase.
    fn hits(value: &str) -> String {
        format!("{GOOD}hits = {value}\n")
    }

    #[test]
    fn a_phases_cache_hits_name_their_objects() {
        let w = Workload::parse(&hits("[{ object = \"a\", share = 0.33 }]"), "t.toml").unwrap();
        assert_eq!(w.phases[0].hits, vec![Hit { object: "a".into(), share: 0.33 }]);
        assert!(Workload::parse(GOOD, "t.toml").unwrap().phases[0].hits.is_empty());
    }

    #[test]
    fn a_pipelines_wait_grows_with_its_threads() {
        let w = Workload::parse(&spin("{ object = \"a\", stages = 160, pipelined = 0.84 }"), "t.toml").unwrap();
        let sp = w.phases[0].spin.as_ref().unwrap();
        // NPB LU class C with 64 threads: each waits 63 of 223 stages of a sweep.
        assert!((sp.share(64) - 0.84 * 63.0 / 223.0).abs() < 1e-12);
        assert!(sp.share(16) < sp.share(64) && sp.share(1) == 0.0 && sp.share(0) == 0.0);
    }

    #[test]
    fn errors_name_file_field_and_reason() {
        let cases = [
            (GOOD.replace("size_mib = 8", "size_mib = -1"), "object[0].size_mib"),
            (GOOD.replace("\"uniform\"", "\"zigzag\""), "t.toml"),
            (GOOD.replace("object = \"a\"", "object = \"b\""), "phase[0].access[0].object"),
            (GOOD.replace("threads = 4", "threads = \"lots\""), "threads"),
            (GOOD.replace("apki = 10", "apki = 10\nbogus = 1"), "bogus"),
            (GOOD.replace("work_ginstr = 0.1\n", ""), "work_ginstr"),
            (
                GOOD.replace(
                    "[[object]]\nname = \"a\"\nsize_mib = 8\n",
                    "[[object]]\nname = \"a\"\nsize_mib = 8\ninit = \"x\"\n",
                ),
                "init",
            ),
            (spin("{ object = \"b\", stages = 10 }"), "phase[0].spin.object"),
            (spin("{ object = \"a\", stages = 0 }"), "phase[0].spin.stages"),
            (spin("{ object = \"a\", stages = 10, pipelined = 1.5 }"), "phase[0].spin.pipelined"),
            (spin("{ object = \"a\", stages = 10, every = 2 }"), "every"),
            (hits("[{ object = \"b\", share = 0.3 }]"), "phase[0].hits[0].object"),
            (hits("[{ object = \"a\", share = 0 }]"), "phase[0].hits[0].share"),
            (hits("[{ object = \"a\", share = 1.5 }]"), "phase[0].hits[0].share"),
            (hits("[{ object = \"a\", share = 0.6 }, { object = \"a\", share = 0.6 }]"), "phase[0].hits"),
            (hits("[{ object = \"a\", share = 0.3, pattern = \"hot\" }]"), "pattern"),
        ];
        for (text, want) in cases {
            let e = Workload::parse(&text, "t.toml").unwrap_err().to_string();
            assert!(e.contains("t.toml") && e.contains(want), "{want}: {e}");
        }
    }

    /// A value of the wrong type was reported as ``field `(document)` ``: the field's path
    /// is named now.
    #[test]
    fn a_wrong_type_names_its_field_and_line() {
        let e = Workload::parse(&GOOD.replace("size_mib = 8", "size_mib = \"big\""), "t.toml").unwrap_err().to_string();
        assert!(e.contains("field `object[0].size_mib`") && e.contains("line 6"), "{e}");
        assert!(!e.contains("(document)"), "{e}");
        let e = Workload::parse("name = [", "t.toml").unwrap_err().to_string();
        assert!(e.contains("line 1") && !e.contains("(document)"), "{e}");
    }

    #[test]
    fn devices_and_fifos_are_not_workload_files() {
        let e = resolve("/dev/zero").unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("device"), "{e}");
    }

    fn arb_workload() -> impl Strategy<Value = Workload> {
        let pat = prop_oneof![
            Just(Pattern::Private),
            Just(Pattern::Neighbours),
            Just(Pattern::Uniform),
            Just(Pattern::Hot),
            Just(Pattern::Stream),
            Just(Pattern::AllToAll)
        ];
        let spin = proptest::option::of((1.0f64..1e4, proptest::option::of(0.0f64..=1.0)));
        let hit = proptest::option::of(0.001f64..=1.0);
        (1u32..64, 1.0f64..64.0, 0.0f64..50.0, 0.0f64..1.0, pat, 1u32..4, (spin, hit)).prop_map(
            |(t, size, apki, ws, pattern, it, (spin, hit))| Workload {
                name: "gen".into(),
                description: String::new(),
                source: String::new(),
                threads: Threads::Count(t),
                seed: 7,
                iterations: it,
                objects: vec![Object { name: "o".into(), size_mib: size, init: "parallel".into(), huge_pages: false }],
                phases: vec![Phase {
                    name: "p".into(),
                    work_ginstr: 0.5,
                    apki,
                    write_share: ws,
                    mlp: 4.0,
                    ips: 2.0,
                    mem_ops_pki: None,
                    threads: None,
                    thread_work: None,
                    access: vec![Access {
                        object: "o".into(),
                        pattern,
                        weight: 1.0,
                        hot_fraction: None,
                        neighbour_share: None,
                        window_fraction: None,
                        threads: None,
                    }],
                    spin: spin.map(|(stages, pipelined)| Spin { object: "o".into(), stages, pipelined }),
                    hits: hit.map(|share| Hit { object: "o".into(), share }).into_iter().collect(),
                }],
            },
        )
    }

    proptest! {
        #[test]
        fn valid_workloads_round_trip(w in arb_workload()) {
            let text = w.to_toml();
            let back = Workload::parse(&text, "gen.toml").unwrap();
            prop_assert_eq!(back, w);
        }

        #[test]
        fn parser_never_panics(text in "[a-z_=\\[\\]\"0-9. \n{},-]{0,200}") {
            let _ = Workload::parse(&text, "fuzz.toml");
        }

        #[test]
        fn mutated_good_files_never_panic(cut in 0usize..300, junk in "[a-z0-9=\\[\\]\"\n.-]{0,12}") {
            let mut t = GOOD.to_string();
            let at = cut.min(t.len());
            t.insert_str(at, &junk);
            let _ = Workload::parse(&t, "fuzz.toml");
        }
    }
}
