//! `ptb plan`: placement planned offline from a recorded trace, with no syscalls.
//!
//! Problem: show what a policy would move for a recorded run, and what that would do to
//! the locality of the recorded accesses.
//!
//! Approach: one snapshot from the whole trace (the last placement's threads and regions,
//! every page node seen, all samples), `Policy::start` then `Policy::decide`, and an access
//! map (thread node x page node, counted over the samples) before and after the plan.

use crate::trace::{Trace, TraceRecord};
use ptb_policy::{
    PageLocations, Plan, Policy, RangeOp, Region, Snapshot, StartContext, StartPlan, ThreadState, ThreadTarget,
};
use ptb_profile::{PageKey, Tid};
use ptb_topology::{CpuId, GroupIdx, Machine, NodeIdx, NodeSet};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Sampled accesses counted by (node of the accessing thread, node of the page); the last
/// column holds accesses to pages of unknown node.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AccessMap {
    pub counts: Vec<Vec<u64>>,
}

impl AccessMap {
    fn new(n: usize) -> Self {
        AccessMap { counts: vec![vec![0; n + 1]; n] }
    }
    /// Fraction of accesses with a known page node that are local.
    pub fn local_fraction(&self) -> f64 {
        let n = self.counts.len();
        let known: u64 = self.counts.iter().map(|r| r[..n].iter().sum::<u64>()).sum();
        let local: u64 = (0..n).map(|i| self.counts[i][i]).sum();
        if known == 0 {
            0.0
        } else {
            local as f64 / known as f64
        }
    }
}

/// The result of planning offline.
#[derive(Debug, Serialize)]
pub struct OfflinePlan {
    pub policy: String,
    pub machine: String,
    pub samples: usize,
    pub threads: usize,
    pub start: StartPlan,
    pub plan: Plan,
    /// Page moves per `from->to`, kernel node ids (`?` when the page's node is unknown).
    pub page_moves: BTreeMap<String, u64>,
    pub before: AccessMap,
    pub after: AccessMap,
    /// Why the plan was refused by validation, if it was.
    pub refused: Option<String>,
}

fn thread_node(m: &Machine, t: ThreadTarget) -> Option<NodeIdx> {
    t.node(m)
}

