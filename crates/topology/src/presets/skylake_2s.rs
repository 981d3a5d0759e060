//! `skylake-2s`: 2 x Intel Xeon Gold 6140 (Skylake-SP, 18 cores each), from the published
//! MLC figures of machines.md section 3.

use super::intel_2s::Mlc2s;
use crate::error::TopologyError;
use crate::machine::Machine;

pub const NAME: &str = "skylake-2s";
pub const DESCRIPTION: &str =
    "2 x Xeon Gold 6140 (Skylake, 18 cores each), published Intel MLC latencies and bandwidths";

/// Published (s3): idle latency ns, local node 0 / node 1.
pub const LOCAL_NS: [f64; 2] = [90.2, 89.1];
/// Published (s3): idle latency ns, remote from node 0 / from node 1.
pub const REMOTE_NS: [f64; 2] = [144.3, 143.2];
/// Published (s3): read bandwidth MB/s, local node 0 / node 1.
pub const LOCAL_MBPS: [f64; 2] = [104362.0, 106028.0];
/// Published (s3): read bandwidth MB/s, remote from node 0 / from node 1.
pub const REMOTE_MBPS: [f64; 2] = [34291.0, 34283.0];
/// Published (s3): all-reads peak, GB/s.
pub const PEAK_GBPS: f64 = 211.2;
/// Published (s3): loaded latency about 166 ns at about 210 GB/s.
pub const LOADED: (f64, f64) = (166.0, 210.0);
/// Assumed: 6 channels x 16 GiB per socket.
pub const MEM_GIB: u64 = 96;

/// Build the preset.
pub fn machine() -> Result<Machine, TopologyError> {
    Mlc2s {
        name: NAME,
        description: DESCRIPTION,
        cpu: "Xeon Gold 6140",
        clock_ghz: 2.3,
        cores_per_socket: 18,
        mem_gib: MEM_GIB,
        mem_reason: "6 DDR4 channels x 16 GiB; not published",
        local_ns: LOCAL_NS,
        remote_ns: REMOTE_NS,
        local_mbps: LOCAL_MBPS,
        remote_mbps: REMOTE_MBPS,
        peak_gbps: PEAK_GBPS,
        loaded: Some(LOADED),
        link_label: "UPI",
    }
    .machine()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GroupIdx, NodeIdx};

    #[test]
    fn skylake_matches_the_published_mlc_figures() {
        let m = machine().unwrap();
        assert_eq!((m.n_nodes(), m.n_cpus()), (2, 36));
        assert_eq!(m.latency_ns(GroupIdx(0), NodeIdx(1)), Some(144.3));
        assert_eq!(m.latency_ns(GroupIdx(1), NodeIdx(1)), Some(89.1));
        assert_eq!(m.bg(GroupIdx(0), NodeIdx(0)), Some(104.362));
        assert_eq!(m.bg(GroupIdx(1), NodeIdx(0)), Some(34.283));
        assert_eq!(m.controller_gbps.as_deref(), Some(&[105.6, 106.028][..]));
    }
}
