//! The static shape of a run: applications, their threads and objects laid out in address
//! spaces, and the phases compiled to per-object access entries.
//!
//! Each workload is one application (`AppId` = its position in the run). Objects of an app
//! are placed one after another from virtual page [`BASE_VPN`], each aligned to 2 MiB.
//! Thread ids are `(app + 1) * 100000 + index` so they are unique across applications.

use crate::error::SimError;
use crate::workload::{parse_init, Init, Pattern, Workload};
use ptb_profile::{AppId, Tid};
use ptb_topology::CpuSet;
use serde::{Deserialize, Serialize};

/// First virtual page of every address space (4 GiB with 4 KiB pages).
pub const BASE_VPN: u64 = 1 << 20;

/// One application.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppLayout {
    pub app: AppId,
    pub workload: String,
    /// Global thread indices `[first, first + count)`.
    pub first_thread: usize,
    pub n_threads: usize,
    /// Global object indices `[first, first + count)`.
    pub first_object: usize,
    pub n_objects: usize,
    /// Phase sequence (indices into `phases`), iterations expanded.
    pub sequence: Vec<usize>,
    pub phases: Vec<CompiledPhase>,
}

/// One thread.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThreadLayout {
    pub tid: Tid,
    pub app: usize,
    /// Index inside its application.
    pub index: usize,
}

/// One memory object.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ObjectLayout {
    pub app: usize,
    pub name: String,
    pub start_vpn: u64,
    pub npages: usize,
    /// App thread indices that first-touch equal slices of the object, in order.
    pub initialisers: Vec<usize>,
    /// Backed by transparent huge pages (see `huge`).
    #[serde(default)]
    pub huge_pages: bool,
}

/// One access entry of a compiled phase.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompiledAccess {
    /// Global object index.
    pub object: usize,
    pub pattern: Pattern,
    /// Normalised share of the phase's accesses.
    pub weight: f64,
    pub hot_fraction: f64,
    pub neighbour_share: f64,
    pub window_fraction: f64,
    /// The app threads this entry applies to (`None`: every thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<bool>>,
}

impl CompiledAccess {
    /// Whether app thread `j` makes this entry's accesses.
    pub fn applies(&self, j: usize) -> bool {
        self.threads.as_ref().is_none_or(|t| t.get(j).copied().unwrap_or(false))
    }
}

/// A phase with its per-thread numbers resolved.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompiledPhase {
    pub name: String,
    /// Instructions per active thread.
    pub work_instr: f64,
    /// Accesses per instruction.
    pub m: f64,
    pub write_share: f64,
    pub mlp: f64,
    /// Instructions per ns.
    pub ips: f64,
    /// Memory operations (cache hits included) per instruction, at least `m`.
    pub mops: f64,
    /// Which app threads work in this phase.
    pub active: Vec<bool>,
    pub access: Vec<CompiledAccess>,
    /// Some thread's pieces move with its progress through the phase: a `stream` window, or
    /// `transposed` accesses following a pipeline's wavefront (a phase with `spin`).
    pub has_stream: bool,
    /// Work multiplier of each app thread (mean 1 over the app's threads; all 1 unless the
    /// phase gives `thread_work`).
    pub thread_work: Vec<f64>,
    /// Where and how much the phase's threads spin ([`crate::workload::Spin`]).
    #[serde(default)]
    pub spin: Option<SpinSite>,
    /// Loads that hit the cache, by object ([`crate::workload::Hit`]).
    #[serde(default)]
    pub hits: Vec<HitSite>,
}

/// A share of a phase's memory ops that hit the cache on one object, resolved.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct HitSite {
    pub object: usize,
    pub share: f64,
}

/// A pipelined phase's spin-wait, resolved: the object holding the flags and the share of the
/// phase's time (and memory ops) each thread spends spinning on them.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct SpinSite {
    pub object: usize,
    pub share: f64,
    /// Stages a sweep passes through ([`crate::workload::Spin::stages`]; 0: no wavefront).
    #[serde(default)]
    pub stages: f64,
    /// Share of the phase's work done in the pipeline's two sweeps.
    #[serde(default)]
    pub pipelined: f64,
}

/// A share of a phase's memory ops that hit the cache on one object: its pipeline's spin
/// loop (on the object's first page) or one of its `hits` (over all its pages).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheHit {
    pub share: f64,
    pub object: usize,
    pub first_page: bool,
}

