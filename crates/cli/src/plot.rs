//! Plots shared by subcommands: a labelled heatmap (Bandwidth Graph, latency matrix) and a
//! grouped bar chart (policy comparisons), each written as PNG and SVG.
//!
//! Layout is computed by hand in pixels (cells, bars, labels, legend) rather than through
//! plotters' chart builder, so that every label is shown exactly once and in full. Text uses
//! DejaVu Sans bundled in the binary and registered with plotters, so nothing needs fontconfig
//! or system fonts at run time.

#![allow(dead_code)]

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

/// Register the bundled font as plotters' `sans-serif` (once per process).
pub(crate) fn ensure_font() {
    REGISTER.call_once(|| {
        // The font is compiled in and known to parse; a failure would only lose text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Viridis, sampled at five stops (perceptually even, readable in grey).
const VIRIDIS: [(f64, f64, f64); 5] =
    [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];

/// Colour of `t` in 0..=1 on the viridis scale.
pub fn viridis(t: f64) -> RGBColor {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 } * 4.0;
    let i = (t.floor() as usize).min(3);
    let f = t - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Twelve distinct series colours (Tableau 10, then a dark indigo and black): every policy
/// and both oracle columns of `ptb compare` get their own.
pub(crate) const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(57, 59, 121),
    RGBColor(0, 0, 0),
];

/// One colour per policy, the same in every chart of every report: the registered policies
/// (in `ptb policies` order), then `oracle-moved` and `oracle`, take the palette in order;
/// any other name (a `+selective` combination, a policy from a newer document) takes the next
/// colour no policy of `policies` uses.
pub(crate) fn policy_colours(policies: &[String]) -> Vec<RGBColor> {
    let fixed: Vec<&str> = ptb_policy::PolicyKind::ALL
        .iter()
        .map(|k| k.name())
        .chain([ptb_oracle::moved::ORACLE_MOVED, crate::report::model::ORACLE])
        .collect();
    let slot = |p: &str| fixed.iter().position(|f| *f == p);
    let mut used: Vec<usize> = policies.iter().filter_map(|p| slot(p)).collect();
    let mut next = 0;
    policies
        .iter()
        .map(|p| {
            let i = slot(p).unwrap_or_else(|| {
                while used.contains(&(next % PALETTE.len())) && used.len() < PALETTE.len() {
                    next += 1;
                }
                let i = next % PALETTE.len();
                used.push(i);
                next += 1;
                i
            });
            PALETTE[i % PALETTE.len()]
        })
        .collect()
}

/// A number with as many decimals as its size deserves.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        "n/a".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(crate) fn text_style(size: f64, color: &RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(color).pos(Pos::new(h, v))
}

/// Draw on a PNG and an SVG of the same size with the same code.
fn both(
    png: &Path,
    svg: &Path,
    size: (u32, u32),
    draw_png: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> Result<()>,
    draw_svg: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
) -> Result<()> {
    ensure_font();
    for p in [png, svg] {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                bail!("cannot write plot {}: directory {} does not exist", p.display(), dir.display());
            }
        }
    }
    write_png(png, size, draw_png)?;
    let area = SVGBackend::new(svg, size).into_drawing_area();
    draw_svg(&area)?;
    area.present().map_err(|e| anyhow!("{e}")).with_context(|| format!("writing {}", svg.display()))?;
    Ok(())
}

/// Draw into an RGB buffer of `size` with `draw` and write it to `path` as a PNG.
pub(crate) fn write_png(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> Result<()>,
) -> Result<()> {
    let mut buf = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let area = BitMapBackend::with_buffer(&mut buf, size).into_drawing_area();
        draw(&area)?;
        area.present().map_err(de)?;
    }
    let f = std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(f), size.0, size.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().with_context(|| format!("writing {}", path.display()))?;
    w.write_image_data(&buf).with_context(|| format!("writing {}", path.display()))?;
    w.finish().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

