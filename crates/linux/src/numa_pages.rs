//! Pages per NUMA node of a whole process, from `/proc/PID/numa_maps`, read with a size cap.
//!
//! Problem: `ptb compare --real` reports where a program's memory is at the end of each run.
//! numa_maps is the only per-node count of every mapping, but the file of a hostile or huge
//! process can be any size and hold any text, and one odd line must not lose the others.
//! Approach: read at most [`MAX_BYTES`] (cut at the last whole line and flagged as truncated),
//! then sum the `N<node>=<pages>` fields line by line, scaled by the line's
//! `kernelpagesize_kB` to base pages, with saturating arithmetic. A line that does not parse
//! is counted in `skipped_lines` and left out; nothing panics and nothing is fatal.

use crate::procfs::{ProcError, ProcRoot};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Read;

/// The most bytes of one numa_maps file read (16 MiB: about 100,000 mappings).
pub const MAX_BYTES: u64 = 16 << 20;

/// Highest node id accepted (the kernel's MAX_NUMNODES is at most 1024).
pub const MAX_NODE_ID: u32 = 4095;

/// Resident pages per node of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodePages {
    /// Resident base pages per kernel node id (every mapping: anonymous, file, huge pages).
    pub pages: BTreeMap<u32, u64>,
    /// Of those, the pages of mappings without a file (heap, stacks, anonymous mmap: the
    /// program's own data, which placement moves).
    pub anon: BTreeMap<u32, u64>,
    /// Lines counted.
    pub mappings: usize,
    /// Lines left out because they did not parse.
    pub skipped_lines: usize,
    /// The file was longer than the cap; the counts cover its first part only.
    pub truncated: bool,
}

impl NodePages {
    /// All resident base pages.
    pub fn total(&self) -> u64 {
        self.pages.values().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// Sum the per-node page counts of numa_maps text; `page_size` is the base page size in bytes.
pub fn summarise(text: &str, page_size: u64) -> NodePages {
    let mut out = NodePages::default();
    let page_size = page_size.max(1);
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, page_size) {
            Some((nodes, file)) => {
                out.mappings += 1;
                for (n, c) in nodes {
                    let e = out.pages.entry(n).or_default();
                    *e = e.saturating_add(c);
                    if !file {
                        let a = out.anon.entry(n).or_default();
                        *a = a.saturating_add(c);
                    }
                }
            }
            None => out.skipped_lines += 1,
        }
    }
    out
}

/// One line: `<hex address> <policy> key=value...`; returns (node, base pages) pairs and
/// whether the mapping has a file.
fn parse_line(line: &str, page_size: u64) -> Option<(Vec<(u32, u64)>, bool)> {
    let mut it = line.split_whitespace();
    u64::from_str_radix(it.next()?, 16).ok()?;
    it.next()?; // memory policy
    let mut nodes = Vec::new();
    let mut kb: u64 = 0;
    let mut file = false;
    for tok in it {
        let Some((k, v)) = tok.split_once('=') else { continue };
        if k == "file" {
            file = true;
        } else if k == "kernelpagesize_kB" {
            kb = v.parse().ok()?;
        } else if let Some(id) = k.strip_prefix('N').filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        {
            let id: u32 = id.parse().ok().filter(|n| *n <= MAX_NODE_ID)?;
            nodes.push((id, v.parse::<u64>().ok()?));
        }
    }
    // Pages are counted in the mapping's own page size (4 KiB, or 2 MiB / 1 GiB for huge pages).
    let mult = if kb == 0 { 1 } else { (kb.saturating_mul(1024) / page_size).max(1) };
    Some((nodes.into_iter().map(|(n, c)| (n, c.saturating_mul(mult))).collect(), file))
}

/// Read at most `cap` bytes of `r`; cut at the last newline when longer (and say so).
pub fn read_capped(r: impl Read, cap: u64) -> std::io::Result<(String, bool)> {
    let mut bytes = Vec::new();
    r.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    let truncated = bytes.len() as u64 > cap;
    if truncated {
        bytes.truncate(cap as usize);
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(keep);
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), truncated))
}

/// Pages per node of process `pid` now.
pub fn read(root: &ProcRoot, pid: u32, page_size: u64) -> Result<NodePages, ProcError> {
    let path = root.path(&format!("proc/{pid}/numa_maps"));
    let io = |source| ProcError::Io { path: path.clone(), source };
    let f = std::fs::File::open(&path).map_err(io)?;
    let (text, truncated) = read_capped(f, MAX_BYTES).map_err(io)?;
    let mut s = summarise(&text, page_size);
    s.truncated = truncated;
    Ok(s)
}

