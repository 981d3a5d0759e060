//! The sysfs reader on generated trees: random node ids (with gaps), memory-only nodes, LLC
//! splits and missing cache directories are read back exactly; a corrupted file is an error
//! naming a path under the root, never a panic.

use proptest::prelude::*;
use ptb_topology::sysfs::read_machine;
use std::path::Path;

#[derive(Clone, Debug)]
struct GenNode {
    id: u32,
    cpus: u32,
    llcs: u32,
    mem_kb: u64,
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn gen_nodes() -> impl Strategy<Value = (Vec<GenNode>, bool)> {
    let node = (0u32..5, 1u32..3, 1u64..1 << 30);
    (proptest::collection::btree_set(0u32..64, 1..6), proptest::collection::vec(node, 6), any::<bool>()).prop_map(
        |(ids, params, caches)| {
            let nodes = ids
                .into_iter()
                .zip(params)
                .map(|(id, (cpus, llcs, mem_kb))| GenNode { id, cpus: cpus * 2, llcs, mem_kb })
                .collect();
            (nodes, caches)
        },
    )
}

/// Write the tree; returns the expected CPU list text of each node.
fn build(root: &Path, nodes: &[GenNode], caches: bool) -> Vec<String> {
    let mut next = 0u32;
    let mut lists = Vec::new();
    for n in nodes {
        let d = format!("sys/devices/system/node/node{}", n.id);
        let cpus: Vec<u32> = (next..next + n.cpus).collect();
        next += n.cpus;
        let list = ptb_topology::CpuSet::from_iter(cpus.iter().copied()).to_list();
        write(root, &format!("{d}/cpulist"), &format!("{list}\n"));
        write(root, &format!("{d}/meminfo"), &format!("Node {} MemTotal: {} kB\n", n.id, n.mem_kb));
        let row: Vec<String> = nodes.iter().map(|o| if o.id == n.id { "10" } else { "21" }.to_string()).collect();
        write(root, &format!("{d}/distance"), &(row.join(" ") + "\n"));
        let per = (n.cpus / n.llcs).max(1);
        for (k, c) in cpus.iter().enumerate() {
            let llc = (k as u32 / per).min(n.llcs - 1);
            let first = cpus[0] + llc * per;
            let last = if llc == n.llcs - 1 { *cpus.last().unwrap() } else { first + per - 1 };
            let cd = format!("sys/devices/system/cpu/cpu{c}");
            if caches {
                write(root, &format!("{cd}/cache/index3/level"), "3\n");
                write(root, &format!("{cd}/cache/index3/shared_cpu_list"), &format!("{first}-{last}\n"));
            }
            write(root, &format!("{cd}/topology/physical_package_id"), &format!("{}\n", n.id));
        }
        lists.push(list);
    }
    lists
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn generated_trees_read_back((nodes, caches) in gen_nodes()) {
        // A node needs CPUs or memory; memory is always >= 1 kB here.
        let dir = tempfile::tempdir().unwrap();
        let lists = build(dir.path(), &nodes, caches);
        let m = read_machine(dir.path()).unwrap();
        prop_assert_eq!(m.n_nodes(), nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let got = &m.nodes[i];
            prop_assert_eq!(got.id.0, n.id);
            prop_assert_eq!(got.idx.ix(), i);
            prop_assert_eq!(got.cpus.to_list(), lists[i].clone());
            prop_assert_eq!(got.memory_bytes, n.mem_kb * 1024);
            let want_groups = if n.cpus == 0 { 0 } else if caches { n.llcs.min(n.cpus) as usize } else { 1 };
            prop_assert_eq!(got.groups.len(), want_groups);
            let union = got.groups.iter().fold(ptb_topology::CpuSet::new(), |u, g| u.union(&m.group(*g).cpus));
            prop_assert_eq!(&union, &got.cpus);
        }
        let d = m.distances.as_ref().unwrap();
        prop_assert!(d.has_shape(nodes.len(), nodes.len()));
    }

    #[test]
    fn corrupted_files_are_errors_naming_a_path(
        (nodes, caches) in gen_nodes(),
        pick in any::<prop::sample::Index>(),
        junk in proptest::collection::vec(any::<u8>(), 0..24),
    ) {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), &nodes, caches);
        let mut files = Vec::new();
        let mut stack = vec![dir.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() { stack.push(p) } else { files.push(p) }
            }
        }
        files.sort();
        let victim = &files[pick.index(files.len())];
        std::fs::write(victim, &junk).unwrap();
        if let Err(e) = read_machine(dir.path()) {
            let text = e.to_string();
            prop_assert!(text.contains(&dir.path().display().to_string()), "{}", text);
        }
    }
}
