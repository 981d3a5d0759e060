//! The few Linux syscalls characterisation needs: thread pinning, anonymous mappings, and
//! binding memory to a node (`mbind`) and asking where a page lives (`get_mempolicy`). The
//! syscall wrappers shared with the runtime live in `ptb_linux::sys`; this module adapts them.

use ptb_linux::sys as lsys;
use ptb_topology::CpuSet;
use std::io;

/// Pin the calling thread to one CPU (kernel id).
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU id beyond {}", libc::CPU_SETSIZE)));
    }
    let mut set = CpuSet::new();
    set.insert_raw(cpu);
    lsys::set_affinity(0, &set)
}

/// The CPUs the calling thread may run on (to explain affinity failures).
pub fn allowed_cpus() -> Vec<u32> {
    lsys::get_affinity(0).map(|s| s.iter_raw().collect()).unwrap_or_default()
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`): unlike the wall clock, it
/// does not advance while the thread waits for a CPU on a busy machine.
pub fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// An anonymous private mapping of `len` bytes (page aligned, zero filled, not yet touched).
pub fn map_anon(len: usize) -> io::Result<*mut u8> {
    lsys::map_anon(len)
}

/// Ask for transparent huge pages on a mapping (best effort: fewer TLB misses, so the
/// figures reflect the memory system rather than page walks).
pub fn advise_huge(ptr: *mut u8, len: usize) {
    // SAFETY: ptr/len describe a mapping this process owns; madvise only changes hints.
    unsafe {
        libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
    }
}

/// Unmap a mapping made by [`map_anon`].
///
/// # Safety
/// `ptr`/`len` must be exactly a live mapping returned by [`map_anon`], not used afterwards.
pub unsafe fn unmap(ptr: *mut u8, len: usize) {
    libc::munmap(ptr.cast(), len);
}

/// Bind `[ptr, ptr+len)` to memory node `node` (kernel id) with `MPOL_BIND`, before first touch.
pub fn bind_to_node(ptr: *mut u8, len: usize, node: u32) -> io::Result<()> {
    if node as usize >= lsys::MAX_NODES {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    lsys::mbind(ptr as u64, len as u64, lsys::MPOL_BIND, &[node], lsys::MPOL_MF_STRICT)
}

/// The node (kernel id) holding the page at `addr`, or `None` when the kernel cannot say
/// (e.g. `get_mempolicy` is filtered by a sandbox).
pub fn node_of_page(addr: *const u8) -> Option<i32> {
    let mut node: libc::c_int = -1;
    // SAFETY: with MPOL_F_NODE|MPOL_F_ADDR and a null mask, the kernel writes one int to `node`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut libc::c_int,
            std::ptr::null_mut::<libc::c_ulong>(),
            0 as libc::c_ulong,
            addr as libc::c_ulong,
            (lsys::MPOL_F_NODE | lsys::MPOL_F_ADDR) as libc::c_ulong,
        )
    };
    (r == 0).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_to_an_allowed_cpu_works_and_to_a_missing_one_fails() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        std::thread::spawn(move || {
            pin_current_thread(allowed[0]).unwrap();
            assert_eq!(allowed_cpus(), vec![allowed[0]]);
            assert!(pin_current_thread(libc::CPU_SETSIZE as u32 + 5).is_err());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn bound_pages_land_on_node_0_and_binding_a_missing_node_fails() {
        let len = 1 << 20;
        let p = map_anon(len).unwrap();
        bind_to_node(p, len, 0).unwrap();
        // SAFETY: p is a fresh writable mapping of len bytes.
        unsafe { p.write(1) };
        if let Some(n) = node_of_page(p) {
            assert_eq!(n, 0);
        }
        let q = map_anon(len).unwrap();
        let e = bind_to_node(q, len, 1000).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        // SAFETY: both are live mappings from map_anon, not used again.
        unsafe {
            unmap(p, len);
            unmap(q, len);
        }
    }
}
