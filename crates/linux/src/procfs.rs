//! Readers for the /proc and sysfs files the daemon needs, with the filesystem root passed in
//! (`/` in production, a fixture directory in tests).
//!
//! Each file has a pure parser (`parse_*`, text in, typed value out, never panics) and a
//! reader on [`ProcRoot`] that adds the path to any error. Hand-written because the procfs
//! crate does not parse numa_maps and the rest are a few lines each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProcError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: line {line}: {reason}")]
    Parse { path: PathBuf, line: usize, reason: String },
}

impl ProcError {
    /// True when the file vanished (the process or thread exited).
    pub fn is_gone(&self) -> bool {
        matches!(self, ProcError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)))
    }
}

/// A parse failure without a path (the reader adds it).
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

/// One line of /proc/PID/maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    pub shared: bool,
    pub offset: u64,
    pub inode: u64,
    /// Path or pseudo-name (`[heap]`, `[stack]`); empty for anonymous mappings.
    pub path: String,
}

impl Mapping {
    /// Private writable memory without a backing file (heap, anonymous mmap, stack): the
    /// pages worth placing.
    /// Private anonymous data: not shared, not file-backed, not executable, not the vDSO/vvar.
    /// The permission bits may be none at all for a while (a program that protects its own
    /// pages to catch accesses, as a garbage collector or a fault-driven profiler does); such
    /// a mapping counts only while it has resident pages, which the caller checks.
    pub fn is_anon_data(&self) -> bool {
        !self.exec && !self.shared && self.inode == 0 && !self.path.starts_with("[v")
    }
    /// Mapped without any access (`---p`): a guard or a reservation unless pages are resident.
    pub fn no_access(&self) -> bool {
        !self.read && !self.write && !self.exec
    }
}

/// One line of /proc/PID/numa_maps.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NumaMapping {
    pub start: u64,
    /// Memory policy text, e.g. `default`, `interleave:0-3`, `bind:1`.
    pub policy: String,
    /// Resident pages per kernel node id (`N0=12`).
    pub pages: BTreeMap<u32, u64>,
    pub anon: u64,
    pub page_kb: u64,
    pub file: Option<String>,
}

/// What ptb reads from /proc/PID/status.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    pub name: String,
    pub tgid: u32,
    pub ppid: u32,
    /// Real, effective, saved, filesystem uid.
    pub uid: [u32; 4],
    pub cpus_allowed: String,
    pub mems_allowed: String,
    /// `Kthread: 1` (kernels >= 6.x print it), when present.
    pub kthread: Option<bool>,
    /// CapEff bits.
    pub cap_eff: u64,
    /// Threads in the process (`Threads:`).
    pub threads: u32,
    /// Resident memory in KiB (`VmRSS:`; absent for kernel threads and zombies: 0).
    pub vm_rss_kb: u64,
}

/// What ptb reads from /proc/PID/task/TID/stat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskStat {
    pub state: char,
    pub ppid: u32,
    /// Kernel task flags (PF_KTHREAD = 0x00200000).
    pub flags: u64,
    /// CPU it last ran on.
    pub processor: u32,
    /// When the task started, in clock ticks after boot (field 22): with the pid, it names
    /// one task for the life of the machine (a reused pid has a later start time).
    pub starttime: u64,
    /// CPU time used in user and in kernel mode, in clock ticks (fields 14 and 15).
    pub utime: u64,
    pub stime: u64,
}

