//! The contention solver: what every thread achieves in one time step, given all demands.
//!
//! Problem: a thread's progress rate depends on its access latency, the latency on the
//! queueing delay of every resource on its routes, and each delay on the demand all threads put
//! on that resource — a fixed point (closed queueing network, mean-value style).
//!
//! Approach: iterate on resource utilisations `u_R` (warm-started from the previous step).
//! From `u` compute delays `q_R = s_R u_R / (1 - u_R)`, then latencies, rates and demand
//! `D_R`; move each `u_R` towards `min(D_R / C_R, u_max)` with its own step size, halved
//! whenever the correction changes sign (so steep curves near saturation converge instead of
//! oscillating). Finally every thread's rate is scaled down by the worst `C_R / D_R` among the
//! resources it uses, so no resource ever carries more than its capacity (`u <= 1`).

use crate::model::ModelParams;

/// Capacity (GB/s), queueing service time (ns) and delay-curve steepness of every resource.
#[derive(Clone, Debug, Default)]
pub struct Resources {
    pub capacity: Vec<f64>,
    pub service: Vec<f64>,
    pub steep: Vec<f64>,
}

impl Resources {
    pub fn of(sm: &crate::machine::SimMachine) -> Resources {
        Resources {
            capacity: sm.resources.iter().map(|r| r.capacity).collect(),
            service: sm.resources.iter().map(|r| r.service_ns).collect(),
            steep: sm.resources.iter().map(|r| r.steepness).collect(),
        }
    }
}

/// One class of threads in a solve: its scalars and where its entries lie in [`Flat`].
#[derive(Clone, Copy, Debug, Default)]
struct Class {
    l0: f64,
    speed: f64,
    ips: f64,
    m: f64,
    mlp: f64,
    /// Its entries in `Flat::lat`, then in `Flat::load`.
    lat: (u32, u32),
    load: (u32, u32),
}

/// The demands of a solve laid out flat (one pass over contiguous arrays per iteration),
/// kept between solves so a solve allocates nothing once they have grown.
#[derive(Clone, Debug, Default)]
struct Flat {
    classes: Vec<Class>,
    /// (resource, crossing share) of each class, resources whose delay can be non-zero only:
    /// a resource with no service time always has `q = 0`, and adding `c * 0` to a latency
    /// changes nothing, so the latency sum skips it.
    lat: Vec<(u32, f64)>,
    /// (resource, bytes each line of the class puts on it: share x line size x threads in
    /// class), every resource.
    load: Vec<(u32, f64)>,
}

impl Flat {
    fn fill(&mut self, demands: &[&Demand], mult: &[f64], line: f64, service: &[f64]) {
        self.classes.clear();
        self.lat.clear();
        self.load.clear();
        for (d, k) in demands.iter().zip(mult) {
            let (l0, n0) = (self.lat.len() as u32, self.load.len() as u32);
            for &(r, c) in &d.coeffs {
                if service.get(r as usize).is_none_or(|&s| s != 0.0) {
                    self.lat.push((r, c));
                }
                self.load.push((r, c * line * k));
            }
            self.classes.push(Class {
                l0: d.l0,
                speed: d.speed,
                ips: d.ips,
                m: d.m,
                mlp: d.mlp.max(1e-6),
                lat: (l0, self.lat.len() as u32),
                load: (n0, self.load.len() as u32),
            });
        }
    }
}

/// A hash of every field of a demand (equal demands, equal fingerprints).
fn fingerprint(d: &Demand) -> u64 {
    let mix = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    let mut h = [d.l0, d.speed, d.ips, d.m, d.mlp].iter().fold(0, |h, x| mix(h, x.to_bits()));
    for &(r, c) in &d.coeffs {
        h = mix(mix(h, u64::from(r)), c.to_bits());
    }
    h
}

/// The demand profile of one thread for a step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Demand {
    /// Idle latency averaged over the thread's accesses, ns.
    pub l0: f64,
    /// (resource, share of the thread's accesses that cross it).
    pub coeffs: Vec<(u32, f64)>,
    /// Fraction of a CPU the thread gets while running (1 / threads sharing its CPU), 0 when idle.
    pub speed: f64,
    /// Instructions per ns when never stalled.
    pub ips: f64,
    /// Memory accesses per instruction.
    pub m: f64,
    /// Memory-level parallelism (outstanding misses overlapped).
    pub mlp: f64,
}

/// What a thread achieves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rate {
    /// Instructions per ns.
    pub instr_per_ns: f64,
    /// Memory accesses (cache lines) per ns.
    pub lines_per_ns: f64,
    /// Mean loaded latency, ns.
    pub latency_ns: f64,
}

/// Solver state kept between steps (warm start).
#[derive(Clone, Debug)]
pub struct Solver {
    pub u: Vec<f64>,
    step: Vec<f64>,
    last_sign: Vec<i8>,
    q: Vec<f64>,
    demand: Vec<f64>,
    /// Iterations of the last solve.
    pub last_iterations: usize,
    /// Scratch of a solve (kept so solves do not allocate).
    flat: Flat,
    fp: Vec<u64>,
    order: Vec<usize>,
    class_of: Vec<usize>,
    mult: Vec<f64>,
}