/// Pages per node of process `pid` while it is alive: `None` when nothing is resident, or
/// when the process was exiting around the read. A read while a program exits sees its mappings
/// half torn down (measured in the VM: 40 pages of a 2048-page buffer); do_exit sets
/// PF_EXITING before it lets go of the memory, so a read that overlapped the teardown is
/// followed by a stat of the main task that shows it (or the task is gone, or a zombie).
pub fn read_live(root: &ProcRoot, pid: u32, page_size: u64) -> Option<NodePages> {
    let p = read(root, pid, page_size).ok()?;
    let st = root.task_stat(pid, pid).ok()?;
    let exiting = st.flags & crate::procfs::PF_EXITING != 0 || matches!(st.state, 'Z' | 'X');
    (p.total() > 0 && !exiting).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_while_the_program_exits_is_not_its_pages() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("proc/7/task/7");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            d.path().join("proc/7/numa_maps"),
            "7f0000000000 default anon=3 N0=2 N1=1 kernelpagesize_kB=4\n",
        )
        .unwrap();
        let stat = |flags: u64| {
            format!("7 (app) S 1 7 7 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n")
        };
        let root = ProcRoot::new(d.path());
        std::fs::write(dir.join("stat"), stat(0x0040_0040)).unwrap();
        assert_eq!(read_live(&root, 7, 4096).map(|p| p.total()), Some(3));
        std::fs::write(dir.join("stat"), stat(0x0040_0044)).unwrap();
        assert_eq!(read_live(&root, 7, 4096), None, "PF_EXITING");
        std::fs::remove_file(dir.join("stat")).unwrap();
        assert_eq!(read_live(&root, 7, 4096), None, "gone");
    }
    use proptest::prelude::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/numa_maps.txt");

    #[test]
    fn sums_the_captured_file() {
        let s = summarise(FIXTURE, 4096);
        assert_eq!(s.mappings, 5);
        assert_eq!(s.skipped_lines, 0);
        // Every N field of the fixture, summed per node.
        let mut want: BTreeMap<u32, u64> = BTreeMap::new();
        for tok in FIXTURE.split_whitespace() {
            if let Some((k, v)) = tok.split_once('=') {
                if let Some(id) = k.strip_prefix('N') {
                    *want.entry(id.parse().unwrap()).or_default() += v.parse::<u64>().unwrap();
                }
            }
        }
        assert_eq!(s.pages, want);
        assert!(s.total() > 0);
        // Without the two file mappings: heap and interleaved anon on N0, stack on N1.
        let anon: BTreeMap<u32, u64> = [(0, 259), (1, 265), (2, 256), (3, 256)].into_iter().collect();
        assert_eq!(s.anon, anon);
    }

    #[test]
    fn huge_pages_count_as_base_pages_and_bad_lines_are_skipped() {
        let text = "7f0000000000 default anon=2 N1=2 kernelpagesize_kB=2048\n\
                    zzzz default N0=1\n\
                    7f0000400000 bind:0 N0=x kernelpagesize_kB=4\n\
                    7f0000800000 default N0=3 N99999=1 kernelpagesize_kB=4\n\
                    7f0000c00000 default N0=5 kernelpagesize_kB=4\n";
        let s = summarise(text, 4096);
        assert_eq!(s.pages.get(&1), Some(&1024));
        assert_eq!(s.pages.get(&0), Some(&5));
        assert_eq!((s.mappings, s.skipped_lines), (2, 3));
    }

    #[test]
    fn the_cap_cuts_at_a_whole_line() {
        let text = "7f00 default N0=1\n7f01 default N0=2\n7f02 default N0=4\n";
        let (t, cut) = read_capped(text.as_bytes(), 30).unwrap();
        assert!(cut);
        assert_eq!(t, "7f00 default N0=1\n");
        let (t, cut) = read_capped(text.as_bytes(), 1000).unwrap();
        assert!(!cut && t == text);
    }

    #[test]
    fn reads_this_process() {
        let s = read(&ProcRoot::live(), std::process::id(), 4096).unwrap();
        assert!(s.total() > 0 && s.mappings > 0 && !s.truncated);
    }

    fn line() -> impl Strategy<Value = (String, Vec<(u32, u64)>, u64)> {
        (
            0u64..1 << 47,
            proptest::collection::btree_map(0u32..64, 0u64..1 << 20, 0..5),
            prop_oneof![Just(4u64), Just(2048u64)],
        )
            .prop_map(|(addr, nodes, kb)| {
                let ns: Vec<String> = nodes.iter().map(|(n, c)| format!("N{n}={c}")).collect();
                let l = format!("{addr:x} default anon=1 dirty=1 {} kernelpagesize_kB={kb}\n", ns.join(" "));
                (l, nodes.into_iter().collect(), kb)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn valid_files_sum_exactly(lines in proptest::collection::vec(line(), 0..12)) {
            let text: String = lines.iter().map(|l| l.0.clone()).collect();
            let mut want: BTreeMap<u32, u64> = BTreeMap::new();
            for (_, nodes, kb) in &lines {
                for (n, c) in nodes {
                    *want.entry(*n).or_default() += c * (kb * 1024 / 4096);
                }
            }
            let s = summarise(&text, 4096);
            prop_assert_eq!(&s.anon, &want);
            prop_assert_eq!(s.pages, want);
            prop_assert_eq!(s.mappings, lines.len());
            prop_assert_eq!(s.skipped_lines, 0);
        }

        #[test]
        fn mutated_files_never_panic(lines in proptest::collection::vec(line(), 1..6), at in 0usize..400,
                                     junk in "[ -~\n]{0,16}", cap in 1u64..600) {
            let mut text: String = lines.iter().map(|l| l.0.clone()).collect();
            let at = at.min(text.len());
            if text.is_char_boundary(at) {
                text.insert_str(at, &junk);
            }
            let s = summarise(&text, 4096);
            prop_assert!(s.mappings + s.skipped_lines <= text.lines().count());
            let (t, cut) = read_capped(text.as_bytes(), cap).unwrap();
            prop_assert!(t.len() as u64 <= cap);
            prop_assert_eq!(cut, text.len() as u64 > cap);
            let _ = summarise(&t, 1);
        }

        #[test]
        fn any_text_never_panics(text in "\\PC{0,300}", ps in 0u64..100_000) {
            let _ = summarise(&text, ps);
        }
    }
}
