//! `icelake-2s`: 2 x Intel Xeon Platinum 8360Y (Ice Lake-SP, 36 cores each), from the
//! published MLC figures of machines.md section 3.

use super::intel_2s::Mlc2s;
use crate::error::TopologyError;
use crate::machine::Machine;

pub const NAME: &str = "icelake-2s";
pub const DESCRIPTION: &str =
    "2 x Xeon Platinum 8360Y (Ice Lake, 36 cores each), published Intel MLC latencies and bandwidths";

/// Published (s3): idle latency ns, local node 0 / node 1.
pub const LOCAL_NS: [f64; 2] = [89.2, 89.0];
/// Published (s3): idle latency ns, remote from node 0 / from node 1.
pub const REMOTE_NS: [f64; 2] = [142.7, 142.9];
/// Published (s3): read bandwidth MB/s, local node 0 / node 1.
pub const LOCAL_MBPS: [f64; 2] = [175691.0, 175913.0];
/// Published (s3): read bandwidth MB/s, remote from node 0 / from node 1.
pub const REMOTE_MBPS: [f64; 2] = [55677.0, 55692.0];
/// Published (s3): all-reads peak, GB/s.
pub const PEAK_GBPS: f64 = 351.8;
/// Published (s3): loaded latency about 264 ns at about 352 GB/s.
pub const LOADED: (f64, f64) = (264.0, 352.0);
/// Assumed: 8 channels x 32 GiB per socket.
pub const MEM_GIB: u64 = 256;

/// Build the preset.
pub fn machine() -> Result<Machine, TopologyError> {
    Mlc2s {
        name: NAME,
        description: DESCRIPTION,
        cpu: "Xeon Platinum 8360Y",
        clock_ghz: 2.4,
        cores_per_socket: 36,
        mem_gib: MEM_GIB,
        mem_reason: "8 DDR4 channels x 32 GiB; not published",
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
    fn icelake_matches_the_published_mlc_figures() {
        let m = machine().unwrap();
        assert_eq!((m.n_nodes(), m.n_cpus()), (2, 72));
        assert_eq!(m.latency_ns(GroupIdx(1), NodeIdx(0)), Some(142.9));
        assert_eq!(m.bg(GroupIdx(1), NodeIdx(1)), Some(175.913));
        assert_eq!(m.bg(GroupIdx(0), NodeIdx(1)), Some(55.677));
    }
}