#[allow(clippy::needless_range_loop)]
impl Solver {
    pub fn new(n_resources: usize) -> Self {
        Solver {
            u: vec![0.0; n_resources],
            step: vec![0.5; n_resources],
            last_sign: vec![0; n_resources],
            q: vec![0.0; n_resources],
            demand: vec![0.0; n_resources],
            last_iterations: 0,
            flat: Flat::default(),
            fp: vec![],
            order: vec![],
            class_of: vec![],
            mult: vec![],
        }
    }

    /// Solve one step. `capacity[R]`, `service[R]` and `steep[R]` per resource (GB/s =
    /// bytes/ns, ns, the delay curve's exponent);
    /// `background[R]` is load (bytes/ns) that is not a thread's (page copies); `line` the
    /// cache-line size. Returns the rate of every thread; `self.u` holds the utilisations.
    pub fn solve(
        &mut self,
        demands: &[&Demand],
        res: &Resources,
        background: &[f64],
        line: f64,
        p: &ModelParams,
    ) -> Vec<Rate> {
        // Threads with identical demand profiles (same CPU group and node shares, same phase)
        // are solved once, weighted by how many there are.
        let mut fp = std::mem::take(&mut self.fp);
        let mut order = std::mem::take(&mut self.order);
        let mut class_of = std::mem::take(&mut self.class_of);
        let mut mult = std::mem::take(&mut self.mult);
        fp.clear();
        fp.extend(demands.iter().map(|d| fingerprint(d)));
        order.clear();
        order.extend(0..demands.len());
        order.sort_unstable_by_key(|&i| (fp[i], i));
        let mut uniq: Vec<&Demand> = Vec::with_capacity(demands.len());
        mult.clear();
        class_of.clear();
        class_of.resize(demands.len(), 0);
        let mut last: Option<usize> = None;
        for &i in &order {
            match last {
                Some(j) if fp[j] == fp[i] && demands[j] == demands[i] => {
                    class_of[i] = class_of[j];
                }
                _ => {
                    uniq.push(demands[i]);
                    mult.push(0.0);
                    class_of[i] = uniq.len() - 1;
                    last = Some(i);
                }
            }
            mult[class_of[i]] += 1.0;
        }
        let rates = self.solve_classes(&uniq, &mult, res, background, line, p);
        let out = class_of.iter().map(|&c| rates[c]).collect();
        (self.fp, self.order, self.class_of, self.mult) = (fp, order, class_of, mult);
        out
    }

    fn solve_classes(
        &mut self,
        demands: &[&Demand],
        mult: &[f64],
        res: &Resources,
        background: &[f64],
        line: f64,
        p: &ModelParams,
    ) -> Vec<Rate> {
        let capacity = &res.capacity;
        let nr = capacity.len();
        let mut rates = vec![Rate::default(); demands.len()];
        for s in self.step.iter_mut() {
            *s = s.max(0.05);
        }
        let mut flat = std::mem::take(&mut self.flat);
        flat.fill(demands, mult, line, &res.service);
        let steep = res.steep.iter().any(|&k| k != 1.0);
        let mut iters = 0;
        for it in 0..p.max_iterations {
            iters = it + 1;
            self.compute(&flat, res, steep, background, p, &mut rates);
            let mut worst: f64 = 0.0;
            for r in 0..nr {
                let target = (self.demand[r] / capacity[r]).min(p.u_max);
                let diff = target - self.u[r];
                worst = worst.max(diff.abs());
                let sign = if diff > 0.0 {
                    1
                } else if diff < 0.0 {
                    -1
                } else {
                    0
                };
                if sign != 0 && sign == -self.last_sign[r] {
                    self.step[r] = (self.step[r] * 0.5).max(1e-4);
                } else if sign == self.last_sign[r] {
                    self.step[r] = (self.step[r] * 1.2).min(1.0);
                }
                self.last_sign[r] = sign;
                self.u[r] = (self.u[r] + self.step[r] * diff).clamp(0.0, p.u_max);
            }
            if worst < p.tolerance {
                break;
            }
        }
        self.last_iterations = iters;
        self.compute(&flat, res, steep, background, p, &mut rates);
        self.flat = flat;
        // Projection: never more than capacity through any resource.
        let over: Vec<f64> = (0..nr)
            .map(|r| {
                let thread_load = self.demand[r] - background[r].min(capacity[r]);
                let room = capacity[r] - background[r].min(capacity[r]);
                if thread_load > room && thread_load > 0.0 {
                    room / thread_load
                } else {
                    1.0
                }
            })
            .collect();
        if over.iter().any(|f| *f < 1.0) {
            for (d, rate) in demands.iter().zip(rates.iter_mut()) {
                let f = d.coeffs.iter().filter(|(_, c)| *c > 0.0).map(|(r, _)| over[*r as usize]).fold(1.0, f64::min);
                rate.instr_per_ns *= f;
                rate.lines_per_ns *= f;
            }
            self.demand.copy_from_slice(background);
            for ((d, rate), k) in demands.iter().zip(&rates).zip(mult) {
                for &(r, c) in &d.coeffs {
                    self.demand[r as usize] += k * rate.lines_per_ns * c * line;
                }
            }
        }
        for r in 0..nr {
            self.u[r] = (self.demand[r] / capacity[r]).clamp(0.0, 1.0);
        }
        rates
    }

