//! Reading this machine's topology from a sysfs tree whose root is passed in.
//!
//! Problem: turn the kernel's view of the machine into a [`Machine`] without ever reading a
//! global path, so that the same code reads `/` in production and a captured tree in tests.
//!
//! Approach (all paths are relative to `root`):
//!
//! ```text
//! sys/devices/system/node/nodeN/cpulist    CPUs of node N (empty: memory-only node)
//!                               meminfo    "Node N MemTotal: <kB> kB"
//!                               distance   SLIT row, one entry per online node in id order
//! sys/devices/system/cpu/cpuC/cache/indexI/{level,shared_cpu_list}   LLC domain of CPU C
//! sys/devices/system/cpu/cpuC/topology/{physical_package_id,die_id}  fallback grouping
//! sys/devices/system/cpu/online                                     online CPUs (optional)
//! proc/meminfo                                                       kernels without NUMA
//! proc/sys/kernel/hostname                                           machine name (optional)
//! ```
//!
//! Offline CPUs (not in `cpu/online`, when that file exists) are left out. Node ids may have gaps; nodes get dense [`NodeIdx`] in kernel-id order. CPUs of a node are
//! split into CPU groups by their level-3 cache (`shared_cpu_list`), else by (package, die),
//! else by package, else one group per node; the method is chosen per node so that a node is
//! never grouped two ways. A tree without any `nodeN` directory (kernel built without NUMA)
//! is one node holding every online CPU and all of `/proc/meminfo`'s memory.
//!
//! Every unreadable or malformed file is an error that names the path; nothing panics.

use crate::cpulist::CpuSet;
use crate::error::TopologyError;
use crate::ids::{CpuId, GroupIdx, NodeId, NodeIdx};
use crate::machine::{CpuGroup, Machine, ModelSource, Node};
use crate::matrix::{Matrix, MatrixSource};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Page size assumed for sysfs machines (x86-64 base page).
const PAGE_SIZE: u64 = 4096;
/// Cache line size assumed for sysfs machines (x86-64).
const LINE_SIZE: u64 = 64;

/// Read the machine whose sysfs tree is rooted at `root` (`/` for this machine).
pub fn read_machine(root: &Path) -> Result<Machine, TopologyError> {
    let node_dir = root.join("sys/devices/system/node");
    let ids = node_ids(&node_dir)?;
    let (mut nodes_raw, distances) = if ids.is_empty() {
        (vec![no_numa_node(root)?], Matrix::new("SLIT", MatrixSource::Derived, vec![vec![10.0]]))
    } else {
        read_nodes(&node_dir, &ids)?
    };
    // Offline CPUs cannot run threads and have no cache directory: leave them out.
    let online_path = root.join("sys/devices/system/cpu/online");
    if let Some(text) = read_opt(&online_path)? {
        let online = CpuSet::parse_list(text.trim()).map_err(|e| parse_err(&online_path, "CPU list", e.to_string()))?;
        for (_, cpus, _) in &mut nodes_raw {
            *cpus = cpus.intersection(&online);
        }
    }
    let mut nodes = Vec::new();
    let mut groups: Vec<CpuGroup> = Vec::new();
    for (i, (id, cpus, mem)) in nodes_raw.into_iter().enumerate() {
        let idx = NodeIdx::from_ix(i);
        let mut node = Node { id, idx, cpus: cpus.clone(), memory_bytes: mem, groups: vec![] };
        for (name, gcpus) in group_cpus(root, id, &cpus)? {
            let g = GroupIdx::from_ix(groups.len());
            groups.push(CpuGroup { idx: g, name, node: idx, cpus: gcpus });
            node.groups.push(g);
        }
        nodes.push(node);
    }
    let root_text = root.display().to_string();
    let name = hostname(root).unwrap_or_else(|| "this-machine".to_string());
    let n_cpus: usize = nodes.iter().map(|n| n.cpus.len()).sum();
    let memonly = nodes.iter().filter(|n| !n.has_cpus()).count();
    let description = format!(
        "read from sysfs at {root_text}: {} node{}, {n_cpus} CPUs{}",
        nodes.len(),
        if nodes.len() == 1 { "" } else { "s" },
        if memonly > 0 { format!(", {memonly} memory-only") } else { String::new() }
    );
    let m = Machine {
        page_size: PAGE_SIZE,
        line_size: LINE_SIZE,
        distances: Some(distances),
        notes: vec![
            if ids.is_empty() {
                "no NUMA nodes in sysfs (kernel without NUMA): one node with all online CPUs and /proc/meminfo"
                    .to_string()
            } else {
                "distances: the firmware SLIT from sysfs".to_string()
            },
            "no link or Bandwidth Graph data in sysfs: run `ptb characterize` to measure them".to_string(),
        ],
        ..Machine::bare(name, description, ModelSource::Sysfs { root: root_text.clone() }, nodes, groups)
    };
    crate::validate::validate(&m, &node_dir.display().to_string())?;
    Ok(m)
}

