//! Consistency checks of a machine model, with errors that name the origin and the field.

use crate::error::TopologyError;
use crate::ids::NodeIdx;
use crate::machine::{End, Machine};
use std::collections::BTreeMap;

/// Smallest and largest base page size a machine may have (the simulator and the actuator
/// count pages; a 1-byte page would make every megabyte a million pages).
pub const MIN_PAGE: u64 = 4096;
pub const MAX_PAGE: u64 = 1 << 30;

/// (field, value, lowest, highest) of every migration cost: copy bandwidth must be positive
/// (a move takes size / bandwidth), the others may be 0 (free).
fn costs_fields(c: &crate::machine::MigrationCosts) -> [(&'static str, f64, f64, f64); 5] {
    [
        ("page_us", c.page_us, 0.0, 1e6),
        ("copy_gbps", c.copy_gbps, 1e-6, 1e6),
        ("thread_us", c.thread_us, 0.0, 1e9),
        ("hint_fault_us", c.hint_fault_us, 0.0, 1e6),
        ("sample_us", c.sample_us, 0.0, 1e6),
    ]
}

/// Check a machine: dense indices, no CPU in two nodes or groups, every node CPU in a group,
/// square/shaped matrices, non-negative finite numbers, links and routes naming real ends.
/// `origin` names the file or preset in error messages.
pub fn validate(m: &Machine, origin: &str) -> Result<(), TopologyError> {
    let bad = |field: String, reason: String| Err(TopologyError::invalid(origin, field, reason));
    let nn = m.nodes.len();
    let ng = m.groups.len();
    if nn == 0 {
        return bad("nodes".into(), "a machine needs at least one node".into());
    }
    if nn > u16::MAX as usize || ng > u16::MAX as usize || m.links.len() > u16::MAX as usize {
        return bad("nodes".into(), "too many nodes, groups or links (max 65535)".into());
    }
    if m.name.trim().is_empty() {
        return bad("name".into(), "a machine needs a name".into());
    }
    if let Some(g) = m.clock_ghz {
        if !(g.is_finite() && (0.1..=10.0).contains(&g)) {
            return bad("clock_ghz".into(), format!("{g} is not a core clock in GHz (0.1 to 10)"));
        }
    }
    if !m.page_size.is_power_of_two() || !(MIN_PAGE..=MAX_PAGE).contains(&m.page_size) {
        return bad(
            "page_size".into(),
            format!("{} is not a power of two from {MIN_PAGE} to {MAX_PAGE} bytes (4096 on x86-64)", m.page_size),
        );
    }
    if !m.line_size.is_power_of_two() || m.line_size < 8 || m.line_size > m.page_size.min(4096) {
        return bad(
            "line_size".into(),
            format!("{} is not a power of two from 8 to {} bytes (64 on x86-64)", m.line_size, m.page_size.min(4096)),
        );
    }
    for (f, v, lo, hi) in costs_fields(&m.costs) {
        if !v.is_finite() || v < lo || v > hi {
            let lo_text = if lo > 0.0 { format!("above 0 (at least {lo})") } else { "at least 0".into() };
            return bad(format!("costs.{f}"), format!("{v} is not a finite number {lo_text} and at most {hi}"));
        }
    }
    let mut owner: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, n) in m.nodes.iter().enumerate() {
        if n.idx.ix() != i {
            return bad(format!("nodes[{i}].idx"), format!("is {} but must be {i} (dense, in order)", n.idx.0));
        }
        if m.nodes[..i].iter().any(|o| o.id == n.id) {
            return bad(format!("nodes[{i}].id"), format!("kernel node id {} appears twice", n.id.0));
        }
        for c in n.cpus.iter() {
            if let Some(prev) = owner.insert(c.0, i) {
                return bad(format!("nodes[{i}].cpus"), format!("CPU {} is also in node {}", c.0, m.nodes[prev].id.0));
            }
        }
        if !n.has_cpus() && !n.has_memory() {
            return bad(format!("nodes[{i}]"), "a node needs CPUs or memory".into());
        }
    }
    let mut in_group: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, g) in m.groups.iter().enumerate() {
        if g.idx.ix() != i {
            return bad(format!("groups[{i}].idx"), format!("must be {i}"));
        }
        if g.node.ix() >= nn {
            return bad(
                format!("groups[{i}].node"),
                format!("node index {} does not exist ({})", g.node.0, count(nn, "node")),
            );
        }
        if g.name.trim().is_empty() {
            return bad(format!("groups[{i}].name"), "a CPU group needs a name".into());
        }
        if g.cpus.is_empty() {
            return bad(format!("groups[{i}].cpus"), "a CPU group needs CPUs".into());
        }
        if !g.cpus.is_subset(&m.nodes[g.node.ix()].cpus) {
            return bad(format!("groups[{i}].cpus"), format!("{} are not all CPUs of its node", g.cpus));
        }
        for c in g.cpus.iter() {
            if in_group.insert(c.0, i).is_some() {
                return bad(format!("groups[{i}].cpus"), format!("CPU {} is in two groups", c.0));
            }
        }
        if !m.nodes[g.node.ix()].groups.contains(&g.idx) {
            return bad(format!("nodes[{}].groups", g.node.0), format!("does not list group {i} that names it"));
        }
    }
    for (i, n) in m.nodes.iter().enumerate() {
        for (k, g) in n.groups.iter().enumerate() {
            match m.groups.get(g.ix()) {
                None => {
                    return bad(
                        format!("nodes[{i}].groups[{k}]"),
                        format!("group {} does not exist ({})", g.0, count(ng, "group")),
                    );
                }
                Some(gr) if gr.node.ix() != i => {
                    return bad(
                        format!("nodes[{i}].groups[{k}]"),
                        format!("group {} belongs to node index {}", g.0, gr.node.0),
                    );
                }
                Some(_) => {}
            }
            if n.groups[..k].contains(g) {
                return bad(format!("nodes[{i}].groups"), format!("lists group {} twice", g.0));
            }
        }
    }
    if let Some(c) = owner.keys().find(|c| !in_group.contains_key(c)) {
        return bad("groups".into(), format!("CPU {c} is in a node but in no CPU group"));
    }
    let check_matrix = |field: &str, mx: &crate::Matrix, rows: usize| -> Result<(), TopologyError> {
        if !mx.has_shape(rows, nn) {
            return Err(TopologyError::invalid(
                origin,
                format!("{field}.rows"),
                format!(
                    "must be {rows} rows x {nn} columns, found {} rows of {:?} entries",
                    mx.n_rows(),
                    mx.rows.iter().map(Vec::len).collect::<Vec<_>>()
                ),
            ));
        }
        if let Some(sp) = &mx.spread {
            if !sp.iter().map(Vec::len).eq(mx.rows.iter().map(Vec::len)) {
                return Err(TopologyError::invalid(origin, format!("{field}.spread"), "must have the shape of `rows`"));
            }
        }
        for (r, row) in mx.rows.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                if !v.is_finite() || *v < 0.0 {
                    return Err(TopologyError::invalid(
                        origin,
                        format!("{field}[{r}][{c}]"),
                        format!("{v} is not a finite non-negative number"),
                    ));
                }
            }
        }
        Ok(())
    };
    if let Some(d) = &m.distances {
        check_matrix("distances", d, nn)?;
    }
    if let Some(b) = &m.bandwidth {
        check_matrix("bandwidth.uncontended", &b.uncontended, ng)?;
        if let Some(c) = &b.contended {
            check_matrix("bandwidth.contended", c, ng)?;
        }
        if let Some(l) = &b.latency {
            check_matrix("bandwidth.latency", l, ng)?;
        }
    }
    if let Some(c) = &m.controller_gbps {
        if c.len() != nn || c.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return bad("controller_gbps".into(), format!("needs {nn} non-negative numbers"));
        }
    }
    let end_ok = |e: &End| match e {
        End::Group(g) => g.ix() < ng,
        End::Memory(n) => n.ix() < nn,
    };
    let end_err = |e: &End| match e {
        End::Group(g) => format!("group {} does not exist ({})", g.0, count(ng, "group")),
        End::Memory(n) => format!("node index {} does not exist ({})", n.0, count(nn, "node")),
    };
    for (i, l) in m.links.iter().enumerate() {
        for (f, e) in [("a", &l.a), ("b", &l.b)] {
            if !end_ok(e) {
                return bad(format!("links[{i}].{f}"), end_err(e));
            }
        }
        if l.a == l.b {
            return bad(format!("links[{i}]"), "joins an end to itself".into());
        }
        for (f, v) in [("gbps_ab", l.gbps_ab), ("gbps_ba", l.gbps_ba)] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("links[{i}].{f}"), format!("{v} is not a non-negative bandwidth"));
            }
        }
    }
    for (i, r) in m.routes.iter().enumerate() {
        if r.group.ix() >= ng {
            return bad(format!("routes[{i}].group"), end_err(&End::Group(r.group)));
        }
        if r.node.ix() >= nn {
            return bad(format!("routes[{i}].node"), end_err(&End::Memory(r.node)));
        }
        if let Some(j) = m.routes[..i].iter().position(|o| o.group == r.group && o.node == r.node) {
            return bad(
                format!("routes[{i}]"),
                format!("group {} -> node index {} is already routed by routes[{j}]", r.group.0, r.node.0),
            );
        }
        for (f, hops) in [("hops", Some(&r.hops)), ("write_hops", r.write_hops.as_ref())] {
            for (k, h) in hops.into_iter().flatten().enumerate() {
                if h.link.ix() >= m.links.len() {
                    return bad(
                        format!("routes[{i}].{f}[{k}].link"),
                        format!("link {} does not exist ({})", h.link.0, count(m.links.len(), "link")),
                    );
                }
            }
        }
    }
    for (i, r) in m.routes.iter().enumerate() {
        if let Err(reason) = route_is_a_path(m, r) {
            return bad(format!("routes[{i}]"), reason);
        }
    }
    Ok(())
}