    /// One pass `u -> q -> L -> r -> D` (`steep`: some resource's delay curve is not the
    /// plain `u / (1 - u)`).
    fn compute(
        &mut self,
        f: &Flat,
        res: &Resources,
        steep: bool,
        background: &[f64],
        p: &ModelParams,
        rates: &mut [Rate],
    ) {
        for ((q, &u), &s) in self.q.iter_mut().zip(&self.u).zip(&res.service) {
            let u = u.min(p.u_max);
            *q = s * u / (1.0 - u);
        }
        if steep {
            // Perturbed worlds only: a steeper or flatter delay curve.
            for (((q, &u), &s), &k) in self.q.iter_mut().zip(&self.u).zip(&res.service).zip(&res.steep) {
                let u = u.min(p.u_max);
                *q = s * (u / (1.0 - u)).powf(k);
            }
        }
        self.demand.copy_from_slice(background);
        let q = &self.q;
        for (c, rate) in f.classes.iter().zip(rates.iter_mut()) {
            if c.speed <= 0.0 || c.ips <= 0.0 {
                *rate = Rate::default();
                continue;
            }
            let lat =
                f.lat[c.lat.0 as usize..c.lat.1 as usize].iter().fold(c.l0, |acc, &(r, x)| acc + x * q[r as usize]);
            let m = c.m;
            let cpi = 1.0 / c.ips + if m > 0.0 { m * lat / c.mlp } else { 0.0 };
            let instr = c.speed / cpi;
            let lines = instr * m;
            *rate = Rate { instr_per_ns: instr, lines_per_ns: lines, latency_ns: lat };
            for &(r, l) in &f.load[c.load.0 as usize..c.load.1 as usize] {
                self.demand[r as usize] += lines * l;
            }
        }
    }

    /// Current queueing delay of each resource, ns.
    pub fn delays(&self) -> &[f64] {
        &self.q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res1() -> Resources {
        Resources { capacity: vec![10.0], service: vec![8.0], steep: vec![1.0] }
    }

    fn thread(res: u32, mlp: f64) -> Demand {
        Demand { l0: 100.0, coeffs: vec![(res, 1.0)], speed: 1.0, ips: 2.0, m: 0.05, mlp }
    }

    #[test]
    fn one_thread_is_latency_bound_and_many_saturate_without_exceeding_capacity() {
        let p = ModelParams::default();
        let mut s = Solver::new(1);
        let r = s.solve(&[&thread(0, 2.0)], &res1(), &[0.0], 64.0, &p);
        // 2 outstanding lines / ~100 ns = 0.02 lines/ns = 1.28 GB/s, far below 10 GB/s.
        let bw = r[0].lines_per_ns * 64.0;
        assert!(bw > 1.0 && bw < 1.3, "{bw}");
        let many: Vec<Demand> = (0..64).map(|_| thread(0, 4.0)).collect();
        let r = s.solve(&many.iter().collect::<Vec<_>>(), &res1(), &[0.0], 64.0, &p);
        let total: f64 = r.iter().map(|x| x.lines_per_ns * 64.0).sum();
        assert!(total <= 10.0 + 1e-9 && total > 9.0, "{total}");
        assert!(s.u[0] <= 1.0);
        // Loaded latency rises well above idle.
        assert!(r[0].latency_ns > 150.0, "{}", r[0].latency_ns);
    }

    #[test]
    fn compute_bound_thread_ignores_memory() {
        let p = ModelParams::default();
        let mut s = Solver::new(1);
        let mut d = thread(0, 2.0);
        d.m = 0.0;
        let r = s.solve(&[&d], &res1(), &[0.0], 64.0, &p);
        assert!((r[0].instr_per_ns - 2.0).abs() < 1e-9);
    }

    #[test]
    fn background_load_takes_capacity() {
        let p = ModelParams::default();
        let many: Vec<Demand> = (0..64).map(|_| thread(0, 4.0)).collect();
        let mut s = Solver::new(1);
        let r = s.solve(&many.iter().collect::<Vec<_>>(), &res1(), &[4.0], 64.0, &p);
        let total: f64 = r.iter().map(|x| x.lines_per_ns * 64.0).sum();
        assert!(total <= 6.0 + 1e-9, "{total}");
    }
}
