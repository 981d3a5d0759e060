//! Summary statistics of a comparison: per (workload, policy) the mean and spread of the
//! speed-up over seeds, and per policy the geometric mean over workloads, the worst workload,
//! and the share of the oracle's speed-up.
//!
//! Conventions (stated in every report): a cell is the mean over seeds; the spread is the
//! sample standard deviation over seeds (0 with one seed); the geometric mean and the worst case
//! are taken over the workloads' means; "share of oracle" is the policy's speed-up divided by
//! the oracle's, as a geometric mean over workloads and as the worst workload among those where
//! the oracle gains more than [`ORACLE_GAIN`].

use crate::report::model::{Document, ORACLE};
use serde::{Deserialize, Serialize};

/// The oracle gain above which a workload counts for the worst share of oracle (issue 9: "on
/// every workload where the oracle gains > 10%").
pub const ORACLE_GAIN: f64 = 1.10;

/// Geometric mean of positive finite values; `None` when empty or any value is not positive.
pub fn geomean(v: &[f64]) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| !x.is_finite() || *x <= 0.0) {
        return None;
    }
    Some((v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

/// The smallest value (`None` when empty or any value is NaN).
pub fn worst(v: &[f64]) -> Option<f64> {
    if v.iter().any(|x| x.is_nan()) {
        return None;
    }
    v.iter().copied().reduce(f64::min)
}

/// Mean and sample standard deviation (0 for one value); `None` when empty.
pub fn mean_sd(v: &[f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 { (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() } else { 0.0 };
    Some((mean, sd))
}

/// One cell of the table.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub mean: f64,
    pub sd: f64,
    pub seeds: usize,
}

/// What a policy achieved over the suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    pub policy: String,
    pub geomean_speedup: Option<f64>,
    pub worst_speedup: Option<f64>,
    pub worst_workload: Option<String>,
    /// Geometric mean over workloads of speed-up / oracle speed-up.
    pub share_of_oracle: Option<f64>,
    /// Smallest speed-up / oracle speed-up among workloads where the oracle gains > 10%.
    pub worst_share_of_oracle: Option<f64>,
    /// Mean over seeds of the pages migrated, summed over workloads.
    pub pages_migrated: f64,
    pub threads_migrated: f64,
    /// Mean measured decision time per policy cycle, ms.
    pub decision_ms_per_cycle: Option<f64>,
}

/// The whole summary block of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub workloads: Vec<String>,
    pub policies: Vec<String>,
    pub seeds: usize,
    /// `cells[w][p]`: speed-up of policy p on workload w (mean over seeds), when present.
    pub cells: Vec<Vec<Option<Cell>>>,
    pub per_policy: Vec<PolicySummary>,
    pub notes: Vec<String>,
}

impl Summary {
    /// Compute from a document's results.
    pub fn of(doc: &Document) -> Summary {
        let workloads = doc.workloads();
        let policies = doc.policies();
        let seeds = doc.seeds().len();
        let cell = |w: &str, p: &str| -> Option<Cell> {
            let v: Vec<f64> =
                doc.results.iter().filter(|r| r.workload == w && r.policy == p).filter_map(|r| r.speedup()).collect();
            mean_sd(&v).map(|(mean, sd)| Cell { mean, sd, seeds: v.len() })
        };
        let cells: Vec<Vec<Option<Cell>>> =
            workloads.iter().map(|w| policies.iter().map(|p| cell(w, p)).collect()).collect();
        let oracle_col = policies.iter().position(|p| p == ORACLE);
        let per_policy = policies
            .iter()
            .enumerate()
            .map(|(pi, p)| {
                let col: Vec<(usize, f64)> =
                    cells.iter().enumerate().filter_map(|(wi, row)| row[pi].map(|c| (wi, c.mean))).collect();
                let vals: Vec<f64> = col.iter().map(|c| c.1).collect();
                let complete = col.len() == workloads.len();
                let worst_at =
                    col.iter().copied().filter(|c| !c.1.is_nan()).reduce(|a, b| if b.1 < a.1 { b } else { a });
                let (mut shares, mut gaining) = (Vec::new(), Vec::new());
                if let Some(oc) = oracle_col {
                    for (wi, s) in &col {
                        if let Some(o) = cells[*wi][oc].filter(|o| o.mean > 0.0) {
                            shares.push(s / o.mean);
                            if o.mean > ORACLE_GAIN {
                                gaining.push(s / o.mean);
                            }
                        }
                    }
                }
                let runs: Vec<_> = doc.results.iter().filter(|r| &r.policy == p).collect();
                let per_seed = |f: &dyn Fn(&crate::report::model::RunRecord) -> f64| {
                    runs.iter().map(|r| f(r)).sum::<f64>() / seeds.max(1) as f64
                };
                let cycles: u64 = runs.iter().map(|r| r.cycles).sum();
                let dec: f64 = runs.iter().map(|r| r.decision_ms).sum();
                PolicySummary {
                    policy: p.clone(),
                    geomean_speedup: if complete { geomean(&vals) } else { None },
                    worst_speedup: worst(&vals),
                    worst_workload: worst_at.map(|(wi, _)| workloads[wi].clone()),
                    share_of_oracle: if shares.len() == workloads.len() { geomean(&shares) } else { None },
                    worst_share_of_oracle: worst(&gaining),
                    pages_migrated: per_seed(&|r| r.pages_migrated as f64),
                    threads_migrated: per_seed(&|r| r.threads_migrated as f64),
                    decision_ms_per_cycle: (cycles > 0).then(|| dec / cycles as f64),
                }
            })
            .collect();
        let mut notes = vec![
            "speed-up = first-touch runtime / policy runtime, simulated".to_string(),
            "cells: mean over seeds; ± is the standard deviation over seeds".to_string(),
            "geomean and worst: over the workloads' means".to_string(),
            format!(
                "share of oracle: speed-up / oracle speed-up (geomean over workloads; worst over workloads where the oracle gains > {:.0}%)",
                (ORACLE_GAIN - 1.0) * 100.0
            ),
        ];
        if oracle_col.is_some() {
            notes.push(crate::report::model::ORACLE_NOTE.to_string());
        }
        if policies.iter().any(|p| p == ptb_oracle::moved::ORACLE_MOVED) {
            notes.push(crate::report::model::ORACLE_MOVED_NOTE.to_string());
        }
        Summary { workloads, policies, seeds, cells, per_policy, notes }
    }

    pub fn policy(&self, name: &str) -> Option<&PolicySummary> {
        self.per_policy.iter().find(|p| p.policy == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::Document;

    #[test]
    fn geomean_of_known_values() {
        assert!((geomean(&[1.0, 4.0]).unwrap() - 2.0).abs() < 1e-12);
        assert!((geomean(&[2.0, 2.0, 2.0]).unwrap() - 2.0).abs() < 1e-12);
        assert!((geomean(&[0.5, 2.0]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[1.0, 0.0]), None);
        assert_eq!(geomean(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn worst_and_spread() {
        assert_eq!(worst(&[1.2, 0.9, 1.5]), Some(0.9));
        assert_eq!(worst(&[]), None);
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0]).unwrap();
        assert!((m - 2.0).abs() < 1e-12 && (sd - 1.0).abs() < 1e-12);
        assert_eq!(mean_sd(&[5.0]), Some((5.0, 0.0)));
        assert_eq!(mean_sd(&[]), None);
    }

    fn run(w: &str, p: &str, seed: u64, s: f64) -> String {
        format!(
            r#"{{"workload":"{w}","policy":"{p}","seed":{seed},"runtime_s":{},"speedup_vs_first_touch":{s},"pages_migrated":10,"cycles":2,"decision_ms":1.0}}"#,
            1.0 / s
        )
    }

    #[test]
    fn summary_over_workloads_seeds_and_oracle() {
        let runs = [
            run("a", "first-touch", 1, 1.0),
            run("a", "first-touch", 2, 1.0),
            run("a", "x", 1, 2.0),
            run("a", "x", 2, 4.0),
            run("a", "oracle", 1, 4.0),
            run("a", "oracle", 2, 4.0),
            run("b", "first-touch", 1, 1.0),
            run("b", "first-touch", 2, 1.0),
            run("b", "x", 1, 0.5),
            run("b", "x", 2, 0.5),
            run("b", "oracle", 1, 1.05),
            run("b", "oracle", 2, 1.05),
        ];
        let d = Document::parse(&format!(r#"{{"results":[{}]}}"#, runs.join(",")), "t").unwrap();
        let s = Summary::of(&d);
        assert_eq!(s.policies, vec!["first-touch", "x", "oracle"]);
        assert_eq!(s.seeds, 2);
        let x = s.policy("x").unwrap();
        // a: mean 3, b: 0.5 -> geomean sqrt(1.5)
        assert!((x.geomean_speedup.unwrap() - 1.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(x.worst_speedup, Some(0.5));
        assert_eq!(x.worst_workload.as_deref(), Some("b"));
        // Only `a` has an oracle gain > 10%: 3 / 4.
        assert!((x.worst_share_of_oracle.unwrap() - 0.75).abs() < 1e-12);
        assert_eq!(x.pages_migrated, 20.0);
        assert_eq!(x.decision_ms_per_cycle, Some(0.5));
        let c = s.cells[0][1].unwrap();
        assert!((c.mean - 3.0).abs() < 1e-12 && (c.sd - 2f64.sqrt()).abs() < 1e-12 && c.seeds == 2);
        assert_eq!(s.policy("oracle").unwrap().share_of_oracle, Some(1.0));
    }
}
