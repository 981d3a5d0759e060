//! The Linux runtime: real sampling and real placement.
