//! Built-in machine presets: published machines (../shared/spec/machines.md, copied here with
//! their sources) that the simulator and the policies can run on.
//!
//! Every preset keeps its numbers in named constants at the top of its file, each with a
//! comment that says where it comes from: **published** (a figure of machines.md, quoted
//! with its section) or **derived** (how it was computed, or what was assumed). The same
//! sources are repeated in the machine's `notes`, which `ptb topology` shows. Matrices whose
//! entries are all published carry [`crate::MatrixSource::Published`]; any matrix with a
//! derived entry carries [`crate::MatrixSource::Derived`] and its notes list the published
//! entries.
//!
//! | preset | file |
//! | --- | --- |
//! | `opteron6272-4n` | [`opteron6272_4n`] (thesis machine: 8 dies, DRAM on 4) |
//! | `opteron6272-8n` | [`opteron6272_8n`] (AsymSched machine A: 8 nodes, asymmetric links) |
//! | `broadwell-cod-4n` | [`broadwell_cod_4n`] (MLC matrices, cluster-on-die) |
//! | `skylake-2s` | [`skylake_2s`] |
//! | `icelake-2s` | [`icelake_2s`] |
//! | `epyc-nps4-2s` | [`epyc_nps4_2s`] |
//! | `cxl-1s` | [`cxl_1s`] (one socket + a CPU-less CXL node) |

pub mod broadwell_cod_4n;
pub(crate) mod build;
pub mod cxl_1s;
pub mod epyc_nps4_2s;
pub mod icelake_2s;
mod intel_2s;
pub mod opteron6272_4n;
pub mod opteron6272_8n;
pub mod skylake_2s;

use crate::error::TopologyError;
use crate::machine::Machine;

type Builder = fn() -> Result<Machine, TopologyError>;

/// Every preset: name, one-line description, builder.
const PRESETS: &[(&str, &str, Builder)] = &[
    (opteron6272_4n::NAME, opteron6272_4n::DESCRIPTION, opteron6272_4n::machine),
    (opteron6272_8n::NAME, opteron6272_8n::DESCRIPTION, opteron6272_8n::machine),
    (broadwell_cod_4n::NAME, broadwell_cod_4n::DESCRIPTION, broadwell_cod_4n::machine),
    (skylake_2s::NAME, skylake_2s::DESCRIPTION, skylake_2s::machine),
    (icelake_2s::NAME, icelake_2s::DESCRIPTION, icelake_2s::machine),
    (epyc_nps4_2s::NAME, epyc_nps4_2s::DESCRIPTION, epyc_nps4_2s::machine),
    (cxl_1s::NAME, cxl_1s::DESCRIPTION, cxl_1s::machine),
];

/// Names and one-line descriptions of the presets.
pub fn list() -> Vec<(&'static str, &'static str)> {
    PRESETS.iter().map(|(n, d, _)| (*n, *d)).collect()
}

/// A preset by name.
pub fn get(name: &str) -> Result<Machine, TopologyError> {
    match PRESETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, _, build)) => build(),
        None => Err(TopologyError::UnknownMachine { name: name.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_cite_published_sources_not_files_outside_the_repository() {
        for (name, _) in list() {
            let m = get(name).unwrap();
            assert!(m.notes[0].starts_with("source: "), "{name}: {}", m.notes[0]);
            for n in &m.notes {
                for bad in ["../", "shared/", "spec/", "machines.md", "asymsched.md", " s1", " s2", " s4"] {
                    assert!(!n.contains(bad), "{name}: note cites `{bad}`: {n}");
                }
                // Files of this repository are named from its root.
                if n.contains(".rs") {
                    assert!(n.contains("crates/topology/src/presets/"), "{name}: {n}");
                }
            }
        }
    }

    #[test]
    fn every_preset_builds_validates_and_is_complete() {
        assert_eq!(list().len(), 7);
        for (name, desc) in list() {
            let m = get(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            crate::validate::validate(&m, name).unwrap();
            assert_eq!(m.name, name);
            assert!(!desc.is_empty() && !m.notes.is_empty(), "{name}");
            assert!(matches!(&m.source, crate::ModelSource::Preset { name: n } if n == name));
            let bg = m.bandwidth.as_ref().expect("bandwidth graph");
            let (unc, con, lat) = (&bg.uncontended, bg.contended.as_ref().unwrap(), bg.latency.as_ref().unwrap());
            assert_eq!((unc.unit.as_str(), con.unit.as_str(), lat.unit.as_str()), ("GB/s", "GB/s", "ns"));
            assert_eq!(m.controller_gbps.as_ref().map(Vec::len), Some(m.n_nodes()));
            // A complete routing table: one route per (group, memory node); local = empty.
            for g in &m.groups {
                for n in m.memory_nodes() {
                    let r = m.route(g.idx, n).unwrap_or_else(|| panic!("{name}: no route {} -> {n}", g.name));
                    assert!(!r.hops.is_empty() || g.node == n, "{name} {} -> {n}: empty route off-node", g.name);
                    // Contended <= uncontended, every figure positive, latency grows off-node.
                    let (u, c) = (unc.get(g.idx.ix(), n.ix()), con.get(g.idx.ix(), n.ix()));
                    assert!(u > 0.0 && c > 0.0 && c <= u + 1e-9, "{name} {} -> {n}: {u} {c}", g.name);
                    assert!(lat.get(g.idx.ix(), n.ix()) > 0.0);
                }
            }
            // Routes are connected paths ending at the group (checked through the link ends).
            for r in &m.routes {
                let mut at: Option<crate::End> = None;
                for h in &r.hops {
                    let l = &m.links[h.link.ix()];
                    let (from, to) = if h.forward { (l.a, l.b) } else { (l.b, l.a) };
                    if let Some(prev) = at {
                        assert_eq!(prev, from, "{name}: broken route {r:?}");
                    }
                    at = Some(to);
                }
                if let Some(end) = at {
                    let home = m.group(r.group).node;
                    assert!(
                        end == crate::End::Group(r.group)
                            || end == crate::End::Memory(home)
                            || m.node(home).groups.iter().any(|g| crate::End::Group(*g) == end),
                        "{name}: route {r:?} does not reach its group"
                    );
                }
            }
            // Every node with CPUs and memory has a group that reads it locally.
            for n in m.memory_nodes().into_iter().filter(|n| m.node(*n).has_cpus()) {
                assert!(m.node(n).groups.iter().any(|g| m.route(*g, n).is_some_and(|r| r.hops.is_empty())), "{name}");
            }
            let d = m.distances.as_ref().unwrap();
            for a in 0..m.n_nodes() {
                assert_eq!(d.get(a, a), 10.0, "{name}");
            }
        }
    }

    #[test]
    fn presets_round_trip_through_machine_files() {
        let dir = tempfile::tempdir().unwrap();
        for (name, _) in list() {
            let m = get(name).unwrap();
            for ext in ["toml", "json"] {
                let p = dir.path().join(format!("{name}.{ext}"));
                crate::file::save(&m, &p).unwrap();
                assert_eq!(crate::file::load(&p).unwrap(), m, "{name}.{ext}");
            }
        }
    }

    #[test]
    fn unknown_presets_are_refused() {
        assert!(matches!(get("nope"), Err(TopologyError::UnknownMachine { .. })));
    }
}
