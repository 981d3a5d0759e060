//! Square or rectangular matrices that say where their numbers came from and in what unit.

use serde::{Deserialize, Serialize};

/// Where the numbers of a matrix come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatrixSource {
    /// Measured on the machine (`ptb characterize`, or an imported MLC run).
    Measured,
    /// Read from firmware (ACPI SLIT / HMAT via sysfs).
    Firmware,
    /// Taken from a published measurement (presets; see the preset's notes).
    Published,
    /// Computed from other numbers (e.g. a contended matrix scaled from an uncontended one).
    Derived,
}

/// A row-major matrix of `f64` with its unit and source.
///
/// Rows and columns are documented by the owner (e.g. rows = CPU groups, columns = memory
/// nodes for the Bandwidth Graph).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    /// Unit of every entry, e.g. `"GB/s"`, `"ns"`, `"SLIT"`.
    pub unit: String,
    pub source: MatrixSource,
    /// One vector per row; every row has the same length.
    pub rows: Vec<Vec<f64>>,
    /// Run-to-run spread per entry (same shape as `rows`), when measured repeatedly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Vec<Vec<f64>>>,
}

impl Matrix {
    /// A matrix from rows; the caller guarantees a rectangular shape (validation checks files).
    pub fn new(unit: &str, source: MatrixSource, rows: Vec<Vec<f64>>) -> Self {
        Matrix { unit: unit.to_string(), source, rows, spread: None }
    }

    /// A `rows x cols` matrix filled with `v`.
    pub fn filled(unit: &str, source: MatrixSource, rows: usize, cols: usize, v: f64) -> Self {
        Matrix::new(unit, source, vec![vec![v; cols]; rows])
    }

    pub fn n_rows(&self) -> usize {
        self.rows.len()
    }

    pub fn n_cols(&self) -> usize {
        self.rows.first().map_or(0, Vec::len)
    }

    /// Entry at (row, col).
    pub fn get(&self, r: usize, c: usize) -> f64 {
        self.rows[r][c]
    }

    /// True when every row has `cols` entries and there are `rows` rows.
    pub fn has_shape(&self, rows: usize, cols: usize) -> bool {
        self.rows.len() == rows && self.rows.iter().all(|r| r.len() == cols)
    }
}
