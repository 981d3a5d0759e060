//! The report's plots, each written as PNG and SVG: speed-up bars per workload, the node x node
//! access map of a run, controller and link utilisation, and pages moved per policy cycle.
//!
//! Layout is computed by hand in pixels (cells, bars, labels, legend) so every label is shown
//! once and in full. The bundled font, colours, tick and text helpers come from [`crate::plot`].

use crate::plot::{de, ensure_font, nice_ticks, policy_colours, text_style as ts, viridis, PALETTE};
use crate::report::model::{AccessMapRec, ControllerRec, LinkRec};
use crate::report::stats::Summary;
use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use std::path::Path;

const GREY: RGBColor = RGBColor(90, 90, 90);
const GRID: RGBColor = RGBColor(225, 225, 225);

type Area<'a, DB> = DrawingArea<DB, Shift>;

/// Something drawable on any backend.
trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, a: &Area<DB>) -> Result<()>;
}

/// Write `fig` as `<stem>.png` and `<stem>.svg` in `dir`; returns the two file names.
fn write<F: Figure>(fig: &F, dir: &Path, stem: &str) -> Result<(String, String)> {
    ensure_font();
    let (png, svg) = (format!("{stem}.png"), format!("{stem}.svg"));
    crate::plot::write_png(&dir.join(&png), fig.size(), |a| fig.draw(a))?;
    let p = dir.join(&svg);
    let area = SVGBackend::new(&p, fig.size()).into_drawing_area();
    fig.draw(&area)?;
    area.present().map_err(de).with_context(|| format!("writing {}", p.display()))?;
    Ok((png, svg))
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn text_w(s: &str, px: f64) -> i32 {
    (s.chars().count() as f64 * px * 0.6).ceil() as i32
}

// ---------------------------------------------------------------------------------------------
// Speed-up bars

struct SpeedupBars<'a> {
    title: String,
    s: &'a Summary,
    colours: Vec<RGBColor>,
    left: i32,
    top: i32,
    plot_h: i32,
    group_w: i32,
    bar_w: i32,
    legend_w: i32,
    /// Axis range (value at the bottom and at the top of a panel).
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    /// Categories per panel (panels are stacked vertically).
    per_row: usize,
}

/// Vertical space of one panel besides its plot height (labels, gap).
const PANEL_GAP: i32 = 60;
/// Size of the value printed on every bar.
const VALUE_PX: f64 = 10.0;
/// Pixels a bar's value label needs beyond the bar's end (rotated text "10.00").
const LABEL_ROOM: i32 = 32;
/// Height of the marker drawn for a value at the 1.0x baseline (no bar to see otherwise).
const FLAT_MARK: i32 = 3;

impl SpeedupBars<'_> {
    fn n_cats(&self) -> usize {
        self.s.workloads.len() + 1
    }

    fn rows(&self) -> usize {
        self.n_cats().div_ceil(self.per_row.max(1))
    }

    fn y(&self, top: i32, v: f64) -> i32 {
        let t = if self.hi > self.lo { (v - self.lo) / (self.hi - self.lo) } else { 0.0 };
        top + self.plot_h - (t.clamp(0.0, 1.0) * self.plot_h as f64).round() as i32
    }
}

