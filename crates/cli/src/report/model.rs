//! What a report is made of: the runs of a `ptb simulate` or `ptb compare` JSON document,
//! read leniently (only the fields a report needs are required; every other field is kept as
//! is and written back unchanged).

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;

/// Name of the oracle's column and entries.
pub const ORACLE: &str = "oracle";
/// How the oracle is labelled wherever it appears.
pub const ORACLE_NOTE: &str =
    "oracle = best static placement found by search with full knowledge (a bound found by search, not a proof)";

/// How the oracle's placement reached by migration is labelled wherever it appears.
pub const ORACLE_MOVED_NOTE: &str = "oracle-moved = the oracle's placement reached from first touch by one migration after --oracle-delay-ms (25 ms unless set), charged like any policy's (the start cost full knowledge cannot avoid; also a bound found by search)";

/// The node x node access map of a run (row: node of the accessing CPU, column: node of the
/// memory; shares of all accesses).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccessMapRec {
    pub nodes: Vec<u32>,
    pub shares: Vec<Vec<f64>>,
    #[serde(default)]
    pub controller_share: Vec<f64>,
    #[serde(default)]
    pub local: f64,
    #[serde(default)]
    pub remote: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Utilisation of one directed link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkRec {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub mean: f64,
    #[serde(default)]
    pub max: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Utilisation of one memory controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerRec {
    pub node: u32,
    #[serde(default)]
    pub mean: f64,
    #[serde(default)]
    pub max: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One run (one workload under one policy and seed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub workload: String,
    pub policy: String,
    #[serde(default)]
    pub seed: u64,
    pub runtime_s: f64,
    #[serde(default)]
    pub speedup_vs_first_touch: Option<f64>,
    #[serde(default)]
    pub local_fraction: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_map: Option<AccessMapRec>,
    #[serde(default)]
    pub controller_utilisation: Vec<ControllerRec>,
    #[serde(default)]
    pub link_utilisation: Vec<LinkRec>,
    #[serde(default)]
    pub pages_migrated: u64,
    #[serde(default)]
    pub threads_migrated: u64,
    #[serde(default)]
    pub migration_s: f64,
    #[serde(default)]
    pub decision_ms: f64,
    #[serde(default)]
    pub cycles: u64,
    /// Pages the policy asked to move in each cycle (recorded by `ptb compare`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages_planned_per_cycle: Vec<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunRecord {
    /// Convert any serialisable run result (e.g. the simulator's) into a record.
    pub fn from_serialize<T: Serialize>(r: &T) -> Result<RunRecord> {
        let v = serde_json::to_value(r).context("serialising a run result")?;
        serde_json::from_value(v).context("a run result lacks the fields a report needs")
    }

    /// The speed-up over first-touch, when known and meaningful.
    pub fn speedup(&self) -> Option<f64> {
        self.speedup_vs_first_touch.filter(|s| s.is_finite() && *s > 0.0)
    }
}

/// A whole document: `ptb simulate --json` or `ptb compare --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Document {
    #[serde(default = "yes")]
    pub simulated: bool,
    #[serde(default)]
    pub machine: String,
    #[serde(default)]
    pub results: Vec<RunRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<crate::report::stats::Summary>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn yes() -> bool {
    true
}

impl Document {
    /// Read a saved document, with errors naming the file and what is wrong.
    pub fn load(path: &Path) -> Result<Document> {
        let text = ptb_topology::input::read_text(path, "saved result (JSON)", ptb_topology::input::cap::JSON)?;
        Document::parse(&text, &path.display().to_string())
    }

    /// Parse from JSON text; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Document> {
        let v: Value = serde_json::from_str(text).with_context(|| {
            format!("{origin}: not JSON (expected the output of `ptb simulate --json` or `ptb compare --json`)")
        })?;
        if !v.is_object() {
            bail!("{origin}: expected a JSON object with a `results` list");
        }
        if v.get("results").is_none() {
            bail!("{origin}: no `results` list (is this a `ptb simulate --json` / `ptb compare --json` file?)");
        }
        let doc: Document = serde_json::from_value(v).with_context(|| format!("{origin}: a result is malformed"))?;
        for (i, r) in doc.results.iter().enumerate() {
            if !r.runtime_s.is_finite() || r.runtime_s < 0.0 {
                bail!("{origin}: results[{i}].runtime_s = {} is not a time", r.runtime_s);
            }
            if let Some(m) = &r.access_map {
                let n = m.nodes.len();
                if m.shares.len() != n || m.shares.iter().any(|row| row.len() != n) {
                    bail!("{origin}: results[{i}].access_map: shares are not {n} x {n}");
                }
            }
        }
        Ok(doc)
    }

    /// Workloads in order of first appearance.
    pub fn workloads(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.results {
            if !v.contains(&r.workload) {
                v.push(r.workload.clone());
            }
        }
        v
    }

    /// Policies in order of first appearance, the oracle last.
    pub fn policies(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in self.results.iter().filter(|r| r.policy != ORACLE) {
            if !v.contains(&r.policy) {
                v.push(r.policy.clone());
            }
        }
        if self.results.iter().any(|r| r.policy == ORACLE) {
            v.push(ORACLE.to_string());
        }
        v
    }

    /// Seeds present, ascending.
    pub fn seeds(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.results.iter().map(|r| r.seed).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let text = r#"{"simulated":true,"machine":"m","seed":3,"results":[{"workload":"w","policy":"p",
            "runtime_s":1.5,"speedup_vs_first_touch":1.2,"phases":[{"phase":"a"}],"pages_migrated":7}]}"#;
        let d = Document::parse(text, "t.json").unwrap();
        assert_eq!(d.results[0].pages_migrated, 7);
        let back: Value = serde_json::to_value(&d).unwrap();
        assert_eq!(back["seed"], 3);
        assert_eq!(back["results"][0]["phases"][0]["phase"], "a");
    }

    #[test]
    fn bad_documents_are_refused_with_the_reason() {
        for (text, want) in [
            ("nope", "not JSON"),
            ("[1]", "JSON object"),
            ("{}", "no `results`"),
            (r#"{"results":[{"workload":"w"}]}"#, "malformed"),
            (r#"{"results":[{"workload":"w","policy":"p","runtime_s":-1}]}"#, "runtime_s"),
            (
                r#"{"results":[{"workload":"w","policy":"p","runtime_s":1,"access_map":{"nodes":[0,1],"shares":[[1]]}}]}"#,
                "2 x 2",
            ),
        ] {
            let e = format!("{:#}", Document::parse(text, "x.json").unwrap_err());
            assert!(e.contains("x.json") && e.contains(want), "{want}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(text in "[{}\\[\\]\":,a-z0-9._ -]{0,200}") {
            let _ = Document::parse(&text, "fuzz.json");
        }
    }
}
