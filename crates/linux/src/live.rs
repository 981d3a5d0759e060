//! This machine's model for the runtime: the topology crate's sysfs reader, or, when that
//! fails, a minimal model read here (nodes, their CPUs and memory; one CPU group per node; no
//! Bandwidth Graph). Both are marked live (`ModelSource::Sysfs { root: "/" }` for root `/`)
//! because both describe the machine ptb runs on. [`adopt`] decides what a `--machine` model
//! may contribute to a command that moves real processes: a matching machine file its measured
//! figures, anything else nothing.

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
    mismatch(a, b).is_none()
}

/// The first difference between a model's nodes and CPUs and this machine's (`live`), in
/// words: `this machine has 2 CPUs, the model 4`; `None` when they are the same.
pub fn mismatch(model: &Machine, live: &Machine) -> Option<String> {
    use ptb_topology::render::plural;
    if model.n_nodes() != live.n_nodes() {
        return Some(format!(
            "this machine has {}, the model {}",
            plural(live.n_nodes(), "NUMA node", "NUMA nodes"),
            model.n_nodes()
        ));
    }
    if model.node_id_list() != live.node_id_list() {
        return Some(format!("this machine's nodes are {}, the model's {}", live.node_id_list(), model.node_id_list()));
    }
    if model.n_cpus() != live.n_cpus() {
        return Some(format!(
            "this machine has {}, the model {}",
            plural(live.n_cpus(), "CPU", "CPUs"),
            model.n_cpus()
        ));
    }
    for (x, y) in model.nodes.iter().zip(&live.nodes) {
        if x.cpus != y.cpus {
            let list = |n: &Node| if n.has_cpus() { n.cpus.to_list() } else { "none".into() };
            return Some(format!("node {} has CPUs {} here, {} in the model", y.id.0, list(y), list(x)));
        }
        if x.has_memory() != y.has_memory() {
            let has = |n: &Node| if n.has_memory() { "memory" } else { "no memory" };
            return Some(format!("node {} has {} here, {} in the model", y.id.0, has(y), has(x)));
        }
    }
    None
}

/// The machine a command that moves real processes uses when `--machine` (or `daemon.machine`)
/// names `model`: only a machine file whose nodes and CPUs match this machine (`live`) is
/// used, and only for its measured figures. Node ids, CPU lists, memory sizes and the page
/// size always come from /sys; the file gives its CPU groups (every one inside a node whose
/// CPUs match), distances, links, routes, controller capacities, Bandwidth Graph, migration
/// costs and clock. A preset, a synthetic spec or a captured sysfs tree never moves real
/// processes, even when its nodes and CPUs happen to match: `Err` says why (for a dry run, or
/// the refusal).
pub fn adopt(model: &Machine, live: &Machine) -> Result<Machine, String> {
    if model.source.is_live() {
        return Ok(model.clone());
    }
    let differs = mismatch(model, live);
    let kind = match &model.source {
        ModelSource::File { .. } => None,
        ModelSource::Preset { .. } => Some("is a preset"),
        ModelSource::Synthetic { .. } => Some("is a synthetic spec"),
        ModelSource::Sysfs { .. } => Some("is a captured sysfs tree, not this machine's /sys"),
    };
    match (kind, differs) {
        (None, None) => {}
        (None, Some(d)) => return Err(format!("does not describe this machine: {d}")),
        (Some(k), None) => return Err(k.to_string()),
        (Some(k), Some(d)) => return Err(format!("{k} (and not this machine: {d})")),
    }
    let nodes =
        live.nodes.iter().zip(&model.nodes).map(|(l, f)| Node { groups: f.groups.clone(), ..l.clone() }).collect();
    let mut notes = model.notes.clone();
    notes.push(format!("nodes, CPUs, memory and page size from /sys; measured figures from {}", model.source));
    Ok(Machine {
        source: live.source.clone(),
        page_size: live.page_size,
        line_size: live.line_size,
        nodes,
        notes,
        ..model.clone()
    })
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

    /// `model` as if it were this machine's /sys (what `live::machine` returns), with other
    /// memory sizes and page size than the model's.
    fn as_live(model: &Machine) -> Machine {
        let mut live = model.clone();
        live.source = ModelSource::Sysfs { root: "/".into() };
        live.page_size = 65536;
        live.bandwidth = None;
        for n in &mut live.nodes {
            n.memory_bytes = n.memory_bytes / 2 + 4096;
        }
        live
    }

    #[test]
    fn a_preset_or_synthetic_spec_never_drives_real_moves_even_when_it_matches() {
        for spec in ["opteron6272-4n", "synthetic:nodes=2,cpus=4,dies=1", "synthetic:nodes=1,cpus=2,dies=1"] {
            let m = ptb_topology::resolve(spec).unwrap();
            let live = as_live(&m);
            assert!(same_topology(&m, &live), "{spec}");
            let why = adopt(&m, &live).unwrap_err();
            assert!(why.starts_with("is a preset") || why.starts_with("is a synthetic spec"), "{spec}: {why}");
        }
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topology/tests/fixtures/qemu-4node-memonly");
        let fixture = ptb_topology::sysfs::read_machine(&dir).unwrap();
        assert!(adopt(&fixture, &as_live(&fixture)).unwrap_err().contains("captured sysfs tree"));
    }

    #[test]
    fn a_matching_machine_file_gives_its_bandwidth_figures_and_sys_the_topology() {
        let mut file = ptb_topology::resolve("opteron6272-4n").unwrap();
        file.source = ModelSource::File { path: "m.toml".into() };
        let live = as_live(&file);
        let m = adopt(&file, &live).unwrap();
        assert!(m.source.is_live());
        assert_eq!(m.page_size, 65536, "the page size is this machine's");
        assert!(m
            .nodes
            .iter()
            .zip(&live.nodes)
            .all(|(a, b)| a.id == b.id && a.cpus == b.cpus && a.memory_bytes == b.memory_bytes));
        assert!(m.bandwidth.is_some() && m.bandwidth == file.bandwidth, "the file's Bandwidth Graph");
        assert_eq!(m.groups, file.groups);
    }

    #[test]
    fn a_file_of_another_machine_is_refused_with_the_real_difference() {
        let mut file = ptb_topology::resolve("synthetic:nodes=1,cpus=4,dies=1").unwrap();
        file.source = ModelSource::File { path: "m.toml".into() };
        let live = as_live(&ptb_topology::resolve("synthetic:nodes=1,cpus=2,dies=1").unwrap());
        assert_eq!(
            adopt(&file, &live).unwrap_err(),
            "does not describe this machine: this machine has 2 CPUs, the model 4"
        );
        let two = as_live(&ptb_topology::resolve("synthetic:nodes=2,cpus=2,dies=1").unwrap());
        assert_eq!(mismatch(&file, &two).unwrap(), "this machine has 2 NUMA nodes, the model 1");
        let one = as_live(&ptb_topology::resolve("synthetic:nodes=1,cpus=1,dies=1").unwrap());
        assert_eq!(mismatch(&file, &one).unwrap(), "this machine has 1 CPU, the model 4");
    }
}
