//! A tiny hand-driven world for policy tests: threads on CPUs, pages on nodes, samples, and
//! a plan applier, so a test can run a policy for several cycles and watch it converge.

use crate::plan::{Plan, RangeOp, ThreadTarget};
use crate::snapshot::{PageLocations, Region, Snapshot, ThreadState};
use ptb_profile::{AppId, PageKey, Sample, SampleKind, Tid};
use ptb_topology::{CpuId, Machine, NodeIdx, NodeSet};
use std::collections::BTreeMap;
use std::time::Duration;

pub struct World {
    pub machine: Machine,
    pub allowed: NodeSet,
    pub threads: Vec<ThreadState>,
    pub samples: Vec<Sample>,
    pub page_map: BTreeMap<PageKey, NodeIdx>,
    pub pages: PageLocations,
    pub regions: Vec<Region>,
    pub free: Vec<u64>,
    pub now: Duration,
    pub cycle: Duration,
    pub period: u64,
}

impl World {
    pub fn new(machine: Machine) -> Self {
        let allowed = machine.all_nodes();
        let free = machine.nodes.iter().map(|n| n.memory_bytes).collect();
        World {
            machine,
            allowed,
            threads: vec![],
            samples: vec![],
            page_map: BTreeMap::new(),
            pages: PageLocations::new(),
            regions: vec![],
            free,
            now: Duration::from_secs(1),
            cycle: Duration::from_secs(1),
            period: 1000,
        }
    }

    pub fn synthetic(spec: &str) -> Self {
        Self::new(ptb_topology::synthetic::synthetic(spec).unwrap())
    }

    pub fn add_thread(&mut self, tid: Tid, app: AppId, cpu: u32) {
        let cpu = CpuId(cpu);
        let node = self.machine.node_of_cpu(cpu).unwrap();
        let group = self.machine.group_of_cpu(cpu).unwrap();
        self.threads.push(ThreadState { tid, app, cpu, node, group, affinity: None });
    }

    /// Put pages `vpns` of `app` on `node`.
    pub fn place(&mut self, app: AppId, vpns: std::ops::Range<u64>, node: u16) {
        for v in vpns {
            self.page_map.insert(PageKey { app, vpn: v }, NodeIdx(node));
        }
        self.refresh();
    }

    /// Declare a region (mapping) of an application.
    pub fn region(&mut self, app: AppId, start_vpn: u64, npages: u64) {
        self.regions.push(Region {
            app,
            start_vpn,
            npages,
            name: format!("r{start_vpn}"),
            resident: vec![],
            huge: Default::default(),
        });
        self.refresh();
    }

    /// One sample: thread `tid` touched page `vpn` of its app.
    pub fn touch(&mut self, tid: Tid, vpn: u64, kind: SampleKind) {
        let t = self.threads.iter().find(|t| t.tid == tid).unwrap().clone();
        let addr = vpn * self.machine.page_size + 64;
        self.samples.push(Sample {
            app: t.app,
            tid,
            cpu: t.cpu,
            addr,
            kind,
            time_ns: self.now.as_nanos() as u64,
            data_src: None,
            latency_ns: None,
            phys: None,
        });
    }

    pub fn node_of(&self, tid: Tid) -> NodeIdx {
        self.threads.iter().find(|t| t.tid == tid).unwrap().node
    }

    pub fn page_node(&self, app: AppId, vpn: u64) -> Option<NodeIdx> {
        self.page_map.get(&PageKey { app, vpn }).copied()
    }

    fn refresh(&mut self) {
        self.pages = self.page_map.iter().map(|(k, v)| (*k, *v)).collect();
        let n = self.machine.n_nodes();
        for r in &mut self.regions {
            let mut res = vec![0u64; n];
            for (k, v) in self.page_map.range(PageKey { app: r.app, vpn: r.start_vpn }..) {
                if k.app != r.app || k.vpn >= r.start_vpn + r.npages {
                    break;
                }
                res[v.ix()] += 1;
            }
            r.resident = res;
        }
    }

    pub fn snap(&self) -> Snapshot<'_> {
        Snapshot {
            machine: &self.machine,
            allowed: &self.allowed,
            now: self.now,
            cycle: self.cycle,
            threads: &self.threads,
            samples: &self.samples,
            sampling: crate::SamplingMode::HintFaults {
                scan_bytes: 256 << 20,
                scan_period: std::time::Duration::from_secs(1),
            },
            sampling_period: self.period,
            pages: &self.pages,
            regions: &self.regions,
            free_bytes: &self.free,
            thread_cpu: &[],
        }
    }

    /// Apply a plan (after checking it), clear the samples and advance the clock one cycle.
    pub fn apply(&mut self, plan: &Plan) {
        crate::validate_plan(plan, &self.snap()).expect("plan must validate");
        for m in &plan.threads {
            let t = self.threads.iter().position(|t| t.tid == m.tid).unwrap();
            let cpu = match m.to {
                ThreadTarget::Cpu(c) => c,
                ThreadTarget::Preferred(n) if self.threads[t].node == n => self.threads[t].cpu,
                ThreadTarget::Node(_) | ThreadTarget::Preferred(_) | ThreadTarget::Group(_) => {
                    // The least-loaded CPU of the node (or group).
                    let used: Vec<CpuId> = self.threads.iter().map(|t| t.cpu).collect();
                    let cpus: Vec<CpuId> = m.to.cpus(&self.machine).unwrap().iter().collect();
                    *cpus.iter().min_by_key(|c| used.iter().filter(|u| u == c).count()).unwrap()
                }
            };
            let th = &mut self.threads[t];
            th.cpu = cpu;
            th.node = self.machine.node_of_cpu(cpu).unwrap();
            th.group = self.machine.group_of_cpu(cpu).unwrap();
        }
        for p in &plan.pages {
            if let Some(n) = self.page_map.get_mut(&p.page) {
                *n = p.to;
            }
        }
        for r in &plan.ranges {
            let keys: Vec<PageKey> = self
                .page_map
                .range(PageKey { app: r.app, vpn: r.start_vpn }..PageKey { app: r.app, vpn: r.start_vpn + r.npages })
                .map(|(k, _)| *k)
                .collect();
            for (i, k) in keys.iter().enumerate() {
                let to = match &r.op {
                    RangeOp::MoveTo(n) => *n,
                    RangeOp::Interleave(ns) => ns[i % ns.len()],
                    RangeOp::Weighted(ws) => ws[i % ws.len()].0,
                };
                self.page_map.insert(*k, to);
            }
        }
        self.samples.clear();
        self.now += self.cycle;
        self.refresh();
    }
}
