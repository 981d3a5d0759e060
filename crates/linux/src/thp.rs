//! What the kernel says about huge pages: `/proc/PID/smaps` (per mapping: `AnonHugePages`,
//! `FilePmdMapped`, `ShmemPmdMapped`, `KernelPageSize`, `THPeligible`), the `thp_migration_*`
//! counters of `/proc/vmstat`, the huge-page lines of `/proc/meminfo`, the transparent huge
//! page size (`/sys/kernel/mm/transparent_hugepage/hpage_pmd_size`), and the binary entries
//! of `/proc/PID/pagemap` and `/proc/kpageflags` (Documentation/admin-guide/mm/pagemap.rst).
//!
//! Problem: ptb runs as root and reads these files of processes it does not own: a file can be
//! huge (a process with 65,000 mappings has a smaps of tens of MB), hold names that are not
//! UTF-8 (a mapped file's path), or, for a fixture or a hostile tree, anything at all.
//!
//! Approach: every text file goes through a reader with a size cap and lossy UTF-8, then a
//! pure parser (text in, typed value out) that checks every field it uses, never panics and
//! names the line of any error; unknown keys are ignored, as the kernel adds fields. Binary
//! entries are decoded from fixed-size words ([`PagemapEntry`], [`KPF_THP`], ...).

use crate::procfs::{ParseError, ProcError, ProcRoot};
use std::io::Read;

/// smaps of a process with the kernel's default limit of 65,530 mappings is ~60 MB.
pub const SMAPS_MAX_BYTES: u64 = 128 << 20;
/// /proc/vmstat and /proc/meminfo are a few KB.
pub const SMALL_MAX_BYTES: u64 = 1 << 20;

/// One mapping of /proc/PID/smaps, with the huge-page fields ptb uses (sizes in KiB).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmapsVma {
    pub start: u64,
    pub end: u64,
    /// `KernelPageSize`: 4 for base pages, 2048 or 1048576 for hugetlbfs mappings.
    pub kernel_page_kb: u64,
    pub rss_kb: u64,
    /// `AnonHugePages`: anonymous memory mapped by PMD-level transparent huge pages.
    pub anon_huge_kb: u64,
    /// `FilePmdMapped` and `ShmemPmdMapped`: file and shmem memory mapped by huge pages.
    pub file_pmd_kb: u64,
    pub shmem_pmd_kb: u64,
    /// `THPeligible` (Linux >= 5.0): whether the mapping may get transparent huge pages.
    pub thp_eligible: Option<bool>,
}

impl SmapsVma {
    /// KiB mapped by PMD-level huge pages now.
    pub fn pmd_mapped_kb(&self) -> u64 {
        self.anon_huge_kb.saturating_add(self.file_pmd_kb).saturating_add(self.shmem_pmd_kb)
    }
    /// The mapping may hold transparent huge pages: it holds some now, or the kernel says it
    /// is eligible (it then may hold some mapped by 4 KiB entries, which smaps does not count).
    pub fn may_have_thp(&self) -> bool {
        self.pmd_mapped_kb() > 0 || self.thp_eligible.unwrap_or(true)
    }
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// A `start-end` header token of smaps/maps.
fn range_token(tok: &str) -> Option<(u64, u64)> {
    let (a, b) = tok.split_once('-')?;
    Some((hex(a)?, hex(b)?))
}

/// Parse /proc/PID/smaps (the fields ptb uses; every other line is skipped).
pub fn parse_smaps(text: &str) -> Result<Vec<SmapsVma>, ParseError> {
    let mut out: Vec<SmapsVma> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |reason: &str| ParseError { line: i + 1, reason: format!("{reason}: `{}`", clip(line)) };
        let mut it = line.split_whitespace();
        let Some(first) = it.next() else { continue };
        if let Some((start, end)) = range_token(first) {
            if end < start {
                return Err(err("range ends before it starts"));
            }
            // A read racing the process's mmap/mprotect: the kernel resumes each read() at the
            // mapping that holds the last end it printed, which may have grown or merged since,
            // so a mapping can overlap (or start before) ones already printed. The later line is
            // the newer state: it replaces what it overlaps, so mappings stay sorted and disjoint.
            while out.last().is_some_and(|prev| prev.start >= start) {
                out.pop();
            }
            if let Some(prev) = out.last_mut().filter(|p| p.end > start) {
                prev.end = start;
                let kb = (prev.end - prev.start) / 1024;
                for f in [&mut prev.rss_kb, &mut prev.anon_huge_kb, &mut prev.file_pmd_kb, &mut prev.shmem_pmd_kb] {
                    *f = (*f).min(kb);
                }
            }
            out.push(SmapsVma { start, end, kernel_page_kb: 4, ..Default::default() });
            continue;
        }
        let Some(key) = first.strip_suffix(':') else { continue };
        if !matches!(
            key,
            "KernelPageSize" | "Rss" | "AnonHugePages" | "FilePmdMapped" | "ShmemPmdMapped" | "THPeligible"
        ) {
            continue;
        }
        let v: u64 = it.next().and_then(|v| v.parse().ok()).ok_or_else(|| err(&format!("`{key}` wants a number")))?;
        let Some(vma) = out.last_mut() else { return Err(err("a field before any mapping")) };
        let size_kb = vma.end.saturating_sub(vma.start) / 1024;
        match key {
            "KernelPageSize" => {
                // The largest hugetlb pages are 16 GiB (POWER).
                if v < 4 || !v.is_power_of_two() || v > 16 << 20 {
                    return Err(err("KernelPageSize must be a power of two from 4 kB to 16 GiB"));
                }
                vma.kernel_page_kb = v;
            }
            "THPeligible" => {
                if v > 1 {
                    return Err(err("THPeligible must be 0 or 1"));
                }
                vma.thp_eligible = Some(v == 1);
            }
            _ if v > size_kb => return Err(err(&format!("`{key}` exceeds the mapping's {size_kb} kB"))),
            "Rss" => vma.rss_kb = v,
            "AnonHugePages" => vma.anon_huge_kb = v,
            "FilePmdMapped" => vma.file_pmd_kb = v,
            _ => vma.shmem_pmd_kb = v,
        }
    }
    Ok(out)
}

