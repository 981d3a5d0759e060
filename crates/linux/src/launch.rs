//! Launching a program under a start plan's allocation policy: set_mempolicy(2) in the child
//! between fork and exec, so every page it touches follows the policy (the policy survives
//! exec). Weighted interleave uses MPOL_WEIGHTED_INTERLEAVE where the kernel has it (its
//! per-node weights live in /sys/kernel/mm/mempolicy/weighted_interleave/nodeN; ptb writes
//! the policy's weights when it may and puts the old ones back), else plain interleave.

use crate::actuator::weighted_interleave_supported;
use crate::procfs::ProcRoot;
use crate::sys;
use ptb_policy::AllocPolicy;
use ptb_topology::Machine;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Kernel weights ptb changed, restored on drop.
pub struct WeightsGuard {
    saved: Vec<(std::path::PathBuf, String)>,
}

impl WeightsGuard {
    /// How many node weights were changed (and will be put back).
    pub fn len(&self) -> usize {
        self.saved.len()
    }
    pub fn is_empty(&self) -> bool {
        self.saved.is_empty()
    }
}

impl Drop for WeightsGuard {
    fn drop(&mut self) {
        for (p, v) in &self.saved {
            let _ = std::fs::write(p, v);
        }
    }
}

/// Why a program did not start.
#[derive(Debug)]
pub struct SpawnError {
    pub program: String,
    pub error: std::io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start `{}`: {}", self.program, self.error)
    }
}

impl std::error::Error for SpawnError {}

impl SpawnError {
    /// The exit status shells use: 127 when the program was not found, 126 when it could not
    /// be executed (permissions, not an executable), 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self.error.kind() {
            std::io::ErrorKind::NotFound => 127,
            std::io::ErrorKind::PermissionDenied => 126,
            _ if self.error.raw_os_error() == Some(libc::ENOEXEC) => 126,
            _ => 1,
        }
    }
}

/// Start `argv` with the allocation policy applied. Returns the child, a note on what was
/// applied, and the guard of any kernel weights changed.
pub fn spawn(
    root: &ProcRoot,
    m: &Machine,
    argv: &[String],
    alloc: &AllocPolicy,
) -> Result<(Child, String, Option<WeightsGuard>), SpawnError> {
    let (prog, args) = argv.split_first().ok_or_else(|| SpawnError {
        program: String::new(),
        error: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no command given: ptb run [OPTIONS] -- CMD ARGS...",
        ),
    })?;
    let kid = |n: &ptb_topology::NodeIdx| m.node(*n).id.0;
    let mut guard = None;
    let (mode, nodes, note) = match alloc {
        AllocPolicy::FirstTouch => (None, vec![], "first touch (kernel default)".to_string()),
        AllocPolicy::Interleave(ns) => {
            let ids: Vec<u32> = ns.iter().map(kid).collect();
            (Some(sys::MPOL_INTERLEAVE), ids.clone(), format!("MPOL_INTERLEAVE over nodes {ids:?}"))
        }
        AllocPolicy::Weighted(ws) => {
            let ids: Vec<u32> = ws.iter().map(|(n, _)| kid(n)).collect();
            if weighted_interleave_supported(root) {
                let mut saved = vec![];
                for ((_, w), id) in ws.iter().zip(&ids) {
                    let p = root.path(&format!("sys/kernel/mm/mempolicy/weighted_interleave/node{id}"));
                    if let Ok(old) = std::fs::read_to_string(&p) {
                        if std::fs::write(&p, w.to_string()).is_ok() {
                            saved.push((p, old.trim().to_string()));
                        }
                    }
                }
                let wrote = !saved.is_empty();
                guard = Some(WeightsGuard { saved });
                let how = if wrote { "policy weights written" } else { "kernel's current weights (not writable)" };
                (
                    Some(sys::MPOL_WEIGHTED_INTERLEAVE),
                    ids.clone(),
                    format!("MPOL_WEIGHTED_INTERLEAVE over {ids:?}, {how}"),
                )
            } else {
                (
                    Some(sys::MPOL_INTERLEAVE),
                    ids.clone(),
                    format!("MPOL_INTERLEAVE over {ids:?} (this kernel has no MPOL_WEIGHTED_INTERLEAVE, Linux >= 6.9)"),
                )
            }
        }
    };
    let mut cmd = Command::new(prog);
    cmd.args(args);
    if let Some(mode) = mode.filter(|_| nodes.len() > 1) {
        // SAFETY: the closure runs between fork and exec and only makes one syscall (no
        // allocation: the node list is moved in and the mask is built on the stack).
        unsafe {
            cmd.pre_exec(move || sys::set_mempolicy_noalloc(mode, &nodes));
        }
    }
    let child = cmd.spawn().map_err(|error| SpawnError { program: prog.clone(), error })?;
    Ok((child, note, guard))
}
