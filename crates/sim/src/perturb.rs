//! Worlds a policy was not tuned on: the simulator's hidden constants scaled by seeded factors.
//!
//! Problem: a policy is judged in this simulator, and a policy tuned inside it can come to depend
//! on the simulator's exact numbers (a service time, a queue curve, a latency) rather than on
//! what it could know on a real server: the machine file and its samples. On a real machine those
//! numbers are never exactly what the machine file says.
//!
//! Approach: with `--perturb SEED`, every hidden constant of the world is multiplied by its own
//! factor drawn uniformly from [0.7, 1.3] (seeded, in a fixed order, so a seed names one world):
//! the queueing service time of every controller and link direction, the steepness of every
//! delay curve (`q = s (u / (1 - u))^k`, `k` = the factor), every idle latency of a (CPU group,
//! memory node) pair, the capacity of every link direction, and each migration and sampling cost
//! (per-page CPU time, copy bandwidth, thread move, hinting fault, sample). Policies still get
//! the unperturbed machine file, as on a server whose file is off by up to 30%. Controller and
//! per-pair path capacities stay: they are the measured Bandwidth Graph a machine file carries.
//!
//! To find which of the file's errors costs a policy what, `--perturb-known` hands the policies
//! a machine file that is right about some of them ([`Known`]): the perturbed link capacities,
//! or the perturbed idle latencies, as if they had been measured.

use crate::machine::{ResourceKind, SimMachine};
use ptb_topology::{Machine, MigrationCosts};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Largest relative change of a constant.
pub const SPREAD: f64 = 0.3;

/// A perturbed constant the machine file given to the policies states rightly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Known {
    /// Every directed link's capacity.
    Links,
    /// Every (CPU group, memory node) idle latency.
    Latency,
}

impl Known {
    pub const ALL: [Known; 2] = [Known::Links, Known::Latency];

    /// The constant called `name` (as [`Known::name`] writes it).
    pub fn parse(name: &str) -> Option<Known> {
        Known::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Known::Links => "links",
            Known::Latency => "latency",
        }
    }
}

/// Write the perturbed world's values of `known` into the machine file `m` the policies see.
/// A file without a latency matrix gets none: the world's idle latencies then came from its
/// distances, which the policies see already.
pub fn tell(known: &[Known], sm: &SimMachine, m: &mut Machine) {
    for k in known {
        match k {
            Known::Links => {
                for r in &sm.resources {
                    if let ResourceKind::Link { link, forward } = r.kind {
                        if let Some(l) = m.links.get_mut(usize::from(link)) {
                            if forward {
                                l.gbps_ab = r.capacity;
                            } else {
                                l.gbps_ba = r.capacity;
                            }
                        }
                    }
                }
            }
            Known::Latency => {
                let (ng, nn) = (sm.n_groups, sm.n_nodes);
                if let Some(lat) = m.bandwidth.as_mut().and_then(|b| b.latency.as_mut()).filter(|l| l.has_shape(ng, nn))
                {
                    for (g, row) in lat.rows.iter_mut().enumerate() {
                        for (n, v) in row.iter_mut().enumerate() {
                            *v = sm.lat0(g, n);
                        }
                    }
                }
            }
        }
    }
}

/// Perturb `sm` and `costs` with `seed` (see the module docs).
pub fn apply(seed: u64, sm: &mut SimMachine, costs: &mut MigrationCosts) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7065_7274_7572_6221);
    let mut f = || 1.0 + SPREAD * (2.0 * rng.random::<f64>() - 1.0);
    for r in sm.resources.iter_mut() {
        match r.kind {
            ResourceKind::Controller(_) => {
                r.service_ns *= f();
                r.steepness = f();
            }
            ResourceKind::Link { .. } => {
                r.service_ns *= f();
                r.steepness = f();
                r.capacity *= f();
            }
            ResourceKind::Path(..) => {}
        }
    }
    for l in sm.lat0.iter_mut() {
        *l *= f();
    }
    costs.page_us *= f();
    costs.copy_gbps *= f();
    costs.thread_us *= f();
    costs.hint_fault_us *= f();
    costs.sample_us *= f();
    sm.notes.push(format!(
        "perturbed world (seed {seed}): hidden constants scaled by factors in [{:.1}, {:.1}]",
        1.0 - SPREAD,
        1.0 + SPREAD
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelParams;

    #[test]
    fn a_seed_names_one_world_and_every_factor_stays_within_the_spread() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let base = SimMachine::new(&m, &ModelParams::default()).unwrap();
        let world = |seed| {
            let mut sm = base.clone();
            let mut c = m.costs.clone();
            apply(seed, &mut sm, &mut c);
            (sm, c)
        };
        let (a, ca) = world(7);
        let (b, _) = world(7);
        let (c, _) = world(8);
        assert_eq!(a.lat0, b.lat0);
        assert_ne!(a.lat0, c.lat0);
        let within = |x: f64, y: f64| x >= y * (1.0 - SPREAD) - 1e-9 && x <= y * (1.0 + SPREAD) + 1e-9;
        for (p, q) in a.lat0.iter().zip(&base.lat0) {
            assert!(within(*p, *q));
        }
        for (p, q) in a.resources.iter().zip(&base.resources) {
            assert!(within(p.capacity, q.capacity) && within(p.service_ns, q.service_ns));
            assert!(within(p.steepness, 1.0));
            if matches!(p.kind, ResourceKind::Controller(_)) {
                assert_eq!(p.capacity, q.capacity, "controller capacity is the measured graph");
            }
        }
        assert!(within(ca.page_us, m.costs.page_us) && ca.page_us != m.costs.page_us);
    }

    #[test]
    fn a_known_constant_is_told_to_the_policies_and_the_others_stay_as_filed() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let mut sm = SimMachine::new(&m, &ModelParams::default()).unwrap();
        let mut costs = m.costs.clone();
        apply(3, &mut sm, &mut costs);
        let mut told = m.clone();
        tell(&[Known::Links], &sm, &mut told);
        let mut differ = 0;
        for r in &sm.resources {
            if let ResourceKind::Link { link, forward } = r.kind {
                let (now, was) = if forward {
                    (told.links[link as usize].gbps_ab, m.links[link as usize].gbps_ab)
                } else {
                    (told.links[link as usize].gbps_ba, m.links[link as usize].gbps_ba)
                };
                assert_eq!(now, r.capacity);
                differ += usize::from(now != was);
            }
        }
        assert!(differ > 0);
        assert_eq!(told.bandwidth, m.bandwidth, "latencies stay as filed");
        for k in Known::ALL {
            assert_eq!(Known::parse(k.name()), Some(k));
        }
        assert_eq!(Known::parse("bandwidth"), None);
        tell(&[Known::Latency], &sm, &mut told);
        let lat = told.bandwidth.as_ref().unwrap().latency.as_ref().unwrap();
        for g in 0..sm.n_groups {
            for n in 0..sm.n_nodes {
                assert_eq!(lat.get(g, n), sm.lat0(g, n));
            }
        }
    }
}
