//! Reports of simulated runs: the comparison table, summary statistics, plots (PNG and SVG)
//! and a page that shows them (`index.html`, self-contained with the SVGs inlined, and
//! `report.md` linking the PNGs).
//!
//! ```text
//! ptb compare / ptb simulate --json ──▶ Document (runs) ──▶ Summary (stats)
//!                                         │                    │
//!                                         ▼                    ▼
//!                     per-run plots (access map, utilisation)  table, speed-up bars
//!                                         └──────▶ index.html + report.md ◀──┘
//! ```

pub mod model;
pub mod page;
pub mod plots;
pub mod stats;
pub mod table;
pub mod trace;

pub use model::Document;
pub use stats::Summary;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Render every plot and the pages of `doc` into `dir` (created if missing). Returns the
/// path of the HTML page.
pub fn render(doc: &Document, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating report directory {}", dir.display()))?;
    let summary = doc.summary.clone().unwrap_or_else(|| Summary::of(doc));
    page::write(doc, &summary, dir)
}

/// A file-name-safe version of a label.
pub fn slug(s: &str) -> String {
    let mut out: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    out.truncate(80);
    out
}