/// Plan for `trace` on `m` with `policy`, restricted to `allowed` (dense node indices).
pub fn plan(trace: &Trace, m: &Machine, policy: &mut dyn Policy, allowed: &NodeSet) -> Result<OfflinePlan, String> {
    let nn = m.n_nodes();
    let check = |n: u16, what: &str| {
        if (n as usize) < nn {
            Ok(NodeIdx(n))
        } else {
            Err(format!(
                "the trace puts {what} on node #{n}, but machine `{}` has {nn} nodes; pick a machine with at least as \
                 many nodes as the one recorded ({})",
                m.name,
                trace.machine.n_nodes()
            ))
        }
    };
    let mut pages = PageLocations::new();
    let mut threads: Vec<ThreadState> = Vec::new();
    let mut regions: Vec<Region> = Vec::new();
    let mut free: Vec<u64> = m.nodes.iter().map(|n| n.memory_bytes).collect();
    for p in &trace.placements {
        if let TraceRecord::Placement { threads: ts, pages: ps, regions: rs, free_bytes, .. } = p {
            for &(app, vpn, node) in ps {
                pages.insert(PageKey { app, vpn }, check(node, "a page")?);
            }
            threads = ts
                .iter()
                .map(|t| {
                    let node = check(t.node, "a thread")?;
                    let cpu = CpuId(t.cpu);
                    let group =
                        m.group_of_cpu(cpu).or_else(|| m.node(node).groups.first().copied()).unwrap_or(GroupIdx(0));
                    Ok(ThreadState { tid: t.tid, app: t.app, cpu, node, group, affinity: None })
                })
                .collect::<Result<_, String>>()?;
            regions = rs
                .iter()
                .map(|r| {
                    let mut resident = r.resident.clone();
                    resident.resize(nn, 0);
                    Region {
                        app: r.app,
                        start_vpn: r.start_vpn,
                        npages: r.npages,
                        name: r.name.clone(),
                        resident,
                        huge: Default::default(),
                    }
                })
                .collect();
            if free_bytes.len() == nn && m.source == trace.machine.source {
                free = free_bytes.clone();
            }
        }
    }
    let span = trace.samples.iter().map(|s| s.time_ns).max().unwrap_or(0);
    let start = policy.start(&StartContext { machine: m, allowed, threads: &threads });
    let mode = ptb_policy::SamplingMode::of_source(&trace.source, trace.period)
        .unwrap_or(ptb_policy::SamplingMode::Address { event: ptb_policy::SampledEvent::Misses, period: trace.period });
    let snap = Snapshot::new(m, allowed, &threads, &free)
        .at(Duration::from_nanos(span), Duration::from_nanos(span.max(1)))
        .with_samples(&trace.samples, mode, trace.period)
        .with_memory(&pages, &regions);
    // The daemon's and the simulator's decide and check; nothing is applied offline.
    let t0 = std::time::Instant::now();
    let decision = ptb_policy::cycle::decide(policy, &snap, &mut || t0.elapsed());
    let refused = decision.refused.map(|e| e.to_string());
    let plan = decision.plan;

    // Where things would be after the plan.
    let tnode_before: HashMap<Tid, NodeIdx> = threads.iter().map(|t| (t.tid, t.node)).collect();
    let mut tnode_after = tnode_before.clone();
    for t in start.threads.iter().chain(&plan.threads) {
        if let Some(n) = thread_node(m, t.to) {
            tnode_after.insert(t.tid, n);
        }
    }
    let moved: HashMap<PageKey, NodeIdx> = plan.pages.iter().map(|p| (p.page, p.to)).collect();
    let after_page = |k: PageKey| -> Option<NodeIdx> {
        if let Some(n) = moved.get(&k) {
            return Some(*n);
        }
        for r in &plan.ranges {
            if r.app == k.app && k.vpn >= r.start_vpn && k.vpn < r.start_vpn + r.npages {
                return match &r.op {
                    RangeOp::MoveTo(n) => Some(*n),
                    RangeOp::Interleave(ns) if !ns.is_empty() => Some(ns[(k.vpn % ns.len() as u64) as usize]),
                    RangeOp::Weighted(ws) if !ws.is_empty() => {
                        let pat: Vec<NodeIdx> =
                            ws.iter().flat_map(|(n, w)| std::iter::repeat_n(*n, (*w).clamp(1, 100) as usize)).collect();
                        Some(pat[(k.vpn % pat.len() as u64) as usize])
                    }
                    _ => pages.get(k),
                };
            }
        }
        pages.get(k)
    };
    let mut before = AccessMap::new(nn);
    let mut after = AccessMap::new(nn);
    for s in &trace.samples {
        let k = s.page(m.page_size);
        let tb = tnode_before.get(&s.tid).copied().or_else(|| m.node_of_cpu(s.cpu)).unwrap_or(NodeIdx(0));
        let ta = tnode_after.get(&s.tid).copied().unwrap_or(tb);
        before.counts[tb.ix()][pages.get(k).map_or(nn, |n| n.ix())] += 1;
        after.counts[ta.ix()][after_page(k).map_or(nn, |n| n.ix())] += 1;
    }
    let mut page_moves = BTreeMap::new();
    for p in &plan.pages {
        let from = pages.get(p.page).map_or("?".to_string(), |n| m.node(n).id.0.to_string());
        *page_moves.entry(format!("{from}->{}", m.node(p.to).id.0)).or_default() += 1;
    }
    Ok(OfflinePlan {
        policy: policy.name(),
        machine: m.name.clone(),
        samples: trace.samples.len(),
        threads: threads.len(),
        start,
        plan,
        page_moves,
        before,
        after,
        refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceThread;
    use ptb_policy::{build, Params, PolicyKind, PolicySpec};
    use ptb_profile::{Sample, SampleKind};

    fn trace(m: &Machine) -> Trace {
        let s = |tid, vpn: u64| Sample {
            app: 1,
            tid,
            cpu: CpuId(0),
            addr: vpn * 4096,
            kind: SampleKind::PageFault,
            time_ns: vpn,
            data_src: None,
            latency_ns: None,
            phys: None,
        };
        Trace {
            pids: vec![1],
            page_size: 4096,
            source: "test".into(),
            period: 1,
            machine: m.clone(),
            samples: vec![s(10, 100), s(10, 101), s(11, 100)],
            placements: vec![TraceRecord::Placement {
                time_ns: 1,
                threads: vec![
                    TraceThread { app: 1, tid: 10, cpu: 0, node: 0 },
                    TraceThread { app: 1, tid: 11, cpu: 2, node: 1 },
                ],
                pages: vec![(1, 100, 0), (1, 101, 1)],
                regions: vec![],
                free_bytes: vec![1 << 30, 1 << 30],
            }],
            lost: 0,
        }
    }

    #[test]
    fn access_map_counts_every_sample_and_fixed_policy_pins() {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=2").unwrap();
        let t = trace(&m);
        let mut p = build(PolicySpec::plain(PolicyKind::Fixed), &Params::new()).unwrap();
        let r = plan(&t, &m, p.as_mut(), &m.all_nodes()).unwrap();
        assert_eq!(r.before.counts.iter().flatten().sum::<u64>(), 3);
        assert_eq!(r.after.counts.iter().flatten().sum::<u64>(), 3);
        // before: tid10 on node0 reads page 100 (node0) and 101 (node1); tid11 on node1 reads 100.
        assert_eq!(r.before.counts, vec![vec![1, 1, 0], vec![1, 0, 0]]);
        assert!((r.before.local_fraction() - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(r.start.threads.len(), 2);
        assert!(r.refused.is_none());
    }

    /// The trace of `trace(m)` as JSON lines, as `ptb record` writes it.
    fn lines(m: &Machine) -> Vec<serde_json::Value> {
        let t = trace(m);
        let mut out = vec![serde_json::to_value(TraceRecord::Header {
            version: crate::trace::TRACE_VERSION,
            pids: t.pids.clone(),
            page_size: t.page_size,
            source: t.source.clone(),
            period: t.period,
            machine: Box::new(m.clone()),
        })
        .unwrap()];
        out.extend(t.samples.iter().map(|s| serde_json::to_value(TraceRecord::Sample(*s)).unwrap()));
        out.extend(t.placements.iter().map(|p| serde_json::to_value(p).unwrap()));
        out
    }

    use serde_json::json;

    fn numbers(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            serde_json::Value::Number(_) => out.push(at.clone()),
            serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
                at.push(i.to_string());
                numbers(x, at, out);
                at.pop();
            }),
            serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| {
                at.push(k.clone());
                numbers(x, at, out);
                at.pop();
            }),
            _ => {}
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 1000, ..Default::default() })]
        /// Fuzz target of `ptb plan --trace`: a valid trace with numbers changed (header
        /// machine, samples, placements) is refused or planned, never a panic (30 of 4,500
        /// such traces panicked before the header's machine was validated).
        #[test]
        fn mutated_traces_are_refused_or_planned(
            edits in proptest::collection::vec((proptest::prop_oneof![proptest::strategy::Just(0usize), 0usize..1000], 0usize..10_000, 0usize..11), 1..4),
            policy in 0usize..4,
        ) {
            let m = ptb_topology::synthetic::synthetic("nodes=3,cpus=2,dies=1").unwrap();
            let mut ls = lines(&m);
            let odd = [json!(0), json!(1), json!(2), json!(7), json!(4095), json!(65535), json!(-1), json!(1e300),
                       json!(4294967295u32), json!(u64::MAX), json!(0.5)];
            for (line, which, val) in edits {
                let i = line % ls.len();
                let mut paths = vec![];
                numbers(&ls[i], &mut vec![], &mut paths);
                if paths.is_empty() {
                    continue;
                }
                let mut x = &mut ls[i];
                for k in &paths[which % paths.len()] {
                    x = match k.parse::<usize>() {
                        Ok(ix) if x.is_array() => &mut x[ix],
                        _ => &mut x[k.as_str()],
                    };
                }
                *x = odd[val].clone();
            }
            let text: String = ls.iter().map(|l| format!("{l}\n")).collect();
            if let Ok(t) = crate::trace::parse_trace(text.as_bytes(), "fuzz") {
                let kind = [PolicyKind::Ptb, PolicyKind::PtbClassic, PolicyKind::Interleave, PolicyKind::Asymsched][policy];
                let mut p = build(PolicySpec::plain(kind), &Params::new()).unwrap();
                let mach = t.machine.clone();
                let _ = plan(&t, &mach, p.as_mut(), &mach.all_nodes());
            }
        }
    }

    #[test]
    fn a_machine_with_too_few_nodes_is_refused() {
        let m2 = ptb_topology::synthetic::synthetic("nodes=2,cpus=2").unwrap();
        let m1 = ptb_topology::synthetic::synthetic("nodes=1,cpus=4").unwrap();
        let mut p = build(PolicySpec::plain(PolicyKind::Interleave), &Params::new()).unwrap();
        let e = plan(&trace(&m2), &m1, p.as_mut(), &m1.all_nodes()).unwrap_err();
        assert!(e.contains("has 1 nodes"), "{e}");
    }
}
