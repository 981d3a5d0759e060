//! CPU sets and node sets, parsed and printed like numactl / the kernel's cpulist format
//! (`0-3,8,10-11`). Distinct types so a CPU list is never used as a node list.

use crate::error::TopologyError;
use crate::ids::{CpuId, NodeIdx};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// Largest id a list may name (guards against `0-4000000000` eating memory).
pub const MAX_LIST_ID: u32 = 1 << 20;

/// A sorted set of small integers with numactl-style text form.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IdSet<K> {
    ids: BTreeSet<u32>,
    _k: PhantomData<K>,
}

/// Marker for CPU sets (kernel CPU ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CpuKind;
/// Marker for node sets (the ids the user typed: kernel node ids on the CLI; dense
/// indices inside ptb where documented).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NodeKind;

pub type CpuSet = IdSet<CpuKind>;
pub type NodeSet = IdSet<NodeKind>;

impl<K> IdSet<K> {
    pub fn new() -> Self {
        IdSet { ids: BTreeSet::new(), _k: PhantomData }
    }
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    pub fn insert_raw(&mut self, id: u32) -> bool {
        self.ids.insert(id)
    }
    pub fn contains_raw(&self, id: u32) -> bool {
        self.ids.contains(&id)
    }
    /// Ids in ascending order.
    pub fn iter_raw(&self) -> impl Iterator<Item = u32> + '_ {
        self.ids.iter().copied()
    }
    pub fn first_raw(&self) -> Option<u32> {
        self.ids.iter().next().copied()
    }
    pub fn is_subset(&self, other: &Self) -> bool {
        self.ids.is_subset(&other.ids)
    }
    pub fn is_disjoint(&self, other: &Self) -> bool {
        self.ids.is_disjoint(&other.ids)
    }
    pub fn union(&self, other: &Self) -> Self {
        IdSet { ids: self.ids.union(&other.ids).copied().collect(), _k: PhantomData }
    }
    pub fn intersection(&self, other: &Self) -> Self {
        IdSet { ids: self.ids.intersection(&other.ids).copied().collect(), _k: PhantomData }
    }

    /// Parse a numactl-style list: comma-separated ids and inclusive ranges `a-b`, with
    /// optional stride `a-b:s` (kernel cpulist syntax). Whitespace around items is allowed;
    /// an empty string is the empty set.
    pub fn parse_list(text: &str) -> Result<Self, TopologyError> {
        let err = |reason: String| TopologyError::List { text: text.to_string(), reason };
        let mut set = Self::new();
        let t = text.trim();
        if t.is_empty() {
            return Ok(set);
        }
        for item in t.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(err("empty item between commas".into()));
            }
            let (range, stride) = match item.split_once(':') {
                Some((r, s)) => {
                    let s: u32 = s.trim().parse().map_err(|_| err(format!("bad stride in `{item}`")))?;
                    if s == 0 {
                        return Err(err(format!("zero stride in `{item}`")));
                    }
                    (r, s)
                }
                None => (item, 1),
            };
            let num = |s: &str| -> Result<u32, TopologyError> {
                let v: u32 = s.trim().parse().map_err(|_| err(format!("`{s}` is not a number")))?;
                if v > MAX_LIST_ID {
                    return Err(err(format!("{v} is larger than {MAX_LIST_ID}")));
                }
                Ok(v)
            };
            match range.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(err(format!("range `{item}` runs backwards")));
                    }
                    // `step_by` ends at `b` without the overflow `i += stride` had near u32::MAX
                    // (`2-3:4294967295` wrapped around to 0 and named node 0 and 1 too).
                    for i in (a..=b).step_by(stride as usize) {
                        set.ids.insert(i);
                    }
                }
                None => {
                    if stride != 1 {
                        return Err(err(format!("stride without a range in `{item}`")));
                    }
                    set.ids.insert(num(range)?);
                }
            }
        }
        Ok(set)
    }

    /// The canonical text form: ascending, runs of 3+ consecutive ids as `a-b`, pairs as
    /// `a,b` (what numactl and the kernel print).
    pub fn to_list(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        let v: Vec<u32> = self.ids.iter().copied().collect();
        let mut i = 0;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                j += 1;
            }
            if j > i {
                out.push(format!("{}-{}", v[i], v[j]));
            } else {
                out.push(v[i].to_string());
            }
            i = j + 1;
        }
        out.join(",")
    }
}

impl CpuSet {
    pub fn contains(&self, c: CpuId) -> bool {
        self.ids.contains(&c.0)
    }
    pub fn insert(&mut self, c: CpuId) -> bool {
        self.ids.insert(c.0)
    }
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.ids.iter().map(|&i| CpuId(i))
    }
}

impl NodeSet {
    /// Membership of a dense node index (for sets that hold dense indices).
    pub fn contains_idx(&self, n: NodeIdx) -> bool {
        self.ids.contains(&(n.0 as u32))
    }
    pub fn iter_idx(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.ids.iter().map(|&i| NodeIdx(i as u16))
    }
}

impl<K> FromIterator<u32> for IdSet<K> {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        IdSet { ids: iter.into_iter().collect(), _k: PhantomData }
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> Self {
        iter.into_iter().map(|c| c.0).collect()
    }
}

impl<K> FromStr for IdSet<K> {
    type Err = TopologyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_list(s)
    }
}

impl<K> fmt::Display for IdSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl<K> fmt::Debug for IdSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.to_list())
    }
}

/// Sets serialise as their list text (`"0-3,8"`), which is what machine files hold.
impl<K> Serialize for IdSet<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

impl<'de, K> Deserialize<'de> for IdSet<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_like_numactl() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse_list(" 5 , 1-2 ").unwrap().to_list(), "1-2,5");
        assert_eq!(CpuSet::parse_list("0-6:2").unwrap().to_list(), "0,2,4,6");
        assert!(CpuSet::parse_list("").unwrap().is_empty());
    }

    #[test]
    fn refuses_bad_lists() {
        for bad in ["3-1", "a", "1,,2", "1-", "-1", "0-4:0", "99999999", "4:2"] {
            let e = CpuSet::parse_list(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    proptest! {
        #[test]
        fn round_trips(ids in proptest::collection::btree_set(0u32..2048, 0..64)) {
            let set: CpuSet = ids.iter().copied().collect();
            let text = set.to_list();
            let back = CpuSet::parse_list(&text).unwrap();
            prop_assert_eq!(back, set);
        }

        #[test]
        fn never_panics(text in "[0-9,:\\- ]{0,24}") {
            let _ = NodeSet::parse_list(&text);
        }

        /// Fuzz target of CPU lists and `--nodes`: every id a parsed range holds lies in it,
        /// on its stride (`2-3:4294967295` wrapped and also named 0 and 1).
        #[test]
        fn strided_ranges_stay_in_range(a in 0u32..=MAX_LIST_ID, len in 0u32..5000, stride in 1u32..=u32::MAX) {
            let b = a.saturating_add(len).min(MAX_LIST_ID);
            let set = NodeSet::parse_list(&format!("{a}-{b}:{stride}")).unwrap();
            prop_assert!(set.first_raw() == Some(a));
            prop_assert!(set.iter_raw().all(|i| i >= a && i <= b && (i - a) % stride == 0));
        }
    }

    #[test]
    fn a_huge_stride_does_not_wrap() {
        let s = NodeSet::parse_list("2-3:4294967295").unwrap();
        assert_eq!(s.iter_raw().collect::<Vec<_>>(), vec![2]);
    }
}
