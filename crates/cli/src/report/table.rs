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

/// Whether a column is a bound found by search (`oracle`, `oracle-moved`), not a policy.
pub fn is_bound(policy: &str) -> bool {
    policy == crate::report::model::ORACLE || policy == ptb_oracle::moved::ORACLE_MOVED
}

/// Which cells of each row to mark as the best policy's: the highest value among the policies
/// (bounds not counted) at the precision shown, on the speed-up and oracle-share rows; none
/// when every policy ties. `values[r][p]` is `None` where there is no value or no ranking.
fn best_of(values: &[Option<f64>], policies: &[String]) -> Vec<bool> {
    let ranked: Vec<(usize, f64)> = values
        .iter()
        .enumerate()
        .filter(|(i, _)| !is_bound(&policies[*i]))
        .filter_map(|(i, v)| v.filter(|x| x.is_finite()).map(|x| (i, (x * 100.0).round())))
        .collect();
    let Some(top) = ranked.iter().map(|r| r.1).reduce(f64::max) else { return vec![false; values.len()] };
    let winners: Vec<usize> = ranked.iter().filter(|r| r.1 == top).map(|r| r.0).collect();
    let mut out = vec![false; values.len()];
    if winners.len() < ranked.len() {
        winners.into_iter().for_each(|i| out[i] = true);
    }
    out
}

/// For every row of [`rows`], which policy cells hold that row's best value.
pub fn best_cells(s: &Summary) -> Vec<Vec<bool>> {
    let mut out: Vec<Vec<bool>> = s
        .cells
        .iter()
        .map(|row| best_of(&row.iter().map(|c| c.map(|c| c.mean)).collect::<Vec<_>>(), &s.policies))
        .collect();
    let col = |f: &dyn Fn(&crate::report::stats::PolicySummary) -> Option<f64>| {
        best_of(&s.per_policy.iter().map(f).collect::<Vec<_>>(), &s.policies)
    };
    out.push(col(&|p| p.geomean_speedup));
    out.push(col(&|p| p.worst_speedup));
    if s.policies.iter().any(|p| p == crate::report::model::ORACLE) {
        // Shares are shown in whole percent, which is the precision best_of compares at.
        out.push(col(&|p| p.share_of_oracle));
        out.push(col(&|p| p.worst_share_of_oracle));
    }
    let none = vec![false; s.policies.len()];
    out.extend(std::iter::repeat_n(none, 3));
    out
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

/// The table as Markdown; the best policy of each row in bold.
pub fn markdown(s: &Summary) -> String {
    let (header, rows, _) = rows(s);
    let best = best_cells(s);
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(j, c)| {
                if j > 0 && best.get(i).and_then(|b| b.get(j - 1)).copied().unwrap_or(false) {
                    format!("**{c}**")
                } else {
                    c.clone()
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// The table as an HTML `<table>`; the best policy of each row in bold (class `best`).
pub fn html(s: &Summary) -> String {
    let (header, rows, body) = rows(s);
    let best = best_cells(s);
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
            } else if best.get(i).and_then(|b| b.get(j - 1)).copied().unwrap_or(false) {
                out.push_str(&format!("<td class=\"best\"><b>{}</b></td>", esc(c)));
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
