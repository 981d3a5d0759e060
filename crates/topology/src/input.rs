//! Reading a file a user named: hostile until validated.
//!
//! Problem: ptb runs as root and reads files users hand it (`--machine`, `--workload`,
//! `--config`, `--import-mlc`, `--trace`, ...). `/dev/zero` reads until memory runs out, a
//! FIFO blocks forever on open, a multi-gigabyte file aborts an allocation.
//!
//! Approach: one reader for every such file. It opens without blocking (`O_NONBLOCK`, so a
//! FIFO does not wait for a writer), refuses anything but a regular file (after `fstat` on the
//! opened descriptor, so a swapped path cannot slip through), and reads at most `max` bytes
//! (files in /proc and /sys report size 0, so the cap is enforced while reading, not from the
//! size). Every refusal names the file, what it was meant to be, and what to do.

use std::fmt;
use std::io::{BufRead, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Size caps of the inputs, in bytes. Generous for real files, small enough that a hostile
/// one cannot exhaust memory.
pub mod cap {
    /// A machine file (the largest real ones, 1024 nodes with full matrices, are ~10 MB).
    pub const MACHINE: u64 = 32 << 20;
    /// A workload model.
    pub const WORKLOAD: u64 = 4 << 20;
    /// A policy or daemon configuration file.
    pub const CONFIG: u64 = 1 << 20;
    /// Intel MLC output.
    pub const MLC: u64 = 16 << 20;
    /// A saved JSON result (`ptb report`, suites, bench cases).
    pub const JSON: u64 = 256 << 20;
    /// A trace file (`ptb record` output), read line by line; see [`LINE`].
    pub const TRACE: u64 = 4 << 30;
    /// One line of a trace (the header line holds a machine model).
    pub const LINE: u64 = MACHINE + (1 << 20);
    /// A file under /proc or /sys (or a captured copy of one).
    pub const SYSFS: u64 = 4 << 20;
}

/// Why a file was not read.
#[derive(Debug)]
pub struct InputError {
    pub path: PathBuf,
    /// What the file was meant to be ("machine file", "trace", ...).
    pub what: String,
    pub reason: String,
    /// The I/O error, if the refusal came from one (e.g. to tell a missing file apart).
    pub io: Option<std::io::ErrorKind>,
    /// True for a file ptb was to write.
    pub output: bool,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.output { "write" } else { "read" };
        write!(f, "cannot {verb} {} `{}`: {}", self.what, self.path.display(), self.reason)
    }
}

impl std::error::Error for InputError {}

impl InputError {
    fn new(path: &Path, what: &str, reason: impl Into<String>) -> Self {
        InputError { path: path.into(), what: what.into(), reason: reason.into(), io: None, output: false }
    }
    fn io(path: &Path, what: &str, e: &std::io::Error) -> Self {
        let reason = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        InputError { io: Some(e.kind()), ..InputError::new(path, what, reason) }
    }
    /// True when the file does not exist.
    pub fn is_not_found(&self) -> bool {
        self.io == Some(std::io::ErrorKind::NotFound)
    }
}

/// Human size for messages: `32 MiB`.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Open `path` for reading without blocking, and check it is a regular file of at most `max`
/// bytes (by its size; the caller still bounds the read, since /proc files report 0).
pub fn open(path: &Path, what: &str, max: u64) -> Result<std::fs::File, InputError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| InputError::io(path, what, &e))?;
    let meta = f.metadata().map_err(|e| InputError::io(path, what, &e))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(InputError::new(path, what, format!("it is {}; give a regular file", kind(&ft))));
    }
    if meta.len() > max {
        return Err(InputError::new(
            path,
            what,
            format!(
                "it is {} ({} bytes), larger than the {} a {what} may have",
                human(meta.len()),
                meta.len(),
                human(max)
            ),
        ));
    }
    Ok(f)
}

