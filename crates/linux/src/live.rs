//! This machine's model for the runtime: the topology crate's sysfs reader, or, when that
//! fails, a minimal model read here (nodes, their CPUs and memory; one CPU group per node; no
//! Bandwidth Graph). Both are marked live (`ModelSource::Sysfs { root: "/" }` for root `/`)
//! because both describe the machine ptb runs on.

use crate::procfs::ProcRoot;
use ptb_topology::{CpuGroup, CpuSet, GroupIdx, Machine, ModelSource, Node, NodeId, NodeIdx};

/// Read the model of the machine whose /sys is under `root`.
pub fn machine(root: &ProcRoot) -> Result<Machine, String> {
    match ptb_topology::sysfs::read_machine(root.root()) {
        Ok(m) => Ok(m),
        Err(full) => minimal(root).map_err(|e| format!("reading this machine's topology: {full}; fallback: {e}")),
    }
}

/// The minimal model: /sys/devices/system/node/node*/{cpulist,meminfo}.
pub fn minimal(root: &ProcRoot) -> Result<Machine, String> {
    let dir = root.path("sys/devices/system/node");
    let mut ids: Vec<u32> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return Err(format!("{}: no nodeN directories", dir.display()));
    }
    let mut nodes = Vec::new();
    let mut groups = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let cl = root.read_line(&format!("sys/devices/system/node/node{id}/cpulist")).unwrap_or_default();
        let cpus = CpuSet::parse_list(&cl).map_err(|e| format!("node{id}/cpulist: {e}"))?;
        let meminfo = root.path(&format!("sys/devices/system/node/node{id}/meminfo"));
        let text = std::fs::read_to_string(&meminfo).map_err(|e| format!("{}: {e}", meminfo.display()))?;
        let kb: u64 = text
            .lines()
            .find(|l| l.contains("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
            .unwrap_or(0);
        let idx = NodeIdx::from_ix(i);
        let mut gs = vec![];
        if !cpus.is_empty() {
            let g = GroupIdx::from_ix(groups.len());
            groups.push(CpuGroup { idx: g, name: format!("node{id}"), node: idx, cpus: cpus.clone() });
            gs.push(g);
        }
        nodes.push(Node { id: NodeId(*id), idx, cpus, memory_bytes: kb * 1024, groups: gs });
    }
    let name = root.read_line("proc/sys/kernel/hostname").unwrap_or_else(|_| "this-machine".into());
    let source = ModelSource::Sysfs { root: root.root().display().to_string() };
    Ok(Machine {
        page_size: crate::sys::page_size(),
        notes: vec!["minimal model read by ptb-linux (no Bandwidth Graph)".into()],
        ..Machine::bare(name, "read from sysfs (minimal: nodes, CPUs, memory)".into(), source, nodes, groups)
    })
}

/// True when two models describe the same nodes with the same CPUs (a machine file made on
/// this machine, e.g. by `ptb characterize`, matches the live model).
pub fn same_topology(a: &Machine, b: &Machine) -> bool {
    a.nodes.len() == b.nodes.len()
        && a.nodes
            .iter()
            .zip(&b.nodes)
            .all(|(x, y)| x.id == y.id && x.cpus == y.cpus && x.has_memory() == y.has_memory())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_model_of_this_machine_is_live() {
        let m = minimal(&ProcRoot::live()).unwrap();
        assert!(m.source.is_live());
        assert!(m.n_nodes() >= 1 && m.n_cpus() >= 1);
        assert!(same_topology(&m, &m));
    }

    #[test]
    fn minimal_model_from_a_fixture_is_not_live() {
        let d = tempfile::tempdir().unwrap();
        for (id, cpus) in [(0, "0-1"), (1, "")] {
            let n = d.path().join(format!("sys/devices/system/node/node{id}"));
            std::fs::create_dir_all(&n).unwrap();
            std::fs::write(n.join("cpulist"), format!("{cpus}\n")).unwrap();
            std::fs::write(n.join("meminfo"), format!("Node {id} MemTotal:  1048576 kB\n")).unwrap();
        }
        let m = minimal(&ProcRoot::new(d.path())).unwrap();
        assert!(!m.source.is_live());
        assert_eq!(m.n_nodes(), 2);
        assert_eq!(m.cpu_nodes().len(), 1);
        assert_eq!(m.memory_nodes().len(), 2);
        let live = minimal(&ProcRoot::live()).unwrap();
        assert!(!same_topology(&m, &live) || live.n_nodes() == 2);
    }
}