impl Figure for SpeedupBars<'_> {
    fn size(&self) -> (u32, u32) {
        let w = self.left + self.group_w * self.per_row.min(self.n_cats()) as i32 + self.legend_w + 20;
        let h = self.top + self.rows() as i32 * (self.plot_h + PANEL_GAP) + 30;
        ((w.max(text_w(&self.title, 20.0) + 40)) as u32, h as u32)
    }

    fn draw<DB: DrawingBackend>(&self, a: &Area<DB>) -> Result<()> {
        a.fill(&WHITE).map_err(de)?;
        let (w, _) = a.dim_in_pixel();
        a.draw_text(&self.title, &ts(20.0, &BLACK, HPos::Center, VPos::Top), (w as i32 / 2, 10)).map_err(de)?;
        let cats: Vec<&str> = self.s.workloads.iter().map(String::as_str).chain(std::iter::once("geomean")).collect();
        // The axis says what the title says, without the machine: "speed-up vs X (simulated)".
        let axis = match (self.title.split_once(" on "), self.title.rfind(" (")) {
            (Some((head, _)), Some(k)) => format!("{}{}", head.to_lowercase(), &self.title[k..]),
            _ => self.title.to_lowercase(),
        };
        let axis = format!("{axis}; bars start at 1.0x = as fast as the reference");
        a.draw_text(&axis, &ts(13.0, &GREY, HPos::Left, VPos::Bottom), (8, self.top - 12)).map_err(de)?;
        let np = self.s.policies.len() as i32;
        let inner = np * self.bar_w;
        let mut right_max = self.left;
        let up = ts(VALUE_PX, &BLACK, HPos::Left, VPos::Center).transform(FontTransform::Rotate270);
        let down = ts(VALUE_PX, &BLACK, HPos::Right, VPos::Center).transform(FontTransform::Rotate270);
        for (row, chunk) in cats.chunks(self.per_row.max(1)).enumerate() {
            let top = self.top + row as i32 * (self.plot_h + PANEL_GAP);
            let right = self.left + self.group_w * chunk.len() as i32;
            right_max = right_max.max(right);
            for &t in &self.ticks {
                let y = self.y(top, t);
                a.draw(&PathElement::new(vec![(self.left, y), (right, y)], GRID)).map_err(de)?;
                a.draw_text(&format!("{t:.2}x"), &ts(13.0, &BLACK, HPos::Right, VPos::Center), (self.left - 6, y))
                    .map_err(de)?;
            }
            let base = self.y(top, 1.0);
            for (jj, cat) in chunk.iter().enumerate() {
                let j = row * self.per_row + jj;
                let gx = self.left + jj as i32 * self.group_w + (self.group_w - inner) / 2;
                for (i, p) in self.s.policies.iter().enumerate() {
                    let (v, sd) = if j < self.s.workloads.len() {
                        match self.s.cells[j][i] {
                            Some(c) => (c.mean, c.sd),
                            None => continue,
                        }
                    } else {
                        match self.s.policy(p).and_then(|x| x.geomean_speedup) {
                            Some(g) => (g, 0.0),
                            None => continue,
                        }
                    };
                    let x = gx + i as i32 * self.bar_w;
                    let yv = self.y(top, v);
                    // Every bar has one edge on the 1.0x baseline; a value that rounds onto it
                    // gets a flat marker astride the line so it is still seen.
                    let (y0, y1) = if (yv - base).abs() < FLAT_MARK {
                        (base - FLAT_MARK / 2 - 1, base + FLAT_MARK / 2 + 1)
                    } else {
                        (yv.min(base), yv.max(base))
                    };
                    a.draw(&Rectangle::new([(x + 1, y0), (x + self.bar_w - 1, y1)], self.colours[i].filled()))
                        .map_err(de)?;
                    if sd > 0.0 {
                        let cx = x + self.bar_w / 2;
                        a.draw(&PathElement::new(vec![(cx, self.y(top, v - sd)), (cx, self.y(top, v + sd))], BLACK))
                            .map_err(de)?;
                    }
                    let cx = x + self.bar_w / 2;
                    let label = format!("{v:.2}");
                    if v >= 1.0 {
                        a.draw_text(&label, &up, (cx, y0.min(self.y(top, v + sd)) - 3)).map_err(de)?;
                    } else {
                        a.draw_text(&label, &down, (cx, y1.max(self.y(top, v - sd)) + 3)).map_err(de)?;
                    }
                }
                let cx = self.left + jj as i32 * self.group_w + self.group_w / 2;
                let style = if j < self.s.workloads.len() { BLACK } else { GREY };
                a.draw_text(cat, &ts(13.0, &style, HPos::Center, VPos::Top), (cx, top + self.plot_h + 8))
                    .map_err(de)?;
            }
            a.draw(&PathElement::new(vec![(self.left, base), (right, base)], BLACK.stroke_width(2))).map_err(de)?;
            a.draw_text("1.0x", &ts(13.0, &BLACK, HPos::Left, VPos::Center), (right + 4, base)).map_err(de)?;
            a.draw(&PathElement::new(vec![(self.left, top), (self.left, top + self.plot_h)], BLACK)).map_err(de)?;
        }
        let lx = right_max + 40;
        for (i, p) in self.s.policies.iter().enumerate() {
            let y = self.top + 10 + i as i32 * 22;
            a.draw(&Rectangle::new([(lx, y - 7), (lx + 14, y + 7)], self.colours[i].filled())).map_err(de)?;
            a.draw_text(p, &ts(13.0, &BLACK, HPos::Left, VPos::Center), (lx + 20, y)).map_err(de)?;
        }
        let note = if self.s.seeds > 1 { "bars: mean over seeds; whiskers: ± sd" } else { "one seed" };
        let bottom = self.top + self.rows() as i32 * (self.plot_h + PANEL_GAP) - PANEL_GAP + 30;
        a.draw_text(note, &ts(12.0, &GREY, HPos::Left, VPos::Top), (self.left, bottom)).map_err(de)?;
        Ok(())
    }
}

