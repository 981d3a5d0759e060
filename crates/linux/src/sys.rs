//! Thin, typed wrappers over the NUMA and affinity system calls ptb uses: move_pages(2),
//! mbind(2), set_mempolicy(2), get_mempolicy(2) (raw syscalls through libc; glibc has no
//! wrappers without libnuma) and sched_{set,get}affinity(2) through nix.
//!
//! Constants the libc crate lacks are defined here, with their kernel header as source
//! (include/uapi/linux/mempolicy.h).

use nix::sched::CpuSet as NixCpuSet;
use nix::unistd::Pid;
use ptb_topology::CpuSet;
use std::io;

/// include/uapi/linux/mempolicy.h
pub const MPOL_DEFAULT: i32 = 0;
pub const MPOL_PREFERRED: i32 = 1;
pub const MPOL_BIND: i32 = 2;
pub const MPOL_INTERLEAVE: i32 = 3;
pub const MPOL_LOCAL: i32 = 4;
pub const MPOL_PREFERRED_MANY: i32 = 5;
pub const MPOL_WEIGHTED_INTERLEAVE: i32 = 6;
pub const MPOL_F_NODE: u32 = 1 << 0;
pub const MPOL_F_ADDR: u32 = 1 << 1;
pub const MPOL_MF_STRICT: u32 = 1 << 0;
pub const MPOL_MF_MOVE: u32 = 1 << 1;
pub const MPOL_MF_MOVE_ALL: u32 = 1 << 2;

/// Highest node id the node masks below can name.
pub const MAX_NODES: usize = 1024;

/// Bits in the kernel's node-mask word (`unsigned long`: 64 or 32 bits).
const WORD_BITS: usize = libc::c_ulong::BITS as usize;

/// Set the bits of `nodes` (< [`MAX_NODES`]; others are ignored) in `mask`, a bitmap of
/// `unsigned long` words of the platform's width. Allocates nothing.
fn fill_mask(nodes: &[u32], mask: &mut [libc::c_ulong; MAX_NODES / WORD_BITS]) {
    for &n in nodes {
        let n = n as usize;
        if n < MAX_NODES {
            mask[n / WORD_BITS] |= 1 << (n % WORD_BITS);
        }
    }
}

/// A node mask as the kernel wants it: a bitmap of `unsigned long` words.
fn node_mask(nodes: &[u32]) -> Vec<libc::c_ulong> {
    let mut mask = [0 as libc::c_ulong; MAX_NODES / WORD_BITS];
    fill_mask(nodes, &mut mask);
    mask.to_vec()
}

/// move_pages(2) on `pid` (0 = this process). `nodes == None` queries where each page is;
/// otherwise each page is moved to the node (kernel id) at the same index. `status[i]` gets
/// the page's node or a negative errno. Returns the count of pages the kernel did not
/// migrate (the syscall's positive return), or the call's error.
pub fn move_pages(pid: i32, addrs: &[u64], nodes: Option<&[i32]>, status: &mut [i32], flags: u32) -> io::Result<u64> {
    assert_eq!(addrs.len(), status.len(), "move_pages: one status slot per page");
    if let Some(n) = nodes {
        assert_eq!(n.len(), addrs.len(), "move_pages: one node per page");
    }
    if addrs.is_empty() {
        return Ok(0);
    }
    // SAFETY: the kernel reads `addrs.len()` pointers and nodes, writes as many statuses; the
    // slices have that length (checked above). The addresses are never dereferenced here.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            addrs.len() as libc::c_ulong,
            addrs.as_ptr(),
            nodes.map_or(std::ptr::null(), |n| n.as_ptr()),
            status.as_mut_ptr(),
            flags as libc::c_long,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as u64)
    }
}

