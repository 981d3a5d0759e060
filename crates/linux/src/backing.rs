//! Which base pages of a managed process the kernel migrates together: the huge page (if any)
//! that holds each page the actuator is asked to move.
//!
//! Problem: `move_pages` of any 4 KiB page of a transparent huge page (or a hugetlbfs page)
//! migrates the whole huge page. To ask only for placements the kernel can give, the actuator
//! must know, for every page it moves, whether it lies in a huge page and which.
//!
//! Approach: per process and apply, `/proc/PID/smaps` says which mappings may hold huge pages:
//! hugetlbfs mappings (`KernelPageSize` above the base page: every aligned block is one), and
//! mappings with PMD-mapped transparent huge pages now or `THPeligible`. In the latter, each
//! aligned block of `hpage_pmd_size` is checked when a move touches it:
//! - **known**, where `/proc/kpageflags` is readable (root, CAP_SYS_ADMIN): the block's pagemap
//!   entries give its page frames; it is one huge page when the first frame is a compound head
//!   with the THP flag, the next frames are its tails, and every present page maps the frame at
//!   its offset. This also finds huge pages the kernel maps with 4 KiB entries (after a partial
//!   mprotect), which smaps does not count;
//! - **assumed**, without kpageflags, when the block's mapping has PMD-mapped huge pages now:
//!   the actuator moves one asked page of the block and looks which pages followed
//!   (`pagemove`), which tells a huge page from base pages after the fact.
//!
//! Elsewhere pages are base pages. `/proc/meminfo` without any huge page skips all of this.

use crate::procfs::ProcRoot;
use crate::thp::{self, PagemapEntry, SmapsVma, KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL, KPF_THP};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// A huge page as the actuator moves it: base pages `[head, head + pages)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    /// First base page (virtual page number).
    pub head: u64,
    /// Base pages in it (512 for 2 MiB over 4 KiB).
    pub pages: u64,
    /// True when the kernel's page flags say so (or a hugetlbfs mapping); false when assumed
    /// from the mapping's smaps alone.
    pub known: bool,
}

/// Answers "which huge page holds this base page?".
pub trait PageBacking {
    fn unit_of(&mut self, vpn: u64) -> Option<Unit>;
}

/// No huge pages anywhere (every page is a base page).
pub struct BasePagesOnly;

impl PageBacking for BasePagesOnly {
    fn unit_of(&mut self, _vpn: u64) -> Option<Unit> {
        None
    }
}

/// The backing of one live process's pages, read from /proc.
pub struct LiveBacking {
    page_size: u64,
    /// Base pages per transparent huge page (0: the kernel has none).
    thp_pages: u64,
    /// Every mapping, ascending.
    vmas: Vec<SmapsVma>,
    /// /proc/PID/pagemap and /proc/kpageflags, when both are readable with page frames.
    frames: Option<(File, File)>,
    /// Per huge-page-aligned block (vpn / thp_pages): what was found.
    cache: HashMap<u64, Option<Unit>>,
}

impl LiveBacking {
    /// Read what is needed about `pid`. Unreadable files leave less known: a process whose
    /// smaps cannot be read is taken as base pages (the actuator's check after the move still
    /// catches a page that went elsewhere with a huge page).
    pub fn open(root: &ProcRoot, pid: u32, page_size: u64) -> Self {
        let thp_pages = thp::pmd_size(root, page_size).map_or(0, |b| b / page_size);
        let vmas: Vec<SmapsVma> = match thp::smaps(root, pid) {
            Ok(v) => v,
            Err(e) => {
                if !e.is_gone() {
                    tracing::warn!(pid, error = %e, "cannot read the process's huge pages; treating its memory as base pages");
                }
                vec![]
            }
        };
        // Page frames decide without smaps too (a process whose smaps could not be read).
        let frames = if thp_pages < 2 {
            None
        } else {
            let pm = File::open(root.path(&format!("proc/{pid}/pagemap"))).ok();
            let kf = File::open(root.path("proc/kpageflags")).ok();
            pm.zip(kf)
        };
        LiveBacking { page_size, thp_pages, vmas, frames, cache: HashMap::new() }
    }

    /// Base pages per transparent huge page (0: none).
    pub fn thp_pages(&self) -> u64 {
        self.thp_pages
    }

    /// True when page frames and their flags are readable: huge pages are known, not assumed.
    pub fn exact(&self) -> bool {
        self.frames.is_some()
    }