impl CompiledPhase {
    /// The phase's cache hits on named objects: the spin loop's, then its `hits`, in that order
    /// (their shares as given; each user bounds them by what is left of the memory ops).
    pub(crate) fn cache_hits(&self) -> impl Iterator<Item = CacheHit> + '_ {
        let spin = self.spin.map(|s| CacheHit { share: s.share, object: s.object, first_page: true });
        spin.into_iter().chain(self.hits.iter().map(|h| CacheHit {
            share: h.share,
            object: h.object,
            first_page: false,
        }))
    }

    /// Instructions app thread `j` executes in this phase.
    pub fn instr_of(&self, j: usize) -> f64 {
        self.work_instr * self.thread_work.get(j).copied().unwrap_or(1.0)
    }

    /// The normalised weight of entry `a` for app thread `j` (its weight over the weights of
    /// the entries that apply to `j`); 0 when the entry does not apply.
    pub fn weight_for(&self, a: &CompiledAccess, j: usize) -> f64 {
        if !a.applies(j) {
            return 0.0;
        }
        // Every entry applies to every thread: the weights are normalised already (and stay
        // bit for bit what they were before per-thread entries existed).
        if self.access.iter().all(|x| x.threads.is_none()) {
            return a.weight;
        }
        let total: f64 = self.access.iter().filter(|x| x.applies(j)).map(|x| x.weight).sum();
        if total > 0.0 {
            a.weight / total
        } else {
            0.0
        }
    }
}

/// The whole run's layout.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Layout {
    pub apps: Vec<AppLayout>,
    pub threads: Vec<ThreadLayout>,
    pub objects: Vec<ObjectLayout>,
}

impl Layout {
    /// Lay out `workloads`; `per_cpu` resolves "per-cpu" thread counts, `threads` overrides all
    /// counts, `duration_scale` multiplies all work.
    pub fn build(
        workloads: &[Workload],
        per_cpu: usize,
        threads: Option<usize>,
        duration_scale: f64,
        page_size: u64,
    ) -> Result<Layout, SimError> {
        let mut l = Layout { apps: vec![], threads: vec![], objects: vec![] };
        for (a, w) in workloads.iter().enumerate() {
            let origin = format!("workload `{}`", w.name);
            w.validate(&origin)?;
            let n = threads.unwrap_or_else(|| w.thread_count(per_cpu)).max(1);
            let first_thread = l.threads.len();
            for i in 0..n {
                l.threads.push(ThreadLayout { tid: ((a as u32) + 1) * 100_000 + i as u32, app: a, index: i });
            }
            let first_object = l.objects.len();
            let mut vpn = BASE_VPN;
            for (oi, o) in w.objects.iter().enumerate() {
                let npages = ((o.size_mib * 1024.0 * 1024.0) / page_size as f64).ceil().max(1.0) as usize;
                let initialisers = match parse_init(&o.init)
                    .map_err(|r| SimError::workload(&origin, format!("object[{oi}].init"), r))?
                {
                    Init::Thread(k) => vec![(k as usize) % n],
                    Init::Threads(v) => v.iter().map(|&k| (k as usize) % n).collect(),
                    Init::Parallel => (0..n).collect(),
                };
                l.objects.push(ObjectLayout {
                    app: a,
                    name: o.name.clone(),
                    start_vpn: vpn,
                    npages,
                    initialisers,
                    huge_pages: o.huge_pages,
                });
                vpn += (npages as u64).div_ceil(512) * 512 + 512;
            }
            let mut phases = Vec::new();
            for (pi, p) in w.phases.iter().enumerate() {
                let mut active = match &p.threads {
                    None => vec![true; n],
                    Some(t) => {
                        let set = CpuSet::parse_list(t)
                            .map_err(|e| SimError::workload(&origin, format!("phase[{pi}].threads"), e.to_string()))?;
                        (0..n).map(|i| set.contains_raw(i as u32)).collect()
                    }
                };
                let thread_work = match &p.thread_work {
                    None => vec![1.0; n],
                    Some(tw) if !tw.is_empty() => {
                        let raw: Vec<f64> = (0..n).map(|i| tw[i % tw.len()]).collect();
                        let mean = raw.iter().sum::<f64>() / n as f64;
                        raw.iter().map(|x| if mean > 0.0 { x / mean } else { 1.0 }).collect()
                    }
                    Some(_) => vec![1.0; n],
                };
                for (a, w) in active.iter_mut().zip(&thread_work) {
                    *a &= *w > 0.0;
                }
                let applies = |t: &Option<String>, k: usize| -> Result<Option<Vec<bool>>, SimError> {
                    let Some(t) = t else { return Ok(None) };
                    let set = CpuSet::parse_list(t).map_err(|e| {
                        SimError::workload(&origin, format!("phase[{pi}].access[{k}].threads"), e.to_string())
                    })?;
                    Ok(Some((0..n).map(|i| set.contains_raw(i as u32)).collect()))
                };
                // Validated: every object a phase names exists.
                let object_of = |name: &str| first_object + w.objects.iter().position(|o| o.name == name).unwrap_or(0);
                let total_w: f64 = p.access.iter().map(|x| x.weight).sum();
                let access = p
                    .access
                    .iter()
                    .enumerate()
                    .map(|(k, x)| {
                        Ok(CompiledAccess {
                            object: object_of(&x.object),
                            pattern: x.pattern,
                            weight: x.weight / total_w,
                            hot_fraction: x.hot_fraction.unwrap_or(0.1),
                            neighbour_share: x.neighbour_share.unwrap_or(0.2),
                            window_fraction: x.window_fraction.unwrap_or(1.0 / 16.0),
                            threads: applies(&x.threads, k)?,
                        })
                    })
                    .collect::<Result<Vec<_>, SimError>>()?;
                let spin = p.spin.as_ref().map(|sp| SpinSite {
                    object: object_of(&sp.object),
                    share: sp.share(active.iter().filter(|a| **a).count()),
                    stages: sp.stages,
                    pipelined: sp.pipelined.unwrap_or(1.0),
                });
                let hits = p.hits.iter().map(|h| HitSite { object: object_of(&h.object), share: h.share }).collect();
                phases.push(CompiledPhase {
                    name: p.name.clone(),
                    work_instr: p.work_ginstr * 1e9 * duration_scale,
                    m: if access.is_empty() { 0.0 } else { p.apki / 1000.0 },
                    write_share: p.write_share,
                    mlp: p.mlp,
                    ips: p.ips,
                    mops: p.mem_ops_pki.unwrap_or(crate::workload::DEFAULT_MEM_OPS_PKI).max(p.apki) / 1000.0,
                    active,
                    has_stream: access
                        .iter()
                        .any(|x| x.pattern == Pattern::Stream || (x.pattern == Pattern::Transposed && spin.is_some())),
                    access,
                    thread_work,
                    spin,
                    hits,
                });
            }
            let sequence = (0..w.iterations).flat_map(|_| 0..w.phases.len()).collect();
            l.apps.push(AppLayout {
                app: a as AppId,
                workload: w.name.clone(),
                first_thread,
                n_threads: n,
                first_object,
                n_objects: w.objects.len(),
                sequence,
                phases,
            });
        }
        Ok(l)
    }

