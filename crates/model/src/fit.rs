//! From a recording to a workload file: threads, objects, phases, per-thread access spreads,
//! memory intensity and first-touch owners, with a fit score per object.
//!
//! Problem: the simulator's workload format describes a program by what it does to memory;
//! a recording only shows samples. Approach, step by step:
//! - threads: every thread with enough samples (at least 3 and 0.2% of them), ordered so that
//!   the simulator's slices line up with the data each thread uses: by the median position of
//!   its samples in the object where those medians differ most (tid order when none differ);
//! - objects: [`crate::objects`]; phases: [`crate::phases`];
//! - per phase, thread and object: [`crate::patterns::fit`]; a thread's share of its phase's
//!   samples on each object becomes its entries' weights (entries that several threads share
//!   with the same weight are written once with a thread list);
//! - intensity: with address sampling every sample stands for `period` accesses, so a thread's
//!   rate is samples x period / time, and `apki` is the rate the closed model of the simulator
//!   turns into that many accesses at 2 G instructions/s, 4 misses in flight and the machine's
//!   local latency. Page-fault samples do not count accesses: `apki` is then assumed (20) and
//!   said so. Work is set so that each thread's accesses in each phase are in proportion to its
//!   samples there (`thread_work`), and the run lasts about as long as the recording;
//! - first touch: where the recorded placements first saw the object's pages: one node for
//!   (nearly) all of them -> `thread:k` with k a thread of that node; each thread's slice on that
//!   thread's node -> `parallel`; else `parallel`, with a note.

use crate::objects::{self, ObjectSpan};
use crate::patterns::{self, round2, Obs, Spread};
use crate::phases::{self, Phases, Point};
use crate::recording::Recording;
use crate::ModelError;
use ptb_profile::SampleKind;
use ptb_sim::workload::{Access, Object, Pattern, Phase, Threads, Workload};
use ptb_topology::{CpuSet, NodeIdx};
use std::collections::BTreeMap;

/// Options of a fit.
#[derive(Clone, Debug, PartialEq)]
pub struct FitOptions {
    /// The workload's name.
    pub name: String,
    /// apki when the samples do not measure intensity.
    pub default_apki: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions { name: "recorded".into(), default_apki: DEFAULT_APKI }
    }
}

/// Accesses per kilo-instruction assumed when the samples cannot measure it.
pub const DEFAULT_APKI: f64 = 20.0;
/// The phase parameters the fitter does not measure (the simulator's defaults).
const IPS: f64 = 2.0;
const MLP: f64 = 4.0;

/// A model thread.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadInfo {
    pub tid: u32,
    /// The CPU most of its samples came from.
    pub cpu: u32,
    /// Dense node of that CPU (when the machine is known).
    pub node: Option<usize>,
    pub samples: usize,
}

/// What was fitted for one object.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectFit {
    pub name: String,
    pub samples: usize,
    /// Samples-weighted mean score of its (phase, thread) fits.
    pub score: f64,
    pub init: String,
    pub init_note: String,
    /// Per phase kind: the spreads chosen, as text.
    pub spreads: Vec<String>,
}

/// A fitted model.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub workload: Workload,
    /// The TOML file: comments that say what was fitted and how well, then the workload.
    pub toml: String,
    /// Model thread order.
    pub threads: Vec<ThreadInfo>,
    pub objects: Vec<ObjectSpan>,
    pub object_fits: Vec<ObjectFit>,
    pub phases: Phases,
    /// Phase kind of each segment, in time order.
    pub sequence: Vec<usize>,
    pub notes: Vec<String>,
    /// Samples the model is built from (in kept objects and threads).
    pub samples_used: usize,
}

fn pattern_of(sp: &Spread) -> Pattern {
    match sp {
        Spread::Private | Spread::PrivateUniform { .. } => Pattern::Private,
        Spread::Neighbours { .. } => Pattern::Neighbours,
        Spread::Uniform => Pattern::Uniform,
        Spread::Hot { .. } => Pattern::Hot,
        Spread::Stream { .. } => Pattern::Stream,
        Spread::AllToAll => Pattern::AllToAll,
    }
}

fn sig3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return 0.0;
    }
    let p = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * p).round() / p
}

