//! Memory bound to one NUMA node: an anonymous mapping, `mbind`-ed before first touch, touched,
//! and checked to really be on that node.

use crate::error::CharError;
use crate::sys;

/// A page-aligned buffer whose pages all live on one node.
pub struct NodeBuffer {
    ptr: *mut u8,
    len: usize,
    node: u32,
}

// SAFETY: the buffer is plain memory owned by this value; threads that share it write disjoint
// elements (see `kernel`), and reads of stale values are harmless for the measurements.
unsafe impl Send for NodeBuffer {}
unsafe impl Sync for NodeBuffer {}

impl NodeBuffer {
    /// Map `len` bytes, bind them to `node` (kernel id), touch every page, and check placement.
    pub fn new(len: usize, node: u32) -> Result<Self, CharError> {
        let len = len.max(4096);
        let ptr = sys::map_anon(len).map_err(|source| CharError::Alloc { node, bytes: len, error: source })?;
        let buf = NodeBuffer { ptr, len, node };
        sys::advise_huge(ptr, len);
        if let Err(source) = sys::bind_to_node(ptr, len, node) {
            let hint = match source.raw_os_error() {
                Some(libc::EINVAL) => format!(
                    "Node {node} has no memory this process may use: it may be memory-less, offline, or outside \
                     this process's cpuset (check /sys/devices/system/node/node{node}/meminfo and cpuset.mems)"
                ),
                Some(libc::EPERM) => "The process is not allowed to set memory policy (container seccomp?)".into(),
                Some(libc::ENOSYS) => "This kernel was built without NUMA support".into(),
                _ => "Check that the node is online".into(),
            };
            return Err(CharError::Bind { node, bytes: len, error: source, hint });
        }
        // Touch every page so the kernel allocates it now, on `node`, outside any timing.
        // SAFETY: [ptr, ptr+len) is a writable mapping owned by `buf`.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        for probe in [0, len / 2, len - 1] {
            if let Some(found) = sys::node_of_page(ptr.wrapping_add(probe)) {
                if found >= 0 && found as u32 != node {
                    return Err(CharError::Misplaced {
                        node,
                        found,
                        hint:
                            "another memory policy or cgroup setting overrides mbind; run outside numactl/cpuset limits"
                                .into(),
                    });
                }
            }
        }
        Ok(buf)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn node(&self) -> u32 {
        self.node
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for NodeBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in `new`, dropped once.
        unsafe { sys::unmap(self.ptr, self.len) };
    }
}