    /// The object holding page `vpn` of app `app`, and the page's index in it.
    pub fn find_page(&self, app: usize, vpn: u64) -> Option<(usize, usize)> {
        let a = self.apps.get(app)?;
        let objs = &self.objects[a.first_object..a.first_object + a.n_objects];
        let i = objs.partition_point(|o| o.start_vpn <= vpn);
        if i == 0 {
            return None;
        }
        let o = &objs[i - 1];
        let off = vpn - o.start_vpn;
        (off < o.npages as u64).then(|| (a.first_object + i - 1, off as usize))
    }

    /// Total pages of all objects.
    pub fn total_pages(&self) -> u64 {
        self.objects.iter().map(|o| o.npages as u64).sum()
    }
}

/// Part `j` of each of the `t` slices of `[0, npages)` (the `transposed` pattern): `t` ranges,
/// each never empty.
pub fn transposed(npages: usize, t: usize, j: usize) -> Vec<(usize, usize)> {
    let t = t.max(1);
    (0..t)
        .map(|i| {
            let (s, e) = slice(npages, t, i);
            let (a, b) = slice(e - s, t, j);
            (s + a, s + b)
        })
        .collect()
}

/// The `transposed` accesses of app thread `j` of `t` in a pipelined phase ([`SpinSite`]) at
/// `progress` (0..1) through its work: the part `j` of each k-plane in the wavefront's window, or
/// `None` where the thread works outside the sweeps or waits for its neighbour.
///
/// NPB LU's triangular sweeps (ssor.f: `do k = 2, nz-1` with jacld+blts, then `do k = nz-1, 2,
/// -1` with jacu+buts) are a pipeline: thread `j` works on plane `k` once thread `j - 1` has
/// finished it (sync_left), so at stage `s` it is on plane `s - j` (the upper sweep runs the
/// other way, led by the last thread). At any moment the threads together touch a window of `t`
/// consecutive planes, not every plane: whichever nodes hold those planes carry the sweep's
/// traffic. The object is laid out in `stages` equal planes; the window advances in steps of
/// 1/16 of a sweep's `stages + t - 1` stages, and a thread's pieces cover the planes it passes in
/// one step. A thread that waits (`s - j` outside the planes) gets `None`: its spin loop's loads
/// hit the cache, and its memory accesses are taken as spread like the phase's other ones.
pub fn wavefront(
    npages: usize,
    stages: f64,
    pipelined: f64,
    t: usize,
    j: usize,
    progress: f64,
) -> Option<Vec<(usize, usize)>> {
    let t = t.max(1);
    if !(stages >= 1.0 && pipelined > 0.0 && pipelined <= 1.0 && progress.is_finite()) || j >= t {
        return None;
    }
    let planes = (stages.round() as usize).clamp(1, npages.max(1));
    let half = pipelined / 2.0;
    let p = progress.clamp(0.0, 1.0);
    if p >= pipelined {
        return None;
    }
    let (u, upper) = if p < half { (p / half, false) } else { ((p - half) / half, true) };
    let total = planes + t - 1;
    let step = total.div_ceil(16).max(1);
    let s = ((u * total as f64) as usize).min(total - 1) / step * step;
    let lag = if upper { t - 1 - j } else { j };
    let first = s as isize - lag as isize;
    let (lo, hi) = (first.max(0) as usize, ((first + step as isize).min(planes as isize)).max(0) as usize);
    if lo >= hi {
        return None;
    }
    Some(
        (lo..hi)
            .map(|k| {
                let k = if upper { planes - 1 - k } else { k };
                let (ps, pe) = slice(npages, planes, k);
                let (a, b) = slice(pe - ps, t, j);
                (ps + a, ps + b)
            })
            .collect(),
    )
}

