//! Linux's scheduler for threads that no policy pinned: where a program's threads start, and how
//! they wander between nodes while it runs.
//!
//! Problem: the Linux default is not "thread k on CPU k for ever". The published access maps of
//! NPB lu.C and ep.C (64 unpinned threads, 4-node Opteron, Linux 3.x; published-results.md) show
//! ~26% local accesses for programs that initialise their data in parallel: over a run the
//! scheduler's wake-up placement and load balancing move each thread across nodes often enough
//! that where it first touched its data says little about where it runs. That is a large part of
//! why interleaving and NUMA balancing help there, and why pinning threads is a policy's first
//! lever.
//!
//! Approach, one mechanism per phase of a program's life, with one rate:
//! - **Start** (`exec` then OpenMP team creation after a serial initialisation): each
//!   application's first thread starts on a CPU drawn uniformly from the allowed CPUs (exec
//!   balancing on an idle machine lands wherever the launcher ran: the published maps show the
//!   master's data on node 0 for cg.C, node 1 for mg.C). Its other threads are created one by
//!   one by that thread, and each goes where fork balancing (`find_idlest_group`, then
//!   `find_idlest_group_cpu`) puts it: the node with the most idle CPUs, the creator's node
//!   winning ties (the kernel keeps a task local unless another group is idler), then the die /
//!   last-level-cache group with the most idle CPUs, then its lowest idle CPU. On an idle machine
//!   this interleaves consecutive threads over the nodes.
//! - **Running**: every unpinned thread moves to another node at `rate` times per second on
//!   average (a Poisson process, applied at scheduler ticks). The destination is a CPU drawn
//!   uniformly among those its affinity allows on other nodes; if a thread runs there, the two
//!   swap when the other may run on the first one's CPU (balancing keeps one thread per CPU when
//!   there are as many threads as CPUs), else the move is skipped. A thread pinned to one node (a
//!   node affinity) or one CPU never leaves it. A moved thread loses its cache contents:
//!   `costs.thread_us` of stall.
//!
//! - **Preferred nodes** (3.13's NUMA-aware load balancing, kernel/sched/fair.c). A plan's
//!   `ThreadTarget::Preferred` gives a thread a preferred node (the kernel's
//!   `numa_preferred_nid`, set by `sched_setnuma` when NUMA balancing places or moves a task)
//!   without pinning it. Wandering stays blind to it (3.13's wake-up placement, `wake_affine`
//!   and `select_idle_sibling`, does not look at it), but the swap that evens the nodes out
//!   again is the load balancer's, and 3.13's balancer chooses what it pulls back: it classes
//!   each runqueue as *regular* (a task with no preferred node), *remote* (a task off its
//!   preferred node) or *all* (every task on its own), classes the busiest node by its lowest
//!   class (`fbq_classify_group`) and skips runqueues of a higher class (`find_busiest_queue`:
//!   "avoid migrating ideally placed NUMA tasks as long as better options exist", commit
//!   0ec8aa00f2b4, merged for 3.13); among those, a task whose move goes to its preferred
//!   node is taken even when cache-hot (`can_migrate_task` -> `migrate_improves_locality`,
//!   feature NUMA_FAVOUR_HIGHER, on in 3.13), the others only after failed balancing attempts
//!   (every task of a fully loaded machine is cache-hot). So the model pulls back, from the
//!   wanderer's destination node to the CPU it left: a thread of the lowest class there whose
//!   preferred node is the wanderer's old node (the wanderer itself first: then nothing moves),
//!   else the thread on the destination CPU if its class allows, else a random thread of the
//!   lowest class. A thread on its preferred node thus leaves it only with a thread that
//!   prefers its place, or when every thread of its node is on its own preferred node and a
//!   wanderer arrived there that cannot go back. NUMA_RESIST_LOWER, which would also refuse
//!   moves towards nodes with fewer faults, is off in 3.13 and not modelled. Not modelled
//!   either: the time a wanderer spends away before the balancer returns it (at most a NUMA
//!   domain's idle balance interval, `min_interval` = its CPU count in ms, `sd_numa_init`),
//!   3.13's `numa_balancing_settle_count` (4 scan passes after `sched_setnuma`, after which
//!   NUMA_FAVOUR_HIGHER stops forcing moves; the class rule still applies) and fault counts
//!   (the kernel also favours a node with more of the task's faults). Nothing here is fitted:
//!   with no preferred node anywhere the swap is the unbiased one, without an extra draw.
//! - **Idle balancing**: a CPU left idle while another runs two threads pulls one of them, if
//!   its affinity allows (Linux's idle and new-idle balancing, from the nearest domain outwards:
//!   same CPU group first, then same node, then any node; across nodes with the preferred-node
//!   order above). It runs after every plan and every
//!   tick, so a policy that pins threads to a node one by one does not leave two on one CPU
//!   while another CPU of that node idles. A pull across CPU groups costs the pulled thread
//!   `costs.thread_us` of lost cache.
//!
//! - **Balancing inside a node**: a CPU running two threads fewer than another CPU of its node
//!   pulls one of them (see `balance_within_nodes`), after every plan and every tick; and a
//!   node's CPU groups (last-level caches, dies) with idle CPUs are evened out, the busiest
//!   running at most one thread more than another (see `balance_groups_within_nodes`): threads
//!   pinned to a node they do not fill spread over its dies, as Linux's balancer spreads them.
//!
//! Calibration: with `rate` = [`DEFAULT_MIGRATIONS_PER_S`], a thread of a 15-60 s run changes
//! node dozens of times, so a parallel-initialised program's local share under the default falls
//! to about one over the number of nodes (26% measured for lu.C and ep.C on 4 nodes) whatever its
//! exact length; a rate ten times lower would leave lu.C's 30-second run ~30% local. Moves within
//! a node cost cache contents only, not locality: only their effect on how the node's CPUs are
//! shared is modelled (balancing inside a node).

