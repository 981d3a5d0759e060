//! The report pages: `index.html` (self-contained: styles and SVG plots inlined) and
//! `report.md` (links the PNG plots next to it).
//!
//! Content: the comparison table, speed-up bars, and per workload the pages moved per cycle
//! and, for every policy (first seed), the node x node access map and controller/link
//! utilisation.

use crate::common::{join, plural};
use crate::plot::policy_colours;
use crate::report::model::{Document, RunRecord, ORACLE_NOTE};
use crate::report::plots;
use crate::report::slug;
use crate::report::stats::Summary;
use crate::report::table::{self, esc};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One plot written to disk: title, PNG and SVG file names.
struct Plot {
    title: String,
    png: String,
    svg: String,
}

/// The plots of one workload.
struct WorkloadPlots {
    workload: String,
    pages: Option<Plot>,
    runs: Vec<(String, Option<Plot>, Option<Plot>)>,
}

fn plot(title: String, r: Result<(String, String)>, warnings: &mut Vec<String>) -> Option<Plot> {
    match r {
        Ok((png, svg)) => Some(Plot { title, png, svg }),
        Err(e) => {
            warnings.push(format!("{title}: {e:#}"));
            None
        }
    }
}

/// Write the plots and both pages; returns the HTML page's path.
pub fn write(doc: &Document, s: &Summary, dir: &Path) -> Result<PathBuf> {
    let mut warnings = Vec::new();
    let machine = if doc.machine.is_empty() { "(unknown machine)" } else { &doc.machine };
    let what = kind(doc);
    let bars = if !has_speedups(s) {
        None
    } else {
        let title = format!("Speed-up vs {} on {machine} ({})", reference(doc), kind(doc));
        plot("speed-up".into(), plots::speedup_bars(s, &title, dir, "speedup"), &mut warnings)
    };
    let first_seed = doc.seeds().first().copied().unwrap_or(0);
    let colours = policy_colours(&s.policies);
    let mut per_workload = Vec::new();
    for w in &s.workloads {
        let runs: Vec<(usize, &RunRecord)> = s
            .policies
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                doc.results.iter().find(|r| &r.workload == w && &r.policy == p && r.seed == first_seed).map(|r| (i, r))
            })
            .collect();
        let mut estimated = false;
        let series: Vec<plots::PagesSeries> = runs
            .iter()
            .filter(|(_, r)| r.pages_planned_per_cycle.iter().any(|&n| n > 0))
            .map(|&(i, r)| {
                let (points, est) = pages_points(r);
                estimated |= est;
                plots::PagesSeries { policy: r.policy.clone(), colour: colours[i], points }
            })
            .collect();
        // Only the simulator records the pages planned per cycle (`ptb compare`).
        let pages = (doc.simulated && runs.iter().any(|(_, r)| r.cycles > 0)).then(|| {
            let until = runs.iter().map(|(_, r)| r.runtime_s).fold(0.0, f64::max);
            let stem = format!("pages-{}", slug(w));
            let title = format!("{w}: pages asked to move per cycle (simulated, seed {first_seed})");
            plot(
                title.clone(),
                plots::pages_per_cycle(&title, what, &series, until, estimated, dir, &stem),
                &mut warnings,
            )
        });
        let pages = pages.flatten();
        let mut rp = Vec::new();
        for (_, r) in runs {
            let stem = format!("{}-{}", slug(w), slug(&r.policy));
            let am = r.access_map.as_ref().and_then(|m| {
                let t = format!("{w} under {}: access map ({what})", r.policy);
                plot(t.clone(), plots::access_map(&t, what, m, dir, &format!("access-{stem}")), &mut warnings)
            });
            let ut = (!r.controller_utilisation.is_empty() || !r.link_utilisation.is_empty()).then(|| {
                let t = format!("{w} under {}: controller and link utilisation ({what})", r.policy);
                plot(
                    t.clone(),
                    plots::utilisation(
                        &t,
                        &r.controller_utilisation,
                        &r.link_utilisation,
                        dir,
                        &format!("util-{stem}"),
                    ),
                    &mut warnings,
                )
            });
            rp.push((r.policy.clone(), am, ut.flatten()));
        }
        per_workload.push(WorkloadPlots { workload: w.clone(), pages, runs: rp });
    }
    let md = markdown(doc, s, machine, bars.as_ref(), &per_workload, &warnings);
    let md_path = dir.join("report.md");
    std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    let html = html(doc, s, machine, bars.as_ref(), &per_workload, &warnings, dir)?;
    let html_path = dir.join("index.html");
    std::fs::write(&html_path, html).with_context(|| format!("writing {}", html_path.display()))?;
    Ok(html_path)
}

