//! Where a sampled access was served from: perf's `PERF_SAMPLE_DATA_SRC` word, decoded.
//!
//! Problem: hardware samplers tag every sampled memory op with its data source (IBS op:
//! DcMiss / L2 miss / DRAM, local or remote; PEBS load latency and SPE likewise), and the
//! kernel folds that into one 64-bit word whose layout is part of the perf ABI
//! (`include/uapi/linux/perf_event.h`, `union perf_mem_data_src`). A policy that sees cache
//! hits (IBS op samples every memory op) must tell them from DRAM accesses.
//!
//! Approach: one small enum, [`MemLevel`], decoded from the word with the ABI's bit layout
//! (the newer `mem_lvl_num` field first, the older `mem_lvl` bit mask as fallback), and the
//! inverse [`encode`] that the simulator uses so that its samples carry the same word a real
//! sampler would. Only the fields ptb reads are encoded: operation, level, remote.
//!
//! ```text
//! bits 0-4 mem_op | 5-18 mem_lvl | 19-23 snoop | 24-25 lock | 26-32 dtlb | 33-36 lvl_num | 37 remote
//! ```

use serde::{Deserialize, Serialize};

const OP_SHIFT: u32 = 0;
const LVL_SHIFT: u32 = 5;
const LVLNUM_SHIFT: u32 = 33;
const REMOTE_SHIFT: u32 = 37;

const OP_LOAD: u64 = 0x02;
const OP_STORE: u64 = 0x04;

const LVL_HIT: u64 = 0x02;
const LVL_MISS: u64 = 0x04;
const LVL_L1: u64 = 0x08;
const LVL_LFB: u64 = 0x10;
const LVL_L2: u64 = 0x20;
const LVL_L3: u64 = 0x40;
const LVL_LOC_RAM: u64 = 0x80;
const LVL_REM_RAM1: u64 = 0x100;
const LVL_REM_RAM2: u64 = 0x200;
const LVL_REM_CCE1: u64 = 0x400;
const LVL_REM_CCE2: u64 = 0x800;

const LVLNUM_L1: u64 = 0x01;
const LVLNUM_L2: u64 = 0x02;
const LVLNUM_L3: u64 = 0x03;
const LVLNUM_L4: u64 = 0x04;
const LVLNUM_ANY_CACHE: u64 = 0x0b;
const LVLNUM_LFB: u64 = 0x0c;
const LVLNUM_RAM: u64 = 0x0d;
const LVLNUM_PMEM: u64 = 0x0e;

/// The level of the memory hierarchy that served a sampled access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemLevel {
    /// A cache of the sampling core (L1, L2, line-fill buffer) or a shared last-level cache.
    Cache,
    /// DRAM (or persistent memory) of the accessing CPU's own node.
    LocalDram,
    /// DRAM of another node, or a line held in another node's cache.
    RemoteDram,
}

impl MemLevel {
    /// True when the access went to memory (local or remote), not a cache.
    pub fn is_dram(self) -> bool {
        !matches!(self, MemLevel::Cache)
    }
}

/// Decode a `PERF_SAMPLE_DATA_SRC` word; `None` when it says nothing about the level.
pub fn decode(word: u64) -> Option<MemLevel> {
    let remote = (word >> REMOTE_SHIFT) & 1 == 1;
    match (word >> LVLNUM_SHIFT) & 0xf {
        LVLNUM_L1 | LVLNUM_L2 | LVLNUM_L3 | LVLNUM_L4 | LVLNUM_ANY_CACHE | LVLNUM_LFB => {
            return Some(if remote { MemLevel::RemoteDram } else { MemLevel::Cache });
        }
        LVLNUM_RAM | LVLNUM_PMEM => return Some(if remote { MemLevel::RemoteDram } else { MemLevel::LocalDram }),
        _ => {}
    }
    let lvl = (word >> LVL_SHIFT) & 0x3fff;
    if lvl & (LVL_REM_RAM1 | LVL_REM_RAM2 | LVL_REM_CCE1 | LVL_REM_CCE2) != 0 {
        return Some(MemLevel::RemoteDram);
    }
    if lvl & LVL_LOC_RAM != 0 {
        return Some(if remote { MemLevel::RemoteDram } else { MemLevel::LocalDram });
    }
    if lvl & (LVL_L1 | LVL_LFB | LVL_L2 | LVL_L3) != 0 && lvl & LVL_MISS == 0 {
        return Some(MemLevel::Cache);
    }
    None
}

/// The fields of a data-source word that [`decode`] reads, one by one: what a perf reader that
/// splits the word into flags (the `perf-event-open` crate) hands over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub store: bool,
    /// `mem_lvl` flags.
    pub hit: bool,
    pub miss: bool,
    pub l1: bool,
    pub lfb: bool,
    pub l2: bool,
    pub l3: bool,
    pub loc_ram: bool,
    pub rem_ram1: bool,
    pub rem_ram2: bool,
    pub rem_cce1: bool,
    pub rem_cce2: bool,
    /// `mem_lvl_num`.
    pub lvl_num: LvlNum,
    /// `mem_remote`.
    pub remote: bool,
}

/// The `mem_lvl_num` values [`decode`] tells apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LvlNum {
    /// Not given (or a value ptb does not read): the `mem_lvl` flags decide.
    #[default]
    Unknown,
    /// L1-L4, any cache, a line-fill buffer.
    Cache,
    /// DRAM or persistent memory.
    Ram,
}