/// Grouped speed-up bars, one group per workload plus the geometric mean. Bars grow up or
/// down from the 1.0x baseline (the reference), every bar carries its value, and each policy
/// has its colour of [`policy_colours`]. `title` says what the speed-up is relative to and
/// whether it is simulated or measured.
pub fn speedup_bars(s: &Summary, title: &str, dir: &Path, stem: &str) -> Result<(String, String)> {
    let cells = s.cells.iter().flatten().flatten().flat_map(|c| [c.mean - c.sd, c.mean + c.sd]);
    let geo = s.per_policy.iter().filter_map(|p| p.geomean_speedup);
    let (lo, hi) =
        cells.chain(geo).fold((1.0f64, 1.0f64), |(l, h), v| if v.is_finite() { (l.min(v), h.max(v)) } else { (l, h) });
    let np = s.policies.len() as i32;
    let bar_w = if np > 6 { 13 } else { 18 };
    let cat_w = s.workloads.iter().map(|w| text_w(w, 13.0)).max().unwrap_or(40);
    let group_w = (np * bar_w + 14).max(cat_w + 10);
    let legend_w = s.policies.iter().map(|p| text_w(p, 13.0)).max().unwrap_or(40) + 70;
    // At most ~1100 px of groups per panel.
    let per_row = ((1100 / group_w.max(1)) as usize).max(1);
    let plot_h = if s.workloads.len() + 1 > per_row { 260 } else { 340 };
    // Room for the value labels beyond the longest bar each way.
    let span = (hi - lo).max(0.2);
    let per_px = span / (plot_h - 2 * LABEL_ROOM) as f64;
    let ticks = nice_ticks((lo - per_px * LABEL_ROOM as f64).max(0.0), hi + per_px * LABEL_ROOM as f64, 6);
    let (axis_lo, axis_hi) = (ticks[0], *ticks.last().unwrap_or(&hi));
    let fig = SpeedupBars {
        title: title.to_string(),
        s,
        colours: policy_colours(&s.policies),
        left: 70,
        top: 70,
        plot_h,
        group_w,
        bar_w,
        legend_w,
        lo: axis_lo,
        hi: axis_hi,
        ticks,
        per_row,
    };
    write(&fig, dir, stem)
}

// ---------------------------------------------------------------------------------------------
// Access map

const FOOT2: &str = "bottom row: share served by each memory controller";

struct AccessMapFig<'a> {
    title: String,
    what: &'a str,
    m: &'a AccessMapRec,
    left: i32,
    top: i32,
    cw: i32,
    ch: i32,
}