/// A run's (time s, pages) per policy cycle: the recorded decision times, or, for documents
/// written before ptb recorded them, cycles spread evenly over the run (then `true`).
fn pages_points(r: &RunRecord) -> (Vec<(f64, u64)>, bool) {
    let p = &r.pages_planned_per_cycle;
    if r.pages_planned_at_s.len() == p.len() {
        return (r.pages_planned_at_s.iter().copied().zip(p.iter().copied()).collect(), false);
    }
    let n = p.len().max(1) as f64;
    (p.iter().enumerate().map(|(i, &v)| (r.runtime_s * (i + 1) as f64 / n, v)).collect(), true)
}

fn has_speedups(s: &Summary) -> bool {
    s.cells.iter().flatten().any(Option::is_some)
}

/// What speed-ups are relative to: first-touch, or the reference mode of a measured comparison.
fn reference(doc: &Document) -> String {
    doc.extra.get("reference").and_then(|v| v.as_str()).unwrap_or("first-touch").to_string()
}

/// The page title: `ptb report: opteron6272-8n (simulated)`, or for a trace
/// `ptb report: pid 4242 on my-server (measured)`.
fn title(doc: &Document, machine: &str) -> String {
    match (doc.simulated, doc.results.first()) {
        (false, Some(r)) => format!("ptb report: {} on {machine} ({})", r.workload, kind(doc)),
        _ => format!("ptb report: {machine} ({})", kind(doc)),
    }
}

fn kind(doc: &Document) -> &'static str {
    if doc.simulated {
        "simulated"
    } else {
        "measured"
    }
}

fn intro(doc: &Document, s: &Summary, machine: &str) -> Vec<String> {
    // A measured comparison (`ptb compare --real`) says itself what it is.
    if let Some(lines) = doc.extra.get("intro").and_then(|v| v.as_array()) {
        let mut v: Vec<String> = lines.iter().filter_map(|l| l.as_str().map(String::from)).collect();
        let more: Vec<String> = s.notes.iter().filter(|n| !v.contains(n)).cloned().collect();
        v.extend(more);
        return v;
    }
    if !doc.simulated {
        let mut v = vec![format!("MEASURED (recorded trace) on machine {machine}; nothing here is simulated.")];
        for r in &doc.results {
            let extra: Vec<String> =
                r.extra.iter().map(|(k, v)| format!("{}: {}", k.replace('_', " "), plain(v))).collect();
            v.push(format!("{}: {:.3} s recorded; {}", r.workload, r.runtime_s, extra.join(", ")));
        }
        return v;
    }
    let seeds = doc.seeds();
    let mut v = vec![format!(
        "SIMULATED results on machine {machine}: {}, {}, {} ({}).",
        plural(s.workloads.len(), "workload", "workloads"),
        plural(s.policies.len(), "policy", "policies"),
        plural(seeds.len(), "seed", "seeds"),
        join(&seeds)
    )];
    if has_speedups(s) {
        v.push(format!("in the table, bold marks the fastest {} of each row", best_what(s)));
    }
    v.extend(s.notes.iter().cloned());
    v
}

/// A JSON value as text for people: strings without quotes.
pub(crate) fn plain(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the bold cells of the table are the best of.
fn best_what(s: &Summary) -> &'static str {
    if s.policies.iter().any(|p| table::is_bound(p)) {
        "policy (the oracle columns, bounds found by search, are not counted)"
    } else {
        "policy"
    }
}

