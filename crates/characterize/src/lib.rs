//! Machine characterisation: measures the Bandwidth Graph and latency matrix.