/// What a file that is not a regular file is, for messages.
fn kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Read a whole text file a user named: a regular file of at most `max` bytes, UTF-8.
pub fn read_text(path: &Path, what: &str, max: u64) -> Result<String, InputError> {
    let f = open(path, what, max)?;
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).map_err(|e| InputError::io(path, what, &e))?;
    if buf.len() as u64 > max {
        return Err(InputError::new(path, what, format!("it grew beyond the {} a {what} may have", human(max))));
    }
    String::from_utf8(buf).map_err(|e| {
        InputError::new(path, what, format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()))
    })
}

/// Read lines of at most `max_line` bytes from `r`, each passed to `f` with its 1-based
/// number; stops at the first error (of `f`, of reading, or a line too long). For large
/// line-oriented inputs (traces) that must not be read whole.
pub fn for_each_line<R: std::io::BufRead, E>(
    mut r: R,
    max_line: u64,
    mut f: impl FnMut(usize, &str) -> Result<(), E>,
    err: impl Fn(usize, String) -> E,
) -> Result<(), E> {
    let mut buf = Vec::new();
    let mut n = 0usize;
    loop {
        buf.clear();
        n += 1;
        let got = (&mut r).take(max_line + 1).read_until(b'\n', &mut buf).map_err(|e| err(n, e.to_string()))?;
        if got == 0 {
            return Ok(());
        }
        if buf.last() != Some(&b'\n') && buf.len() as u64 > max_line {
            return Err(err(n, format!("line longer than {}", human(max_line))));
        }
        let text = std::str::from_utf8(&buf).map_err(|e| err(n, format!("not UTF-8 text: {e}")))?;
        f(n, text.trim_end_matches(['\n', '\r']))?;
    }
}

/// Open a file ptb writes (statistics, plan logs, traces, machine files) without following a
/// symbolic link in its last component and only if it is a regular file owned by ptb's own
/// user: a root ptb writing `/tmp/stats.json` must not overwrite what another user planted
/// there (a symlink to a root file, or a file they own and would then read). `append` keeps
/// what is there; otherwise the file is truncated.
pub fn create(path: &Path, what: &str, append: bool) -> Result<std::fs::File, InputError> {
    let out = |e: InputError| InputError { output: true, ..e };
    create_inner(path, what, append).map_err(out)
}

fn create_inner(path: &Path, what: &str, append: bool) -> Result<std::fs::File, InputError> {
    // Look before opening: opening a device has effects of its own (a watchdog arms, a tape
    // rewinds), so one is refused unopened; the check after the open catches a swap.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let ft = meta.file_type();
        if !ft.is_file() && !ft.is_symlink() {
            return Err(InputError::new(path, what, format!("it is {}; give the path of a regular file", kind(&ft))));
        }
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    if append {
        o.append(true);
    }
    let f = o.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            InputError::new(path, what, "it is a symbolic link; give the file itself")
        } else {
            InputError::io(path, what, &e)
        }
    })?;
    let meta = f.metadata().map_err(|e| InputError::io(path, what, &e))?;
    if !meta.file_type().is_file() {
        return Err(InputError::new(
            path,
            what,
            format!("it is {}; give the path of a regular file", kind(&meta.file_type())),
        ));
    }
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(InputError::new(
            path,
            what,
            format!(
                "it belongs to uid {}, not to you (uid {me}); refusing to write a file another user owns",
                meta.uid()
            ),
        ));
    }
    if !append {
        f.set_len(0).map_err(|e| InputError::io(path, what, &e))?;
    }
    Ok(f)
}

/// [`create`] then write all of `text`.
pub fn write_text(path: &Path, what: &str, text: &str) -> Result<(), InputError> {
    use std::io::Write;
    let mut f = create(path, what, false)?;
    f.write_all(text.as_bytes()).map_err(|e| InputError { output: true, ..InputError::io(path, what, &e) })
}