fn markdown(
    doc: &Document,
    s: &Summary,
    machine: &str,
    bars: Option<&Plot>,
    per: &[WorkloadPlots],
    warnings: &[String],
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}\n", title(doc, machine));
    for l in intro(doc, s, machine) {
        let _ = writeln!(o, "- {l}");
    }
    if has_speedups(s) {
        let _ = writeln!(o, "\n## Speed-up vs {} ({})\n\n{}", reference(doc), kind(doc), table::markdown(s));
    }
    if let Some(b) = bars {
        let _ = writeln!(o, "![{}]({})\n", b.title, b.png);
    }
    for w in per {
        let _ = writeln!(o, "## {}\n", w.workload);
        if let Some(p) = &w.pages {
            let _ = writeln!(o, "![{}]({})\n", p.title, p.png);
        }
        for (policy, am, ut) in &w.runs {
            let _ = writeln!(o, "### {} under {policy}\n", w.workload);
            for p in [am, ut].into_iter().flatten() {
                let _ = writeln!(o, "![{}]({})\n", p.title, p.png);
            }
        }
    }
    if !warnings.is_empty() {
        let _ = writeln!(o, "## Plots not drawn\n");
        for w in warnings {
            let _ = writeln!(o, "- {w}");
        }
    }
    o
}

fn inline_svg(dir: &Path, p: &Plot) -> Result<String> {
    let path = dir.join(&p.svg);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let body = match text.find("<svg") {
        Some(i) => &text[i..],
        None => &text,
    };
    Ok(format!(
        "<figure>{body}<figcaption>{} (<a href=\"{}\">PNG</a>, <a href=\"{}\">SVG</a>)</figcaption></figure>\n",
        esc(&p.title),
        esc(&p.png),
        esc(&p.svg)
    ))
}

const STYLE: &str = "td.best{background:#e8f4e8}body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:2em;color:#222;max-width:1400px}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\
thead th{background:#eee}tbody th{text-align:left}tr.stat td,tr.stat th{background:#f6f6f6;font-weight:bold}\
figure{display:inline-block;margin:0.5em;vertical-align:top}figcaption{font-size:80%;color:#555}\
svg{max-width:100%;height:auto}.note{color:#555;font-size:90%}.warn{color:#a00}";

fn html(
    doc: &Document,
    s: &Summary,
    machine: &str,
    bars: Option<&Plot>,
    per: &[WorkloadPlots],
    warnings: &[String],
    dir: &Path,
) -> Result<String> {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n<ul class=\"note\">",
        t = esc(&title(doc, machine)),
    );
    for l in intro(doc, s, machine) {
        let _ = write!(o, "<li>{}</li>", esc(&l));
    }
    o.push_str("</ul>\n");
    if has_speedups(s) {
        let _ = writeln!(o, "<h2>Speed-up vs {} ({})</h2>\n{}", esc(&reference(doc)), kind(doc), table::html(s));
    }
    if let Some(b) = bars {
        o.push_str(&inline_svg(dir, b)?);
    }
    for w in per {
        let _ = writeln!(o, "<h2>{}</h2>", esc(&w.workload));
        if let Some(p) = &w.pages {
            o.push_str(&inline_svg(dir, p)?);
        }
        for (policy, am, ut) in &w.runs {
            let _ = writeln!(o, "<details><summary>{} under {}</summary>", esc(&w.workload), esc(policy));
            for p in [am, ut].into_iter().flatten() {
                o.push_str(&inline_svg(dir, p)?);
            }
            o.push_str("</details>\n");
        }
    }
    if !warnings.is_empty() {
        o.push_str("<h2>Plots not drawn</h2><ul class=\"warn\">");
        for w in warnings {
            let _ = write!(o, "<li>{}</li>", esc(w));
        }
        o.push_str("</ul>");
    }
    if s.policies.iter().any(|p| p == crate::report::model::ORACLE) {
        let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(ORACLE_NOTE));
    }
    o.push_str("</body></html>\n");
    Ok(o)
}
