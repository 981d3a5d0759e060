//! The comparison table as text (terminal) and as Markdown/HTML rows.
//!
//! Rows: workloads, then geometric mean, worst case, share of oracle, and the costs (pages
//! migrated, decision time). Columns: policies, the oracle last. Cells: speed-up over
//! first-touch (simulated), `mean ± sd` when there are several seeds.

use crate::report::stats::{Cell, Summary};
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};

/// A cell's text.
pub fn cell_text(c: Option<Cell>) -> String {
    match c {
        None => "-".into(),
        Some(c) if c.seeds > 1 => format!("{:.2}x ±{:.2}", c.mean, c.sd),
        Some(c) => format!("{:.2}x", c.mean),
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

/// Header and rows of the table as plain strings (shared by every output format).
pub fn rows(s: &Summary) -> (Vec<String>, Vec<Vec<String>>, usize) {
    let mut header = vec!["workload".to_string()];
    header.extend(s.policies.iter().cloned());
    let mut out: Vec<Vec<String>> = Vec::new();
    for (w, row) in s.workloads.iter().zip(&s.cells) {
        let mut r = vec![w.clone()];
        r.extend(row.iter().map(|c| cell_text(*c)));
        out.push(r);
    }
    let body = out.len();
    let mut stat = |name: &str, f: &dyn Fn(&crate::report::stats::PolicySummary) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(s.per_policy.iter().map(f));
        out.push(r);
    };
    stat("geometric mean", &|p| opt(p.geomean_speedup, |v| format!("{v:.2}x")));
    stat("worst", &|p| opt(p.worst_speedup, |v| format!("{v:.2}x")));
    if s.policies.iter().any(|p| p == crate::report::model::ORACLE) {
        stat("oracle share (geomean)", &|p| opt(p.share_of_oracle, |v| format!("{:.0}%", 100.0 * v)));
        stat("oracle share (worst, oracle>1.1x)", &|p| opt(p.worst_share_of_oracle, |v| format!("{:.0}%", 100.0 * v)));
    }
    stat("pages migrated", &|p| format!("{:.0}", p.pages_migrated));
    stat("threads migrated", &|p| format!("{:.0}", p.threads_migrated));
    stat("decision ms/cycle", &|p| opt(p.decision_ms_per_cycle, |v| format!("{v:.3}")));
    (header, out, body)
}

/// The table for a terminal.
pub fn terminal(s: &Summary) -> String {
    let (header, rows, _) = rows(s);
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(header);
    for r in rows {
        t.add_row(r);
    }
    for c in t.column_iter_mut().skip(1) {
        c.set_cell_alignment(CellAlignment::Right);
    }
    t.to_string()
}

/// The table as Markdown.
pub fn markdown(s: &Summary) -> String {
    let (header, rows, _) = rows(s);
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

/// The table as an HTML `<table>`.
pub fn html(s: &Summary) -> String {
    let (header, rows, body) = rows(s);
    let mut out = String::from("<table>\n<thead><tr>");
    for h in &header {
        out.push_str(&format!("<th>{}</th>", esc(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (i, r) in rows.iter().enumerate() {
        let class = if i >= body { " class=\"stat\"" } else { "" };
        out.push_str(&format!("<tr{class}>"));
        for (j, c) in r.iter().enumerate() {
            if j == 0 {
                out.push_str(&format!("<th>{}</th>", esc(c)));
            } else {
                out.push_str(&format!("<td>{}</td>", esc(c)));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