/// A text with `edits` applied, for the parsers' fuzz tests: each edit is (position as a share
/// of the text's length, 0 insert / 1 cut / 2 replace, the bytes). Positions land on character
/// boundaries, so any text stays a valid `String`.
pub fn mutate(text: &str, edits: &[(f64, u8, String)]) -> String {
    let mut t = text.to_string();
    let boundary = |t: &str, mut i: usize| {
        while !t.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    for (at, op, junk) in edits {
        let i = boundary(&t, ((at.clamp(0.0, 1.0) * t.len() as f64) as usize).min(t.len()));
        let j = boundary(&t, (i + junk.len()).min(t.len()));
        match op {
            0 => t.insert_str(i, junk),
            1 => t.replace_range(i..j, ""),
            _ => t.replace_range(i..j, junk),
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutate_inserts_cuts_and_replaces_on_character_boundaries() {
        assert_eq!(mutate("abcd", &[(0.5, 0, "XY".into())]), "abXYcd");
        assert_eq!(mutate("abcd", &[(0.25, 1, "..".into())]), "ad");
        assert_eq!(mutate("abcd", &[(0.0, 2, "zz".into())]), "zzcd");
        // Inside a two-byte character the position moves back to its start.
        assert_eq!(mutate("aéb", &[(0.5, 0, "x".into())]), "axéb");
    }

    #[test]
    fn regular_files_are_read_and_others_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.toml");
        std::fs::write(&p, "name = \"x\"\n").unwrap();
        assert_eq!(read_text(&p, "machine file", 100).unwrap(), "name = \"x\"\n");
        let e = read_text(&p, "machine file", 4).unwrap_err().to_string();
        assert!(e.contains("m.toml") && e.contains("larger than the 4 bytes"), "{e}");
        let e = read_text(d.path(), "machine file", 100).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let e = read_text(Path::new("/dev/zero"), "workload file", 100).unwrap_err().to_string();
        assert!(e.contains("a device") && e.contains("/dev/zero"), "{e}");
        let e = read_text(&d.path().join("none"), "config", 100).unwrap_err();
        assert!(e.is_not_found() && e.to_string().contains("no such file"), "{e}");
        std::fs::write(&p, [0xffu8, 0xfe]).unwrap();
        assert!(read_text(&p, "x", 100).unwrap_err().to_string().contains("UTF-8"));
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&p, "trace", 100).unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
    }

    #[test]
    fn proc_files_are_regular_and_capped_while_reading() {
        let s = read_text(Path::new("/proc/self/status"), "status", cap::SYSFS).unwrap();
        assert!(s.contains("Uid:"));
        let e = read_text(Path::new("/proc/self/status"), "status", 10).unwrap_err().to_string();
        assert!(e.contains("grew beyond"), "{e}");
    }

    /// A planted symlink or another user's file is never written through.
    #[test]
    fn outputs_refuse_symlinks_and_other_users_files() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("precious");
        std::fs::write(&target, "keep").unwrap();
        let link = d.path().join("stats.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_text(&link, "statistics", "x").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let p = d.path().join("out.json");
        write_text(&p, "statistics", "one").unwrap();
        write_text(&p, "statistics", "two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        std::io::Write::write_all(&mut create(&p, "log", true).unwrap(), b"+").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two+");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::lchown(&p, Some(65534), None).unwrap();
            let e = write_text(&p, "statistics", "x").unwrap_err().to_string();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
        // `--out /dev/full` said "cannot read"; a device is refused for writing, unopened.
        for dev in ["/dev/null", "/dev/full"] {
            let e = write_text(Path::new(dev), "statistics", "x").unwrap_err().to_string();
            assert!(e.starts_with("cannot write statistics") && e.contains("it is a device"), "{e}");
        }
        let e = write_text(d.path(), "statistics", "x").unwrap_err().to_string();
        assert!(e.contains("it is a directory"), "{e}");
    }

    #[test]
    fn lines_are_bounded() {
        let text = b"a\nbb\n\nccc";
        let mut seen = vec![];
        for_each_line(
            &text[..],
            3,
            |n, l| -> Result<(), String> {
                seen.push((n, l.to_string()));
                Ok(())
            },
            |n, e| format!("{n}: {e}"),
        )
        .unwrap();
        assert_eq!(seen, vec![(1, "a".into()), (2, "bb".into()), (3, "".into()), (4, "ccc".into())]);
        let e = for_each_line(&b"a\nbbbbbbbb\n"[..], 3, |_, _| Ok(()), |n, e| format!("line {n}: {e}")).unwrap_err();
        assert_eq!(e, "line 2: line longer than 3 bytes");
    }
}