/// A route's hops must chain from node to node: read data leaves the memory of `node` (the
/// first hop starts at one of that node's ends: its memory or one of its groups), each hop
/// starts on the node where the previous one ended (ends of one node are joined on-chip),
/// and the last hop ends on the group's node. Write hops run the other way. This catches a
/// link used in the wrong direction (`forward` means a -> b). Called after indices were checked.
fn route_is_a_path(m: &Machine, r: &crate::machine::Route) -> Result<(), String> {
    let node_of = |e: End| match e {
        End::Memory(n) => n,
        End::Group(g) => m.groups[g.ix()].node,
    };
    let gnode = m.groups[r.group.ix()].node;
    let check = |hops: &[crate::machine::DirLink], what: &str, start: NodeIdx, end: NodeIdx| -> Result<(), String> {
        let mut at = start;
        for (k, h) in hops.iter().enumerate() {
            let l = &m.links[h.link.ix()];
            let (from, to) = if h.forward { (l.a, l.b) } else { (l.b, l.a) };
            if node_of(from) != at {
                return Err(format!(
                    "{what}[{k}] uses link {} from {} (node index {}) but the data is on node index {} \
                     (is `forward` right? true means a -> b)",
                    h.link.0,
                    show(from),
                    node_of(from).0,
                    at.0
                ));
            }
            at = node_of(to);
        }
        if at != end {
            return Err(format!("{what} end on node index {} instead of node index {}", at.0, end.0));
        }
        Ok(())
    };
    check(&r.hops, "hops", r.node, gnode)?;
    if let Some(w) = &r.write_hops {
        check(w, "write_hops", gnode, r.node)?;
    }
    Ok(())
}

fn show(e: End) -> String {
    match e {
        End::Group(g) => format!("group {}", g.0),
        End::Memory(n) => format!("the memory of node index {}", n.0),
    }
}

/// "the machine has 3 nodes: 0..2" for error messages.
fn count(n: usize, what: &str) -> String {
    match n {
        0 => format!("the machine has no {what}s"),
        1 => format!("the machine has 1 {what}: 0"),
        _ => format!("the machine has {n} {what}s: 0..{}", n - 1),
    }
}