fn mode<T: Ord + Copy>(v: impl Iterator<Item = T>) -> Option<T> {
    let mut m: BTreeMap<T, usize> = BTreeMap::new();
    for x in v {
        *m.entry(x).or_default() += 1;
    }
    m.into_iter().max_by_key(|(k, c)| (*c, std::cmp::Reverse(*k))).map(|x| x.0)
}

/// Fit a workload model to a recording.
pub fn fit(rec: &Recording, opts: &FitOptions) -> Result<Fitted, ModelError> {
    let mut notes = rec.notes.clone();
    if rec.samples.is_empty() {
        return Err(ModelError::Empty(format!("{}: no samples to fit", rec.origin)));
    }
    let objs = objects::find(rec, &mut notes);
    if objs.is_empty() {
        return Err(ModelError::Empty(format!(
            "{}: no memory object has enough samples ({} samples in all)",
            rec.origin,
            rec.samples.len()
        )));
    }
    // (sample index, object) of samples inside objects.
    let located: Vec<(usize, usize)> =
        rec.samples.iter().enumerate().filter_map(|(i, s)| objects::locate(&objs, s.vpn).map(|o| (i, o))).collect();
    let mut per_tid: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, _) in &located {
        *per_tid.entry(rec.samples[*i].tid).or_default() += 1;
    }
    let min_t = (located.len() / 500).max(3);
    let (kept, dropped): (Vec<_>, Vec<_>) = per_tid.iter().partition(|(_, n)| **n >= min_t);
    if !dropped.is_empty() {
        notes.push(format!(
            "left out {} thread(s) with fewer than {min_t} samples ({} samples)",
            dropped.len(),
            dropped.iter().map(|x| *x.1).sum::<usize>()
        ));
    }
    let mut tids: Vec<u32> = kept.iter().map(|x| *x.0).take(ptb_sim::workload::MAX_THREADS as usize).collect();
    if tids.is_empty() {
        return Err(ModelError::Empty(format!("{}: no thread has {min_t} samples in the objects", rec.origin)));
    }
    let located: Vec<(usize, usize)> =
        located.into_iter().filter(|(i, _)| tids.binary_search(&rec.samples[*i].tid).is_ok()).collect();
    let t = tids.len();
    // Thread order: by median position in the object where the medians differ most.
    let mut best_spread = (0.01, None::<Vec<(u32, f64)>>);
    for (o, obj) in objs.iter().enumerate() {
        let mut by_tid: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for (i, oi) in &located {
            if *oi == o {
                let s = &rec.samples[*i];
                by_tid.entry(s.tid).or_default().push((s.vpn - obj.start_vpn) as f64 / obj.npages as f64);
            }
        }
        if by_tid.values().map(Vec::len).sum::<usize>() * 5 < located.len() {
            continue;
        }
        let med: Vec<(u32, f64)> = by_tid
            .into_iter()
            .filter(|(_, v)| v.len() >= 5)
            .map(|(k, mut v)| {
                v.sort_by(f64::total_cmp);
                (k, v[v.len() / 2])
            })
            .collect();
        if med.len() < 2 {
            continue;
        }
        let m = med.iter().map(|x| x.1).sum::<f64>() / med.len() as f64;
        let var = med.iter().map(|x| (x.1 - m).powi(2)).sum::<f64>() / med.len() as f64;
        if var > best_spread.0 {
            best_spread = (var, Some(med));
        }
    }
    if let Some(med) = best_spread.1 {
        let pos: BTreeMap<u32, f64> = med.into_iter().collect();
        tids.sort_by(|a, b| {
            let (pa, pb) = (pos.get(a).copied().unwrap_or(f64::MAX), pos.get(b).copied().unwrap_or(f64::MAX));
            pa.total_cmp(&pb).then(a.cmp(b))
        });
    }
    let tindex: BTreeMap<u32, usize> = tids.iter().enumerate().map(|(j, t)| (*t, j)).collect();
    let threads: Vec<ThreadInfo> = tids
        .iter()
        .map(|&tid| {
            let cpus = located.iter().map(|(i, _)| &rec.samples[*i]).filter(|s| s.tid == tid);
            let cpu = mode(cpus.clone().map(|s| s.cpu)).unwrap_or(0);
            ThreadInfo { tid, cpu, node: rec.node_of_cpu(cpu), samples: cpus.count() }
        })
        .collect();
    // Phases.
    let (t0, t1) = (
        located.first().map_or(0, |x| rec.samples[x.0].time_ns),
        located.last().map_or(0, |x| rec.samples[x.0].time_ns),
    );
    let points: Vec<Point> = located
        .iter()
        .map(|(i, o)| {
            let s = &rec.samples[*i];
            Point {
                time_ns: s.time_ns,
                thread: tindex[&s.tid],
                object: *o,
                pos: (s.vpn - objs[*o].start_vpn) as f64 / objs[*o].npages as f64,
            }
        })
        .collect();
    let ph = phases::find(&points, t, objs.len(), t0, t1);
    let sequence: Vec<usize> = ph.segments.iter().map(|s| s.kind).collect();
    let kinds = ph.kinds;
    // Per kind: samples per thread, observations per (thread, object), stores.
    let mut n_qj = vec![vec![0usize; t]; kinds];
    let mut obs: Vec<Vec<Vec<Vec<Obs>>>> = vec![vec![vec![Vec::new(); objs.len()]; t]; kinds];
    let (mut loads, mut stores) = (vec![0usize; kinds], vec![0usize; kinds]);
    for (p, (i, o)) in points.iter().zip(&located) {
        let s = &rec.samples[*i];
        let k = ph.segments.partition_point(|g| g.start_ns <= p.time_ns).saturating_sub(1);
        let g = &ph.segments[k];
        let progress = ((p.time_ns.saturating_sub(g.start_ns)) as f64 / (g.end_ns - g.start_ns).max(1) as f64).min(1.0);
        let store = match s.kind {
            SampleKind::Store => Some(true),
            SampleKind::Load => Some(false),
            _ => None,
        };
        loads[g.kind] += usize::from(store == Some(false));
        stores[g.kind] += usize::from(store == Some(true));
        n_qj[g.kind][p.thread] += 1;
        obs[g.kind][p.thread][*o].push(Obs { page: s.vpn - objs[*o].start_vpn, progress, store });
    }
    let iterations = (0..kinds).map(|q| sequence.iter().filter(|k| **k == q).count()).max().unwrap_or(1).max(1);
    let local_ns = rec
        .machine
        .as_ref()
        .and_then(|m| {
            let b = m.bandwidth.as_ref()?.latency.as_ref()?;
            let g = m.groups.first()?;
            Some(b.get(g.idx.ix(), g.node.ix())).filter(|v| *v > 0.0)
        })
        .unwrap_or(ptb_sim::ModelParams::default().default_local_ns);
    let mut phases_out = Vec::new();
    let mut fits_per_obj: Vec<(f64, f64, Vec<String>)> = vec![(0.0, 0.0, Vec::new()); objs.len()];
    let mut intensity_note = String::new();
    // Without a measured intensity, one sample stands for the same number of accesses in every
    // phase (so each phase's share of the accesses is its share of the samples), chosen so the
    // whole run keeps threads about half busy with memory for as long as the recording lasted.
    let all_dur: u64 = ph.segments.iter().map(|g| g.end_ns - g.start_ns).sum::<u64>().max(1);
    let all_mean = n_qj.iter().flatten().sum::<usize>() as f64 / t as f64;
    let default_m = opts.default_apki / 1000.0;
    let default_unit = all_dur as f64 * IPS * 0.5 * default_m / all_mean.max(1e-9);
    for q in 0..kinds {
        let dur_ns: u64 = ph.segments.iter().filter(|g| g.kind == q).map(|g| g.end_ns - g.start_ns).sum::<u64>().max(1);
        let mean_n = n_qj[q].iter().sum::<usize>() as f64 / t as f64;
        let (m, unit) = match rec.period {
            Some(period) => {
                let a = mean_n * period as f64 / dur_ns as f64; // accesses per ns per thread
                let denom = (1.0 - a * local_ns / MLP).max(0.1);
                let m = ((a / IPS) / denom).clamp(1e-5, 1.0);
                intensity_note = format!(
                    "memory intensity from the samples: {period} accesses per sample, local latency {local_ns:.0} ns"
                );
                (m, period as f64)
            }
            None => {
                intensity_note = format!(
                    "memory intensity NOT measured ({} samples count faults, not accesses): apki = {} assumed",
                    rec.source, opts.default_apki
                );
                (default_m, default_unit)
            }
        };
        let work_instr = mean_n * unit / m / iterations as f64;
        let tw: Vec<f64> = n_qj[q].iter().map(|n| sig3(*n as f64 / mean_n.max(1e-9))).collect();
        let uneven = tw.iter().any(|w| (w - 1.0).abs() > 0.05);
        // Access entries, grouped by identical (object, pattern, parameters, weight).
        let mut groups: BTreeMap<(usize, String), (Access, Vec<u32>)> = BTreeMap::new();
        for j in 0..t {
            let nj = n_qj[q][j];
            if nj == 0 {
                continue;
            }
            for (o, ob) in obs[q][j].iter().enumerate() {
                if ob.is_empty() {
                    continue;
                }
                let f = patterns::fit(ob, objs[o].npages, t, j);
                let e = &mut fits_per_obj[o];
                e.0 += f.score * ob.len() as f64;
                e.1 += ob.len() as f64;
                let share = ob.len() as f64 / nj as f64;
                let mut parts: Vec<(Spread, f64)> = vec![(f.spread, share)];
                if let Spread::PrivateUniform { private } = f.spread {
                    parts = vec![(Spread::Private, share * private), (Spread::Uniform, share * (1.0 - private))];
                }
                for (sp, w) in parts {
                    let w = round2(w);
                    if w <= 0.0 {
                        continue;
                    }
                    let mut a = Access {
                        object: objs[o].name.clone(),
                        pattern: pattern_of(&sp),
                        weight: w,
                        hot_fraction: None,
                        neighbour_share: None,
                        window_fraction: None,
                        threads: None,
                    };
                    match sp {
                        Spread::Hot { fraction } => a.hot_fraction = Some(fraction.clamp(0.01, 1.0)),
                        Spread::Neighbours { share } => a.neighbour_share = Some(share.clamp(0.01, 1.0)),
                        Spread::Stream { window } => a.window_fraction = Some(window.clamp(0.01, 1.0)),
                        _ => {}
                    }
                    let key = (
                        o,
                        format!(
                            "{:?}|{:?}|{:?}|{:?}|{w}",
                            a.pattern, a.hot_fraction, a.neighbour_share, a.window_fraction
                        ),
                    );
                    groups.entry(key).or_insert_with(|| (a, Vec::new())).1.push(j as u32);
                }
                let text = format!("{}: {}", j, f.spread.describe());
                let per = &mut fits_per_obj[o].2;
                if per.len() <= q {
                    per.resize(q + 1, String::new());
                }
                if !per[q].is_empty() {
                    per[q].push_str("; ");
                }
                per[q].push_str(&text);
            }
        }
        let access: Vec<Access> = groups
            .into_values()
            .map(|(mut a, js)| {
                if js.len() < t {
                    let set: CpuSet = js.iter().map(|j| ptb_topology::CpuId(*j)).collect();
                    a.threads = Some(set.to_list());
                }
                a
            })
            .collect();
        let (ld, st) = (loads[q], stores[q]);
        phases_out.push(Phase {
            name: format!("phase{}", q + 1),
            work_ginstr: sig3(work_instr / 1e9).max(1e-6),
            apki: sig3(m * 1000.0),
            write_share: if ld + st >= 10 { round2(st as f64 / (ld + st) as f64) } else { 0.3 },
            mlp: MLP,
            ips: IPS,
            mem_ops_pki: None,
            threads: None,
            thread_work: uneven.then_some(tw),
            access,
            spin: None,
            hits: vec![],
        });
    }
    notes.push(intensity_note);
    // Objects with their first-touch owner.
    let first_nodes: BTreeMap<u64, u16> = {
        let mut m = BTreeMap::new();
        for &(_, v, n) in &rec.page_nodes {
            m.entry(v).or_insert(n);
        }
        m
    };
    let mut object_fits = Vec::new();
    let mut objects_out = Vec::new();
    for (o, obj) in objs.iter().enumerate() {
        let (init, init_note) = first_touch(rec, obj, &first_nodes, &threads);
        let ps = rec.page_size as f64;
        let size_mib = sig3((obj.npages as f64 * ps / (1u64 << 20) as f64).max(ps / (1u64 << 20) as f64));
        objects_out.push(Object { name: obj.name.clone(), size_mib, init: init.clone(), huge_pages: false });
        let (sum, n, spreads) = &fits_per_obj[o];
        object_fits.push(ObjectFit {
            name: obj.name.clone(),
            samples: *n as usize,
            score: if *n > 0.0 { sum / n } else { 0.0 },
            init,
            init_note,
            spreads: spreads.clone(),
        });
    }
    let total_used = located.len();
    let fit_text: Vec<String> = object_fits.iter().map(|f| format!("{} {:.2}", f.name, f.score)).collect();
    let workload = Workload {
        name: opts.name.clone(),
        description: format!(
            "fitted by `ptb model` from {} (pid {}, {}, {}, {} phase kind(s))",
            rec.origin,
            rec.pid,
            ptb_topology::render::plural(t, "thread", "threads"),
            ptb_topology::render::plural(objs.len(), "object", "objects"),
            kinds
        ),
        source: format!(
            "ptb model: {total_used} samples ({}); fit per object (1 = perfect): {}",
            rec.source,
            fit_text.join(", ")
        ),
        threads: Threads::Count(t as u32),
        seed: 0,
        iterations: iterations as u32,
        objects: objects_out,
        phases: phases_out,
    };
    let body = workload.to_toml();
    Workload::parse(&body, "the fitted model")
        .map_err(|e| ModelError::Sim(format!("the fitted model does not load back (a bug in ptb model): {e}")))?;
    let mut fitted = Fitted {
        workload,
        toml: String::new(),
        threads,
        objects: objs,
        object_fits,
        phases: ph,
        sequence,
        notes,
        samples_used: total_used,
    };
    fitted.toml = format!("{}{body}", header(rec, &fitted));
    Ok(fitted)
}

