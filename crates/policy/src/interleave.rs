//! `interleave` and `weighted-interleave`: pages spread over the allowed memory nodes at
//! allocation, round-robin (MPOL_INTERLEAVE) or in proportion to per-node weights
//! (MPOL_WEIGHTED_INTERLEAVE). Weights default to each node's share of the Bandwidth Graph:
//! the mean uncontended GB/s from all CPU groups to the node, scaled to integers 1..=100
//! (the kernel's weights are small integers). Without a Bandwidth Graph, weights are equal.

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use ptb_topology::{Machine, NodeIdx};
use std::time::Duration;

/// `interleave` has no parameters.
pub const PARAMS: &[ParamDoc] = &[];

/// Parameters of `weighted-interleave`.
pub const WEIGHTED_PARAMS: &[ParamDoc] = &[ParamDoc {
    key: "weights",
    default: "from the Bandwidth Graph",
    doc: "explicit per-node weights as `node:weight,...` (dense node indices)",
}];

#[derive(Debug)]
pub struct Interleave {
    weighted: bool,
    explicit: Option<Vec<(NodeIdx, u32)>>,
}

impl Interleave {
    pub fn from_params(p: &Params, weighted: bool) -> Result<Self, PolicyError> {
        let name = if weighted { "weighted-interleave" } else { "interleave" };
        let s = p.section(name);
        let mut explicit = None;
        if weighted {
            let text: String = s.get("weights", String::new())?;
            if !text.is_empty() {
                let mut v = Vec::new();
                for item in text.split(',') {
                    let parsed = item
                        .split_once(':')
                        .and_then(|(n, w)| Some((NodeIdx(n.trim().parse().ok()?), w.trim().parse::<u32>().ok()?)));
                    match parsed {
                        Some((n, w)) if w > 0 => v.push((n, w)),
                        _ => {
                            return Err(PolicyError::Param {
                                origin: "parameters".into(),
                                policy: name.into(),
                                key: "weights".into(),
                                reason: format!("`{item}` is not node:weight with weight >= 1"),
                            })
                        }
                    }
                }
                explicit = Some(v);
            }
        }
        s.finish()?;
        Ok(Interleave { weighted, explicit })
    }
}

/// Bandwidth-proportional weights for the given memory nodes (integers 1..=100).
pub fn bandwidth_weights(m: &Machine, nodes: &[NodeIdx]) -> Vec<(NodeIdx, u32)> {
    let raw: Vec<f64> = nodes
        .iter()
        .map(|&n| match &m.bandwidth {
            Some(b) if !m.groups.is_empty() => {
                m.groups.iter().map(|g| b.uncontended.get(g.idx.ix(), n.ix())).sum::<f64>() / m.groups.len() as f64
            }
            _ => 1.0,
        })
        .collect();
    let max = raw.iter().cloned().fold(0.0, f64::max);
    nodes
        .iter()
        .zip(raw)
        .map(|(&n, r)| (n, if max > 0.0 { ((r / max) * 100.0).round().clamp(1.0, 100.0) as u32 } else { 1 }))
        .collect()
}

impl Policy for Interleave {
    fn name(&self) -> String {
        if self.weighted { "weighted-interleave" } else { "interleave" }.into()
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        let nodes: Vec<NodeIdx> =
            ctx.machine.memory_nodes().into_iter().filter(|n| ctx.allowed.contains_idx(*n)).collect();
        let alloc = if !self.weighted {
            AllocPolicy::Interleave(nodes)
        } else if let Some(w) = self
            .explicit
            .as_ref()
            .map(|w| w.iter().filter(|(n, _)| nodes.contains(n)).copied().collect::<Vec<_>>())
            .filter(|w| !w.is_empty())
        {
            // Explicit weights of allowed nodes; when none is allowed, the Bandwidth Graph's.
            AllocPolicy::Weighted(w)
        } else {
            AllocPolicy::Weighted(bandwidth_weights(ctx.machine, &nodes))
        };
        StartPlan { alloc, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest { mode: SamplingMode::None, cycle: Duration::from_secs(1) }
    }
    fn decide(&mut self, _snap: &Snapshot) -> Plan {
        Plan::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autonuma::test_world::World;
    use ptb_topology::NodeSet;

    fn alloc(w: &World, weighted: bool, sets: &[&str]) -> Result<AllocPolicy, PolicyError> {
        let mut ps = Params::new();
        sets.iter().for_each(|s| ps.set_assignment(s).unwrap());
        let mut p = Interleave::from_params(&ps, weighted)?;
        let ctx = StartContext { machine: &w.machine, allowed: &w.allowed, threads: &w.threads };
        let sp = p.start(&ctx);
        assert!(sp.threads.is_empty());
        assert!(p.decide(&w.snap()).is_empty());
        Ok(sp.alloc)
    }

    #[test]
    fn interleave_uses_every_allowed_memory_node() {
        let mut w = World::synthetic("nodes=3,cpus=2,memonly=1");
        let all: Vec<NodeIdx> = (0..4).map(NodeIdx).collect();
        assert_eq!(alloc(&w, false, &[]).unwrap(), AllocPolicy::Interleave(all));
        w.allowed = NodeSet::from_iter([0u32, 2]);
        assert_eq!(alloc(&w, false, &[]).unwrap(), AllocPolicy::Interleave(vec![NodeIdx(0), NodeIdx(2)]));
        assert!(alloc(&w, false, &["interleave.weights=0:1"]).is_err(), "weights belong to weighted-interleave");
    }

    #[test]
    fn weights_follow_the_bandwidth_graph() {
        // Local 10 GB/s, remote 5, memory-only node 2.5: mean over 2 groups = 7.5, 7.5, 2.5.
        let w = World::synthetic("nodes=2,cpus=2,memonly=1");
        assert_eq!(
            alloc(&w, true, &[]).unwrap(),
            AllocPolicy::Weighted(vec![(NodeIdx(0), 100), (NodeIdx(1), 100), (NodeIdx(2), 33)])
        );
        let mut m = w.machine.clone();
        m.bandwidth = None;
        assert_eq!(bandwidth_weights(&m, &[NodeIdx(0), NodeIdx(2)]), vec![(NodeIdx(0), 100), (NodeIdx(2), 100)]);
    }

    #[test]
    fn explicit_weights_are_parsed_checked_and_limited_to_allowed_nodes() {
        let mut w = World::synthetic("nodes=2,cpus=2");
        let a = alloc(&w, true, &["weighted-interleave.weights=0:3, 1:1"]).unwrap();
        assert_eq!(a, AllocPolicy::Weighted(vec![(NodeIdx(0), 3), (NodeIdx(1), 1)]));
        for bad in ["0:0", "x:1", "0", "0:1,,1:2"] {
            let set = format!("weighted-interleave.weights={bad}");
            assert!(alloc(&w, true, &[&set]).is_err(), "{bad} accepted");
        }
        w.allowed = NodeSet::from_iter([1u32]);
        let a = alloc(&w, true, &["weighted-interleave.weights=0:3,1:1"]).unwrap();
        assert_eq!(a, AllocPolicy::Weighted(vec![(NodeIdx(1), 1)]));
        // Weights naming only nodes outside the allowed set fall back to the Bandwidth Graph.
        let a = alloc(&w, true, &["weighted-interleave.weights=0:3"]).unwrap();
        assert_eq!(a, AllocPolicy::Weighted(vec![(NodeIdx(1), 100)]));
    }
}