/// PF_KTHREAD from include/linux/sched.h.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// PF_EXITING from include/linux/sched.h: set by do_exit before the task lets go of its
/// memory, so a process whose main task has it may be tearing its mappings down.
pub const PF_EXITING: u64 = 0x0000_0004;

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// Parse /proc/PID/maps.
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |reason: &str| ParseError { line: i + 1, reason: format!("{reason}: `{line}`") };
        let mut it = line.split_whitespace();
        let range = it.next().ok_or_else(|| err("empty line"))?;
        let (a, b) = range.split_once('-').ok_or_else(|| err("address range without `-`"))?;
        let (start, end) =
            (hex(a).ok_or_else(|| err("bad start address"))?, hex(b).ok_or_else(|| err("bad end address"))?);
        if end < start {
            return Err(err("range ends before it starts"));
        }
        let perms = it.next().ok_or_else(|| err("missing permissions"))?.as_bytes();
        if perms.len() < 4 {
            return Err(err("permissions must have 4 letters"));
        }
        let offset = hex(it.next().ok_or_else(|| err("missing offset"))?).ok_or_else(|| err("bad offset"))?;
        let _dev = it.next().ok_or_else(|| err("missing device"))?;
        let inode = it.next().ok_or_else(|| err("missing inode"))?.parse().map_err(|_| err("bad inode"))?;
        let path = it.collect::<Vec<_>>().join(" ");
        out.push(Mapping {
            start,
            end,
            read: perms[0] == b'r',
            write: perms[1] == b'w',
            exec: perms[2] == b'x',
            shared: perms[3] == b's',
            offset,
            inode,
            path,
        });
    }
    Ok(out)
}

/// Parse /proc/PID/numa_maps.
pub fn parse_numa_maps(text: &str) -> Result<Vec<NumaMapping>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |reason: &str| ParseError { line: i + 1, reason: format!("{reason}: `{line}`") };
        let mut it = line.split_whitespace();
        let start = hex(it.next().ok_or_else(|| err("empty line"))?).ok_or_else(|| err("bad address"))?;
        let policy = it.next().ok_or_else(|| err("missing policy"))?.to_string();
        let mut m = NumaMapping { start, policy, ..Default::default() };
        for tok in it {
            let Some((k, v)) = tok.split_once('=') else { continue };
            let num = || v.parse::<u64>().map_err(|_| err(&format!("`{k}` wants a number")));
            match k {
                "anon" => m.anon = num()?,
                "kernelpagesize_kB" => m.page_kb = num()?,
                "file" => m.file = Some(v.to_string()),
                _ if k.len() > 1 && k.starts_with('N') && k[1..].bytes().all(|b| b.is_ascii_digit()) => {
                    let node: u32 = k[1..].parse().map_err(|_| err("bad node id"))?;
                    m.pages.insert(node, num()?);
                }
                _ => {}
            }
        }
        out.push(m);
    }
    Ok(out)
}

/// Parse /proc/PID/status (the fields ptb needs; others are ignored).
pub fn parse_status(text: &str) -> Result<Status, ParseError> {
    let mut s = Status::default();
    let mut seen_uid = false;
    for (i, line) in text.lines().enumerate() {
        let Some((k, v)) = line.split_once(':') else { continue };
        let v = v.trim();
        let err = |reason: &str| ParseError { line: i + 1, reason: format!("{reason}: `{line}`") };
        match k {
            "Name" => s.name = v.to_string(),
            "Tgid" => s.tgid = v.parse().map_err(|_| err("bad Tgid"))?,
            "PPid" => s.ppid = v.parse().map_err(|_| err("bad PPid"))?,
            "Uid" => {
                let ids: Vec<u32> =
                    v.split_whitespace().map(|x| x.parse().map_err(|_| err("bad Uid"))).collect::<Result<_, _>>()?;
                if ids.len() != 4 {
                    return Err(err("Uid wants 4 numbers"));
                }
                s.uid.copy_from_slice(&ids);
                seen_uid = true;
            }
            "Cpus_allowed_list" => s.cpus_allowed = v.to_string(),
            "Mems_allowed_list" => s.mems_allowed = v.to_string(),
            "Kthread" => s.kthread = Some(v == "1"),
            "CapEff" => s.cap_eff = hex(v).ok_or_else(|| err("bad CapEff"))?,
            "Threads" => s.threads = v.parse().map_err(|_| err("bad Threads"))?,
            "VmRSS" => {
                s.vm_rss_kb = v.trim_end_matches("kB").trim().parse().map_err(|_| err("bad VmRSS"))?;
            }
            _ => {}
        }
    }
    if !seen_uid {
        return Err(ParseError { line: 0, reason: "no `Uid:` line".into() });
    }
    Ok(s)
}

