//! Machine files (TOML, JSON accepted). Placeholder: the serialised [`Machine`] itself.

use crate::error::TopologyError;
use crate::machine::Machine;
use std::path::Path;

/// Load and validate a machine file.
pub fn load(path: &Path) -> Result<Machine, TopologyError> {
    let text = std::fs::read_to_string(path).map_err(|e| TopologyError::Io { path: path.into(), source: e })?;
    let m: Machine = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| TopologyError::Parse {
            path: path.into(),
            what: "machine file (JSON)".into(),
            reason: e.to_string(),
        })?
    } else {
        toml::from_str(&text).map_err(|e| TopologyError::Parse {
            path: path.into(),
            what: "machine file (TOML)".into(),
            reason: e.to_string(),
        })?
    };
    crate::validate::validate(&m, &path.display().to_string())?;
    Ok(m)
}

/// The TOML text of a machine file for `m` (what `ptb characterize --out` writes).
pub fn to_toml(m: &Machine) -> Result<String, TopologyError> {
    toml::to_string(m).map_err(|e| TopologyError::invalid(&m.name, "machine", format!("cannot serialise: {e}")))
}

/// Write `m` as a machine file (TOML, or JSON when the path ends in `.json`).
pub fn save(m: &Machine, path: &Path) -> Result<(), TopologyError> {
    let text = if path.extension().is_some_and(|e| e == "json") {
        serde_json::to_string_pretty(m).map_err(|e| TopologyError::invalid(&m.name, "machine", e.to_string()))?
    } else {
        to_toml(m)?
    };
    std::fs::write(path, text).map_err(|e| TopologyError::Io { path: path.into(), source: e })
}