pub(crate) fn de<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// A heatmap of `values[row][col]` with the value printed in every cell and a colour bar in
/// `unit`. Non-finite values are drawn grey as `n/a`.
pub fn heatmap(
    title: &str,
    row_labels: &[String],
    col_labels: &[String],
    values: &[Vec<f64>],
    unit: &str,
    png_path: &Path,
    svg_path: &Path,
) -> Result<()> {
    if values.is_empty() || values.len() != row_labels.len() || values.iter().any(|r| r.len() != col_labels.len()) {
        bail!(
            "heatmap `{title}`: {} rows of {:?} values do not match {} row and {} column labels",
            values.len(),
            values.iter().map(Vec::len).collect::<Vec<_>>(),
            row_labels.len(),
            col_labels.len()
        );
    }
    let finite: Vec<f64> = values.iter().flatten().copied().filter(|v| v.is_finite()).collect();
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (nr, nc) = (row_labels.len() as i32, col_labels.len() as i32);
    let label_w = row_labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as i32 * 9 + 24;
    let col_w = col_labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as i32 * 9 + 16;
    let (cw, ch) = (col_w.max(84), 46);
    let (left, top) = (label_w.max(100), 86);
    let width = (left + nc * cw + 130).max((title.chars().count() as i32) * 11 + 40);
    let height = top + nr * ch + 50;
    let spec = Heat { title, row_labels, col_labels, values, unit, lo, hi, cw, ch, left, top };
    both(png_path, svg_path, (width as u32, height as u32), |a| spec.draw(a), |a| spec.draw(a))
}

struct Heat<'a> {
    title: &'a str,
    row_labels: &'a [String],
    col_labels: &'a [String],
    values: &'a [Vec<f64>],
    unit: &'a str,
    lo: f64,
    hi: f64,
    cw: i32,
    ch: i32,
    left: i32,
    top: i32,
}

impl Heat<'_> {
    fn t(&self, v: f64) -> f64 {
        if self.hi > self.lo {
            (v - self.lo) / (self.hi - self.lo)
        } else {
            0.5
        }
    }

    fn draw<DB: DrawingBackend>(&self, a: &DrawingArea<DB, Shift>) -> Result<()> {
        a.fill(&WHITE).map_err(de)?;
        let (w, _) = a.dim_in_pixel();
        a.draw_text(self.title, &text_style(22.0, &BLACK, HPos::Center, VPos::Top), (w as i32 / 2, 10)).map_err(de)?;
        let grid_w = self.cw * self.col_labels.len() as i32;
        let caption = text_style(13.0, &RGBColor(90, 90, 90), HPos::Center, VPos::Top);
        a.draw_text("memory node", &caption, (self.left + grid_w / 2, 40)).map_err(de)?;
        let lab = text_style(15.0, &BLACK, HPos::Center, VPos::Bottom);
        for (c, l) in self.col_labels.iter().enumerate() {
            a.draw_text(l, &lab, (self.left + c as i32 * self.cw + self.cw / 2, self.top - 6)).map_err(de)?;
        }
        let rlab = text_style(15.0, &BLACK, HPos::Right, VPos::Center);
        for (r, (l, row)) in self.row_labels.iter().zip(self.values).enumerate() {
            let y = self.top + r as i32 * self.ch;
            a.draw_text(l, &rlab, (self.left - 8, y + self.ch / 2)).map_err(de)?;
            for (c, &v) in row.iter().enumerate() {
                let x = self.left + c as i32 * self.cw;
                let (fill, ink) = if v.is_finite() {
                    let t = self.t(v);
                    (viridis(t), if t < 0.6 { WHITE } else { BLACK })
                } else {
                    (RGBColor(200, 200, 200), BLACK)
                };
                a.draw(&Rectangle::new([(x, y), (x + self.cw, y + self.ch)], fill.filled())).map_err(de)?;
                a.draw(&Rectangle::new([(x, y), (x + self.cw, y + self.ch)], WHITE.stroke_width(2))).map_err(de)?;
                let vs = text_style(15.0, &ink, HPos::Center, VPos::Center);
                a.draw_text(&fmt_value(v), &vs, (x + self.cw / 2, y + self.ch / 2)).map_err(de)?;
            }
        }
        let grid_h = self.ch * self.row_labels.len() as i32;
        a.draw_text(
            "CPU group",
            &text_style(13.0, &RGBColor(90, 90, 90), HPos::Right, VPos::Bottom),
            (self.left - 8, self.top - 6),
        )
        .map_err(de)?;
        // Colour bar: top = max, bottom = min.
        let (bx, by, bh) = (self.left + grid_w + 22, self.top, grid_h.max(60));
        let steps = 40;
        for i in 0..steps {
            let y0 = by + bh * i / steps;
            let y1 = by + bh * (i + 1) / steps;
            let t = 1.0 - (i as f64 + 0.5) / steps as f64;
            a.draw(&Rectangle::new([(bx, y0), (bx + 16, y1)], viridis(t).filled())).map_err(de)?;
        }
        let tick = text_style(13.0, &BLACK, HPos::Left, VPos::Center);
        if self.lo.is_finite() {
            a.draw_text(&fmt_value(self.hi), &tick, (bx + 20, by + 6)).map_err(de)?;
            a.draw_text(&fmt_value(self.lo), &tick, (bx + 20, by + bh - 6)).map_err(de)?;
        }
        a.draw_text(self.unit, &text_style(13.0, &BLACK, HPos::Left, VPos::Top), (bx, by + bh + 8)).map_err(de)?;
        Ok(())
    }
}