    /// Huge-page backed ranges `[start_vpn, end_vpn)` with base pages per huge page, for the
    /// snapshot's regions: hugetlbfs mappings whole; where page frames are readable, every
    /// block found to be a transparent huge page (at most `max_blocks` blocks are looked at;
    /// beyond, as without frames, mappings with PMD-mapped huge pages now, whole).
    pub fn huge_ranges(&mut self, max_blocks: usize) -> Vec<(u64, u64, u64)> {
        let ps = self.page_size;
        let mut left = max_blocks;
        let mut out = Vec::new();
        for i in 0..self.vmas.len() {
            let m = self.vmas[i].clone();
            let (lo, hi) = (m.start / ps, m.end / ps);
            if m.kernel_page_kb * 1024 > ps {
                out.push((lo, hi, m.kernel_page_kb * 1024 / ps));
                continue;
            }
            let n = self.thp_pages;
            if n < 2 {
                continue;
            }
            // Mappings that may hold huge pages, and pieces smaller than two huge pages: the
            // kernel says a piece is not eligible (too small for a huge page of its own) even
            // when it is part of one, as after a program mprotects part of a huge page.
            if !m.may_have_thp() && hi - lo >= 2 * n {
                continue;
            }
            let blocks = (hi.div_ceil(n) - lo / n) as usize;
            if self.exact() && blocks <= left {
                left -= blocks;
                for b in lo / n..hi.div_ceil(n) {
                    if out.last().is_some_and(|x: &(u64, u64, u64)| x.0 == b * n) {
                        continue; // the block was found from the mapping before
                    }
                    if self.unit_of(b * n).is_some_and(|u| u.known) {
                        out.push((b * n, b * n + n, n));
                    }
                }
            } else if m.pmd_mapped_kb() > 0 {
                out.push((lo, hi, n));
            }
        }
        out
    }

    fn vma_of(&self, vpn: u64) -> Option<&SmapsVma> {
        let a = vpn.checked_mul(self.page_size)?;
        let i = self.vmas.partition_point(|m| m.end <= a);
        self.vmas.get(i).filter(|m| m.start <= a)
    }

    /// Is the aligned block starting at `head` one transparent huge page? From its page frames.
    fn frames_say_huge(&self, head: u64, n: u64) -> Option<bool> {
        let (pm, kf) = self.frames.as_ref()?;
        let mut raw = vec![0u8; n as usize * 8];
        pm.read_exact_at(&mut raw, head.checked_mul(8)?).ok()?;
        let entries: Vec<PagemapEntry> =
            raw.chunks_exact(8).map(|c| PagemapEntry(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))).collect();
        let Some(pfn0) = entries[0].pfn() else { return Some(false) };
        if pfn0 == 0 {
            return None; // frames hidden (no CAP_SYS_ADMIN): cannot tell
        }
        for (i, e) in entries.iter().enumerate() {
            if let Some(p) = e.pfn() {
                if p != pfn0 + i as u64 {
                    return Some(false);
                }
            }
        }
        let mut fl = vec![0u8; n as usize * 8];
        kf.read_exact_at(&mut fl, pfn0.checked_mul(8)?).ok()?;
        let flags: Vec<u64> = fl.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
        let head_ok = flags[0] & (KPF_THP | KPF_COMPOUND_HEAD) == KPF_THP | KPF_COMPOUND_HEAD;
        let tails_ok = flags[1..].iter().all(|f| f & KPF_COMPOUND_TAIL != 0 && f & KPF_COMPOUND_HEAD == 0);
        Some(head_ok && tails_ok)
    }
}

impl PageBacking for LiveBacking {
    fn unit_of(&mut self, vpn: u64) -> Option<Unit> {
        let ps = self.page_size;
        if let Some(m) = self.vma_of(vpn).filter(|m| m.kernel_page_kb * 1024 > ps) {
            let pages = m.kernel_page_kb * 1024 / ps;
            return Some(Unit { head: vpn / pages * pages, pages, known: true });
        }
        let n = self.thp_pages;
        if n < 2 {
            return None;
        }
        let block = vpn / n;
        if let Some(u) = self.cache.get(&block) {
            return *u;
        }
        let u = self.classify(block);
        self.cache.insert(block, u);
        u
    }
}