/// Parse /proc/PID/task/TID/stat. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<TaskStat, ParseError> {
    let err = |reason: &str| ParseError { line: 1, reason: reason.to_string() };
    let close = text.rfind(')').ok_or_else(|| err("no `)` after the command name"))?;
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    if f.len() < 37 {
        return Err(err(&format!("{} fields after the name, expected at least 37", f.len())));
    }
    let num = |i: usize, name: &str| f[i].parse::<u64>().map_err(|_| err(&format!("bad {name} `{}`", f[i])));
    Ok(TaskStat {
        state: f[0].chars().next().unwrap_or('?'),
        ppid: num(1, "ppid")? as u32,
        flags: num(6, "flags")?,
        processor: num(36, "processor")? as u32,
        starttime: num(19, "starttime")?,
        utime: num(11, "utime")?,
        stime: num(12, "stime")?,
    })
}

/// The cgroup v2 path of a process from /proc/PID/cgroup (the `0::/path` line), or else the
/// path of the first v1 hierarchy line (`N:controllers:/path`).
pub fn parse_cgroup(text: &str) -> Result<String, ParseError> {
    let mut first = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (it.next(), it.next(), it.next()) else {
            return Err(ParseError { line: i + 1, reason: format!("expected ID:CONTROLLERS:PATH: `{line}`") });
        };
        if id.parse::<u32>().is_err() {
            return Err(ParseError { line: i + 1, reason: format!("bad hierarchy id: `{line}`") });
        }
        if id == "0" && ctrl.is_empty() {
            return Ok(path.to_string());
        }
        first.get_or_insert_with(|| path.to_string());
    }
    first.ok_or(ParseError { line: 0, reason: "no cgroup line".into() })
}

/// The program name of a process from /proc/PID/cmdline: the file name of its first argument
/// (empty for kernel threads and zombies).
pub fn parse_cmdline_name(raw: &[u8]) -> String {
    let argv0 = raw.split(|b| *b == 0).next().unwrap_or_default();
    let name = argv0.rsplit(|b| *b == b'/').next().unwrap_or_default();
    String::from_utf8_lossy(name).into_owned()
}

/// Free bytes from a node's sysfs meminfo (`Node 0 MemFree:  123 kB`).
pub fn parse_node_memfree(text: &str) -> Result<u64, ParseError> {
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let (_node, _id, key, val) = (it.next(), it.next(), it.next(), it.next());
        if key == Some("MemFree:") {
            let kb: u64 = val
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| ParseError { line: i + 1, reason: format!("bad MemFree value: `{line}`") })?;
            return Ok(kb.saturating_mul(1024));
        }
    }
    Err(ParseError { line: 0, reason: "no `MemFree:` line".into() })
}

/// Most bytes read from one /proc or /sys file (maps of a process at the kernel's default
/// 65,530 mappings is about 7 MB).
pub const READ_CAP: u64 = 64 << 20;

/// The /proc and /sys of one machine.
#[derive(Clone, Debug)]
pub struct ProcRoot {
    root: PathBuf,
}

