//! Reading this machine's topology from a sysfs tree whose root is passed in.

use crate::error::TopologyError;
use crate::machine::Machine;
use std::path::Path;

/// Read the machine whose sysfs tree is rooted at `root` (`/` for this machine).
pub fn read_machine(root: &Path) -> Result<Machine, TopologyError> {
    Err(TopologyError::Io {
        path: root.join("sys/devices/system/node"),
        source: std::io::Error::other("sysfs reader not built yet"),
    })
}
