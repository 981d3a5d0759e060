//! A child process that holds a buffer of resident pages, for measuring and testing page
//! migration of *another* process, as the daemon does it (moving the pages of ptb's own
//! address space would also make every migration flush the TLBs of ptb's worker threads).

use crate::sys::AnonBuffer;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

/// The holder process: its pid, the buffer's page addresses in its address space.
pub struct Holder {
    pub pid: u32,
    pub addrs: Vec<u64>,
    to_child: std::fs::File,
    done: bool,
}

const FILL: u8 = 0x5a;

impl Holder {
    /// Fork a child that maps `len` bytes, fills them, and waits. The child makes no heap
    /// allocation (only mmap, pipes and exit), so this is safe in a multi-threaded process.
    pub fn spawn(len: usize) -> std::io::Result<Holder> {
        let (up_r, up_w) = nix::unistd::pipe().map_err(std::io::Error::from)?;
        let (down_r, down_w) = nix::unistd::pipe().map_err(std::io::Error::from)?;
        // SAFETY: the child only maps memory, uses pipes and exits: no locks another thread
        // of the parent could have held at fork time.
        match unsafe { nix::unistd::fork() }.map_err(std::io::Error::from)? {
            nix::unistd::ForkResult::Child => {
                drop(up_r);
                drop(down_w);
                let code = child(len, up_w, down_r);
                // SAFETY: leave the forked child without running the parent's destructors.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(up_w);
                drop(down_r);
                let mut up = std::fs::File::from(up_r);
                let mut b = [0u8; 8];
                up.read_exact(&mut b)?;
                let base = u64::from_le_bytes(b);
                let ps = crate::sys::page_size();
                let addrs = (0..len as u64 / ps).map(|i| base + i * ps).collect();
                Ok(Holder { pid: child.as_raw() as u32, addrs, to_child: std::fs::File::from(down_w), done: false })
            }
        }
    }

    /// Ask the child to check its data and exit; true when every byte is intact.
    pub fn finish(mut self) -> bool {
        self.stop()
    }

    fn stop(&mut self) -> bool {
        if self.done {
            return false;
        }
        self.done = true;
        let _ = self.to_child.write_all(b"x");
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        matches!(nix::sys::wait::waitpid(pid, None), Ok(nix::sys::wait::WaitStatus::Exited(_, 0)))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop();
    }
}

fn child(len: usize, up: OwnedFd, down: OwnedFd) -> i32 {
    let Ok(buf) = AnonBuffer::new(len, FILL) else { return 3 };
    let base = buf.as_slice().as_ptr() as u64;
    let mut up = std::fs::File::from(up);
    if up.write_all(&base.to_le_bytes()).is_err() {
        return 4;
    }
    let mut c = [0u8; 1];
    // SAFETY: reading one byte from a pipe we own.
    let _ = unsafe { libc::read(down.as_raw_fd(), c.as_mut_ptr() as *mut libc::c_void, 1) };
    // Keep `down` alive until here.
    let _ = std::fs::File::from(down);
    i32::from(!buf.as_slice().iter().all(|&b| b == FILL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuator::{move_pages_batched, query_pages};

    #[test]
    fn holder_pages_can_be_queried_and_moved_by_pid() {
        // Test threads exist, but the child only maps memory and uses pipes.
        let h = Holder::spawn(1 << 20).unwrap();
        let st = query_pages(h.pid, &h.addrs).unwrap();
        assert!(st.iter().all(|s| *s >= 0), "{st:?}");
        let moves: Vec<(u64, i32)> = h.addrs.iter().zip(&st).map(|(a, n)| (*a, *n)).collect();
        let c = move_pages_batched(h.pid, &moves, 2, 64);
        assert_eq!(c.moved, h.addrs.len() as u64, "{c:?}");
        assert!(h.finish());
    }
}