impl Figure for AccessMapFig<'_> {
    fn size(&self) -> (u32, u32) {
        let n = self.m.nodes.len() as i32;
        let w = (self.left + n * self.cw + 40).max(text_w(FOOT2, 12.0) + 180).max(text_w(&self.title, 18.0) + 30);
        (w as u32, (self.top + (n + 1) * self.ch + 12 + 70) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, a: &Area<DB>) -> Result<()> {
        a.fill(&WHITE).map_err(de)?;
        let (w, _) = a.dim_in_pixel();
        a.draw_text(&self.title, &ts(18.0, &BLACK, HPos::Center, VPos::Top), (w as i32 / 2, 8)).map_err(de)?;
        let n = self.m.nodes.len() as i32;
        let grid_w = n * self.cw;
        a.draw_text("node of the memory", &ts(13.0, &GREY, HPos::Center, VPos::Top), (self.left + grid_w / 2, 36))
            .map_err(de)?;
        let hi = self.m.shares.iter().flatten().copied().fold(0.0f64, f64::max).max(1e-12);
        for (c, id) in self.m.nodes.iter().enumerate() {
            let x = self.left + c as i32 * self.cw + self.cw / 2;
            a.draw_text(&id.to_string(), &ts(14.0, &BLACK, HPos::Center, VPos::Bottom), (x, self.top - 6))
                .map_err(de)?;
        }
        let cell = |a: &Area<DB>, x: i32, y: i32, v: f64, scale: f64| -> Result<()> {
            let t = v / scale;
            let fill = if v > 0.0 { viridis(t) } else { RGBColor(245, 245, 245) };
            let ink = if v > 0.0 && t < 0.6 { WHITE } else { BLACK };
            a.draw(&Rectangle::new([(x, y), (x + self.cw, y + self.ch)], fill.filled())).map_err(de)?;
            a.draw(&Rectangle::new([(x, y), (x + self.cw, y + self.ch)], WHITE.stroke_width(2))).map_err(de)?;
            let txt = if v <= 0.0 {
                "0".to_string()
            } else if v < 0.001 {
                "<0.1".into()
            } else {
                format!("{:.1}", 100.0 * v)
            };
            a.draw_text(
                &txt,
                &ts(if self.cw < 50 { 11.0 } else { 13.0 }, &ink, HPos::Center, VPos::Center),
                (x + self.cw / 2, y + self.ch / 2),
            )
            .map_err(de)?;
            Ok(())
        };
        for (r, row) in self.m.shares.iter().enumerate() {
            let y = self.top + r as i32 * self.ch;
            a.draw_text(
                &self.m.nodes[r].to_string(),
                &ts(14.0, &BLACK, HPos::Right, VPos::Center),
                (self.left - 8, y + self.ch / 2),
            )
            .map_err(de)?;
            for (c, &v) in row.iter().enumerate() {
                cell(a, self.left + c as i32 * self.cw, y, v, hi)?;
            }
            // Diagonal (local) outline.
            let x = self.left + r as i32 * self.cw;
            a.draw(&Rectangle::new(
                [(x + 2, y + 2), (x + self.cw - 2, y + self.ch - 2)],
                RGBColor(220, 50, 50).stroke_width(2),
            ))
            .map_err(de)?;
        }
        a.draw_text("CPU node", &ts(13.0, &GREY, HPos::Right, VPos::Bottom), (self.left - 8, self.top - 6))
            .map_err(de)?;
        // Controller row, separated by a gap.
        let yc = self.top + n * self.ch + 12;
        let ctrl_hi = self.m.controller_share.iter().copied().fold(0.0f64, f64::max).max(1e-12);
        for (c, &v) in self.m.controller_share.iter().enumerate() {
            cell(a, self.left + c as i32 * self.cw, yc, v, ctrl_hi)?;
        }
        a.draw_text("controller", &ts(13.0, &BLACK, HPos::Right, VPos::Center), (self.left - 8, yc + self.ch / 2))
            .map_err(de)?;
        let foot = format!(
            "% of all accesses; local (red outline) {:.1}%, remote {:.1}%",
            100.0 * self.m.local,
            100.0 * self.m.remote
        );
        a.draw_text(&foot, &ts(12.0, &GREY, HPos::Left, VPos::Top), (10, yc + self.ch + 14)).map_err(de)?;
        a.draw_text(
            &format!("{FOOT2} ({})", self.what),
            &ts(12.0, &GREY, HPos::Left, VPos::Top),
            (10, yc + self.ch + 32),
        )
        .map_err(de)?;
        Ok(())
    }
}

/// The node x node access map of one run.
/// `what` says where the numbers come from (`simulated`, `measured samples`).
pub fn access_map(title: &str, what: &str, m: &AccessMapRec, dir: &Path, stem: &str) -> Result<(String, String)> {
    let n = m.nodes.len().max(1) as i32;
    let cw = if n > 8 { 44 } else { 58 };
    let fig = AccessMapFig { title: title.to_string(), what, m, left: 100, top: 80, cw, ch: 34 };
    write(&fig, dir, stem)
}

// ---------------------------------------------------------------------------------------------
// Utilisation bars (controllers and links)

struct UtilFig {
    title: String,
    rows: Vec<(String, f64, f64)>,
    label_w: i32,
    bar_len: i32,
    row_h: i32,
    top: i32,
}

