//! Objects backed by transparent huge pages (`huge_pages = true` on a workload's object).
//!
//! Problem: on Linux a transparent huge page (2 MiB) is allocated, and migrated, whole: its
//! first touch puts all of it on one node, interleaving spreads whole huge pages, and moving
//! any of its 4 KiB pages moves all 512. A simulator that moves 4 KiB pages of such memory
//! one by one would let policies win what the kernel never gives them.
//!
//! Approach: an object with `huge_pages` is cut into aligned blocks of [`HUGE_PAGE_BYTES`]
//! (objects start 2 MiB aligned; a partial block at the end stays base pages, as the kernel
//! does for a mapping's unaligned tail). Policies see the blocks in their snapshot
//! ([`backing`]). Allocation: after the usual first touch, every block goes whole to the node
//! of its first page, or with an interleave rule to the node of its huge-page index (as the
//! kernel interleaves huge pages). Migration ([`Run::move_huge`]): a move of any page of a
//! block moves every page of it, as one huge page, costing `max(page_us, 2 MiB / copy_gbps)`
//! of the machine's costs; a plan that names a block for several nodes moves it once per
//! change of node, as the kernel would (policies built by `ptb_policy::build` never do).

use crate::layout::ObjectLayout;
use crate::run::Run;
use ptb_policy::{spread_node, AllocPolicy, HugeBacking, RangeOp};

/// Size of a transparent huge page (x86-64, and arm64 with 4 KiB pages).
pub const HUGE_PAGE_BYTES: u64 = 2 << 20;

/// Base pages per huge page on a machine with `page_size` pages (0 when pages are that big).
pub fn pages_per_huge(page_size: u64) -> u64 {
    let n = HUGE_PAGE_BYTES / page_size.max(1);
    if n >= 2 {
        n
    } else {
        0
    }
}

/// The huge-page backed ranges of an object, as a policy's snapshot shows them.
pub fn backing(o: &ObjectLayout, page_size: u64) -> HugeBacking {
    let n = pages_per_huge(page_size);
    if !o.huge_pages || n == 0 {
        return HugeBacking::default();
    }
    HugeBacking::new(n, [(o.start_vpn, o.start_vpn + o.npages as u64)])
}

/// The block `[start, end)` (page indices in the object) holding page `p`, when it is a whole
/// huge page.
pub(crate) fn block_of(o: &ObjectLayout, p: usize, page_size: u64) -> Option<(usize, usize)> {
    if !o.huge_pages {
        return None;
    }
    let n = pages_per_huge(page_size) as usize;
    if n == 0 {
        return None;
    }
    // Objects start on a huge-page boundary (layout), so blocks are aligned in the object.
    let s = p / n * n;
    (s + n <= o.npages).then_some((s, s + n))
}

/// Page copies of a plan, collected for the costs (see `actuator`): dense counters, read back in
/// (key, key) order so sums over them run in the same order whatever the plan's size.
pub(crate) struct Copies {
    n_nodes: usize,
    /// (app, destination node) -> base pages moved one by one.
    pages: Vec<u64>,
    /// (app, destination node) -> CPU time of the huge pages moved, ns, and how many.
    huge_ns: Vec<f64>,
    huge: Vec<u64>,
    /// (source, destination) -> base pages copied (huge pages count theirs).
    pair_pages: Vec<u64>,
}

impl Copies {
    pub fn new(n_apps: usize, n_nodes: usize) -> Copies {
        Copies {
            n_nodes,
            pages: vec![0; n_apps * n_nodes],
            huge_ns: vec![0.0; n_apps * n_nodes],
            huge: vec![0; n_apps * n_nodes],
            pair_pages: vec![0; n_nodes * n_nodes],
        }
    }

    /// One base page of `app` moved from `from` to `to`.
    pub fn page(&mut self, app: usize, from: usize, to: usize) {
        self.pages[app * self.n_nodes + to] += 1;
        self.pair_pages[from * self.n_nodes + to] += 1;
    }

    /// One huge page of `app` moved to `to`, costing `ns` (its base pages go to
    /// [`Self::pair`]).
    pub fn huge(&mut self, app: usize, to: usize, ns: f64) {
        self.huge_ns[app * self.n_nodes + to] += ns;
        self.huge[app * self.n_nodes + to] += 1;
    }

    /// One base page copied from `from` to `to` (of a huge page).
    pub fn pair(&mut self, from: usize, to: usize) {
        self.pair_pages[from * self.n_nodes + to] += 1;
    }

