//! `interleave` and `weighted-interleave`: pages spread over the allowed memory nodes at
//! allocation, round-robin (MPOL_INTERLEAVE) or in proportion to per-node weights
//! (MPOL_WEIGHTED_INTERLEAVE). Weights default to each node's share of the Bandwidth Graph:
//! the mean uncontended GB/s from all CPU groups to the node, scaled to integers 1..=100
//! (the kernel's weights are small integers). Without a Bandwidth Graph, weights are equal.
//! Explicit weights name nodes by kernel id, as `--nodes` and numactl do.

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use ptb_topology::{Machine, NodeId, NodeIdx};
use std::time::Duration;

/// `interleave` has no parameters.
pub const PARAMS: &[ParamDoc] = &[];

/// Parameters of `weighted-interleave`.
pub const WEIGHTED_PARAMS: &[ParamDoc] = &[ParamDoc {
    key: "weights",
    default: "from the Bandwidth Graph",
    doc: "explicit per-node weights as `node:weight,...` (kernel node ids, as numactl)",
}];

#[derive(Debug)]
pub struct Interleave {
    weighted: bool,
    /// Explicit weights by kernel node id.
    explicit: Option<Vec<(NodeId, u32)>>,
}

/// Parse `weights` (`node:weight,...`, kernel node ids); `None` when not set.
fn parse_weights(s: &crate::params::Section) -> Result<Option<Vec<(NodeId, u32)>>, PolicyError> {
    let text: String = s.get("weights", String::new())?;
    if text.is_empty() {
        return Ok(None);
    }
    let mut v = Vec::new();
    for item in text.split(',') {
        let parsed = item
            .split_once(':')
            .and_then(|(n, w)| Some((NodeId(n.trim().parse().ok()?), w.trim().parse::<u32>().ok()?)));
        match parsed {
            Some((n, w)) if w > 0 => v.push((n, w)),
            _ => {
                return Err(PolicyError::Param {
                    origin: s.origin("weights"),
                    policy: "weighted-interleave".into(),
                    key: "weights".into(),
                    reason: format!("`{item}` is not node:weight (kernel node id, weight >= 1)"),
                })
            }
        }
    }
    Ok(Some(v))
}

/// Refuse explicit weights that name a node the machine does not have, or one without memory.
pub fn check_weights(p: &Params, m: &Machine) -> Result<(), PolicyError> {
    let s = p.section("weighted-interleave");
    let Some(ws) = parse_weights(&s)? else { return Ok(()) };
    for (id, _) in ws {
        let ok = m.node_idx(id).is_some_and(|ix| m.node(ix).has_memory());
        if !ok {
            let mem: Vec<String> = m.memory_nodes().iter().map(|&n| m.node(n).id.0.to_string()).collect();
            return Err(PolicyError::Param {
                origin: s.origin("weights"),
                policy: "weighted-interleave".into(),
                key: "weights".into(),
                reason: format!(
                    "node {} is not a memory node of machine `{}` (its memory nodes, by kernel id: {})",
                    id.0,
                    m.name,
                    mem.join(", ")
                ),
            });
        }
    }
    Ok(())
}

impl Interleave {
    pub fn from_params(p: &Params, weighted: bool) -> Result<Self, PolicyError> {
        let name = if weighted { "weighted-interleave" } else { "interleave" };
        let s = p.section(name);
        let explicit = if weighted { parse_weights(&s)? } else { None };
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
            .map(|w| {
                w.iter()
                    .filter_map(|&(id, w)| Some((ctx.machine.node_idx(id)?, w)))
                    .filter(|(n, _)| nodes.contains(n))
                    .collect::<Vec<_>>()
            })
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
        SamplingRequest::new(SamplingMode::None, Duration::from_secs(1))
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

    #[test]
    fn explicit_weights_name_kernel_node_ids() {
        // opteron6272-4n numbers its nodes 0, 2, 4, 6 (dense 0..3).
        let m = ptb_topology::presets::get("opteron6272-4n").unwrap();
        let w = World::new(m.clone());
        let a = alloc(&w, true, &["weighted-interleave.weights=2:3,6:1"]).unwrap();
        assert_eq!(a, AllocPolicy::Weighted(vec![(NodeIdx(1), 3), (NodeIdx(3), 1)]));
        let mut ok = Params::new();
        ok.set_assignment("weighted-interleave.weights=2:3,6:1").unwrap();
        assert!(check_weights(&ok, &m).is_ok());
        let mut bad = Params::new();
        bad.set_assignment("weighted-interleave.weights=1:3").unwrap();
        let e = check_weights(&bad, &m).unwrap_err().to_string();
        assert!(e.contains("node 1 is not a memory node") && e.contains("0, 2, 4, 6"), "{e}");
    }
}