impl ProcRoot {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProcRoot { root: root.into() }
    }
    /// This machine.
    pub fn live() -> Self {
        ProcRoot::new("/")
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }
    /// Read a whole file, at most [`READ_CAP`] bytes (a root reading /proc of a hostile
    /// process, or a fixture tree, never reads without bound).
    fn read(&self, rel: &str) -> Result<(PathBuf, String), ProcError> {
        let path = self.path(rel);
        let mut raw = Vec::new();
        let r = std::fs::File::open(&path)
            .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, READ_CAP + 1), &mut raw));
        match r {
            Ok(_) if raw.len() as u64 > READ_CAP => {
                Err(ProcError::Parse { path, line: 0, reason: format!("longer than {READ_CAP} bytes") })
            }
            Ok(_) => Ok((path, String::from_utf8_lossy(&raw).into_owned())),
            Err(source) => Err(ProcError::Io { path, source }),
        }
    }
    fn parsed<T>(&self, rel: &str, f: impl Fn(&str) -> Result<T, ParseError>) -> Result<T, ProcError> {
        let (path, text) = self.read(rel)?;
        f(&text).map_err(|e| ProcError::Parse { path, line: e.line, reason: e.reason })
    }

    /// Thread ids of a process, ascending.
    pub fn tasks(&self, pid: u32) -> Result<Vec<u32>, ProcError> {
        let path = self.path(&format!("proc/{pid}/task"));
        let rd = std::fs::read_dir(&path).map_err(|source| ProcError::Io { path: path.clone(), source })?;
        let mut v: Vec<u32> = rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        v.sort_unstable();
        Ok(v)
    }
    pub fn maps(&self, pid: u32) -> Result<Vec<Mapping>, ProcError> {
        self.parsed(&format!("proc/{pid}/maps"), parse_maps)
    }
    pub fn numa_maps(&self, pid: u32) -> Result<Vec<NumaMapping>, ProcError> {
        self.parsed(&format!("proc/{pid}/numa_maps"), parse_numa_maps)
    }
    pub fn status(&self, pid: u32) -> Result<Status, ProcError> {
        self.parsed(&format!("proc/{pid}/status"), parse_status)
    }
    pub fn task_stat(&self, pid: u32, tid: u32) -> Result<TaskStat, ProcError> {
        self.parsed(&format!("proc/{pid}/task/{tid}/stat"), parse_stat)
    }
    /// Free bytes of a node (kernel id), from /sys/devices/system/node/nodeN/meminfo.
    pub fn node_free_bytes(&self, node: u32) -> Result<u64, ProcError> {
        self.parsed(&format!("sys/devices/system/node/node{node}/meminfo"), parse_node_memfree)
    }
    /// The cgroup path of a process (see [`parse_cgroup`]).
    pub fn cgroup(&self, pid: u32) -> Result<String, ProcError> {
        self.parsed(&format!("proc/{pid}/cgroup"), parse_cgroup)
    }
    /// The command name of a process (`/proc/PID/comm`, at most 15 bytes).
    pub fn comm(&self, pid: u32) -> Result<String, ProcError> {
        self.read_line(&format!("proc/{pid}/comm"))
    }
    /// The program name from /proc/PID/cmdline (see [`parse_cmdline_name`]).
    pub fn cmdline_name(&self, pid: u32) -> Result<String, ProcError> {
        let path = self.path(&format!("proc/{pid}/cmdline"));
        let f = std::fs::File::open(&path).map_err(|source| ProcError::Io { path: path.clone(), source })?;
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, 64 << 10), &mut raw)
            .map_err(|source| ProcError::Io { path, source })?;
        Ok(parse_cmdline_name(&raw))
    }
    /// Process ids under /proc, ascending.
    pub fn pids(&self) -> Result<Vec<u32>, ProcError> {
        let path = self.path("proc");
        let rd = std::fs::read_dir(&path).map_err(|source| ProcError::Io { path: path.clone(), source })?;
        let mut v: Vec<u32> = rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        v.sort_unstable();
        Ok(v)
    }
    /// A one-line text file such as /proc/sys/kernel/numa_balancing, trimmed.
    pub fn read_line(&self, rel: &str) -> Result<String, ProcError> {
        Ok(self.read(rel)?.1.trim().to_string())
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAPS: &str = include_str!("../tests/fixtures/maps.txt");
    const NUMA_MAPS: &str = include_str!("../tests/fixtures/numa_maps.txt");
    const STATUS: &str = include_str!("../tests/fixtures/status.txt");
    const STAT: &str = include_str!("../tests/fixtures/stat.txt");
    const MEMINFO: &str = include_str!("../tests/fixtures/node0_meminfo.txt");

    #[test]
    fn protected_anonymous_memory_is_data_and_code_is_not() {
        let m =
            parse_maps("7f00000000-7f00001000 ---p 00000000 00:00 0 \n7f00001000-7f00002000 r-xp 00000000 00:00 0 \n")
                .unwrap();
        assert!(m[0].is_anon_data() && m[0].no_access());
        assert!(!m[1].is_anon_data() && !m[1].no_access());
    }

    #[test]
    fn parses_captured_maps() {
        let m = parse_maps(MAPS).unwrap();
        assert_eq!(m.len(), 8);
        let heap = m.iter().find(|x| x.path == "[heap]").unwrap();
        assert!(heap.is_anon_data());
        assert_eq!(heap.start, 0x5581_2a3c_9000);
        let exe = &m[0];
        assert!(exe.read && !exe.write && exe.path.ends_with("/cat"));
        assert!(!exe.is_anon_data());
        assert!(m.iter().filter(|x| x.path.is_empty()).all(|x| x.is_anon_data()));
    }

    #[test]
    fn parses_captured_numa_maps() {
        let m = parse_numa_maps(NUMA_MAPS).unwrap();
        assert_eq!(m.len(), 5);
        let il = m.iter().find(|x| x.policy.starts_with("interleave")).unwrap();
        assert_eq!(il.pages.get(&0), Some(&256));
        assert_eq!(il.pages.get(&3), Some(&256));
        assert_eq!(il.anon, 1024);
        assert_eq!(il.page_kb, 4);
        assert!(m[0].file.as_deref().unwrap().ends_with("/cat"));
    }

    #[test]
    fn parses_captured_status_stat_and_meminfo() {
        let s = parse_status(STATUS).unwrap();
        assert_eq!(s.name, "cat");
        assert_eq!(s.tgid, 4242);
        assert_eq!(s.ppid, 100);
        assert_eq!(s.uid, [1000, 1000, 1000, 1000]);
        assert_eq!(s.cpus_allowed, "0-1");
        assert_eq!(s.kthread, Some(false));
        let st = parse_stat(STAT).unwrap();
        assert_eq!(st.state, 'R');
        assert_eq!(st.processor, 1);
        assert_eq!(st.starttime, 4461);
        assert_eq!((st.utime, st.stime), (0, 0));
        let busy = STAT.replacen("98 0 0 0 0 0 0 0 20", "98 0 0 0 37 5 0 0 20", 1);
        let st = parse_stat(&busy).unwrap();
        assert_eq!((st.utime, st.stime), (37, 5));
        assert_eq!(st.flags & PF_KTHREAD, 0);
        assert_eq!(parse_node_memfree(MEMINFO).unwrap(), 1_538_252 * 1024);
    }

    #[test]
    fn cgroup_comm_and_cmdline() {
        assert_eq!(parse_cgroup("0::/user.slice/a.scope\n").unwrap(), "/user.slice/a.scope");
        assert_eq!(parse_cgroup("12:cpu,cpuacct:/db\n1:name=systemd:/x\n").unwrap(), "/db");
        assert!(parse_cgroup("junk\n").is_err());
        assert_eq!(parse_cmdline_name(b"/usr/bin/postgres\0-D\0/data\0"), "postgres");
        assert_eq!(parse_cmdline_name(b""), "");
        let s = parse_status(STATUS).unwrap();
        assert!(s.threads >= 1 && s.vm_rss_kb > 0, "{s:?}");
        let r = ProcRoot::live();
        let me = std::process::id();
        assert!(r.pids().unwrap().contains(&me));
        assert!(!r.comm(me).unwrap().is_empty());
        assert!(!r.cmdline_name(me).unwrap().is_empty());
        assert!(r.cgroup(me).unwrap().starts_with('/'));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_maps("zzzz-1 r--p 0 0:0 0\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(parse_status("Name: x\n").is_err());
        assert!(parse_stat("1 (a) R").is_err());
        let e = parse_numa_maps("7f00 default N0=x\n").unwrap_err();
        assert!(e.reason.contains("N0"), "{e:?}");
    }

    #[test]
    fn reads_a_fake_proc_tree() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("proc/4242/task/4243");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::create_dir_all(d.path().join("proc/4242/task/4242")).unwrap();
        std::fs::write(d.path().join("proc/4242/status"), STATUS).unwrap();
        std::fs::write(p.join("stat"), STAT).unwrap();
        let r = ProcRoot::new(d.path());
        assert_eq!(r.tasks(4242).unwrap(), vec![4242, 4243]);
        assert_eq!(r.status(4242).unwrap().tgid, 4242);
        assert_eq!(r.task_stat(4242, 4243).unwrap().processor, 1);
        let e = r.maps(4242).unwrap_err();
        assert!(e.is_gone() && e.to_string().contains("4242/maps"), "{e}");
    }

    #[test]
    fn reads_this_process() {
        let r = ProcRoot::live();
        let me = std::process::id();
        assert!(r.tasks(me).unwrap().contains(&me));
        assert!(r.maps(me).unwrap().iter().any(|m| m.is_anon_data()));
        assert!(!r.numa_maps(me).unwrap().is_empty());
        assert_eq!(r.status(me).unwrap().tgid, me);
        assert!(r.node_free_bytes(0).unwrap() > 0);
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,300}") {
            let _ = parse_maps(&s);
            let _ = parse_numa_maps(&s);
            let _ = parse_status(&s);
            let _ = parse_stat(&s);
            let _ = parse_node_memfree(&s);
            let _ = parse_cgroup(&s);
            let _ = parse_cmdline_name(s.as_bytes());
        }

        /// Fuzz target of the /proc parsers: captured files with bytes cut, doubled or
        /// replaced parse or fail with a line number, never panic.
        #[test]
        fn mutated_captures_never_panic(
            which in 0usize..6,
            edits in proptest::collection::vec((0.0f64..1.0, 0u8..3, "[0-9a-zA-Z :()\t\n=-]{0,6}"), 1..6),
        ) {
            let cg = "0::/system.slice/postgresql.service\n";
            let t = ptb_topology::input::mutate([MAPS, NUMA_MAPS, STATUS, STAT, MEMINFO, cg][which], &edits);
            let r = match which {
                0 => parse_maps(&t).map(|_| ()),
                1 => parse_numa_maps(&t).map(|_| ()),
                2 => parse_status(&t).map(|_| ()),
                3 => parse_stat(&t).map(|_| ()),
                4 => parse_node_memfree(&t).map(|_| ()),
                _ => parse_cgroup(&t).map(|_| ()),
            };
            if let Err(e) = r {
                prop_assert!(e.line <= t.lines().count() + 1, "{e:?}");
            }
        }

        #[test]
        fn maps_lines_round_trip(start in 0u64..1 << 47, len in 1u64..1 << 30, w in any::<bool>(), inode in 0u64..1000) {
            let line = format!("{:x}-{:x} r{}-p 00000000 00:00 {} /x y\n", start, start + len, if w { 'w' } else { '-' }, inode);
            let m = parse_maps(&line).unwrap();
            prop_assert_eq!(m.len(), 1);
            prop_assert_eq!(m[0].start, start);
            prop_assert_eq!(m[0].end, start + len);
            prop_assert_eq!(m[0].write, w);
            prop_assert_eq!(&m[0].path, "/x y");
        }

        #[test]
        fn numa_maps_node_counts_round_trip(counts in proptest::collection::btree_map(0u32..64, 1u64..1 << 30, 0..8)) {
            let nodes: Vec<String> = counts.iter().map(|(n, c)| format!("N{n}={c}")).collect();
            let line = format!("7f0000000000 default anon=1 dirty=1 {} kernelpagesize_kB=4\n", nodes.join(" "));
            let m = parse_numa_maps(&line).unwrap();
            prop_assert_eq!(&m[0].pages, &counts);
        }
    }
}