fn io(path: &Path, e: std::io::Error) -> TopologyError {
    TopologyError::Unreadable {
        path: path.to_path_buf(),
        error: e,
        hint: "check that sysfs is mounted and readable, or capture the tree again with scripts/capture-sysfs.sh"
            .into(),
    }
}

/// What to do about a malformed entry, appended to every parse error of this module.
const FIX_HINT: &str = "if this is a captured tree, capture it again with scripts/capture-sysfs.sh; \
                        if it is this machine's /sys, please report it with such a capture attached";

fn parse_err(path: &Path, what: &str, reason: impl Into<String>) -> TopologyError {
    TopologyError::Parse {
        path: path.to_path_buf(),
        what: what.to_string(),
        reason: format!("{} ({FIX_HINT})", reason.into()),
    }
}

/// A file of the tree: regular, at most [`cap::SYSFS`] bytes (a captured tree given with
/// `--machine DIR` is a user's files: a FIFO or /dev/zero planted in it is refused).
fn read(path: &Path) -> Result<String, TopologyError> {
    crate::input::read_text(path, "sysfs file", crate::input::cap::SYSFS).map_err(|e| match e.io {
        Some(kind) => io(path, std::io::Error::new(kind, e.reason)),
        None => parse_err(path, "sysfs file", e.reason),
    })
}