/// mbind(2) on a range of this process: set `mode` over `nodes` (kernel ids) with `flags`
/// (e.g. [`MPOL_MF_MOVE`] to move pages already there).
pub fn mbind(addr: u64, len: u64, mode: i32, nodes: &[u32], flags: u32) -> io::Result<()> {
    let mask = node_mask(nodes);
    // SAFETY: mbind only changes the memory policy of the range; the mask outlives the call.
    let r = unsafe {
        libc::syscall(libc::SYS_mbind, addr, len, mode as libc::c_long, mask.as_ptr(), (MAX_NODES + 1) as u64, flags)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// set_mempolicy(2) for the calling thread (inherited by children and across exec).
pub fn set_mempolicy(mode: i32, nodes: &[u32]) -> io::Result<()> {
    let mask = node_mask(nodes);
    let (ptr, max) = if nodes.is_empty() { (std::ptr::null(), 0) } else { (mask.as_ptr(), MAX_NODES as u64 + 1) };
    // SAFETY: the mask outlives the call; the kernel only reads it.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode as libc::c_long, ptr, max) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// set_mempolicy(2) without heap allocation (safe between fork and exec): nodes must be
/// < 1024. The mask is built in `unsigned long` words of the platform's width (it assumed
/// 64-bit words).
pub fn set_mempolicy_noalloc(mode: i32, nodes: &[u32]) -> io::Result<()> {
    let mut mask = [0 as libc::c_ulong; MAX_NODES / WORD_BITS];
    fill_mask(nodes, &mut mask);
    // SAFETY: the mask outlives the call; the kernel only reads it.
    let r =
        unsafe { libc::syscall(libc::SYS_set_mempolicy, mode as libc::c_long, mask.as_ptr(), MAX_NODES as u64 + 1) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// get_mempolicy(2) for the calling thread: the mode.
pub fn get_mempolicy_mode() -> io::Result<i32> {
    let mut mode: libc::c_int = 0;
    // SAFETY: the kernel writes one int; no node mask is asked for.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            std::ptr::null_mut::<u64>(),
            0u64,
            0u64,
            0u64,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(mode)
    }
}

/// Set the CPU affinity of one thread.
pub fn set_affinity(tid: u32, cpus: &CpuSet) -> io::Result<()> {
    let mut set = NixCpuSet::new();
    for c in cpus.iter_raw() {
        set.set(c as usize).map_err(io::Error::from)?;
    }
    nix::sched::sched_setaffinity(Pid::from_raw(tid as i32), &set).map_err(io::Error::from)
}

/// The CPU affinity of one thread.
pub fn get_affinity(tid: u32) -> io::Result<CpuSet> {
    let set = nix::sched::sched_getaffinity(Pid::from_raw(tid as i32)).map_err(io::Error::from)?;
    let mut out = CpuSet::new();
    for c in 0..NixCpuSet::count() {
        if set.is_set(c).unwrap_or(false) {
            out.insert_raw(c as u32);
        }
    }
    Ok(out)
}

/// The name of a (positive) errno as move_pages reports it in a status slot.
pub fn errno_name(e: i32) -> String {
    match e {
        libc::ENOENT => "ENOENT".into(),
        libc::EBUSY => "EBUSY".into(),
        libc::EAGAIN => "EAGAIN".into(),
        libc::ENOMEM => "ENOMEM".into(),
        libc::EACCES => "EACCES".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EIO => "EIO".into(),
        libc::ENODEV => "ENODEV".into(),
        libc::E2BIG => "E2BIG".into(),
        libc::EPERM => "EPERM".into(),
        libc::ESRCH => "ESRCH".into(),
        other => format!("errno{other}"),
    }
}

/// A private anonymous mapping, unmapped on drop: memory ptb owns, for benchmarks and tests of
/// page migration. Base pages only ([`AnonBuffer::new`]) or transparent huge pages where the
/// kernel gives them ([`AnonBuffer::with_huge_pages`]).
pub struct AnonBuffer {
    ptr: *mut u8,
    len: usize,
    /// The whole mapping (larger than `len` when aligned for huge pages).
    map: (*mut u8, usize),
}

/// An anonymous private read-write mapping of `len` bytes (page aligned, zero filled, not yet
/// touched). The caller owns it and unmaps it with munmap.
pub fn map_anon(len: usize) -> io::Result<*mut u8> {
    // SAFETY: anonymous mapping with no fixed address; the kernel picks a fresh range.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

impl AnonBuffer {
    /// Map `len` bytes and fill them with `fill` (so every page is resident).
    pub fn new(len: usize, fill: u8) -> io::Result<Self> {
        let p = map_anon(len)?;
        // SAFETY: advice and writes on our own fresh mapping of `len` bytes.
        unsafe {
            libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE);
            std::ptr::write_bytes(p, fill, len);
        }
        Ok(AnonBuffer { ptr: p, len, map: (p, len) })
    }

    /// Map `len` bytes starting on a huge-page boundary (2 MiB, or the kernel's
    /// `hpage_pmd_size`), advise MADV_HUGEPAGE and fill them: the kernel backs every whole
    /// aligned block with a transparent huge page where THP is `always` or `madvise` and it
    /// has one free; under `never`, base pages.
    pub fn with_huge_pages(len: usize, fill: u8) -> io::Result<Self> {
        let ps = page_size();
        let huge = crate::thp::pmd_size(&crate::procfs::ProcRoot::live(), ps).unwrap_or(2 << 20) as usize;
        // Whole huge pages around the buffer, so its last block can be one too.
        let total = len.next_multiple_of(huge) + huge;
        let p = map_anon(total)?;
        let start = (p as usize).next_multiple_of(huge) as *mut u8;
        // SAFETY: `start..start + len` rounded up to whole huge pages lies inside our fresh
        // mapping of `total` bytes (start is less than `huge` bytes past `p`); advice on it and
        // writes to the first `len` bytes.
        unsafe {
            libc::madvise(start.cast(), len.next_multiple_of(huge), libc::MADV_HUGEPAGE);
            std::ptr::write_bytes(start, fill, len);
        }
        Ok(AnonBuffer { ptr: start, len, map: (p, total) })
    }

    /// Map `len` bytes without touching them: each page lands where its first writer runs.
    pub fn untouched(len: usize) -> io::Result<Self> {
        let p = map_anon(len)?;
        // SAFETY: advice on our own fresh mapping of `len` bytes.
        unsafe { libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE) };
        Ok(AnonBuffer { ptr: p, len, map: (p, len) })
    }
    /// The mapping's first byte, for writers that split it into disjoint parts themselves
    /// (each part written by one thread at a time).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Address of each base page.
    pub fn page_addrs(&self) -> Vec<u64> {
        let ps = page_size() as usize;
        (0..self.len / ps).map(|i| self.ptr as u64 + (i * ps) as u64).collect()
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes, readable, alive while self is.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

// SAFETY: the buffer is plain memory owned by the value (like a Vec<u8>); shared access is
// read-only through `as_slice`, mutation needs `&mut self`.
unsafe impl Send for AnonBuffer {}
// SAFETY: see above.
unsafe impl Sync for AnonBuffer {}

impl Drop for AnonBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map.0 as *mut libc::c_void, self.map.1) };
    }
}

/// Clock ticks per second of the times in /proc/PID/task/TID/stat (USER_HZ).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_own_page_reports_a_node_and_untouched_pages_enoent() {
        let ps = page_size() as usize;
        let mut buf = vec![0u8; ps * 4];
        let base = (buf.as_mut_ptr() as usize).next_multiple_of(ps);
        // SAFETY: base..base+ps lies inside buf (4 pages, aligned up by < 1 page).
        unsafe { std::ptr::write_volatile(base as *mut u8, 1) };
        let mut st = [i32::MIN];
        move_pages(0, &[base as u64], None, &mut st, 0).unwrap();
        assert!(st[0] >= 0, "touched page should be on a node, got status {}", st[0]);
        // A fresh anonymous mapping never touched: ENOENT.
        // SAFETY: plain anonymous mmap, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ps,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let mut st = [0];
        move_pages(0, &[p as u64], None, &mut st, 0).unwrap();
        assert_eq!(st[0], -libc::ENOENT);
        // SAFETY: unmapping what we mapped.
        unsafe { libc::munmap(p, ps) };
    }

    #[test]
    fn own_affinity_round_trips_and_mempolicy_mode_reads() {
        let me = nix::unistd::gettid().as_raw() as u32;
        let orig = get_affinity(me).unwrap();
        assert!(!orig.is_empty());
        set_affinity(me, &orig).unwrap();
        assert_eq!(get_affinity(me).unwrap(), orig);
        assert!(get_mempolicy_mode().unwrap() >= 0);
        assert_eq!(errno_name(libc::EBUSY), "EBUSY");
    }

    #[test]
    fn node_mask_sets_bits() {
        let m = node_mask(&[0, 3, 65, 5000]);
        let bit = |n: usize| m[n / WORD_BITS] >> (n % WORD_BITS) & 1;
        assert_eq!((bit(0), bit(1), bit(3), bit(65), bit(64)), (1, 0, 1, 1, 0));
        assert_eq!(m.iter().map(|w| w.count_ones()).sum::<u32>(), 3, "node 5000 is beyond the mask");
        assert_eq!(m.len() * WORD_BITS, MAX_NODES);
    }
}
