//! Index newtypes. The kernel's numbering (OS index) and ptb's dense numbering (logical index)
//! are distinct types, as in hwloc, so that one is never used where the other is meant.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A NUMA node as the kernel numbers it (`/sys/devices/system/node/nodeN`). May have gaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

/// A NUMA node as ptb numbers it: dense, `0..machine.nodes.len()`, in kernel-id order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeIdx(pub u16);

/// A CPU (hardware thread) as the kernel numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuId(pub u32);

/// A CPU group (die / LLC domain): dense index into `machine.groups`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupIdx(pub u16);

/// An interconnect link: dense index into `machine.links`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkIdx(pub u16);

macro_rules! index_impls {
    ($($t:ident : $prefix:literal),*) => {$(
        impl $t {
            /// The index as a `usize`, for indexing vectors.
            pub fn ix(self) -> usize {
                self.0 as usize
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    )*};
}
index_impls!(NodeId: "node", NodeIdx: "n#", CpuId: "cpu", GroupIdx: "g#", LinkIdx: "link");

impl NodeIdx {
    /// Build from a `usize` position (panics only if the machine had more than 65535 nodes,
    /// which validation refuses before any index is made).
    pub fn from_ix(i: usize) -> Self {
        NodeIdx(u16::try_from(i).expect("node count validated <= u16::MAX"))
    }
}

impl GroupIdx {
    /// Build from a `usize` position (see [`NodeIdx::from_ix`]).
    pub fn from_ix(i: usize) -> Self {
        GroupIdx(u16::try_from(i).expect("group count validated <= u16::MAX"))
    }
}

impl LinkIdx {
    /// Build from a `usize` position (see [`NodeIdx::from_ix`]).
    pub fn from_ix(i: usize) -> Self {
        LinkIdx(u16::try_from(i).expect("link count validated <= u16::MAX"))
    }
}