/// Slice `j` of `t` equal slices of `[0, npages)` (never empty).
pub fn slice(npages: usize, t: usize, j: usize) -> (usize, usize) {
    let t = t.max(1);
    let s = j * npages / t;
    let e = (j + 1) * npages / t;
    if e > s {
        (s, e)
    } else {
        let s = s.min(npages.saturating_sub(1));
        (s, s + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_parts_cover_the_object_once_when_slices_are_long_enough() {
        for (n, t) in [(4096, 64), (1000, 7), (64, 8)] {
            let mut seen = vec![0u32; n];
            for j in 0..t {
                let parts = transposed(n, t, j);
                assert_eq!(parts.len(), t);
                for (s, e) in parts {
                    assert!(e > s && e <= n);
                    seen[s..e].iter_mut().for_each(|x| *x += 1);
                }
            }
            assert!(seen.iter().all(|&x| x == 1), "n={n} t={t}");
        }
        // Slices shorter than t pages: parts overlap but are never empty.
        assert!(transposed(10, 8, 7).iter().all(|(s, e)| e > s && *e <= 10));
    }

    #[test]
    fn a_pipelines_wavefront_touches_a_window_of_planes_lagging_by_thread() {
        // 160 planes of 8 pages, 16 threads: a sweep has 175 stages in steps of 11.
        let (np, planes, t) = (1280, 160.0, 16);
        let planes_of = |parts: &[(usize, usize)]| -> Vec<usize> { parts.iter().map(|&(s, _)| s / 8).collect() };
        // Half-way through the lower sweep (stage 77 -> step 77): thread j works on planes from 77 - j.
        let p = 0.84 / 2.0 * 0.45;
        let mut union = std::collections::BTreeSet::new();
        for j in 0..t {
            let parts = wavefront(np, planes, 0.84, t, j, p).expect("every thread is on a plane");
            let ks = planes_of(&parts);
            assert_eq!(ks[0], 77 - j, "thread {j}: {ks:?}");
            assert_eq!(ks.len(), 11);
            for (&(s, e), &k) in parts.iter().zip(&ks) {
                // Part j of plane k: one of its 8 pages (8 pages, 16 threads: never empty).
                assert!(e > s && s >= k * 8 && e <= (k + 1) * 8, "{s}..{e} on plane {k}");
            }
            union.extend(ks);
        }
        // Together the threads touch t + 10 planes, not the 160.
        assert_eq!(union.len(), t + 10);
        // The upper sweep runs the other way, led by the last thread.
        let up = 0.42 + 0.84 / 2.0 * 0.45;
        assert_eq!(planes_of(&wavefront(np, planes, 0.84, t, t - 1, up).unwrap())[0], 159 - 77);
        assert_eq!(planes_of(&wavefront(np, planes, 0.84, t, 0, up).unwrap())[0], 159 - 62);
        // Waiting for the neighbour (thread 15 at the first step), outside the sweeps, or no
        // pipeline: no wavefront.
        assert_eq!(wavefront(np, planes, 0.84, t, 15, 0.0), None);
        assert_eq!(planes_of(&wavefront(np, planes, 0.84, t, 0, 0.0).unwrap())[0], 0);
        assert_eq!(wavefront(np, planes, 0.84, t, 3, 0.9), None);
        assert_eq!(wavefront(np, 0.0, 0.84, t, 3, 0.1), None);
        assert_eq!(wavefront(np, planes, 0.84, t, t, 0.1), None);
    }

    #[test]
    fn slices_cover_the_object() {
        for (n, t) in [(100, 7), (5, 8), (1_000_000, 64)] {
            let mut covered = 0;
            for j in 0..t {
                let (s, e) = slice(n, t, j);
                assert!(e > s && e <= n);
                covered += e - s;
            }
            assert!(covered >= n);
        }
    }
}
