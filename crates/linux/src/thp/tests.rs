use super::*;
use proptest::prelude::*;

const SMAPS: &str = include_str!("../../tests/fixtures/smaps.txt");

#[test]
fn parses_captured_smaps() {
    let v = parse_smaps(SMAPS).unwrap();
    assert_eq!(v.len(), 5);
    let thp = v.iter().find(|x| x.anon_huge_kb > 0).unwrap();
    assert_eq!((thp.start, thp.end), (0x7f47_1e20_0000, 0x7f47_1ea0_0000));
    assert_eq!((thp.anon_huge_kb, thp.rss_kb, thp.kernel_page_kb), (8192, 8192, 4));
    assert_eq!(thp.thp_eligible, Some(true));
    assert!(thp.may_have_thp());
    let exe = &v[0];
    assert_eq!((exe.thp_eligible, exe.pmd_mapped_kb()), (Some(false), 0));
    assert!(!exe.may_have_thp());
}

#[test]
fn smaps_errors_name_the_line() {
    let e = parse_smaps("Rss: 4 kB\n").unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.reason.contains("before any mapping"), "{e:?}");
    let e = parse_smaps("1000-2000 rw-p 0 00:00 0\nAnonHugePages: 9999 kB\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.reason.contains("exceeds"), "{e:?}");
    let e = parse_smaps("1000-2000 rw-p 0 00:00 0\nKernelPageSize: 3 kB\n").unwrap_err();
    assert!(e.reason.contains("power of two"), "{e:?}");
    assert!(parse_smaps("1000-2000 rw-p 0 00:00 0\nKernelPageSize: 34359738368 kB\n").is_err());
    // A read racing the process's mprotect: a mapping printed again, grown or merged, overlaps
    // the ones before. The later line wins where they overlap; mappings stay sorted, disjoint.
    let v = parse_smaps("3000-4000 rw-p 0 00:00 0\n1000-2000 rw-p 0 00:00 0\n").unwrap();
    assert_eq!(v.iter().map(|m| (m.start, m.end)).collect::<Vec<_>>(), [(0x1000, 0x2000)]);
    let v =
        parse_smaps("1000-5000 rw-p 0 00:00 0\nAnonHugePages: 16 kB\n3000-9000 rw-p 0 00:00 0\nAnonHugePages: 8 kB\n")
            .unwrap();
    assert_eq!(
        v.iter().map(|m| (m.start, m.end, m.anon_huge_kb)).collect::<Vec<_>>(),
        [(0x1000, 0x3000, 8), (0x3000, 0x9000, 8)]
    );
    assert!(parse_smaps("2000-1000 rw-p 0 00:00 0\n").is_err());
    assert!(parse_smaps("1000-2000 rw-p 0 00:00 0\nRss: lots kB\n").is_err());
    // Fields ptb does not use are skipped, whatever they hold.
    assert_eq!(parse_smaps("1000-2000 rw-p 0 00:00 0\nVmFlags: rd wr\nPss: x\n").unwrap().len(), 1);
}