/// "Nice" axis ticks (1, 2, 5 x 10^k) covering `lo..=hi`.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let span = (hi - lo).abs().max(1e-12);
    let raw = span / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= target as f64).unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut v = Vec::new();
    let mut x = start;
    while x <= hi + step * 1e-9 && v.len() < 100 {
        v.push(if x.abs() < step * 1e-9 { 0.0 } else { x });
        x += step;
    }
    if v.last().is_some_and(|l| *l < hi) {
        v.push(x);
    }
    v
}

/// A grouped bar chart: one group of bars per category, one bar (colour) per series, y axis
/// in `y_label`. `series[i].1[j]` is series i's value for category j. Non-finite values are
/// left out.
pub fn bars(
    title: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    y_label: &str,
    png_path: &Path,
    svg_path: &Path,
) -> Result<()> {
    if categories.is_empty() || series.is_empty() || series.iter().any(|(_, v)| v.len() != categories.len()) {
        bail!("bar chart `{title}`: every series needs one value per category ({} categories)", categories.len());
    }
    let finite = series.iter().flat_map(|(_, v)| v.iter().copied()).filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((0.0f64, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    let ticks = nice_ticks(lo, if hi > lo { hi } else { lo + 1.0 }, 6);
    let ns = series.len() as i32;
    let bar_w = 22;
    let group_w = ns * bar_w + 24;
    let cat_chars = categories.iter().map(|c| c.chars().count()).max().unwrap_or(1) as i32;
    let group_w = group_w.max(cat_chars * 8 + 10);
    let (left, top, plot_h) = (84, 80, 320);
    let legend_w = series.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(1) as i32 * 8 + 50;
    let width =
        (left + categories.len() as i32 * group_w + legend_w + 30).max((title.chars().count() as i32) * 11 + 40);
    let height = top + plot_h + 80;
    let names: Vec<String> = series.iter().map(|s| s.0.clone()).collect();
    let colours = policy_colours(&names);
    let spec = Bars { title, categories, series, y_label, ticks, bar_w, group_w, left, top, plot_h, colours };
    both(png_path, svg_path, (width as u32, height as u32), |a| spec.draw(a), |a| spec.draw(a))
}

struct Bars<'a> {
    title: &'a str,
    categories: &'a [String],
    series: &'a [(String, Vec<f64>)],
    y_label: &'a str,
    ticks: Vec<f64>,
    bar_w: i32,
    group_w: i32,
    left: i32,
    top: i32,
    plot_h: i32,
    /// One colour per series (by name, as in every report).
    colours: Vec<RGBColor>,
}

impl Bars<'_> {
    fn y(&self, v: f64) -> i32 {
        let (lo, hi) = (self.ticks[0], *self.ticks.last().unwrap_or(&1.0));
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
        self.top + self.plot_h - (t * self.plot_h as f64).round() as i32
    }

    fn draw<DB: DrawingBackend>(&self, a: &DrawingArea<DB, Shift>) -> Result<()> {
        a.fill(&WHITE).map_err(de)?;
        let (w, _) = a.dim_in_pixel();
        a.draw_text(self.title, &text_style(22.0, &BLACK, HPos::Center, VPos::Top), (w as i32 / 2, 10)).map_err(de)?;
        let right = self.left + self.categories.len() as i32 * self.group_w;
        let grid = RGBColor(225, 225, 225);
        let tick = text_style(13.0, &BLACK, HPos::Right, VPos::Center);
        for &t in &self.ticks {
            let y = self.y(t);
            a.draw(&PathElement::new(vec![(self.left, y), (right, y)], grid)).map_err(de)?;
            a.draw_text(&fmt_value(t), &tick, (self.left - 6, y)).map_err(de)?;
        }
        a.draw_text(self.y_label, &text_style(13.0, &BLACK, HPos::Left, VPos::Bottom), (8, self.top - 14))
            .map_err(de)?;
        let zero = self.y(0.0f64.clamp(self.ticks[0], *self.ticks.last().unwrap_or(&0.0)));
        let ns = self.series.len() as i32;
        let inner = ns * self.bar_w;
        let label = text_style(13.0, &BLACK, HPos::Center, VPos::Top);
        let show_values = self.categories.len() * self.series.len() <= 40;
        for (j, cat) in self.categories.iter().enumerate() {
            let gx = self.left + j as i32 * self.group_w + (self.group_w - inner) / 2;
            for (i, (_, vals)) in self.series.iter().enumerate() {
                let v = vals[j];
                if !v.is_finite() {
                    continue;
                }
                let x = gx + i as i32 * self.bar_w;
                let y = self.y(v);
                let (y0, y1) = (y.min(zero), y.max(zero));
                a.draw(&Rectangle::new([(x + 1, y0), (x + self.bar_w - 1, y1)], self.colours[i].filled()))
                    .map_err(de)?;
                if show_values {
                    let vs = text_style(10.0, &BLACK, HPos::Center, if v >= 0.0 { VPos::Bottom } else { VPos::Top });
                    let ty = if v >= 0.0 { y0 - 2 } else { y1 + 2 };
                    a.draw_text(&fmt_value(v), &vs, (x + self.bar_w / 2, ty)).map_err(de)?;
                }
            }
            let cx = self.left + j as i32 * self.group_w + self.group_w / 2;
            a.draw_text(cat, &label, (cx, self.top + self.plot_h + 20)).map_err(de)?;
        }
        a.draw(&PathElement::new(vec![(self.left, zero), (right, zero)], BLACK)).map_err(de)?;
        a.draw(&PathElement::new(vec![(self.left, self.top), (self.left, self.top + self.plot_h)], BLACK))
            .map_err(de)?;
        let lx = right + 20;
        let ls = text_style(13.0, &BLACK, HPos::Left, VPos::Center);
        for (i, (name, _)) in self.series.iter().enumerate() {
            let y = self.top + 10 + i as i32 * 22;
            a.draw(&Rectangle::new([(lx, y - 7), (lx + 14, y + 7)], self.colours[i].filled())).map_err(de)?;
            a.draw_text(name, &ls, (lx + 20, y)).map_err(de)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_range_with_round_steps() {
        let t = nice_ticks(0.0, 37.0, 6);
        assert_eq!(t.first(), Some(&0.0));
        assert!(*t.last().unwrap() >= 37.0);
        let step = t[1] - t[0];
        assert!([1.0, 2.0, 5.0, 10.0].contains(&step), "{t:?}");
        assert!(t.len() <= 8);
    }

    #[test]
    fn viridis_runs_from_purple_to_yellow() {
        assert_eq!(viridis(0.0), RGBColor(68, 1, 84));
        assert_eq!(viridis(1.0), RGBColor(253, 231, 37));
        assert_eq!(viridis(f64::NAN), RGBColor(68, 1, 84));
    }

    #[test]
    fn heatmap_and_bars_write_png_and_svg_and_refuse_bad_shapes() {
        let d = tempfile::tempdir().unwrap();
        let labels = |p: &str, n: usize| (0..n).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
        let v = vec![vec![36.5, 18.9], vec![20.2, f64::NAN]];
        let (png, svg) = (d.path().join("h.png"), d.path().join("h.svg"));
        heatmap("BG", &labels("g", 2), &labels("node ", 2), &v, "GB/s", &png, &svg).unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
        assert!(std::fs::read_to_string(&svg).unwrap().contains("36.5"));
        assert!(heatmap("BG", &labels("g", 1), &labels("n", 2), &v, "GB/s", &png, &svg).is_err());
        let s = vec![
            ("first-touch".to_string(), vec![1.0, 2.0, 1.0]),
            ("ptb-classic".to_string(), vec![1.5, -0.5, 2.4]),
            ("interleave".to_string(), vec![1.2, 1.1, f64::NAN]),
        ];
        let (png, svg) = (d.path().join("b.png"), d.path().join("b.svg"));
        bars("speed-up over first-touch (simulated)", &labels("workload-", 3), &s, "x", &png, &svg).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().contains("first-touch"));
        if let Some(keep) = std::env::var_os("PTB_KEEP_PLOTS") {
            // For looking at the plots by eye: PTB_KEEP_PLOTS=/some/dir cargo test -p ptb plot
            for f in ["h.png", "h.svg", "b.png", "b.svg"] {
                std::fs::copy(d.path().join(f), Path::new(&keep).join(f)).unwrap();
            }
        }
        let missing = d.path().join("no/such/dir/x.png");
        assert!(bars("t", &labels("w", 3), &s, "x", &missing, &svg)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }
}