/// Like [`read`], but a missing file is `None` (other errors still count).
fn read_opt(path: &Path) -> Result<Option<String>, TopologyError> {
    match read(path) {
        Ok(s) => Ok(Some(s)),
        Err(TopologyError::Unreadable { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn cpulist(path: &Path) -> Result<CpuSet, TopologyError> {
    let text = read(path)?;
    CpuSet::parse_list(text.trim()).map_err(|e| parse_err(path, "CPU list", e.to_string()))
}

/// Kernel ids of the `nodeN` directories, ascending. A missing directory means no NUMA.
fn node_ids(node_dir: &Path) -> Result<Vec<u32>, TopologyError> {
    let entries = match std::fs::read_dir(node_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(node_dir, e)),
    };
    let mut ids = Vec::new();
    for e in entries {
        let e = e.map_err(|e| io(node_dir, e))?;
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("node")) else { continue };
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let id: u32 =
            rest.parse().map_err(|_| parse_err(&e.path(), "node directory name", "node id does not fit in 32 bits"))?;
        ids.push(id);
    }
    ids.sort_unstable();
    if ids.len() > u16::MAX as usize {
        return Err(parse_err(node_dir, "node directories", "more than 65535 nodes"));
    }
    Ok(ids)
}

/// A raw node: kernel id, CPUs, memory bytes.
type RawNode = (NodeId, CpuSet, u64);

fn read_nodes(node_dir: &Path, ids: &[u32]) -> Result<(Vec<RawNode>, Matrix), TopologyError> {
    let mut nodes: Vec<RawNode> = Vec::new();
    let mut rows = Vec::new();
    for &id in ids {
        let dir = node_dir.join(format!("node{id}"));
        let cpath = dir.join("cpulist");
        let cpus = cpulist(&cpath)?;
        if let Some((other, other_cpus, _)) = nodes.iter().find(|(_, c, _)| !c.is_disjoint(&cpus)) {
            return Err(parse_err(
                &cpath,
                "CPU list",
                format!(
                    "CPU(s) {} also in node{}/cpulist: a CPU belongs to one node; the tree is inconsistent",
                    other_cpus.intersection(&cpus),
                    other.0
                ),
            ));
        }
        let mem = memtotal(&dir.join("meminfo"))?;
        let dpath = dir.join("distance");
        let text = read(&dpath)?;
        let row: Vec<f64> = text
            .split_whitespace()
            .map(|t| match t.parse::<u32>() {
                Ok(v) => Ok(f64::from(v)),
                Err(_) => Err(parse_err(&dpath, "SLIT distance row", format!("`{t}` is not a whole number"))),
            })
            .collect::<Result<_, _>>()?;
        if row.len() != ids.len() {
            return Err(parse_err(
                &dpath,
                "SLIT distance row",
                format!(
                    "has {} entries but there are {} node directories (nodes {}): the tree is incomplete",
                    row.len(),
                    ids.len(),
                    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                ),
            ));
        }
        rows.push(row);
        nodes.push((NodeId(id), cpus, mem));
    }
    Ok((nodes, Matrix::new("SLIT", MatrixSource::Firmware, rows)))
}

/// `MemTotal` in bytes from a per-node meminfo ("Node 0 MemTotal: 123 kB") or /proc/meminfo
/// ("MemTotal: 123 kB").
fn memtotal(path: &Path) -> Result<u64, TopologyError> {
    let text = read(path)?;
    let line = text
        .lines()
        .find(|l| l.contains("MemTotal:"))
        .ok_or_else(|| parse_err(path, "meminfo", "no `MemTotal:` line"))?;
    let after = line.split_once("MemTotal:").map_or("", |(_, a)| a);
    let mut it = after.split_whitespace();
    let num = it.next().unwrap_or("");
    let kb: u64 =
        num.parse().map_err(|_| parse_err(path, "meminfo MemTotal", format!("`{num}` is not a whole number of kB")))?;
    match it.next() {
        Some("kB") => {}
        other => {
            return Err(parse_err(path, "meminfo MemTotal", format!("unit is {other:?}, expected `kB`")));
        }
    }
    kb.checked_mul(1024).ok_or_else(|| parse_err(path, "meminfo MemTotal", format!("{kb} kB overflows")))
}

/// The single node of a kernel without NUMA: all online CPUs, /proc/meminfo's memory.
fn no_numa_node(root: &Path) -> Result<RawNode, TopologyError> {
    let cpus = cpulist(&root.join("sys/devices/system/cpu/online"))?;
    let mem = memtotal(&root.join("proc/meminfo"))?;
    Ok((NodeId(0), cpus, mem))
}

/// `(physical_package_id, die_id)` of a CPU.
type PackageDie = (u32, Option<u32>);

/// How the CPUs of one node were grouped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GroupBy {
    Llc,
    Die,
    Package,
    Node,
}

/// Split the CPUs of node `id` into named groups, ordered by their lowest CPU.
fn group_cpus(root: &Path, id: NodeId, cpus: &CpuSet) -> Result<Vec<(String, CpuSet)>, TopologyError> {
    if cpus.is_empty() {
        return Ok(vec![]);
    }
    let cpu_dir = root.join("sys/devices/system/cpu");
    let mut keys: BTreeMap<CpuId, (Option<String>, Option<PackageDie>)> = BTreeMap::new();
    for c in cpus.iter() {
        let dir = cpu_dir.join(format!("cpu{}", c.0));
        keys.insert(c, (llc_key(&dir)?, package_die(&dir)?));
    }
    let by = if keys.values().all(|k| k.0.is_some()) {
        GroupBy::Llc
    } else if keys.values().all(|k| matches!(k.1, Some((_, Some(_))))) {
        GroupBy::Die
    } else if keys.values().all(|k| k.1.is_some()) {
        GroupBy::Package
    } else {
        GroupBy::Node
    };
    // Group key -> CPUs; keys are strings so that all methods share one map.
    let mut groups: BTreeMap<String, CpuSet> = BTreeMap::new();
    for (c, (llc, pd)) in &keys {
        let key = match (by, llc, pd) {
            (GroupBy::Llc, Some(l), _) => l.clone(),
            (GroupBy::Die, _, Some((p, Some(d)))) => format!("pkg{p}.die{d}"),
            (GroupBy::Package, _, Some((p, _))) => format!("pkg{p}"),
            _ => "node".to_string(),
        };
        groups.entry(key).or_default().insert(*c);
    }
    let mut v: Vec<(String, CpuSet)> = groups.into_iter().collect();
    v.sort_by_key(|(_, s)| s.first_raw());
    Ok(v.into_iter()
        .enumerate()
        .map(|(k, (key, s))| {
            let name = match by {
                GroupBy::Llc => format!("node{}.llc{k}", id.0),
                GroupBy::Die | GroupBy::Package => format!("node{}.{key}", id.0),
                GroupBy::Node => format!("node{}", id.0),
            };
            (name, s)
        })
        .collect())
}

/// The canonical `shared_cpu_list` of the CPU's level-3 cache, or `None` when the CPU has
/// no readable cache directory or no level-3 cache.
fn llc_key(cpu_dir: &Path) -> Result<Option<String>, TopologyError> {
    let cache = cpu_dir.join("cache");
    let entries = match std::fs::read_dir(&cache) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&cache, e)),
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    for e in entries {
        let e = e.map_err(|e| io(&cache, e))?;
        if e.file_name().to_str().is_some_and(|n| n.starts_with("index")) {
            dirs.push(e.path());
        }
    }
    dirs.sort();
    for d in dirs {
        let Some(level) = read_opt(&d.join("level"))? else { continue };
        let lpath = d.join("level");
        let level: u32 = level
            .trim()
            .parse()
            .map_err(|_| parse_err(&lpath, "cache level", format!("`{}` is not a number", level.trim())))?;
        if level == 3 {
            let set = cpulist(&d.join("shared_cpu_list"))?;
            return Ok(Some(set.to_list()));
        }
    }
    Ok(None)
}

