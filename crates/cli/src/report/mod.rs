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

/// Refuse to write a report into `dir` when it holds anything already (a report written over
/// another leaves the old plots beside the new page), unless `force`.
pub fn check_out_dir(dir: &Path, force: bool) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("report directory {}", dir.display())),
        Ok(_) if !dir.is_dir() => {
            anyhow::bail!("{} exists and is not a directory: choose another report directory", dir.display())
        }
        Ok(_) => {
            let mut entries =
                std::fs::read_dir(dir).with_context(|| format!("reading report directory {}", dir.display()))?;
            if entries.next().is_some() && !force {
                anyhow::bail!(
                    "report directory {} is not empty: choose a new directory, or add --force to write into it \
                     (files of the same name are replaced, others stay)",
                    dir.display()
                );
            }
            Ok(())
        }
    }
}

/// A file-name-safe version of a label that still reads like it: every run of other
/// characters becomes one `-` (`pid 4242, 4243` -> `pid-4242-4243`, `ptb+selective` ->
/// `ptb-selective`); at most 80 characters; never empty.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '.' && !out.is_empty() && !out.ends_with('-') {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') || out.ends_with('.') {
        out.pop();
    }
    out.truncate(80);
    if out.is_empty() {
        out.push_str("run");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_read_like_words() {
        assert_eq!(slug("pid 4242, 4243"), "pid-4242-4243");
        assert_eq!(slug("ptb-classic+selective"), "ptb-classic-selective");
        assert_eq!(slug("canneal+ep"), "canneal-ep");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("  "), "run");
        assert!(slug(&"x".repeat(200)).len() <= 80);
    }

    #[test]
    fn a_report_directory_that_is_not_empty_is_refused_without_force() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_out_dir(&d.path().join("new"), false).is_ok());
        assert!(check_out_dir(d.path(), false).is_ok(), "empty");
        std::fs::write(d.path().join("index.html"), "old").unwrap();
        let e = check_out_dir(d.path(), false).unwrap_err().to_string();
        assert!(e.contains("not empty") && e.contains("--force"), "{e}");
        assert!(check_out_dir(d.path(), true).is_ok());
        assert!(check_out_dir(&d.path().join("index.html"), true).is_err(), "a file");
    }
}
