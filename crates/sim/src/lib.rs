//! The NUMA simulator (machine side, workload models, driver).