use crate::run::Run;
use rand::Rng;

/// Cross-node migrations per second of an unpinned thread under the default (see the module
/// docs for the calibration).
pub const DEFAULT_MIGRATIONS_PER_S: f64 = 2.0;

/// Interval between scheduler ticks at which migrations are applied, ns. Linux balances a NUMA
/// domain every few tens of ms to seconds; batching the moves of a tick into one step
/// keeps the contention solve off the per-migration path.
pub const TICK_NS: f64 = 100e6;

impl Run<'_> {
    /// Place every thread as Linux does when the program starts (see the module docs).
    pub(crate) fn place_at_start(&mut self) {
        let allowed = self.sim.allowed_cpu_pos.clone();
        if allowed.is_empty() {
            return;
        }
        for rt in &self.threads {
            self.cpu_load[rt.cpu_pos] = self.cpu_load[rt.cpu_pos].saturating_sub(1);
        }
        let l = &self.sim.layout;
        for a in 0..l.apps.len() {
            let first = l.apps[a].first_thread;
            let n = l.apps[a].n_threads;
            let master = allowed[self.rng.random_range(0..allowed.len())];
            self.threads[first].cpu_pos = master;
            self.cpu_load[master] += 1;
            for t in first + 1..first + n {
                let pos = self.fork_target(master);
                self.threads[t].cpu_pos = pos;
                self.cpu_load[pos] += 1;
            }
        }
        self.dirty = true;
    }

    /// Where fork balancing puts a thread created by a thread on CPU position `parent`.
    fn fork_target(&self, parent: usize) -> usize {
        let sim = self.sim;
        let idle = |pos: &usize| self.cpu_load[*pos] == 0;
        // Nodes in the kernel's group order from the parent's node: its own first, then upwards.
        let pnode = sim.cpu_node[parent];
        let nodes = &sim.cpu_nodes;
        let start = nodes.iter().position(|&n| n == pnode).unwrap_or(0);
        let order = (0..nodes.len()).map(|i| nodes[(start + i) % nodes.len()]);
        let score = |cpus: &[usize]| -> (usize, f64) {
            let idle_n = cpus.iter().filter(|p| idle(p)).count();
            let load: u32 = cpus.iter().map(|&p| self.cpu_load[p]).sum();
            (idle_n, -(load as f64) / cpus.len().max(1) as f64)
        };
        let mut best: Option<(usize, (usize, f64))> = None;
        for n in order {
            let s = score(&sim.node_cpu_pos[n]);
            if best.is_none_or(|(_, b)| s.0 > b.0 || (s.0 == b.0 && s.1 > b.1)) {
                best = Some((n, s));
            }
        }
        let node = best.map_or(pnode, |b| b.0);
        // Inside the node: the group with most idle CPUs (the parent's group first), then its
        // lowest idle CPU (or least loaded).
        let pgroup = sim.cpu_group[parent];
        let mut groups = self.groups_of_node(node);
        if let Some(i) = groups.iter().position(|&g| g == pgroup) {
            groups.rotate_left(i);
        }
        let mut best_g: Option<(usize, (usize, f64))> = None;
        for g in groups {
            let cpus: Vec<usize> = sim.node_cpu_pos[node].iter().copied().filter(|&p| sim.cpu_group[p] == g).collect();
            let s = score(&cpus);
            if best_g.is_none_or(|(_, b)| s.0 > b.0 || (s.0 == b.0 && s.1 > b.1)) {
                best_g = Some((g, s));
            }
        }
        let g = best_g.map_or(pgroup, |b| b.0);
        sim.node_cpu_pos[node]
            .iter()
            .copied()
            .filter(|&p| sim.cpu_group[p] == g)
            .min_by_key(|&p| (self.cpu_load[p], p))
            .unwrap_or(parent)
    }

    /// The CPU groups of node `node`'s allowed CPUs, ascending.
    fn groups_of_node(&self, node: usize) -> Vec<usize> {
        let mut groups: Vec<usize> = self.sim.node_cpu_pos[node].iter().map(|&p| self.sim.cpu_group[p]).collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// Whether thread `t` may run on CPU position `pos` (its affinity, within the allowed nodes).
    fn may_run_on(&self, t: usize, pos: usize) -> bool {
        if !self.sim.cpu_allowed[pos] {
            return false;
        }
        match &self.threads[t].affinity {
            None => true,
            Some(set) => set.contains(self.sim.cpus[pos]),
        }
    }

    /// Whether the scheduler may move thread `t` to another node at all.
    pub(crate) fn movable(&self, t: usize) -> bool {
        let rt = &self.threads[t];
        if !rt.alive {
            return false;
        }
        match &rt.affinity {
            None => self.sim.cpu_nodes.len() > 1,
            Some(set) => {
                let here = self.node_of(t);
                set.iter()
                    .filter_map(|c| self.sim.cpu_pos(c))
                    .any(|p| self.sim.cpu_node[p] != here && self.may_run_on(t, p))
            }
        }
    }

    /// Idle balancing (see the module docs). Returns how many threads moved.
    pub(crate) fn balance_idle(&mut self) -> u64 {
        let stall = self.sim.costs.thread_us * 1e3;
        let mut moved = 0;
        loop {
            let mut pulled = false;
            for &idle in &self.sim.allowed_cpu_pos {
                if self.cpu_load[idle] > 0 {
                    continue;
                }
                // The nearest busy CPU with a thread that may run here: same group, then node.
                let (ig, inode) = (self.sim.cpu_group[idle], self.sim.cpu_node[idle]);
                let dist = |p: usize| {
                    if self.sim.cpu_group[p] == ig {
                        0
                    } else if self.sim.cpu_node[p] == inode {
                        1
                    } else {
                        2
                    }
                };
                // Across nodes, 3.13's balancer takes first a thread whose preferred node is
                // this one, then one off its preferred node or without one, and a thread on its
                // own preferred node last (the classes of `pull_back`).
                let rank = |t: usize| {
                    let p = self.threads[t].cpu_pos;
                    match self.threads[t].preferred {
                        _ if dist(p) < 2 => 1,
                        Some(n) if n == inode => 0,
                        Some(n) if n == self.sim.cpu_node[p] => 2,
                        _ => 1,
                    }
                };
                let pick = (0..self.threads.len())
                    .filter(|&t| self.threads[t].alive && self.cpu_load[self.threads[t].cpu_pos] >= 2)
                    .filter(|&t| self.may_run_on(t, idle))
                    .min_by_key(|&t| (dist(self.threads[t].cpu_pos), rank(t), self.threads[t].cpu_pos, t));
                if let Some(t) = pick {
                    let from = self.threads[t].cpu_pos;
                    self.place_thread(t, idle);
                    if self.sim.cpu_group[from] != ig {
                        self.threads[t].stall_ns += stall;
                        self.acc.sched_migration_ns += stall;
                    }
                    if self.sim.cpu_node[from] != inode {
                        self.acc.sched_migrations += 1;
                    }
                    moved += 1;
                    pulled = true;
                }
            }
            if !pulled {
                break;
            }
        }
        moved + self.balance_within_nodes()
    }

    /// Load balancing inside a node: a CPU running at least two threads fewer than another CPU
    /// of its node pulls one that may run on it (CFS balances the CPUs of a node every few
    /// milliseconds). Without it, threads pinned to a node one by one while the node's CPUs
    /// are time-shared (more threads than CPUs) could stay three to one CPU and one to another,
    /// and a program waiting at barriers would run at the pace of its most crowded CPU. Pulls
    /// across CPU groups cost `costs.thread_us` as in idle balancing. Returns how many moved.
    fn balance_within_nodes(&mut self) -> u64 {
        let stall = self.sim.costs.thread_us * 1e3;
        let mut moved = 0;
        for node in 0..self.sim.node_cpu_pos.len() {
            let cpus: Vec<usize> =
                self.sim.node_cpu_pos[node].iter().copied().filter(|&p| self.sim.cpu_allowed[p]).collect();
            // Each pull lowers the spread of the loads: at most one pull per thread.
            for _ in 0..self.threads.len() {
                let Some(&to) = cpus.iter().min_by_key(|&&p| (self.cpu_load[p], p)) else { break };
                let pick = (0..self.threads.len())
                    .filter(|&t| self.threads[t].alive)
                    .filter(|&t| {
                        let from = self.threads[t].cpu_pos;
                        self.sim.cpu_node[from] == node && self.cpu_load[from] >= self.cpu_load[to] + 2
                    })
                    .filter(|&t| self.may_run_on(t, to))
                    .max_by_key(|&t| (self.cpu_load[self.threads[t].cpu_pos], std::cmp::Reverse(t)));
                let Some(t) = pick else { break };
                let from = self.threads[t].cpu_pos;
                self.place_thread(t, to);
                if self.sim.cpu_group[from] != self.sim.cpu_group[to] {
                    self.threads[t].stall_ns += stall;
                    self.acc.sched_migration_ns += stall;
                }
                moved += 1;
            }
        }
        moved + self.balance_groups_within_nodes()
    }

    /// Load balancing between the CPU groups (last-level-cache domains) of a node, when they
    /// have idle CPUs: the balancer of the domain that spans the node's groups evens out the
    /// number of running threads between them (kernel/sched/fair.c, `find_busiest_group`:
    /// with spare capacity it balances when the busiest group runs more than one thread more
    /// than the local one, "prefer sibling ... evenly spread running tasks on groups"; groups
    /// of unequal size are compared per CPU, as `sibling_imbalance` does). So threads pinned
    /// to a node that does not fill it end up spread over its dies, not packed on its first.
    /// A move costs the thread `costs.thread_us` of lost cache, as in idle balancing. Returns
    /// how many moved.
    fn balance_groups_within_nodes(&mut self) -> u64 {
        let stall = self.sim.costs.thread_us * 1e3;
        let mut moved = 0;
        for node in 0..self.sim.node_cpu_pos.len() {
            let cpus = &self.sim.node_cpu_pos[node];
            let groups = self.groups_of_node(node);
            if groups.len() < 2 {
                continue;
            }
            for _ in 0..self.threads.len() {
                // (running threads, CPUs) of each group.
                let stat = |g: usize| {
                    let ps = cpus.iter().filter(|&&p| self.sim.cpu_group[p] == g);
                    ps.fold((0u64, 0u64), |(n, w), &p| (n + u64::from(self.cpu_load[p]), w + 1))
                };
                // Groups from the busiest per CPU; the first of equals, as the kernel's scan.
                let mut order: Vec<(usize, (u64, u64))> = groups.iter().map(|&g| (g, stat(g))).collect();
                order.sort_by(|a, b| (b.1 .0 * a.1 .1).cmp(&(a.1 .0 * b.1 .1)));
                let mut done = true;
                'pair: for &(bg, (nb, wb)) in &order {
                    for &(lg, (nl, wl)) in order.iter().rev() {
                        // Move while the busiest stays at least as loaded per CPU as the local.
                        if lg == bg || nb * wl < (nl + 2) * wb {
                            continue;
                        }
                        let Some(&to) = cpus.iter().find(|&&p| self.sim.cpu_group[p] == lg && self.cpu_load[p] == 0)
                        else {
                            continue;
                        };
                        // The thread on the busiest CPU of the busiest group (its lowest such
                        // CPU), that may run on `to`.
                        let pick = (0..self.threads.len())
                            .filter(|&t| self.threads[t].alive)
                            .filter(|&t| self.sim.cpu_group[self.threads[t].cpu_pos] == bg)
                            .filter(|&t| self.sim.cpu_node[self.threads[t].cpu_pos] == node)
                            .filter(|&t| self.may_run_on(t, to))
                            .min_by_key(|&t| {
                                let p = self.threads[t].cpu_pos;
                                (std::cmp::Reverse(self.cpu_load[p]), p, t)
                            });
                        if let Some(t) = pick {
                            self.place_thread(t, to);
                            self.threads[t].stall_ns += stall;
                            self.acc.sched_migration_ns += stall;
                            moved += 1;
                            done = false;
                            break 'pair;
                        }
                    }
                }
                if done {
                    break;
                }
            }
        }
        moved
    }

    /// Which thread the load balancer pulls back to CPU `here` after thread `t`, which ran
    /// there, wandered onto the busy CPU `dest` of another node (see the module docs,
    /// **Preferred nodes**). `Some(t)`: the wanderer itself, i.e. nothing changes.
    fn pull_back(&mut self, t: usize, dest: usize, here: usize) -> Option<usize> {
        let node = self.sim.cpu_node[dest];
        let home = self.sim.cpu_node[here];
        let movable = |o: usize| {
            self.threads[o].alive
                && self.threads[o].affinity.as_ref().is_none_or(|s| s.len() > 1)
                && self.may_run_on(o, here)
        };
        // The thread on `dest` swaps with the wanderer, as without preferred nodes.
        let partner = (0..self.threads.len()).find(|&o| o != t && self.threads[o].cpu_pos == dest && movable(o));
        // 3.13's classes (`fbq_classify_rq`): 0 regular (no preferred node), 1 remote (off it),
        // 2 all (on it); the wanderer counts as on `node`.
        let class = |o: usize| match self.threads[o].preferred {
            None => 0u8,
            Some(p) if p != node => 1,
            Some(_) => 2,
        };
        let on_node =
            |o: usize| o == t || (self.threads[o].alive && self.sim.cpu_node[self.threads[o].cpu_pos] == node);
        if (0..self.threads.len()).all(|o| !on_node(o) || self.threads[o].preferred.is_none()) {
            return partner; // nothing prefers a node: the unbiased swap, no extra draw
        }
        // `fbq_classify_group` of the destination node: its lowest class.
        let group = (0..self.threads.len()).filter(|&o| on_node(o)).map(class).min().unwrap_or(0);
        // `find_busiest_queue` skips runqueues of a higher class than the group's.
        let eligible: Vec<usize> =
            (0..self.threads.len()).filter(|&o| on_node(o) && class(o) <= group && (o == t || movable(o))).collect();
        // `migrate_improves_locality` (NUMA_FAVOUR_HIGHER): a thread whose preferred node is
        // `here`'s moves even cache-hot, the others wait for failed balancing attempts.
        let improving: Vec<usize> =
            eligible.iter().copied().filter(|&o| self.threads[o].preferred == Some(home)).collect();
        if improving.contains(&t) {
            return Some(t);
        }
        if !improving.is_empty() {
            return Some(improving[self.rng.random_range(0..improving.len())]);
        }
        if partner.is_some_and(|o| eligible.contains(&o)) {
            return partner;
        }
        let others: Vec<usize> = eligible.into_iter().filter(|&o| o != t).collect();
        if others.is_empty() {
            return None;
        }
        Some(others[self.rng.random_range(0..others.len())])
    }

    /// One scheduler tick of `dt` ns: each movable thread changes node with probability
    /// `1 - exp(-rate dt)`. Returns how many threads moved.
    pub(crate) fn sched_tick(&mut self, dt: f64) -> u64 {
        let rate = self.sim.opts.linux_migrations_per_s;
        if rate <= 0.0 || dt <= 0.0 {
            if self.balance_idle() > 0 {
                self.dirty = true;
            }
            return 0;
        }
        let p = 1.0 - (-rate * dt / 1e9).exp();
        let stall = self.sim.costs.thread_us * 1e3;
        let mut moved = 0;
        for t in 0..self.threads.len() {
            if !self.threads[t].alive || self.rng.random::<f64>() >= p || !self.movable(t) {
                continue;
            }
            let here = self.threads[t].cpu_pos;
            let hnode = self.sim.cpu_node[here];
            let cands: Vec<usize> = self
                .sim
                .allowed_cpu_pos
                .iter()
                .copied()
                .filter(|&q| self.sim.cpu_node[q] != hnode && self.may_run_on(t, q))
                .collect();
            if cands.is_empty() {
                continue;
            }
            let dest = cands[self.rng.random_range(0..cands.len())];
            if self.cpu_load[dest] == 0 {
                self.place_thread(t, dest);
                self.threads[t].stall_ns += stall;
                moved += 1;
                continue;
            }
            // The balancer evens the nodes out again: one thread of the destination node
            // comes back to `here`.
            match self.pull_back(t, dest, here) {
                Some(o) if o != t => {
                    self.place_thread(t, dest);
                    self.place_thread(o, here);
                    self.threads[t].stall_ns += stall;
                    self.threads[o].stall_ns += stall;
                    moved += 2;
                }
                // The wanderer itself (back on its preferred node), or no thread may come.
                _ => {}
            }
        }
        if moved > 0 {
            self.acc.sched_migrations += moved;
            self.acc.sched_migration_ns += moved as f64 * stall;
            self.dirty = true;
        }
        if self.balance_idle() > 0 {
            self.dirty = true;
        }
        moved
    }
}