/// A line cut for an error message (a hostile line may be megabytes).
fn clip(line: &str) -> String {
    line.chars().take(120).collect()
}

/// The `thp_migration_*` counters of /proc/vmstat (None: the kernel does not count it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThpCounters {
    /// Huge pages migrated whole.
    pub migration_success: Option<u64>,
    /// Huge pages that could not be migrated.
    pub migration_fail: Option<u64>,
    /// Huge pages split to be migrated as base pages.
    pub migration_split: Option<u64>,
}

impl ThpCounters {
    /// `self - before`, per counter known in both (a counter that went back gives 0).
    pub fn since(&self, before: &ThpCounters) -> ThpCounters {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        ThpCounters {
            migration_success: d(self.migration_success, before.migration_success),
            migration_fail: d(self.migration_fail, before.migration_fail),
            migration_split: d(self.migration_split, before.migration_split),
        }
    }
}

/// Parse the `thp_migration_*` lines of /proc/vmstat.
pub fn parse_vmstat_thp(text: &str) -> Result<ThpCounters, ParseError> {
    let mut c = ThpCounters::default();
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let (Some(k), v) = (it.next(), it.next()) else { continue };
        let slot = match k {
            "thp_migration_success" => &mut c.migration_success,
            "thp_migration_fail" => &mut c.migration_fail,
            "thp_migration_split" => &mut c.migration_split,
            _ => continue,
        };
        let n = v
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| ParseError { line: i + 1, reason: format!("`{k}` wants a number: `{}`", clip(line)) })?;
        *slot = Some(n);
    }
    Ok(c)
}