impl Fields {
    /// The data-source word with these fields (the others zero).
    pub fn word(&self) -> u64 {
        let flags = [
            (self.hit, LVL_HIT),
            (self.miss, LVL_MISS),
            (self.l1, LVL_L1),
            (self.lfb, LVL_LFB),
            (self.l2, LVL_L2),
            (self.l3, LVL_L3),
            (self.loc_ram, LVL_LOC_RAM),
            (self.rem_ram1, LVL_REM_RAM1),
            (self.rem_ram2, LVL_REM_RAM2),
            (self.rem_cce1, LVL_REM_CCE1),
            (self.rem_cce2, LVL_REM_CCE2),
        ];
        let lvl = flags.iter().filter(|f| f.0).fold(0, |a, f| a | f.1);
        let num = match self.lvl_num {
            LvlNum::Unknown => 0,
            LvlNum::Cache => LVLNUM_L1,
            LvlNum::Ram => LVLNUM_RAM,
        };
        let op = if self.store { OP_STORE } else { OP_LOAD };
        (op << OP_SHIFT) | (lvl << LVL_SHIFT) | (num << LVLNUM_SHIFT) | (u64::from(self.remote) << REMOTE_SHIFT)
    }
}

/// Encode a level and the operation as a `PERF_SAMPLE_DATA_SRC` word (what IBS op or PEBS
/// report for a hit in L1, a local DRAM access or a remote DRAM access).
pub fn encode(level: MemLevel, store: bool) -> u64 {
    let op = if store { OP_STORE } else { OP_LOAD };
    let (lvl, num, remote) = match level {
        MemLevel::Cache => (LVL_L1 | LVL_HIT, LVLNUM_L1, 0),
        MemLevel::LocalDram => (LVL_LOC_RAM | LVL_HIT, LVLNUM_RAM, 0),
        MemLevel::RemoteDram => (LVL_REM_RAM1 | LVL_HIT, LVLNUM_RAM, 1),
    };
    (op << OP_SHIFT) | (lvl << LVL_SHIFT) | (num << LVLNUM_SHIFT) | (remote << REMOTE_SHIFT)
}

/// The word Intel PEBS gives a precise store (Haswell and later, the kernel's
/// `precise_datala_hsw`): a store that hit the L1 data cache or missed it, nothing more (no
/// level beyond L1, no latency). A hit decodes as [`MemLevel::Cache`]; a miss decodes to no
/// level ([`missed_l1`] says what it is).
pub fn encode_store_l1(hit: bool) -> u64 {
    let lvl = LVL_L1 | if hit { LVL_HIT } else { LVL_MISS };
    (OP_STORE << OP_SHIFT) | (lvl << LVL_SHIFT)
}

/// Whether the word says the access missed the L1 data cache and nothing about where it was
/// served ([`decode`] gives `None`): a PEBS precise store that went past L1, which a sampler of
/// memory accesses keeps (it may have hit L2 or L3; the hardware does not say).
pub fn missed_l1(word: u64) -> bool {
    let lvl = (word >> LVL_SHIFT) & 0x3fff;
    decode(word).is_none() && lvl & LVL_L1 != 0 && lvl & LVL_MISS != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn precise_stores_say_l1_hit_or_miss_only() {
        assert_eq!(decode(encode_store_l1(true)), Some(MemLevel::Cache));
        assert!(!missed_l1(encode_store_l1(true)));
        assert_eq!(decode(encode_store_l1(false)), None);
        assert!(missed_l1(encode_store_l1(false)));
        // A DRAM access, or a word with no level, is no L1 miss of unknown level.
        assert!(!missed_l1(encode(MemLevel::LocalDram, true)) && !missed_l1(1 << LVL_SHIFT));
    }

    #[test]
    fn encoded_levels_decode_to_themselves() {
        for l in [MemLevel::Cache, MemLevel::LocalDram, MemLevel::RemoteDram] {
            for store in [false, true] {
                assert_eq!(decode(encode(l, store)), Some(l));
            }
        }
    }

    #[test]
    fn old_style_words_without_lvl_num_decode_from_the_mask() {
        // IBS on older kernels: mem_lvl = LOC_RAM | HIT, no lvl_num.
        assert_eq!(decode((LVL_LOC_RAM | LVL_HIT) << LVL_SHIFT), Some(MemLevel::LocalDram));
        assert_eq!(decode((LVL_REM_RAM2 | LVL_HIT) << LVL_SHIFT), Some(MemLevel::RemoteDram));
        assert_eq!(decode((LVL_L2 | LVL_HIT) << LVL_SHIFT), Some(MemLevel::Cache));
        // N/A or a miss without a level says nothing.
        assert_eq!(decode(1 << LVL_SHIFT), None);
        assert_eq!(decode((LVL_L1 | LVL_MISS) << LVL_SHIFT), None);
        assert_eq!(decode(0), None);
    }

    #[test]
    fn fields_read_as_the_word_they_come_from() {
        let dram = |remote| Fields { hit: true, loc_ram: true, lvl_num: LvlNum::Ram, remote, ..Default::default() };
        assert_eq!(decode(dram(false).word()), Some(MemLevel::LocalDram));
        assert_eq!(decode(dram(true).word()), Some(MemLevel::RemoteDram));
        let l1 = Fields { hit: true, l1: true, lvl_num: LvlNum::Cache, store: true, ..Default::default() };
        assert_eq!(decode(l1.word()), Some(MemLevel::Cache));
        assert_eq!(l1.word(), encode(MemLevel::Cache, true));
        // A remote cache is a remote access; an old kernel's flags alone still decode.
        assert_eq!(decode(Fields { remote: true, ..l1 }.word()), Some(MemLevel::RemoteDram));
        let old = Fields { hit: true, rem_ram1: true, ..Default::default() };
        assert_eq!(decode(old.word()), Some(MemLevel::RemoteDram));
        assert_eq!(decode(Fields::default().word()), None, "nothing known: no level");
    }

    proptest! {
        #[test]
        fn any_word_decodes_without_panicking(w in any::<u64>()) {
            let _ = decode(w);
        }
    }
}