impl Figure for UtilFig {
    fn size(&self) -> (u32, u32) {
        let w = self.label_w + self.bar_len + 90;
        ((w.max(text_w(&self.title, 18.0) + 30)) as u32, (self.top + self.rows.len() as i32 * self.row_h + 60) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, a: &Area<DB>) -> Result<()> {
        a.fill(&WHITE).map_err(de)?;
        let (w, _) = a.dim_in_pixel();
        a.draw_text(&self.title, &ts(18.0, &BLACK, HPos::Center, VPos::Top), (w as i32 / 2, 8)).map_err(de)?;
        let x0 = self.label_w;
        let bottom = self.top + self.rows.len() as i32 * self.row_h;
        for t in [0.0, 0.25, 0.5, 0.75, 1.0] {
            let x = x0 + (t * self.bar_len as f64) as i32;
            a.draw(&PathElement::new(vec![(x, self.top - 4), (x, bottom)], GRID)).map_err(de)?;
            a.draw_text(&format!("{:.0}%", t * 100.0), &ts(12.0, &BLACK, HPos::Center, VPos::Top), (x, bottom + 4))
                .map_err(de)?;
        }
        for (i, (label, mean, max)) in self.rows.iter().enumerate() {
            let y = self.top + i as i32 * self.row_h;
            a.draw_text(label, &ts(12.0, &BLACK, HPos::Right, VPos::Center), (x0 - 8, y + self.row_h / 2))
                .map_err(de)?;
            let len = |v: f64| (v.clamp(0.0, 1.0) * self.bar_len as f64).round() as i32;
            let c = if label.starts_with("controller") { PALETTE[0] } else { PALETTE[1] };
            a.draw(&Rectangle::new([(x0, y + 3), (x0 + len(*mean).max(1), y + self.row_h - 3)], c.filled()))
                .map_err(de)?;
            let xm = x0 + len(*max);
            a.draw(&PathElement::new(vec![(xm, y + 1), (xm, y + self.row_h - 1)], BLACK.stroke_width(2)))
                .map_err(de)?;
            a.draw_text(
                &format!("{:.0}% (peak {:.0}%)", 100.0 * mean, 100.0 * max),
                &ts(11.0, &GREY, HPos::Left, VPos::Center),
                (x0 + self.bar_len + 6, y + self.row_h / 2),
            )
            .map_err(de)?;
        }
        a.draw_text(
            "bar: mean utilisation over the run; black tick: peak",
            &ts(12.0, &GREY, HPos::Left, VPos::Top),
            (10, bottom + 24),
        )
        .map_err(de)?;
        Ok(())
    }
}

/// Mean and peak utilisation of every controller and directed link of one run.
pub fn utilisation(
    title: &str,
    ctrls: &[ControllerRec],
    links: &[LinkRec],
    dir: &Path,
    stem: &str,
) -> Result<(String, String)> {
    let mut rows: Vec<(String, f64, f64)> =
        ctrls.iter().map(|c| (format!("controller {}", c.node), c.mean, c.max)).collect();
    rows.extend(links.iter().map(|l| (format!("{} -> {}", l.from, l.to), l.mean, l.max)));
    if rows.is_empty() {
        anyhow::bail!("no controller or link utilisation in this run");
    }
    let label_w = rows.iter().map(|r| text_w(&r.0, 12.0)).max().unwrap_or(60) + 20;
    let row_h = if rows.len() > 40 { 14 } else { 20 };
    let fig = UtilFig { title: title.to_string(), rows, label_w, bar_len: 360, row_h, top: 44 };
    write(&fig, dir, stem)
}

// ---------------------------------------------------------------------------------------------
// Pages per cycle

/// One policy's line: its name, colour and (time s, pages) points.
pub struct PagesSeries {
    pub policy: String,
    pub colour: RGBColor,
    pub points: Vec<(f64, u64)>,
}

struct LinesFig<'a> {
    title: String,
    what: &'a str,
    series: &'a [PagesSeries],
    left: i32,
    top: i32,
    plot_w: i32,
    plot_h: i32,
    yticks: Vec<f64>,
    xticks: Vec<f64>,
    /// Axis note about times (e.g. that they were estimated).
    x_note: &'a str,
}