/// `(physical_package_id, die_id)` of a CPU, each `None` when the file is absent.
fn package_die(cpu_dir: &Path) -> Result<Option<PackageDie>, TopologyError> {
    let num = |f: &str| -> Result<Option<u32>, TopologyError> {
        let p = cpu_dir.join("topology").join(f);
        match read_opt(&p)? {
            None => Ok(None),
            // Some kernels report -1 for "unknown"; treat it as absent.
            Some(t) if t.trim() == "-1" => Ok(None),
            Some(t) => {
                t.trim().parse().map(Some).map_err(|_| parse_err(&p, f, format!("`{}` is not a number", t.trim())))
            }
        }
    };
    match num("physical_package_id")? {
        None => Ok(None),
        Some(p) => Ok(Some((p, num("die_id")?))),
    }
}

/// The host name from `proc/sys/kernel/hostname`, when present and non-empty.
fn hostname(root: &Path) -> Option<String> {
    let h = read(&root.join("proc/sys/kernel/hostname")).ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| h.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A machine root with one node `node0` holding CPUs `cpus` and 1 MiB of memory.
    fn one_node(cpus: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "sys/devices/system/node/node0/cpulist", &format!("{cpus}\n"));
        write(d.path(), "sys/devices/system/node/node0/meminfo", "Node 0 MemTotal: 1024 kB\n");
        write(d.path(), "sys/devices/system/node/node0/distance", "10\n");
        d
    }

    #[test]
    fn reads_nodes_with_gaps_and_a_memory_only_node() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "sys/devices/system/node/node0/cpulist", "0-3\n");
        write(r, "sys/devices/system/node/node0/meminfo", "Node 0 MemTotal: 1024 kB\n");
        write(r, "sys/devices/system/node/node0/distance", "10 20\n");
        write(r, "sys/devices/system/node/node2/cpulist", "\n");
        write(r, "sys/devices/system/node/node2/meminfo", "Node 2 MemTotal: 2048 kB\n");
        write(r, "sys/devices/system/node/node2/distance", "20 10\n");
        for c in 0..4 {
            write(r, &format!("sys/devices/system/cpu/cpu{c}/cache/index3/level"), "3\n");
            let l = if c < 2 { "0-1" } else { "2-3" };
            write(r, &format!("sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list"), l);
        }
        let m = read_machine(r).unwrap();
        assert_eq!(m.n_nodes(), 2);
        assert_eq!(m.nodes[1].id, NodeId(2));
        assert_eq!(m.nodes[1].idx, NodeIdx(1));
        assert!(!m.nodes[1].has_cpus());
        assert_eq!(m.nodes[1].memory_bytes, 2048 * 1024);
        assert_eq!(m.groups.len(), 2);
        assert_eq!(m.groups[1].cpus.to_list(), "2-3");
        assert_eq!(m.distance(NodeIdx(0), NodeIdx(1)), Some(20.0));
    }

    #[test]
    fn falls_back_to_packages_then_the_node() {
        let d = one_node("0-3");
        let r = d.path();
        for c in 0..4 {
            write(r, &format!("sys/devices/system/cpu/cpu{c}/topology/physical_package_id"), &format!("{}\n", c / 2));
        }
        let m = read_machine(r).unwrap();
        assert_eq!(m.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), ["node0.pkg0", "node0.pkg1"]);
        std::fs::remove_file(r.join("sys/devices/system/cpu/cpu3/topology/physical_package_id")).unwrap();
        let m = read_machine(r).unwrap();
        assert_eq!(m.groups.len(), 1);
        assert_eq!(m.groups[0].cpus.len(), 4);
    }

    #[test]
    fn without_caches_dies_split_a_package() {
        let d = one_node("0-3");
        let r = d.path();
        for c in 0..4 {
            write(r, &format!("sys/devices/system/cpu/cpu{c}/topology/physical_package_id"), "0\n");
            write(r, &format!("sys/devices/system/cpu/cpu{c}/topology/die_id"), &format!("{}\n", 1 - c / 2));
        }
        let m = read_machine(r).unwrap();
        let names: Vec<(&str, String)> = m.groups.iter().map(|g| (g.name.as_str(), g.cpus.to_list())).collect();
        assert_eq!(names, [("node0.pkg0.die1", "0-1".to_string()), ("node0.pkg0.die0", "2-3".to_string())]);
    }

    #[test]
    fn offline_cpus_are_left_out() {
        let d = one_node("0-3");
        let r = d.path();
        write(r, "sys/devices/system/cpu/online", "0-2\n");
        let m = read_machine(r).unwrap();
        assert_eq!(m.nodes[0].cpus.to_list(), "0-2");
        assert_eq!(m.groups[0].cpus.to_list(), "0-2");
    }

    #[test]
    fn malformed_files_name_their_path() {
        let d = one_node("0-x");
        let r = d.path();
        let e = read_machine(r).unwrap_err().to_string();
        assert!(e.contains("node0/cpulist"), "{e}");
        write(r, "sys/devices/system/node/node0/cpulist", "0\n");
        write(r, "sys/devices/system/node/node0/meminfo", "Node 0 MemFree: 1024 kB\n");
        let e = read_machine(r).unwrap_err().to_string();
        assert!(e.contains("node0/meminfo") && e.contains("MemTotal"), "{e}");
    }
}
