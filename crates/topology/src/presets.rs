//! Built-in machine presets (filled in by the presets work; see machines.md).

use crate::error::TopologyError;
use crate::machine::Machine;

/// Names and one-line descriptions of the presets.
pub fn list() -> Vec<(&'static str, &'static str)> {
    Vec::new()
}

/// A preset by name.
pub fn get(name: &str) -> Result<Machine, TopologyError> {
    Err(TopologyError::UnknownMachine { name: name.to_string() })
}