impl Figure for LinesFig<'_> {
    fn size(&self) -> (u32, u32) {
        let legend = self.series.iter().map(|s| text_w(&s.policy, 13.0)).max().unwrap_or(40) + 60;
        let w = (self.left + self.plot_w + legend).max(text_w(&self.title, 18.0) + 30);
        (w as u32, (self.top + self.plot_h + 70) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, a: &Area<DB>) -> Result<()> {
        a.fill(&WHITE).map_err(de)?;
        let (w, _) = a.dim_in_pixel();
        a.draw_text(&self.title, &ts(18.0, &BLACK, HPos::Center, VPos::Top), (w as i32 / 2, 8)).map_err(de)?;
        let hi = *self.yticks.last().unwrap_or(&1.0);
        let xhi = *self.xticks.last().unwrap_or(&1.0);
        let px = |t: f64| self.left + (t / xhi.max(1e-9) * self.plot_w as f64).round() as i32;
        let py = |v: f64| self.top + self.plot_h - (v / hi.max(1e-9) * self.plot_h as f64) as i32;
        for &t in &self.yticks {
            let y = py(t);
            a.draw(&PathElement::new(vec![(self.left, y), (self.left + self.plot_w, y)], GRID)).map_err(de)?;
            a.draw_text(&fmt_tick(t), &ts(12.0, &BLACK, HPos::Right, VPos::Center), (self.left - 6, y)).map_err(de)?;
        }
        for &t in &self.xticks {
            a.draw_text(&fmt_tick(t), &ts(12.0, &BLACK, HPos::Center, VPos::Top), (px(t), self.top + self.plot_h + 4))
                .map_err(de)?;
        }
        a.draw_text(
            &format!("time, s ({}){}", self.what, self.x_note),
            &ts(13.0, &GREY, HPos::Center, VPos::Top),
            (self.left + self.plot_w / 2, self.top + self.plot_h + 22),
        )
        .map_err(de)?;
        a.draw_text(
            "pages asked to move in each policy cycle, at the time of the decision",
            &ts(13.0, &GREY, HPos::Left, VPos::Bottom),
            (8, self.top - 24),
        )
        .map_err(de)?;
        if self.series.is_empty() {
            a.draw_text(
                "no policy asked to move pages in this workload",
                &ts(14.0, &GREY, HPos::Center, VPos::Center),
                (self.left + self.plot_w / 2, self.top + self.plot_h / 2),
            )
            .map_err(de)?;
        }
        for (k, s) in self.series.iter().enumerate() {
            let c = s.colour;
            let pts: Vec<(i32, i32)> = s.points.iter().map(|&(t, y)| (px(t), py(y as f64))).collect();
            a.draw(&PathElement::new(pts.clone(), c.stroke_width(2))).map_err(de)?;
            if pts.len() < 60 {
                for p in pts {
                    a.draw(&Circle::new(p, 3, c.filled())).map_err(de)?;
                }
            }
            let ly = self.top + 10 + k as i32 * 22;
            let lx = self.left + self.plot_w + 20;
            a.draw(&Rectangle::new([(lx, ly - 6), (lx + 14, ly + 6)], c.filled())).map_err(de)?;
            a.draw_text(&s.policy, &ts(13.0, &BLACK, HPos::Left, VPos::Center), (lx + 20, ly)).map_err(de)?;
        }
        a.draw(&PathElement::new(
            vec![
                (self.left, self.top),
                (self.left, self.top + self.plot_h),
                (self.left + self.plot_w, self.top + self.plot_h),
            ],
            BLACK,
        ))
        .map_err(de)?;
        Ok(())
    }
}

/// Pages planned per cycle against time in seconds (policies' cycles differ: 25 ms to 1 s),
/// one line per policy that asked for any; `until_s` is the end of the x axis (the longest
/// run), so every workload's chart is drawn even when nothing moved. `what` is `simulated`
/// or `measured`.
pub fn pages_per_cycle(
    title: &str,
    what: &str,
    series: &[PagesSeries],
    until_s: f64,
    estimated: bool,
    dir: &Path,
    stem: &str,
) -> Result<(String, String)> {
    let hi = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).max().unwrap_or(1).max(1) as f64;
    let tmax = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(until_s, f64::max).max(1e-3);
    let fig = LinesFig {
        title: title.to_string(),
        what,
        series,
        left: 80,
        top: 60,
        plot_w: 560,
        plot_h: 280,
        yticks: nice_ticks(0.0, hi, 5),
        xticks: nice_ticks(0.0, tmax, 8),
        x_note: if estimated { "; cycle times estimated from the run length" } else { "" },
    };
    write(&fig, dir, stem)
}