#[test]
fn vmstat_meminfo_and_pmd_size() {
    let t = "nr_free_pages 12\nthp_migration_success 7\nthp_migration_fail 1\nthp_migration_split 2\n";
    let c = parse_vmstat_thp(t).unwrap();
    assert_eq!((c.migration_success, c.migration_fail, c.migration_split), (Some(7), Some(1), Some(2)));
    let before = ThpCounters { migration_success: Some(3), migration_fail: None, migration_split: Some(5) };
    let d = c.since(&before);
    assert_eq!((d.migration_success, d.migration_fail, d.migration_split), (Some(4), None, Some(0)));
    assert_eq!(parse_vmstat_thp("pgfault 1\n").unwrap(), ThpCounters::default());
    assert_eq!(parse_vmstat_thp("thp_migration_success x\n").unwrap_err().line, 1);
    assert!(parse_meminfo_has_huge("MemTotal: 10 kB\nAnonHugePages: 2048 kB\n").unwrap());
    assert!(!parse_meminfo_has_huge("AnonHugePages: 0 kB\nHugePages_Total: 0\n").unwrap());
    assert!(parse_meminfo_has_huge("HugePages_Total: many\n").is_err());
    assert_eq!(
        parse_meminfo_available("MemTotal: 10 kB\nMemAvailable:   22865920 kB\n").unwrap(),
        Some(22865920 * 1024)
    );
    assert_eq!(parse_meminfo_available("MemTotal: 10 kB\n").unwrap(), None);
    let e = parse_meminfo_available("MemTotal: 10 kB\nMemAvailable: lots\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(parse_meminfo_available("MemAvailable: 10 MB\n").is_err());
    assert!(parse_meminfo_available("MemAvailable: 18446744073709551615 kB\n").is_err());
    assert_eq!(parse_pmd_size("2097152\n", 4096).unwrap(), 2 << 20);
    for bad in ["4096", "3000000", "x", "", "4294967296"] {
        assert!(parse_pmd_size(bad, 4096).is_err(), "{bad}");
    }
}

#[test]
fn pagemap_entries_decode() {
    let e = PagemapEntry(1 << 63 | 0x1234);
    assert_eq!((e.present(), e.pfn()), (true, Some(0x1234)));
    assert_eq!(PagemapEntry(0x1234).pfn(), None);
    // Swapped: bit 62 set, the low bits are a swap entry, not a frame.
    assert_eq!(PagemapEntry(3 << 62 | 5).pfn(), None);
}

#[test]
fn capped_reader_refuses_big_files_and_keeps_bad_utf8() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("proc/7")).unwrap();
    let mut text = SMAPS.as_bytes().to_vec();
    text.extend_from_slice(b"7fff00000000-7fff00001000 rw-p 00000000 00:00 5 /tmp/\xff\xfe name\nRss: 4 kB\n");
    std::fs::write(d.path().join("proc/7/smaps"), &text).unwrap();
    let root = ProcRoot::new(d.path());
    let v = smaps(&root, 7).unwrap();
    assert_eq!(v.len(), 6);
    std::fs::write(d.path().join("proc/vmstat"), vec![b'x'; (SMALL_MAX_BYTES + 1) as usize]).unwrap();
    let e = thp_counters(&root).unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");
    assert!(huge_pages_possible(&root), "unreadable meminfo: assume huge pages");
    std::fs::write(d.path().join("proc/meminfo"), "MemTotal: 100 kB\nAnonHugePages: 0 kB\n").unwrap();
    assert!(!huge_pages_possible(&root), "no THP in the kernel, none in use");
    std::fs::create_dir_all(d.path().join("sys/kernel/mm/transparent_hugepage")).unwrap();
    std::fs::write(d.path().join("sys/kernel/mm/transparent_hugepage/enabled"), "always madvise [never]\n").unwrap();
    assert!(!huge_pages_possible(&root));
    std::fs::write(d.path().join("sys/kernel/mm/transparent_hugepage/enabled"), "always [madvise] never\n").unwrap();
    assert!(huge_pages_possible(&root));
    assert_eq!(pmd_size(&root, 4096), None);
}

#[test]
fn reads_this_machine() {
    let root = ProcRoot::live();
    let v = smaps(&root, std::process::id()).unwrap();
    assert!(v.len() > 3);
    assert!(v.windows(2).all(|w| w[0].end <= w[1].start));
    thp_counters(&root).unwrap();
    assert!(mem_available(&root).unwrap().is_some_and(|b| b > 0));
}

proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC{0,400}") {
        let _ = parse_smaps(&s);
        let _ = parse_vmstat_thp(&s);
        let _ = parse_meminfo_has_huge(&s);
        let _ = parse_meminfo_available(&s);
        let _ = parse_pmd_size(&s, 4096);
    }

    /// Mutations of a captured smaps (a line dropped, duplicated, or one byte changed) are
    /// parsed or refused, never a panic; what is parsed keeps its invariants.
    #[test]
    fn mutated_smaps_parse_or_refuse(op in 0u8..3, at in 0usize..10_000, byte in any::<u8>()) {
        let mut lines: Vec<String> = SMAPS.lines().map(str::to_string).collect();
        let i = at % lines.len();
        match op {
            0 => { lines.remove(i); }
            1 => { let l = lines[i].clone(); lines.insert(i, l); }
            _ => {
                let mut b = lines[i].clone().into_bytes();
                let j = at % b.len().max(1);
                if let Some(x) = b.get_mut(j) { *x = byte; }
                lines[i] = String::from_utf8_lossy(&b).into_owned();
            }
        }
        if let Ok(v) = parse_smaps(&lines.join("\n")) {
            for m in &v {
                prop_assert!(m.start <= m.end);
                prop_assert!(m.pmd_mapped_kb() <= 3 * ((m.end - m.start) / 1024));
                prop_assert!(m.kernel_page_kb.is_power_of_two());
            }
            prop_assert!(v.windows(2).all(|w| w[0].end <= w[1].start));
        }
    }

    #[test]
    fn smaps_round_trip(start in 0u64..1 << 46, pages in 1u64..1 << 20, huge in 0u64..1 << 20, elig in any::<bool>()) {
        let end = start + pages * 4096;
        let huge = huge.min(pages * 4);
        let text = format!(
            "{start:x}-{end:x} rw-p 00000000 00:00 0 \nSize: {} kB\nKernelPageSize: 4 kB\nAnonHugePages: {huge} kB\nTHPeligible: {}\n",
            pages * 4, u8::from(elig)
        );
        let v = parse_smaps(&text).unwrap();
        prop_assert_eq!(v.len(), 1);
        prop_assert_eq!((v[0].start, v[0].end, v[0].anon_huge_kb, v[0].thp_eligible), (start, end, huge, Some(elig)));
    }
}
