//! Last-level cache size, read from a sysfs tree whose root is passed in: buffers must be
//! larger than it so that the kernels measure memory, not cache.

use std::path::Path;

/// Used when sysfs says nothing (32 MiB: larger than most per-die LLCs, so buffers stay big).
pub const FALLBACK_LLC: u64 = 32 << 20;

/// Parse a sysfs cache size such as `32768K`, `1M`, `512`.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mul) = match t.as_bytes().last()? {
        b'K' | b'k' => (&t[..t.len() - 1], 1u64 << 10),
        b'M' | b'm' => (&t[..t.len() - 1], 1 << 20),
        b'G' | b'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

/// The largest highest-level cache of `cpus` (kernel ids) under `root`, or [`FALLBACK_LLC`].
pub fn llc_bytes(root: &Path, cpus: &[u32]) -> u64 {
    let mut best: Option<(u32, u64)> = None;
    for cpu in cpus {
        let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cache"));
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
            let (Some(level), Some(size)) = (read("level"), read("size")) else { continue };
            if read("type").is_some_and(|t| t.trim() == "Instruction") {
                continue;
            }
            let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(&size)) else { continue };
            let better = match best {
                None => true,
                Some((l, s)) => level > l || (level == l && size > s),
            };
            if better {
                best = Some((level, size));
            }
        }
    }
    best.map_or(FALLBACK_LLC, |(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes_and_garbage_is_refused() {
        assert_eq!(parse_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }

    #[test]
    fn the_highest_level_data_cache_wins_and_a_missing_tree_falls_back() {
        let d = tempfile::tempdir().unwrap();
        let put = |idx: u32, level: &str, ty: &str, size: &str| {
            let p = d.path().join(format!("sys/devices/system/cpu/cpu0/cache/index{idx}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("level"), level).unwrap();
            std::fs::write(p.join("type"), ty).unwrap();
            std::fs::write(p.join("size"), size).unwrap();
        };
        put(0, "1\n", "Data\n", "32K\n");
        put(1, "1\n", "Instruction\n", "64K\n");
        put(2, "2\n", "Unified\n", "1024K\n");
        put(3, "3\n", "Unified\n", "16384K\n");
        assert_eq!(llc_bytes(d.path(), &[0]), 16 << 20);
        assert_eq!(llc_bytes(d.path(), &[7]), FALLBACK_LLC);
    }
}