    /// CPU time of the copies per (app, destination node), ns, in (app, node) order:
    /// `per_page_ns` per base page plus the huge pages' own.
    pub fn ns(&self, per_page_ns: f64) -> Vec<((usize, usize), f64)> {
        let nn = self.n_nodes.max(1);
        (0..self.pages.len())
            .filter(|&i| self.pages[i] > 0 || self.huge[i] > 0)
            .map(|i| {
                let mut ns = if self.pages[i] > 0 { self.pages[i] as f64 * per_page_ns } else { 0.0 };
                if self.huge[i] > 0 {
                    ns += self.huge_ns[i];
                }
                ((i / nn, i % nn), ns)
            })
            .collect()
    }

    /// Base pages copied per (source, destination), in that order.
    pub fn pairs(&self) -> impl Iterator<Item = ((usize, usize), u64)> + '_ {
        let nn = self.n_nodes.max(1);
        self.pair_pages.iter().enumerate().filter(|(_, &n)| n > 0).map(move |(i, &n)| ((i / nn, i % nn), n))
    }
}

impl Run<'_> {
    /// Allocate as [`Run::allocate`] does, then give every block of a huge-page object one node.
    pub(crate) fn allocate_objects(
        &mut self,
        alloc: &AllocPolicy,
        only: Option<&[bool]>,
    ) -> Result<(), crate::SimError> {
        self.allocate(alloc, only)?;
        let spread = match alloc {
            AllocPolicy::FirstTouch => None,
            AllocPolicy::Interleave(ns) => Some(RangeOp::Interleave(ns.clone())),
            AllocPolicy::Weighted(ws) => Some(RangeOp::Weighted(ws.clone())),
        };
        let ps = self.sim.machine.page_size;
        let n = pages_per_huge(ps) as usize;
        for o in 0..self.sim.layout.objects.len() {
            let obj = &self.sim.layout.objects[o];
            if !obj.huge_pages || n == 0 || only.is_some_and(|m| !m[o]) {
                continue;
            }
            let (start_vpn, npages) = (obj.start_vpn, obj.npages);
            for s in (0..npages / n).map(|b| b * n) {
                let head = start_vpn + s as u64;
                let to = match &spread {
                    Some(op) => spread_node(op, head / n as u64).map(|x| x.ix()),
                    None => self.objs[o].get(s),
                };
                let Some(to) = to.filter(|&t| self.sim.is_mem_allowed(t)) else { continue };
                for q in s..s + n {
                    if self.objs[o].get(q).is_some_and(|x| x != to) && self.used_pages[to] < self.cap_pages[to] {
                        self.alloc_page(o, q, to);
                    }
                }
            }
        }
        Ok(())
    }

    /// Move page `p` of object `o` to node `to` if it lies in a huge page: the whole huge page
    /// moves (None: a base page, the caller moves it). Returns whether a huge page moved.
    pub(crate) fn move_huge(
        &mut self,
        o: usize,
        p: usize,
        to: usize,
        rep: &mut ptb_policy::ApplyReport,
        copies: &mut Copies,
    ) -> Option<bool> {
        let ps = self.sim.machine.page_size;
        let (s, e) = block_of(&self.sim.layout.objects[o], p, ps)?;
        let moving: Vec<(usize, usize)> =
            (s..e).filter_map(|q| self.objs[o].get(q).filter(|&n| n != to).map(|n| (q, n))).collect();
        if moving.is_empty() {
            return Some(false);
        }
        if self.used_pages[to] + moving.len() as u64 > self.cap_pages[to] {
            *rep.pages_failed.entry("ENOMEM".into()).or_default() += moving.len() as u64;
            return Some(false);
        }
        for &(q, from) in &moving {
            self.alloc_page(o, q, to);
            copies.pair(from, to);
        }
        let costs = &self.sim.costs;
        let ns = (costs.page_us * 1e3).max(HUGE_PAGE_BYTES as f64 / costs.copy_gbps.max(1e-6));
        copies.huge(self.sim.layout.objects[o].app, to, ns);
        rep.huge_pages_moved += 1;
        self.acc.pages_migrated += moving.len() as u64;
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SimOptions, Simulation, Workload};
    use ptb_policy::{PageMove, Plan, RangeAction};
    use ptb_profile::PageKey;
    use ptb_topology::NodeIdx;

    fn sim(huge: bool) -> Simulation {
        let text = format!(
            "name = \"t\"\nthreads = 2\n[[object]]\nname = \"a\"\nsize_mib = 9\ninit = \"thread:0\"\nhuge_pages = {huge}\n\
             [[phase]]\nname = \"p\"\nwork_ginstr = 0.01\napki = 5\naccess = [{{ object = \"a\", pattern = \"uniform\" }}]\n"
        );
        let w: Workload = toml::from_str(&text).unwrap();
        let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=2").unwrap();
        Simulation::new(m, vec![w], SimOptions::default()).unwrap()
    }

    #[test]
    fn backing_covers_whole_huge_pages_only() {
        let s = sim(true);
        let o = &s.layout().objects[0];
        let b = backing(o, 4096);
        // 9 MiB: four whole huge pages, the last 1 MiB stays base pages.
        assert_eq!(b.ranges, vec![(o.start_vpn, o.start_vpn + 2048)]);
        assert_eq!(block_of(o, 2047, 4096), Some((1536, 2048)));
        assert_eq!(block_of(o, 2048, 4096), None);
        assert!(backing(&sim(false).layout().objects[0], 4096).is_empty());
    }

    #[test]
    fn interleave_allocates_whole_huge_pages() {
        let s = sim(true);
        let mut run = Run::new(&s, 0);
        let ns: Vec<NodeIdx> = (0..4).map(NodeIdx).collect();
        run.allocate_objects(&AllocPolicy::Interleave(ns), None).unwrap();
        for b in 0..4 {
            let first = run.objs[0].get(b * 512);
            assert!((b * 512..b * 512 + 512).all(|q| run.objs[0].get(q) == first), "block {b} split");
        }
        // Four huge pages over four nodes, one each; the 1 MiB tail interleaves page by page.
        let t = run.objs[0].totals();
        assert!(t.iter().all(|&c| c == 512 + 64), "{t:?}");
    }

    /// A plan that spreads one huge page page by page bounces it once per change of node and
    /// leaves it whole on the last node; the same plan made whole moves it once.
    #[test]
    fn page_moves_inside_a_huge_page_move_it_whole() {
        let s = sim(true);
        let o = s.layout().objects[0].clone();
        let spread = Plan {
            pages: (0..8u64)
                .map(|i| PageMove { page: PageKey { app: 0, vpn: o.start_vpn + i }, to: NodeIdx(1 + (i % 3) as u16) })
                .collect(),
            ..Default::default()
        };
        let mut run = Run::new(&s, 0);
        run.allocate_objects(&AllocPolicy::FirstTouch, None).unwrap();
        // One migration per change of node, from where first touch put it.
        let mut at = run.objs[0].get(0).unwrap();
        let mut changes = 0;
        for i in 0..8 {
            let to = 1 + (i % 3) as usize;
            changes += u64::from(to != at);
            at = to;
        }
        let rep = run.apply_plan(&spread);
        assert!(changes >= 7);
        assert_eq!(rep.huge_pages_moved, changes);
        assert_eq!(rep.pages_moved, 0);
        let last = run.objs[0].get(0);
        assert!((0..512).all(|q| run.objs[0].get(q) == last));
        assert_eq!(last, Some(1 + 7 % 3));
        let region = ptb_policy::Region {
            app: 0,
            start_vpn: o.start_vpn,
            npages: o.npages as u64,
            name: "a".into(),
            resident: vec![],
            huge: backing(&o, 4096),
        };
        let whole = ptb_policy::whole_huge_pages(spread, &[region]);
        let mut run = Run::new(&s, 0);
        run.allocate_objects(&AllocPolicy::FirstTouch, None).unwrap();
        let rep = run.apply_plan(&whole);
        assert_eq!(rep.huge_pages_moved, 1);
        // Copy cost: one 2 MiB copy at the machine's copy bandwidth.
        let c = &s.machine().costs;
        let want = (c.page_us * 1e-6).max(HUGE_PAGE_BYTES as f64 / (c.copy_gbps * 1e9));
        assert!((rep.seconds - want).abs() < 1e-9, "{} vs {want}", rep.seconds);
        // Base pages of the tail still move one by one.
        let away = (run.objs[0].get(2048).unwrap() + 1) % 4;
        let tail = Plan {
            ranges: vec![RangeAction {
                app: 0,
                start_vpn: o.start_vpn + 2048,
                npages: 4,
                op: RangeOp::MoveTo(NodeIdx(away as u16)),
            }],
            ..Default::default()
        };
        let rep = run.apply_plan(&tail);
        assert_eq!((rep.pages_moved, rep.huge_pages_moved), (4, 0));
    }
}