impl LiveBacking {
    /// Is block `block` (base pages `[block * n, (block + 1) * n)`) one transparent huge page?
    /// With page frames readable, they alone decide (a huge page may span several mappings, and
    /// a piece of a mapping too small for a huge page of its own is not "eligible" in smaps,
    /// yet part of one). Without, a block wholly inside a mapping with PMD-mapped huge pages
    /// now is assumed to be one.
    fn classify(&self, block: u64) -> Option<Unit> {
        let (n, ps) = (self.thp_pages, self.page_size);
        let head = block.checked_mul(n)?;
        match self.frames_say_huge(head, n) {
            Some(true) => return Some(Unit { head, pages: n, known: true }),
            Some(false) => return None,
            None => {}
        }
        let (lo, hi) = (head.checked_mul(ps)?, (head + n).checked_mul(ps)?);
        let m = self.vma_of(head)?;
        (m.start <= lo && hi <= m.end && m.kernel_page_kb * 1024 <= ps && m.pmd_mapped_kb() > 0).then_some(Unit {
            head,
            pages: n,
            known: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{self, AnonBuffer};

    fn anon_huge_kb(start: u64) -> u64 {
        let v = thp::smaps(&ProcRoot::live(), std::process::id()).unwrap();
        v.iter().find(|m| m.start <= start && start < m.end).map_or(0, |m| m.anon_huge_kb)
    }

    /// On this machine: a buffer advised MADV_HUGEPAGE is found as huge pages (as many as smaps
    /// counts), a MADV_NOHUGEPAGE one as base pages.
    #[test]
    fn finds_this_process_huge_pages_as_smaps_counts_them() {
        let root = ProcRoot::live();
        let ps = sys::page_size();
        let Some(pmd) = thp::pmd_size(&root, ps) else { return }; // no THP in this kernel
        let enabled = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        let huge = AnonBuffer::with_huge_pages(4 * pmd as usize, 7).unwrap();
        let base = AnonBuffer::new(4 * pmd as usize, 7).unwrap();
        let mut b = LiveBacking::open(&root, std::process::id(), ps);
        let n = pmd / ps;
        let heads: Vec<u64> = huge.page_addrs().iter().step_by(n as usize).map(|a| a / ps).collect();
        let found = heads.iter().filter(|&&h| b.unit_of(h + 3).is_some_and(|u| u.head == h && u.pages == n)).count();
        let smaps_kb = anon_huge_kb(huge.page_addrs()[0]);
        if !enabled.contains("[never]") {
            assert!(smaps_kb > 0, "THP is on ({}) but the advised buffer got no huge page", enabled.trim());
        }
        if b.exact() {
            assert_eq!(found as u64 * pmd / 1024, smaps_kb, "frames and smaps disagree");
        } else {
            assert!(found as u64 * pmd / 1024 >= smaps_kb);
        }
        assert!(base.page_addrs().iter().all(|a| b.unit_of(a / ps).is_none()));
        assert_eq!(b.unit_of(u64::MAX / ps), None);
        // A program that protects one page of a huge page splits its mapping in three and maps
        // the huge page with 4 KiB entries: smaps no longer counts it, the page frames still
        // say it is one huge page.
        if b.exact() && found > 0 {
            let head = heads.iter().copied().find(|&h| b.unit_of(h).is_some()).unwrap();
            // SAFETY: one page inside our own mapping; made read-only, never written after.
            assert_eq!(
                unsafe { libc::mprotect(((head + 7) * ps) as *mut libc::c_void, ps as usize, libc::PROT_READ) },
                0
            );
            let v = thp::smaps(&root, std::process::id()).unwrap();
            assert!(v.iter().any(|m| m.start == (head + 7) * ps && m.end == (head + 8) * ps), "mapping not split");
            let mut b = LiveBacking::open(&root, std::process::id(), ps);
            assert_eq!(b.unit_of(head + 300), Some(Unit { head, pages: n, known: true }));
            let r = b.huge_ranges(1 << 20);
            assert!(r.contains(&(head, head + n, n)), "{r:?}");
        }
        std::hint::black_box((&huge, &base));
    }

    #[test]
    fn a_process_that_cannot_be_read_is_base_pages() {
        let d = tempfile::tempdir().unwrap();
        let mut b = LiveBacking::open(&ProcRoot::new(d.path()), 4242, 4096);
        assert_eq!(b.unit_of(512), None);
        assert!(!b.exact() && b.huge_ranges(100).is_empty());
    }

    #[test]
    fn a_fake_tree_without_frames_assumes_huge_pages_where_smaps_shows_them() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/9")).unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel/mm/transparent_hugepage")).unwrap();
        std::fs::write(d.path().join("sys/kernel/mm/transparent_hugepage/hpage_pmd_size"), "2097152\n").unwrap();
        // 0x200000-0x800000: 4 MiB of PMD-mapped THP in 6 MiB; 0x800000-0x1000000 eligible, none yet;
        // 0x40000000-0x80000000: hugetlbfs with 1 GiB pages.
        let smaps = "200000-800000 rw-p 0 00:00 0\nAnonHugePages: 4096 kB\nTHPeligible: 1\n\
                     800000-1000000 rw-p 0 00:00 0\nAnonHugePages: 0 kB\nTHPeligible: 1\n\
                     40000000-80000000 rw-s 0 00:0f 77 /anon_hugepage (deleted)\nKernelPageSize: 1048576 kB\n";
        std::fs::write(d.path().join("proc/9/smaps"), smaps).unwrap();
        let mut b = LiveBacking::open(&ProcRoot::new(d.path()), 9, 4096);
        assert_eq!(b.thp_pages(), 512);
        assert!(!b.exact());
        assert_eq!(b.unit_of(0x300), Some(Unit { head: 0x200, pages: 512, known: false }));
        assert_eq!(b.unit_of(0x900), None, "eligible without huge pages now: base pages");
        assert_eq!(b.unit_of(0x40000 + 5), Some(Unit { head: 0x40000, pages: 262_144, known: true }));
        assert_eq!(b.unit_of(0x100), None, "outside every mapping");
        assert_eq!(b.huge_ranges(100), vec![(0x200, 0x800, 512), (0x40000, 0x80000, 262_144)]);
    }
}