/// `init` of an object from where its pages were first seen.
fn first_touch(
    rec: &Recording,
    obj: &ObjectSpan,
    first: &BTreeMap<u64, u16>,
    threads: &[ThreadInfo],
) -> (String, String) {
    let t = threads.len();
    let nodes: Vec<(u64, usize)> =
        first.range(obj.start_vpn..obj.start_vpn + obj.npages).map(|(v, n)| (v - obj.start_vpn, *n as usize)).collect();
    let kid = |n: usize| {
        rec.machine.as_ref().filter(|m| n < m.n_nodes()).map_or(n as u32, |m| m.node(NodeIdx::from_ix(n)).id.0)
    };
    let thread_on = |n: usize| threads.iter().position(|th| th.node == Some(n));
    let mut per_node: BTreeMap<usize, usize> = BTreeMap::new();
    if nodes.is_empty() {
        // No sampled page's node is known: the region's resident pages, if any.
        if let Some(r) = obj.region.and_then(|i| rec.regions.get(i)) {
            for (n, c) in r.resident.iter().enumerate() {
                if *c > 0 {
                    per_node.insert(n, *c as usize);
                }
            }
        }
        if per_node.is_empty() {
            return ("thread:0".into(), "not known (no placement recorded): thread 0 assumed".into());
        }
    } else {
        for (_, n) in &nodes {
            *per_node.entry(*n).or_default() += 1;
        }
    }
    let total: usize = per_node.values().sum();
    let (&top, &c) = per_node.iter().max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n))).unwrap_or((&0, &0));
    if c * 10 >= total * 9 {
        return match thread_on(top) {
            Some(k) => (
                format!("thread:{k}"),
                format!("{:.0}% of its pages on node {}", 100.0 * c as f64 / total as f64, kid(top)),
            ),
            None => (
                "thread:0".into(),
                format!(
                    "{:.0}% on node {}, where no modelled thread ran (thread 0 assumed)",
                    100.0 * c as f64 / total as f64,
                    kid(top)
                ),
            ),
        };
    }
    if !nodes.is_empty() && t > 1 {
        let mut matching = 0;
        for (j, th) in threads.iter().enumerate() {
            let (s, e) = ptb_sim::layout::slice(obj.npages as usize, t, j);
            let dom = mode(nodes.iter().filter(|(k, _)| *k >= s as u64 && (*k as usize) < e).map(|(_, n)| *n));
            matching += usize::from(dom.is_some() && dom == th.node);
        }
        if matching * 10 >= t * 8 {
            return ("parallel".into(), format!("{matching} of {t} threads' slices on their thread's node"));
        }
    }
    let spread: Vec<String> =
        per_node.iter().map(|(n, c)| format!("node {} {:.0}%", kid(*n), 100.0 * *c as f64 / total as f64)).collect();
    (
        "parallel".into(),
        format!(
            "pages spread over nodes ({}), not where one thread or each thread ran (an interleave policy?)",
            spread.join(", ")
        ),
    )
}

