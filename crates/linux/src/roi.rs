//! Region of interest: `ptb roi begin|end PID` writes `on` or `off` into a small control
//! file keyed by the managed process's pid; the daemon reads it every cycle and pauses
//! placement while it says `off`. Files not owned by the daemon's user (or root) are ignored,
//! so another user cannot pause someone else's daemon.
//!
//! Location: `$PTB_ROI_DIR/ptb-roi.PID`, default `/tmp/ptb-roi.PID`.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The control file of process `pid`.
pub fn path(pid: u32) -> PathBuf {
    let dir = std::env::var_os("PTB_ROI_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    dir.join(format!("ptb-roi.{pid}"))
}

/// Write the state for `pid`.
pub fn write(pid: u32, on: bool) -> std::io::Result<PathBuf> {
    let p = path(pid);
    std::fs::write(&p, if on { "on\n" } else { "off\n" })?;
    Ok(p)
}

/// The state the control file of `pid` asks for (None: no file, unreadable, or not trusted).
pub fn read(pid: u32, my_uid: u32) -> Option<bool> {
    let p = path(pid);
    let meta = std::fs::metadata(&p).ok()?;
    if meta.uid() != my_uid && meta.uid() != 0 {
        tracing::warn!(path = %p.display(), owner = meta.uid(), "ignoring ROI file not owned by you or root");
        return None;
    }
    match std::fs::read_to_string(&p).ok()?.trim() {
        "on" | "begin" | "1" => Some(true),
        "off" | "end" | "0" => Some(false),
        other => {
            tracing::warn!(path = %p.display(), content = other, "ROI file should say `on` or `off`");
            None
        }
    }
}

/// Remove the control file of `pid` (at daemon exit).
pub fn clear(pid: u32) {
    let _ = std::fs::remove_file(path(pid));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_end_round_trip() {
        let d = tempfile::tempdir().unwrap();
        std::env::set_var("PTB_ROI_DIR", d.path());
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let pid = 4_000_000_001;
        assert_eq!(read(pid, me), None);
        write(pid, false).unwrap();
        assert_eq!(read(pid, me), Some(false));
        write(pid, true).unwrap();
        assert_eq!(read(pid, me), Some(true));
        std::fs::write(path(pid), "maybe").unwrap();
        assert_eq!(read(pid, me), None);
        clear(pid);
        assert!(!path(pid).exists());
    }
}