/// True when /proc/meminfo shows any huge page in use (`AnonHugePages`, `ShmemPmdMapped`,
/// `FilePmdMapped` or `HugePages_Total` above 0).
pub fn parse_meminfo_has_huge(text: &str) -> Result<bool, ParseError> {
    for (i, line) in text.lines().enumerate() {
        let Some((k, v)) = line.split_once(':') else { continue };
        if !matches!(k, "AnonHugePages" | "ShmemPmdMapped" | "FilePmdMapped" | "HugePages_Total") {
            continue;
        }
        let n: u64 = v
            .split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| ParseError { line: i + 1, reason: format!("`{k}` wants a number: `{}`", clip(line)) })?;
        if n > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `MemAvailable` of /proc/meminfo in bytes (its `kB` figure x 1024); `None` where the line is
/// missing (kernels before 3.14).
pub fn parse_meminfo_available(text: &str) -> Result<Option<u64>, ParseError> {
    for (i, line) in text.lines().enumerate() {
        let Some(("MemAvailable", v)) = line.split_once(':') else { continue };
        let mut words = v.split_whitespace();
        let err = || ParseError { line: i + 1, reason: format!("`MemAvailable` wants `N kB`: `{}`", clip(line)) };
        let n: u64 = words.next().and_then(|x| x.parse().ok()).ok_or_else(err)?;
        if !matches!(words.next(), Some("kB")) || words.next().is_some() {
            return Err(err());
        }
        return n.checked_mul(1024).map(Some).ok_or_else(err);
    }
    Ok(None)
}

/// Memory available for new allocations without swapping, in bytes (/proc/meminfo's
/// `MemAvailable`); `None` where the file cannot be read or has no such line.
pub fn mem_available(root: &ProcRoot) -> Result<Option<u64>, ProcError> {
    parsed(root, "proc/meminfo", SMALL_MAX_BYTES, parse_meminfo_available)
}

/// Parse `hpage_pmd_size` (bytes): a power of two above `page_size`, at most 1 GiB.
pub fn parse_pmd_size(text: &str, page_size: u64) -> Result<u64, ParseError> {
    let err = |r: &str| ParseError { line: 1, reason: format!("{r}: `{}`", clip(text.trim())) };
    let v: u64 = text.trim().parse().map_err(|_| err("not a number"))?;
    if !v.is_power_of_two() || v <= page_size || v > 1 << 30 {
        return Err(err(&format!("want a power of two above the {page_size}-byte page, at most 1 GiB")));
    }
    Ok(v)
}

/// One 64-bit /proc/PID/pagemap entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagemapEntry(pub u64);

impl PagemapEntry {
    pub fn present(self) -> bool {
        self.0 >> 63 & 1 == 1
    }
    /// Page frame number (bits 0-54), when present; 0 without CAP_SYS_ADMIN.
    pub fn pfn(self) -> Option<u64> {
        (self.present() && self.0 >> 62 & 1 == 0).then_some(self.0 & ((1 << 55) - 1))
    }
}

/// /proc/kpageflags bits (include/uapi/linux/kernel-page-flags.h).
pub const KPF_COMPOUND_HEAD: u64 = 1 << 15;
pub const KPF_COMPOUND_TAIL: u64 = 1 << 16;
/// A hugetlbfs page.
pub const KPF_HUGE: u64 = 1 << 17;
/// A page of a transparent huge page.
pub const KPF_THP: u64 = 1 << 22;

/// Read a text file of at most `cap` bytes; bytes that are not UTF-8 become U+FFFD.
pub fn read_capped(root: &ProcRoot, rel: &str, cap: u64) -> Result<String, ProcError> {
    let path = root.path(rel);
    let io = |source| ProcError::Io { path: path.clone(), source };
    let f = std::fs::File::open(&path).map_err(io)?;
    let mut buf = Vec::new();
    f.take(cap + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > cap {
        return Err(ProcError::Parse { path: path.clone(), line: 0, reason: format!("larger than {cap} bytes") });
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn parsed<T>(root: &ProcRoot, rel: &str, cap: u64, f: impl Fn(&str) -> Result<T, ParseError>) -> Result<T, ProcError> {
    let text = read_capped(root, rel, cap)?;
    f(&text).map_err(|e| ProcError::Parse { path: root.path(rel), line: e.line, reason: e.reason })
}

/// /proc/PID/smaps.
pub fn smaps(root: &ProcRoot, pid: u32) -> Result<Vec<SmapsVma>, ProcError> {
    parsed(root, &format!("proc/{pid}/smaps"), SMAPS_MAX_BYTES, parse_smaps)
}

/// The thp_migration_* counters of /proc/vmstat.
pub fn thp_counters(root: &ProcRoot) -> Result<ThpCounters, ProcError> {
    parsed(root, "proc/vmstat", SMALL_MAX_BYTES, parse_vmstat_thp)
}

/// Whether a process may hold huge pages: transparent huge pages are not `never`
/// (`/sys/kernel/mm/transparent_hugepage/enabled`), or /proc/meminfo shows huge pages in use.
/// Unreadable files: assume so. (meminfo alone is not enough: a huge page whose PMD mapping was
/// split, by a partial mprotect for instance, is no longer counted there, yet migrates whole.)
pub fn huge_pages_possible(root: &ProcRoot) -> bool {
    let thp_on = match read_capped(root, "sys/kernel/mm/transparent_hugepage/enabled", 256) {
        Ok(t) => !t.contains("[never]"),
        Err(ProcError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => true,
    };
    thp_on || parsed(root, "proc/meminfo", SMALL_MAX_BYTES, parse_meminfo_has_huge).unwrap_or(true)
}

/// Size of a transparent huge page in bytes; None where the kernel has none.
pub fn pmd_size(root: &ProcRoot, page_size: u64) -> Option<u64> {
    parsed(root, "sys/kernel/mm/transparent_hugepage/hpage_pmd_size", 64, |t| parse_pmd_size(t, page_size)).ok()
}

#[cfg(test)]
mod tests;