/// The comment block at the top of the file.
fn header(rec: &Recording, f: &Fitted) -> String {
    let kid = |n: Option<usize>| -> String {
        match (n, rec.machine.as_ref()) {
            (Some(n), Some(m)) if n < m.n_nodes() => m.node(NodeIdx::from_ix(n)).id.0.to_string(),
            _ => "?".into(),
        }
    };
    let mut h = String::new();
    // A comment line stays one line whatever a file name or note holds (a newline there would
    // start TOML of its own).
    let mut line = |s: String| {
        h.push_str("# ");
        h.extend(s.chars().map(|c| if c.is_control() { '?' } else { c }));
        h.push('\n');
    };
    line(format!(
        "Workload model fitted by `ptb model` from {} (pid {}, {} samples used of {}, source: {}, {:.2} s recorded).",
        rec.origin,
        rec.pid,
        f.samples_used,
        rec.samples.len(),
        rec.source,
        rec.span_ns() as f64 / 1e9
    ));
    line(
        "Simulate it: `ptb simulate --workload FILE`; compare policies: `ptb compare --workload FILE --machine M`."
            .into(),
    );
    line(String::new());
    line("Threads (model thread: recorded tid, the CPU most of its samples came from, samples):".into());
    for (j, th) in f.threads.iter().enumerate() {
        line(format!("  {j}: tid {}, CPU {} (node {}), {} samples", th.tid, th.cpu, kid(th.node), th.samples));
    }
    let seq: Vec<String> = f.sequence.iter().map(|k| format!("phase{}", k + 1)).collect();
    line(format!(
        "Phases: {} kind(s) found in the access mix over time{}; sequence: {} -> {} iteration(s).",
        f.phases.kinds,
        if f.phases.threshold > 0.0 {
            format!(" (kinds differ by at least {:.2})", f.phases.threshold)
        } else {
            String::new()
        },
        seq.join(" "),
        f.workload.iterations
    ));
    for g in &f.phases.segments {
        line(format!(
            "  {:.3}-{:.3} s: phase{} ({} samples)",
            g.start_ns as f64 / 1e9,
            g.end_ns as f64 / 1e9,
            g.kind + 1,
            g.samples
        ));
    }
    line(
        "Objects (fit = 1 - total-variation distance between the sampled and the fitted spread of its accesses,".into(),
    );
    line("  samples-weighted over threads and phases; 1 = perfect, few samples score lower even when right):".into());
    for (o, of) in f.object_fits.iter().enumerate() {
        let obj = &f.objects[o];
        line(format!(
            "  {}: {} pages{}, {} samples, fit {:.2}; first touch: {} ({})",
            of.name,
            obj.npages,
            if obj.npages < obj.mapping_pages {
                format!(" of a {}-page mapping", obj.mapping_pages)
            } else {
                String::new()
            },
            of.samples,
            of.score,
            of.init,
            of.init_note
        ));
        for (q, s) in of.spreads.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            line(format!("    phase{}: thread {s}", q + 1));
        }
    }
    line("Fitted from the samples: objects, thread order, phases, access patterns and weights, thread_work, first touch.".into());
    line("Not fitted (simulator defaults): mlp 4, ips 2; write_share from loads/stores when the source tells them apart.".into());
    for n in &f.notes {
        line(format!("Note: {n}"));
    }
    h.push('\n');
    h
}
