//! perf_event_open sample sources: detection of address-sampling PMUs, and one ring-buffer
//! reader (per thread) for all of them, with lost-sample accounting.
//!
//! ```text
//! /sys/bus/event_source/devices ──detect──▶ [Found]: ibs_op | cpu/mem-loads (PEBS) | arm_spe | software
//!                                                     (+ cpu/mem-stores)
//! PerfSource { one counter + mmap ring per TID } ──drain──▶ [Sample] (addr, tid, cpu, time) + lost
//!              (PEBS asked for misses: two, loads and stores)
//! ```
//!
//! Threads come and go: [`PerfSource::track`] opens rings for new TIDs and drops rings of
//! exited ones every cycle. A policy's sampling plan changes the period of every open ring
//! ([`PerfSource::set_period`], the PERF_EVENT_IOC_PERIOD ioctl) or pauses them
//! ([`PerfSource::set_enabled`]). The software source samples page-fault events with their data
//! address: it works on every machine (no PMU) but only sees first touches and hinting faults.
//!
//! Intel PEBS load latency sees loads slower than a threshold and never a store. Where the CPU
//! also has precise stores (`cpu/mem-stores/`: every retired store, its address, and whether it
//! hit the L1 data cache) and a policy asks for misses, each thread gets a second counter, of
//! stores, beside its load counter, both at one period: the samples of both that the data
//! source marks as cache hits (slow loads served by a cache, stores that hit L1) are dropped,
//! and the period is thinned by the share kept, as for IBS op without a miss filter
//! ([`ptb_profile::thinning::served`] says so for the simulator too).

use perf_event_open::config::{Cpu, Opts, Proc, SampleOn, SampleSkid};
use perf_event_open::count::Counter;
use perf_event_open::event::dp::DynamicPmu;
use perf_event_open::event::sw::Software;
use perf_event_open::sample::record::sample::{DataSource, MemLevel2};
use perf_event_open::sample::record::Record;
use perf_event_open::sample::Sampler;
use ptb_profile::datasrc::{Fields, LvlNum, MemLevel};
use ptb_profile::thinning::Served;
use ptb_profile::{AppId, Sample, SampleKind, SampleSource, SampledEvent, SourceStats, Tid};
use ptb_topology::{AddressSampler, CpuId};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// Which kind of sampling hardware (or software event) a source uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// AMD IBS op sampling (`ibs_op` PMU); `op_count`: the config bits that make it count
    /// dispatched ops instead of core cycles (`format/cnt_ctl`), `miss_only`: the bits that make
    /// it keep only ops that missed the last-level cache (`format/l3missonly`, Zen 4 and later),
    /// where the PMU has them.
    IbsOp { pmu_type: u32, op_count: Option<u64>, miss_only: Option<u64> },
    /// Intel PEBS load latency (`cpu/mem-loads/`); `stores`: the config of the CPU's precise
    /// stores (`cpu/mem-stores/`, same PMU), where it has them and they encode.
    PebsLoads { pmu_type: u32, config: u64, config1: u64, stores: Option<u64> },
    /// Arm SPE (`arm_spe_0`).
    Spe { pmu_type: u32, config: u64 },
    /// Software page-fault events with data addresses.
    PageFaults,
}

impl SourceKind {
    /// The hardware sampler this source is, as a machine file states it (`None`: SPE, page
    /// faults). What it serves a request with is [`ptb_profile::thinning::served`].
    pub fn sampler(&self) -> Option<AddressSampler> {
        match self {
            SourceKind::IbsOp { op_count, miss_only, .. } => {
                Some(AddressSampler::IbsOp { op_count: op_count.is_some(), miss_filter: miss_only.is_some() })
            }
            SourceKind::PebsLoads { stores, .. } => Some(AddressSampler::PebsLoads { stores: stores.is_some() }),
            SourceKind::Spe { .. } | SourceKind::PageFaults => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            SourceKind::IbsOp { .. } => "ibs-op",
            SourceKind::PebsLoads { .. } => "pebs-loads",
            SourceKind::Spe { .. } => "spe",
            SourceKind::PageFaults => "page-faults",
        }
    }
}

/// What detection found, for the user.
#[derive(Clone, Debug, Serialize)]
pub struct Detection {
    /// Usable sources, best first (hardware before software).
    pub found: Vec<SourceKind>,
    /// One line per PMU checked: what was found or why not.
    pub notes: Vec<String>,
}

impl Detection {
    pub fn best(&self) -> Option<&SourceKind> {
        self.found.first()
    }
    /// Pick by name (`auto`, `ibs-op`, `pebs-loads`, `spe`, `page-faults`).
    pub fn pick(&self, name: &str) -> Result<SourceKind, String> {
        if name == "auto" {
            return self.best().cloned().ok_or_else(|| self.why_none());
        }
        self.found.iter().find(|k| k.name() == name).cloned().ok_or_else(|| {
            format!(
                "sample source `{name}` is not available here (found: {}); {}",
                self.found.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                self.notes.join("; ")
            )
        })
    }
    pub fn why_none(&self) -> String {
        format!(
            "no sample source works here: {}. Check /proc/sys/kernel/perf_event_paranoid (<= 1, or run as root \
             / with CAP_PERFMON) and that perf events are enabled in the kernel (CONFIG_PERF_EVENTS)",
            self.notes.join("; ")
        )
    }
}

/// Parse a sysfs PMU format spec such as `config:0-7` or `config1:0-15` into (field, lo, hi).
pub fn parse_format(spec: &str) -> Option<(String, u32, u32)> {
    let (field, bits) = spec.trim().split_once(':')?;
    // Only contiguous ranges (the common case); `config:0-7,32-35` takes the first range.
    let first = bits.split(',').next()?;
    let (lo, hi) = match first.split_once('-') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => {
            let b: u32 = first.parse().ok()?;
            (b, b)
        }
    };
    if hi < lo || hi > 63 {
        return None;
    }
    Some((field.to_string(), lo, hi))
}

/// Encode a sysfs event string (`event=0xcd,umask=0x1,ldlat=3`) with the PMU's format
/// directory into (config, config1, config2). Unknown terms are errors.
pub fn encode_event(pmu_dir: &Path, event: &str) -> Result<[u64; 3], String> {
    let mut cfg = [0u64; 3];
    for term in event.trim().split(',').filter(|t| !t.is_empty()) {
        let (k, v) = term.split_once('=').unwrap_or((term, "1"));
        let v = v.trim();
        let val = if let Some(h) = v.strip_prefix("0x") { u64::from_str_radix(h, 16) } else { v.parse() }
            .map_err(|_| format!("bad value in `{term}`"))?;
        let fpath = pmu_dir.join("format").join(k.trim());
        let spec = std::fs::read_to_string(&fpath).map_err(|e| format!("{}: {e}", fpath.display()))?;
        let (field, lo, hi) =
            parse_format(&spec).ok_or_else(|| format!("{}: cannot parse `{spec}`", fpath.display()))?;
        let idx = match field.as_str() {
            "config" => 0,
            "config1" => 1,
            "config2" => 2,
            other => return Err(format!("{}: unknown field `{other}`", fpath.display())),
        };
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        cfg[idx] |= (val & mask) << lo;
    }
    Ok(cfg)
}

fn read_type(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("type")).ok()?.trim().parse().ok()
}

/// Look for address-sampling PMUs under `root`/sys/bus/event_source/devices, and check that
/// the software page-fault event can be opened here (for this process).
pub fn detect(root: &Path) -> Detection {
    let devs = root.join("sys/bus/event_source/devices");
    let mut d = Detection { found: vec![], notes: vec![] };
    let ibs = devs.join("ibs_op");
    match read_type(&ibs) {
        Some(t) => {
            let bits = |term: &str| encode_event(&ibs, term).ok().map(|c| c[0]).filter(|&c| c != 0);
            let (op_count, miss_only) = (bits("cnt_ctl=1"), bits("l3missonly=1"));
            d.found.push(SourceKind::IbsOp { pmu_type: t, op_count, miss_only });
            let counts = if op_count.is_some() { "cycles or ops" } else { "cycles only: no format/cnt_ctl" };
            let misses = if miss_only.is_some() { "; last-level misses only on request" } else { "" };
            d.notes.push(format!("ibs_op: AMD IBS op sampling (type {t}; counts {counts}{misses})"));
        }
        None => d.notes.push("ibs_op: not present (not an AMD CPU with IBS, or IBS not exposed to this VM)".into()),
    }
    let cpu = devs.join("cpu");
    match (read_type(&cpu), std::fs::read_to_string(cpu.join("events/mem-loads"))) {
        (Some(t), Ok(ev)) => match encode_event(&cpu, &ev) {
            Ok(c) => {
                // ldlat=3 is the kernel's default threshold; 30 cycles keeps L1 hits out.
                let ld = encode_event(&cpu, "ldlat=30").map(|x| x[1]).unwrap_or(c[1]);
                d.notes.push(format!("cpu/mem-loads: Intel PEBS load latency (type {t}, `{}`)", ev.trim()));
                // Precise stores (Sandy Bridge and later): every retired store, opened beside
                // the loads when a policy asks for misses.
                let stores = match std::fs::read_to_string(cpu.join("events/mem-stores")) {
                    Ok(sev) => match encode_event(&cpu, &sev) {
                        Ok(s) => {
                            d.notes.push(format!("cpu/mem-stores: Intel PEBS precise stores (`{}`)", sev.trim()));
                            Some(s[0])
                        }
                        Err(e) => {
                            d.notes.push(format!("cpu/mem-stores: present but not usable: {e}; loads only"));
                            None
                        }
                    },
                    Err(_) => {
                        d.notes.push("cpu/mem-stores: not present (no PEBS precise stores): loads only".into());
                        None
                    }
                };
                d.found.push(SourceKind::PebsLoads { pmu_type: t, config: c[0], config1: ld.max(c[1]), stores });
            }
            Err(e) => d.notes.push(format!("cpu/mem-loads: present but not usable: {e}")),
        },
        _ => d.notes.push("cpu/mem-loads: not present (no Intel PEBS load-latency event)".into()),
    }
    let spe = std::fs::read_dir(&devs)
        .ok()
        .and_then(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| p.to_string_lossy().contains("arm_spe")));
    // Arm SPE writes its records (address, latency, data source packets) into an AUX trace
    // buffer, not as perf samples in the ring: without an AUX area mapped its driver never
    // starts, so a ring alone delivers nothing. ptb does not decode that buffer yet, so SPE is
    // named, never picked (`--source spe` says why).
    match spe.as_deref().and_then(|p| Some((p, read_type(p)?))) {
        Some((p, t)) => d.notes.push(format!(
            "{}: Arm SPE present (type {t}) but not used: its samples come through an AUX trace buffer, \
             which ptb does not decode yet",
            p.file_name().unwrap_or_default().to_string_lossy()
        )),
        None => d.notes.push("arm_spe: not present".into()),
    }
    // The software event always exists in a perf-enabled kernel; check we may open it.
    match open_counter(&SourceKind::PageFaults, 0, 1, false, false) {
        Ok(_) => {
            d.found.push(SourceKind::PageFaults);
            d.notes.push("software page-faults: usable (coarse: first touches and hinting faults only)".into());
        }
        Err(e) => d.notes.push(format!("software page-faults: perf_event_open failed: {e}")),
    }
    d
}

/// The core clock in GHz under `root`: cpufreq's base frequency, else its maximum (kHz),
/// else the first "cpu MHz" of /proc/cpuinfo; `None` when none is readable and plausible.
pub fn core_ghz(root: &std::path::Path) -> Option<f64> {
    let cpufreq = root.join("sys/devices/system/cpu/cpu0/cpufreq");
    let khz = ["base_frequency", "cpuinfo_max_freq"]
        .iter()
        .find_map(|f| std::fs::read_to_string(cpufreq.join(f)).ok()?.trim().parse::<f64>().ok());
    let ghz = khz.map(|k| k / 1e6).or_else(|| {
        let info = std::fs::read_to_string(root.join("proc/cpuinfo")).ok()?;
        cpuinfo_mhz(&info).map(|m| m / 1e3)
    })?;
    (ghz.is_finite() && (0.1..=10.0).contains(&ghz)).then_some(ghz)
}

/// The first "cpu MHz" value of a /proc/cpuinfo text.
pub fn cpuinfo_mhz(info: &str) -> Option<f64> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "cpu MHz").then(|| v.trim().parse::<f64>().ok()).flatten()
    })
}

use ptb_profile::thinning::KEPT_SHARE_PRIOR;
pub use ptb_profile::thinning::MAX_INTERRUPTS_PER_S;
/// Sampled memory ops a drain needs before its kept share counts.
const MIN_SEEN: u64 = 64;

/// A sample's latency in ns from its weight (core cycles) and the core clock; `None` for a
/// weight of 0, which says no latency was measured (IBS: an op that is not a load missing the
/// data cache, or a kernel before 6.1), not an access that took no time.
fn latency_ns(w: &perf_event_open::sample::record::sample::Weight, ghz: f64) -> Option<f32> {
    use perf_event_open::sample::record::sample::Weight;
    let cycles = match w {
        Weight::Full(v) => *v as f64,
        Weight::Vars { var1, .. } => f64::from(*var1),
    };
    (cycles > 0.0 && ghz > 0.0).then(|| (cycles / ghz) as f32)
}

/// The fields of a sample's data source that ptb reads (see [`ptb_profile::datasrc`]).
fn data_src_fields(ds: &DataSource) -> Fields {
    let l = &ds.level;
    let lvl_num = match ds.level2 {
        MemLevel2::L1 | MemLevel2::L2 | MemLevel2::L3 | MemLevel2::L4 | MemLevel2::AnyCache | MemLevel2::Lfb => {
            LvlNum::Cache
        }
        MemLevel2::Ram | MemLevel2::Pmem => LvlNum::Ram,
        _ => LvlNum::Unknown,
    };
    Fields {
        store: ds.op.store,
        hit: l.hit,
        miss: l.miss,
        l1: l.l1,
        lfb: l.lfb,
        l2: l.l2,
        l3: l.l3,
        loc_ram: l.loc_ram,
        rem_ram1: l.rem_ram1,
        rem_ram2: l.rem_ram2,
        rem_cce1: l.rem_cce1,
        rem_cce2: l.rem_cce2,
        lvl_num,
        remote: ds.remote,
    }
}

/// What every counter samples: user space, at one event in `period`, with the data address,
/// the thread, CPU and time.
fn sample_opts(period: u64) -> Opts {
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    opts.sample_on = SampleOn::Count(period.max(1));
    opts.sample_format.data_addr = true;
    opts.record_id_format.task = true;
    opts.record_id_format.cpu = true;
    opts.record_id_format.time = true;
    opts
}

/// Open the PEBS precise-store counter (`cpu/mem-stores/`, PMU `pmu_type`, `config`) on a
/// thread: every retired store counted, one in `period` sampled with its address and its data
/// source (L1 hit or miss; no latency, so no weight).
fn open_store_counter(pmu_type: u32, config: u64, tid: u32, period: u64) -> io::Result<Counter> {
    let mut opts = sample_opts(period);
    opts.sample_skid = SampleSkid::ReqZero;
    opts.sample_format.data_source = true;
    Counter::new(DynamicPmu { ty: pmu_type, config, config1: 0, config2: 0, config3: 0 }, (Proc(tid), Cpu::ALL), opts)
}

/// How one address sample counts in a drain, from its data-source word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tally {
    /// The word says where the access was served, or that it went past the L1 data cache (a
    /// PEBS precise store that missed L1: the hardware says no more of it).
    seen: bool,
    /// Seen, and not dropped: a memory access that the source keeps, for the kept share that
    /// thins its period ([`PerfSource::observe_kept`]).
    kept: bool,
    /// A cache hit that a source keeping memory accesses only drops (slow loads served by a
    /// cache, stores that hit L1, ops that hit a cache).
    dropped: bool,
}

/// Count a sample whose data-source word is `word` (`None`: none came back) for a source that
/// keeps memory accesses only (`memory_only`) or every sample.
fn tally(word: Option<u64>, memory_only: bool) -> Tally {
    use ptb_profile::datasrc::{decode, missed_l1};
    let level = word.and_then(decode);
    let seen = level.is_some() || word.is_some_and(missed_l1);
    let dropped = memory_only && level == Some(MemLevel::Cache);
    Tally { seen, kept: seen && !dropped, dropped }
}

/// Open one sampling counter on a thread (0 = the calling thread); `ops`: an IBS counter
/// counts dispatched ops (where the PMU can), not core cycles; `misses`: it keeps only ops that
/// missed the last-level cache (where the PMU can).
fn open_counter(kind: &SourceKind, tid: u32, period: u64, ops: bool, misses: bool) -> io::Result<Counter> {
    let mut opts = sample_opts(period);
    let target = (Proc(tid), Cpu::ALL);
    match *kind {
        SourceKind::PageFaults => {
            opts.exclude.kernel = false; // page faults are counted in the kernel
            Counter::new(Software::PageFault, target, opts)
        }
        SourceKind::IbsOp { pmu_type, op_count, miss_only } => {
            // IBS cannot exclude the kernel on older kernels.
            opts.exclude.kernel = false;
            // The data source of each op (cache hit, local or remote DRAM): Linux 6.1 and later
            // fill it for IBS; older kernels leave it "not available".
            opts.sample_format.data_source = true;
            // The load's latency (IbsDcMissLat, core cycles) for loads that missed the data
            // cache, from Linux 6.1; 0 for other ops and on older kernels.
            opts.sample_format.weight = Some(perf_event_open::config::Repr::Full);
            let config = if ops { op_count.unwrap_or(0) } else { 0 } | if misses { miss_only.unwrap_or(0) } else { 0 };
            Counter::new(DynamicPmu { ty: pmu_type, config, config1: 0, config2: 0, config3: 0 }, target, opts)
        }
        SourceKind::PebsLoads { pmu_type, config, config1, .. } => {
            opts.sample_skid = SampleSkid::ReqZero;
            opts.sample_format.data_source = true;
            opts.sample_format.weight = Some(perf_event_open::config::Repr::Full);
            Counter::new(DynamicPmu { ty: pmu_type, config, config1, config2: 0, config3: 0 }, target, opts)
        }
        SourceKind::Spe { pmu_type, config } => {
            opts.sample_format.data_source = true;
            Counter::new(DynamicPmu { ty: pmu_type, config, config1: 0, config2: 0, config3: 0 }, target, opts)
        }
    }
}

/// One counter and its mapped ring buffer.
struct Channel {
    // Field order matters: the sampler's mapping must go before the counter's fd.
    sampler: Sampler,
    counter: Counter,
}

impl Channel {
    fn open(counter: Counter, exp: u8, enabled: bool) -> io::Result<Self> {
        let sampler = counter.sampler(exp)?;
        if enabled {
            counter.enable()?;
        }
        Ok(Channel { sampler, counter })
    }
}

/// What one thread is sampled through: the source's counter and, for PEBS asked for misses, its
/// precise-store counter at the same period ([`PerfSource::stores_config`]). The thread is
/// sampled through both or not at all: a thread whose store counter does not open is recorded
/// in [`PerfSource::open_errors`] like one whose load counter does not, since its load samples
/// alone would be slow loads, not the misses the source's mode says.
struct Ring {
    main: Channel,
    stores: Option<Channel>,
}

impl Ring {
    fn channels(&self) -> impl Iterator<Item = (&Channel, bool)> {
        std::iter::once((&self.main, false)).chain(self.stores.iter().map(|c| (c, true)))
    }
}

/// Samples of the threads of one or more processes through one perf ring per thread (two for
/// PEBS with precise stores asked for misses: loads and stores).
pub struct PerfSource {
    kind: SourceKind,
    period: u64,
    /// IBS counts dispatched ops (a sample stands for `period` ops), not core cycles.
    ops: bool,
    /// Samples the source marks as cache hits are dropped: the policy asked for memory accesses
    /// and the hardware samples every op, or every store (PEBS with precise stores)
    /// ([`PerfSource::for_event`]).
    memory_only: bool,
    /// The hardware itself keeps only last-level misses (IBS `l3missonly`).
    hw_misses: bool,
    /// The period asked for (`period` is the one programmed: larger where ops are thinned).
    asked: u64,
    /// Share of the sampled memory ops (PEBS with precise stores: of its slow loads and stores)
    /// that are memory accesses, as the samples show it ([`Self::observe_kept`]); it sets how far
    /// the period is thinned.
    kept_share: f64,
    /// Address samples arrive without a data source (IBS before Linux 6.1): no cache hit can be
    /// dropped, and the samples are every memory op's.
    no_data_src: bool,
    /// Sampled events a second per thread, as the last drain showed them (0 before): with
    /// [`MAX_INTERRUPTS_PER_S`], or the policy's lower budget, the shortest period.
    events_per_s: f64,
    /// The policy's own interrupt budget per thread and second (`SamplingRequest`), if lower
    /// than the cap.
    budget: Option<f64>,
    /// When the rings were last drained.
    last_drain: Option<std::time::Instant>,
    /// The period may be raised to keep under [`MAX_INTERRUPTS_PER_S`] (not for a recording,
    /// whose trace states one period).
    capped: bool,
    /// Ring size: 2^exp data pages.
    exp: u8,
    rings: BTreeMap<Tid, (AppId, Ring)>,
    /// Clock origin (perf time, ns) so sample times start near 0; set by the first sample.
    t0: Option<u64>,
    /// TIDs whose counter could not be opened (reported once).
    pub open_errors: BTreeMap<Tid, String>,
    /// Core clock in GHz, to turn sampled latencies (core cycles) into ns; `None`: unknown,
    /// and samples then carry no latency.
    ghz: Option<f64>,
    /// Counters count (false: paused; new rings open disabled).
    enabled: bool,
}

impl PerfSource {
    /// The source as its hardware samples by default (IBS: one op every `period` cycles).
    pub fn new(kind: SourceKind, period: u64) -> Self {
        let event = match kind {
            SourceKind::IbsOp { .. } => SampledEvent::Cycles,
            SourceKind::Spe { .. } => SampledEvent::Ops,
            _ => SampledEvent::SlowLoads,
        };
        Self::for_event(kind, period, event)
    }

    /// The source as close to what a policy asks for as its hardware comes: asked for memory
    /// accesses (`Misses`, `SlowLoads`), a source that samples every op (IBS counting ops, SPE)
    /// keeps only the samples that are not cache hits, each still standing for `period` ops, so
    /// that samples x period estimates the accesses as a miss counter's would; asked for ops,
    /// IBS counts ops. IBS without op counting samples per cycle, and then no sample stands for
    /// a number of accesses, so nothing is dropped. PEBS load latency delivers slow loads,
    /// except asked for misses where the CPU has precise stores: then every thread also gets a
    /// store counter at the same period, and the samples of both that are cache hits (slow
    /// loads served by a cache, stores that hit L1) are dropped, at a period thinned as IBS op
    /// is. What each sampler serves is [`ptb_profile::thinning::served`], the simulator's rule;
    /// [`Self::mode`] says what the samples are.
    pub fn for_event(kind: SourceKind, period: u64, event: SampledEvent) -> Self {
        let memory = matches!(event, SampledEvent::Misses | SampledEvent::SlowLoads);
        let (ops, memory_only, hw_misses) = match (kind.sampler(), &kind) {
            (Some(s), _) => {
                let op_sampler = matches!(s, AddressSampler::IbsOp { .. });
                match ptb_profile::thinning::served(s, event) {
                    // IBS samples ops for it; PEBS its loads and stores.
                    Served { event: SampledEvent::Misses, thinned } => (op_sampler, true, !thinned),
                    Served { event, .. } => (event == SampledEvent::Ops, false, false),
                }
            }
            (_, SourceKind::Spe { .. }) => (false, memory, false),
            _ => (false, false, false),
        };
        let mut src = PerfSource {
            kind,
            ops,
            memory_only,
            hw_misses,
            asked: period.max(1),
            kept_share: KEPT_SHARE_PRIOR,
            no_data_src: false,
            events_per_s: 0.0,
            budget: None,
            last_drain: None,
            capped: true,
            period: period.max(1),
            exp: 5,
            rings: BTreeMap::new(),
            t0: None,
            open_errors: BTreeMap::new(),
            ghz: core_ghz(std::path::Path::new("/")),
            enabled: true,
        };
        src.period = src.thinned(src.asked);
        src
    }

    /// The op period that costs as many interrupts as `asked` memory accesses would: where a
    /// sampler of every op keeps only its memory accesses (`kept_share` of its samples, every
    /// op sampled interrupting, memory op or not), one op in `asked / kept_share`; else
    /// `asked`. A miss counter at period `asked` interrupts once per `asked` misses; an op
    /// sampler at the same period would interrupt `1 / kept_share` times as often (a program
    /// with 2 memory accesses per 100 ops: 50 times) for the same samples, an overhead no
    /// policy priced. Thinned, it keeps `kept_share` as many samples, each standing for the
    /// period programmed. PEBS with precise stores is thinned the same way: its store counter
    /// samples every store, most of them L1 hits that are dropped.
    fn thinned(&self, asked: u64) -> u64 {
        let thins = self.memory_only && !self.hw_misses;
        let min_period = ptb_profile::thinning::min_period(self.events_per_s, self.budget);
        ptb_profile::thinning::period(asked, thins.then_some(self.kept_share), min_period)
    }

    /// What one drain saw: `sampled` samples (interrupts) of `threads` threads over `secs`
    /// seconds, `addressed` of them with an address, `seen` of those with a data source, `kept`
    /// of those memory accesses. Updates the kept share and the shortest period the interrupt
    /// cap allows and, where they moved the period by more than a quarter, reprograms the rings.
    fn observe_kept(&mut self, sampled: u64, addressed: u64, seen: u64, kept: u64, threads: usize, secs: f64) {
        if addressed >= MIN_SEEN {
            self.no_data_src = seen == 0;
        }
        if self.capped && self.kind != SourceKind::PageFaults && sampled >= MIN_SEEN && threads > 0 && secs > 0.0 {
            let events = sampled as f64 * self.period as f64 / (threads as f64 * secs);
            self.events_per_s = events;
        }
        if self.memory_only && !self.hw_misses && seen >= MIN_SEEN {
            self.kept_share = (kept.max(1) as f64 / sampled.max(seen) as f64).min(1.0);
        }
        let q = self.thinned(self.asked);
        if (q as f64 - self.period as f64).abs() > 0.25 * self.period as f64 {
            self.program(q);
        }
    }

    /// The source at exactly the period asked, never raised for the interrupt cap: a recording
    /// states one period for all its samples.
    pub fn uncapped(mut self) -> Self {
        self.capped = false;
        self
    }

    /// Hold the interrupts under a policy's own `budget` (a second per thread; `None`: the cap
    /// alone) from now on. Returns how many rings were closed to change the period (see
    /// [`Self::set_period`]).
    pub fn set_budget(&mut self, budget: Option<f64>) -> usize {
        if budget == self.budget {
            return 0;
        }
        self.budget = budget;
        self.program(self.thinned(self.asked))
    }

    /// The policy's interrupt budget in force ([`Self::set_budget`]).
    pub fn budget(&self) -> Option<f64> {
        self.budget
    }

    /// The period asked for ([`Self::period`] is the one programmed).
    pub fn asked_period(&self) -> u64 {
        self.asked
    }

    /// Sample once every `period` events from now on, on every open ring and every ring
    /// opened later. A ring whose period cannot be changed (its thread exiting, a PMU that
    /// refuses the value) is closed, and [`Self::track`] opens it again at the new period.
    /// Returns how many rings were closed that way.
    pub fn set_period(&mut self, period: u64) -> usize {
        self.asked = period.max(1);
        self.program(self.thinned(self.asked))
    }

    /// Program `period` on every ring (see [`Self::set_period`]).
    fn program(&mut self, period: u64) -> usize {
        let period = period.max(1);
        if period == self.period {
            return 0;
        }
        self.period = period;
        let before = self.rings.len();
        self.rings.retain(|tid, (_, ring)| match ring.channels().try_for_each(|(c, _)| c.sampler.sample_on(period)) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(tid, error = %e, period, "cannot change the sample period; reopening the ring");
                false
            }
        });
        before - self.rings.len()
    }

    /// Count (true) or pause (false) every ring, now and for rings opened later. Rings that
    /// cannot follow are closed (and reopened by [`Self::track`] in the new state).
    pub fn set_enabled(&mut self, on: bool) {
        if on == self.enabled {
            return;
        }
        self.enabled = on;
        let toggle = |c: &Channel| if on { c.counter.enable() } else { c.counter.disable() };
        self.rings.retain(|tid, (_, ring)| match ring.channels().try_for_each(|(c, _)| toggle(c)) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(tid, error = %e, on, "cannot enable or pause a counter; reopening the ring");
                false
            }
        });
    }

    /// True when the counters count (not paused by [`Self::set_enabled`]).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Events per sample.
    pub fn period(&self) -> u64 {
        self.period
    }

    pub fn kind(&self) -> &SourceKind {
        &self.kind
    }

    /// What this source's samples stand for, as a policy's snapshot says it.
    pub fn mode(&self) -> ptb_policy::SamplingMode {
        let event = match self.kind {
            SourceKind::PageFaults => return ptb_policy::SamplingMode::PageFaults,
            _ if self.memory_only && !self.no_data_src => SampledEvent::Misses,
            SourceKind::IbsOp { .. } if self.ops => SampledEvent::Ops,
            SourceKind::IbsOp { .. } => SampledEvent::Cycles,
            SourceKind::Spe { .. } => SampledEvent::Ops,
            SourceKind::PebsLoads { .. } => SampledEvent::SlowLoads,
        };
        ptb_policy::SamplingMode::Address { event, period: self.period }
    }

    /// Make the set of sampled threads equal to `threads` ((app, tid) pairs): open rings for
    /// new threads, close rings of threads no longer listed. Returns how many were opened.
    pub fn track(&mut self, threads: &[(AppId, Tid)]) -> usize {
        let want: BTreeMap<Tid, AppId> = threads.iter().map(|&(a, t)| (t, a)).collect();
        self.rings.retain(|t, _| want.contains_key(t));
        self.track_more(threads)
    }

    /// Open rings for the threads of `threads` that have none (the others keep theirs).
    /// Returns how many were opened.
    pub fn track_more(&mut self, threads: &[(AppId, Tid)]) -> usize {
        let mut opened = 0;
        for &(app, tid) in threads {
            if self.rings.contains_key(&tid) || self.open_errors.contains_key(&tid) {
                continue;
            }
            match self.open(tid) {
                Ok(r) => {
                    self.rings.insert(tid, (app, r));
                    opened += 1;
                }
                Err(e) => {
                    // A thread that exited between listing and opening is not an error.
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        tracing::warn!(tid, error = %e, source = self.kind.name(), "cannot sample thread");
                    }
                    self.open_errors.insert(tid, e.to_string());
                }
            }
        }
        opened
    }

    fn open(&self, tid: Tid) -> io::Result<Ring> {
        let counter = open_counter(&self.kind, tid, self.period, self.ops, self.hw_misses)?;
        let main = Channel::open(counter, self.exp, self.enabled)?;
        let stores = match (&self.kind, self.stores_config()) {
            (SourceKind::PebsLoads { pmu_type, .. }, Some(config)) => {
                let counter = open_store_counter(*pmu_type, config, tid, self.period)?;
                Some(Channel::open(counter, self.exp, self.enabled)?)
            }
            _ => None,
        };
        Ok(Ring { main, stores })
    }

    /// The precise-store config each thread's second counter is opened with: PEBS with precise
    /// stores, asked for misses ([`Self::for_event`]); `None` for every other source.
    fn stores_config(&self) -> Option<u64> {
        match self.kind {
            SourceKind::PebsLoads { stores, .. } if self.memory_only => stores,
            _ => None,
        }
    }

    /// Number of threads with an open ring.
    pub fn n_rings(&self) -> usize {
        self.rings.len()
    }

    /// What a sample from one of a ring's counters is (`stores`: the precise-store counter): a
    /// page fault for the software source; for PEBS with its two counters, a load or a store,
    /// as the counter says; else an access of unknown direction.
    fn sample_kind(&self, stores: bool) -> SampleKind {
        match self.kind {
            SourceKind::PageFaults => SampleKind::PageFault,
            SourceKind::PebsLoads { .. } if self.stores_config().is_some() => {
                if stores {
                    SampleKind::Store
                } else {
                    SampleKind::Load
                }
            }
            _ => SampleKind::Access,
        }
    }
}

impl SampleSource for PerfSource {
    fn describe(&self) -> String {
        let what = match self.kind {
            SourceKind::IbsOp { .. } if self.ops => "AMD IBS op, counting ops",
            SourceKind::IbsOp { .. } => "AMD IBS op, counting cycles",
            SourceKind::PebsLoads { .. } if self.stores_config().is_some() => {
                "Intel PEBS load latency and precise stores"
            }
            SourceKind::PebsLoads { .. } => "Intel PEBS load latency",
            SourceKind::Spe { .. } => "Arm SPE",
            SourceKind::PageFaults => "software page-fault events",
        };
        let only = match (self.memory_only, self.no_data_src) {
            (true, false) => ", memory accesses only (cache hits dropped)",
            (true, true) => ", no data source on this kernel: cache hits counted",
            _ => "",
        };
        format!("{} ({what}{only}, period {})", self.kind.name(), self.period)
    }

    fn drain(&mut self, out: &mut Vec<Sample>) -> io::Result<SourceStats> {
        let mut st = SourceStats::default();
        // Samples (of both counters where a thread has two), those with an address, those with
        // a known data source, the memory accesses among them.
        let (mut sampled, mut addressed, mut seen, mut kept) = (0u64, 0u64, 0u64, 0u64);
        for (&tid, (app, ring)) in &self.rings {
            for (channel, stores) in ring.channels() {
                let Some(iter) = channel.sampler.iter() else { continue };
                let kind = self.sample_kind(stores);
                for (_priv, rec) in iter {
                    match rec {
                        Record::Sample(s) => {
                            sampled += 1;
                            let Some(addr) = s.data_addr.filter(|a| *a != 0) else {
                                st.other += 1;
                                continue;
                            };
                            let data_src = s.data_source.as_ref().map(|d| data_src_fields(d).word());
                            let t = tally(data_src, self.memory_only);
                            addressed += 1;
                            seen += u64::from(t.seen);
                            if t.dropped {
                                st.cache_hits += 1;
                                continue;
                            }
                            kept += u64::from(t.kept);
                            let time = s.record_id.time.unwrap_or(0);
                            let t0 = *self.t0.get_or_insert(time);
                            // A precise store has no latency, whatever weight comes back.
                            let weight = s.weight.as_ref().filter(|_| !stores);
                            out.push(Sample {
                                app: *app,
                                tid: s.record_id.task.as_ref().map_or(tid, |t| t.tid),
                                cpu: CpuId(s.record_id.cpu.unwrap_or(0)),
                                addr,
                                kind,
                                time_ns: time.saturating_sub(t0),
                                data_src,
                                latency_ns: weight.zip(self.ghz).and_then(|(w, ghz)| latency_ns(w, ghz)),
                                phys: s.data_phys_addr,
                            });
                            st.samples += 1;
                        }
                        Record::LostSamples(l) => st.lost += l.lost_samples,
                        Record::LostRecords(l) => st.lost += l.lost_records,
                        _ => st.other += 1,
                    }
                }
            }
        }
        let now = std::time::Instant::now();
        let secs = self.last_drain.map_or(0.0, |t| now.duration_since(t).as_secs_f64());
        self.last_drain = Some(now);
        self.observe_kept(sampled, addressed, seen, kept, self.rings.len(), secs);
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_clock_comes_from_cpufreq_else_cpuinfo_and_implausible_values_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(core_ghz(d.path()), None);
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::write(d.path().join("proc/cpuinfo"), "processor\t: 0\ncpu MHz\t\t: 2095.076\n").unwrap();
        assert!((core_ghz(d.path()).unwrap() - 2.095076).abs() < 1e-9);
        let f = d.path().join("sys/devices/system/cpu/cpu0/cpufreq");
        std::fs::create_dir_all(&f).unwrap();
        std::fs::write(f.join("cpuinfo_max_freq"), "3000000\n").unwrap();
        assert_eq!(core_ghz(d.path()), Some(3.0));
        std::fs::write(f.join("base_frequency"), "2100000\n").unwrap();
        assert_eq!(core_ghz(d.path()), Some(2.1));
        std::fs::write(f.join("base_frequency"), "0\n").unwrap();
        assert_eq!(core_ghz(d.path()), None, "a zero clock is not a clock");
    }

    proptest::proptest! {
        #[test]
        fn cpuinfo_parsing_never_panics(text in "(cpu MHz|model name|[a-z ]{0,8})[ \t]*:?[ \t]*[-0-9.e]{0,12}\n{0,2}") {
            let _ = cpuinfo_mhz(&text);
        }
    }

    #[test]
    fn format_specs_parse() {
        assert_eq!(parse_format("config:0-7\n"), Some(("config".into(), 0, 7)));
        assert_eq!(parse_format("config1:0-15"), Some(("config1".into(), 0, 15)));
        assert_eq!(parse_format("config:21"), Some(("config".into(), 21, 21)));
        assert_eq!(parse_format("config:9-3"), None);
        assert_eq!(parse_format("nonsense"), None);
    }

    #[test]
    fn event_strings_encode_with_a_fake_pmu() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("format");
        std::fs::create_dir_all(&f).unwrap();
        std::fs::write(f.join("event"), "config:0-7\n").unwrap();
        std::fs::write(f.join("umask"), "config:8-15\n").unwrap();
        std::fs::write(f.join("ldlat"), "config1:0-15\n").unwrap();
        let c = encode_event(d.path(), "event=0xcd,umask=0x1,ldlat=3").unwrap();
        assert_eq!(c, [0x01cd, 3, 0]);
        assert!(encode_event(d.path(), "bogus=1").is_err());
        assert!(encode_event(d.path(), "event=zz").is_err());
    }

    /// A PMU `name` of `type` in a fake sysfs under `root`, with a `format` folder: its path.
    fn fake_pmu(root: &Path, name: &str, ty: u32) -> std::path::PathBuf {
        let dir = root.join("sys/bus/event_source/devices").join(name);
        std::fs::create_dir_all(dir.join("format")).unwrap();
        std::fs::write(dir.join("type"), format!("{ty}\n")).unwrap();
        dir
    }

    #[test]
    fn detection_on_a_fake_sysfs_finds_ibs() {
        let d = tempfile::tempdir().unwrap();
        fake_pmu(d.path(), "ibs_op", 11);
        let det = detect(d.path());
        assert_eq!(det.best(), Some(&SourceKind::IbsOp { pmu_type: 11, op_count: None, miss_only: None }));
        assert!(det.pick("spe").is_err());
    }

    #[test]
    fn arm_spe_is_named_but_never_picked() {
        let d = tempfile::tempdir().unwrap();
        fake_pmu(d.path(), "arm_spe_0", 9);
        let det = detect(d.path());
        assert!(det.found.iter().all(|k| !matches!(k, SourceKind::Spe { .. })), "{:?}", det.found);
        let e = det.pick("spe").unwrap_err();
        assert!(e.contains("AUX trace buffer"), "{e}");
    }

    #[test]
    fn detection_sees_whether_ibs_can_count_ops() {
        let d = tempfile::tempdir().unwrap();
        let ibs = fake_pmu(d.path(), "ibs_op", 11);
        std::fs::write(ibs.join("format/cnt_ctl"), "config:19\n").unwrap();
        let det = detect(d.path());
        assert_eq!(det.best(), Some(&SourceKind::IbsOp { pmu_type: 11, op_count: Some(1 << 19), miss_only: None }));
        assert!(det.notes[0].contains("cycles or ops"), "{:?}", det.notes);
        std::fs::write(ibs.join("format/l3missonly"), "config:16\n").unwrap();
        let det = detect(d.path());
        let zen4 = SourceKind::IbsOp { pmu_type: 11, op_count: Some(1 << 19), miss_only: Some(1 << 16) };
        assert_eq!(det.best(), Some(&zen4));
        assert!(det.notes[0].contains("last-level misses only"), "{:?}", det.notes);
    }

    /// Intel: `cpu/mem-loads` is PEBS load latency; `cpu/mem-stores` beside it, where it
    /// encodes, adds precise stores.
    #[test]
    fn detection_sees_whether_pebs_has_precise_stores() {
        let d = tempfile::tempdir().unwrap();
        let cpu = fake_pmu(d.path(), "cpu", 4);
        std::fs::write(cpu.join("format/event"), "config:0-7\n").unwrap();
        std::fs::write(cpu.join("format/umask"), "config:8-15\n").unwrap();
        std::fs::write(cpu.join("format/ldlat"), "config1:0-15\n").unwrap();
        std::fs::create_dir_all(cpu.join("events")).unwrap();
        std::fs::write(cpu.join("events/mem-loads"), "event=0xcd,umask=0x1,ldlat=3\n").unwrap();
        let loads_only = SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: None };
        let det = detect(d.path());
        assert_eq!(det.best(), Some(&loads_only));
        assert_eq!(loads_only.sampler(), Some(AddressSampler::PebsLoads { stores: false }));
        assert!(det.notes.iter().any(|n| n.contains("mem-stores: not present")), "{:?}", det.notes);
        // Haswell and later: `event=0xd0,umask=0x82`.
        std::fs::write(cpu.join("events/mem-stores"), "event=0xd0,umask=0x82\n").unwrap();
        let det = detect(d.path());
        let both = SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: Some(0x82d0) };
        assert_eq!(det.best(), Some(&both));
        assert_eq!(both.sampler(), Some(AddressSampler::PebsLoads { stores: true }));
        assert_eq!(det.pick("pebs-loads"), Ok(both));
        assert!(det.notes.iter().any(|n| n.contains("PEBS precise stores")), "{:?}", det.notes);
        // An event this PMU's format cannot encode: loads only, and why.
        std::fs::write(cpu.join("events/mem-stores"), "event=0xd0,bogus=1\n").unwrap();
        let det = detect(d.path());
        assert_eq!(det.best(), Some(&loads_only));
        assert!(det.notes.iter().any(|n| n.contains("mem-stores: present but not usable")), "{:?}", det.notes);
    }

    /// What a policy asks for and what the source then delivers (no hardware needed: nothing
    /// is opened until a thread is tracked).
    #[test]
    fn asked_for_memory_accesses_an_op_sampler_drops_cache_hits_and_says_so() {
        use ptb_policy::SamplingMode::Address;
        let ibs = |op_count| SourceKind::IbsOp { pmu_type: 11, op_count, miss_only: None };
        // Thinned (see the next test) until a drain shows how many ops are memory accesses.
        let misses = PerfSource::for_event(ibs(Some(1 << 19)), 4096, SampledEvent::Misses);
        assert_eq!(misses.mode(), Address { event: SampledEvent::Misses, period: 4096 * 32 });
        assert_eq!(misses.asked_period(), 4096);
        assert!(misses.describe().contains("counting ops, memory accesses only"), "{}", misses.describe());
        let ops = PerfSource::for_event(ibs(Some(1 << 19)), 4096, SampledEvent::Ops);
        assert_eq!(ops.mode(), Address { event: SampledEvent::Ops, period: 4096 });
        // The thesis' mode, and IBS that cannot count ops: one op every `period` cycles, whose
        // samples stand for no number of accesses, so none is dropped.
        let cycles = PerfSource::for_event(ibs(Some(1 << 19)), 4096, SampledEvent::Cycles);
        assert_eq!(cycles.mode(), Address { event: SampledEvent::Cycles, period: 4096 });
        let old = PerfSource::for_event(ibs(None), 4096, SampledEvent::Misses);
        assert_eq!(old.mode(), Address { event: SampledEvent::Cycles, period: 4096 });
        assert!(!old.memory_only);
        assert_eq!(PerfSource::new(ibs(Some(1 << 19)), 64).mode(), Address { event: SampledEvent::Cycles, period: 64 });
        let spe = SourceKind::Spe { pmu_type: 9, config: 0 };
        let spe_misses = PerfSource::for_event(spe.clone(), 512, SampledEvent::Misses);
        assert_eq!(spe_misses.mode(), Address { event: SampledEvent::Misses, period: 512 * 32 });
        assert_eq!(PerfSource::new(spe, 512).mode(), Address { event: SampledEvent::Ops, period: 512 });
        let pebs = SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: None };
        let slow = PerfSource::for_event(pebs, 100, SampledEvent::Misses);
        assert_eq!(slow.mode(), Address { event: SampledEvent::SlowLoads, period: 100 });
        assert!(!slow.memory_only && slow.stores_config().is_none());
        assert_eq!(PerfSource::new(SourceKind::PageFaults, 1).mode(), ptb_policy::SamplingMode::PageFaults);
    }

    /// The simulator serves a policy's request on a machine file's sampler with
    /// `ptb_profile::thinning::served`; the daemon must open that same sampler the same way.
    #[test]
    fn the_daemon_serves_every_request_as_the_simulator_does() {
        use ptb_policy::SamplingMode::Address;
        let bits = |on: bool| on.then_some(1u64 << 19);
        let mut kinds = vec![
            SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: None },
            SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: Some(0x82d0) },
        ];
        for (op_count, miss_only) in [(true, false), (true, true), (false, false), (false, true)] {
            kinds.push(SourceKind::IbsOp { pmu_type: 11, op_count: bits(op_count), miss_only: bits(miss_only) });
        }
        for kind in kinds {
            for asked in [SampledEvent::Cycles, SampledEvent::Ops, SampledEvent::SlowLoads, SampledEvent::Misses] {
                let want = ptb_profile::thinning::served(kind.sampler().unwrap(), asked);
                let src = PerfSource::for_event(kind.clone(), 4096, asked);
                let Address { event, period } = src.mode() else { panic!("{kind:?}: no address mode") };
                assert_eq!(event, want.event, "{kind:?} asked {asked:?}");
                assert_eq!(period > 4096, want.thinned, "{kind:?} asked {asked:?}: period {period}");
            }
        }
    }

    /// Asked for memory accesses, IBS without a miss filter samples every op: its period is
    /// thinned by the share of the sampled memory ops that are memory accesses, so that it
    /// interrupts as often as a miss sampler at the period asked (and says what one kept sample
    /// stands for); IBS with one (Zen 4) keeps the period asked.
    #[test]
    fn an_op_sampler_asked_for_misses_costs_what_a_miss_sampler_would() {
        let ibs = SourceKind::IbsOp { pmu_type: 11, op_count: Some(1 << 19), miss_only: None };
        let mut s = PerfSource::for_event(ibs, 8192, SampledEvent::Misses);
        s.observe_kept(1000, 1000, 1000, 50, 0, 0.0); // 5% of the sampled ops went to memory
        assert_eq!((s.asked_period(), s.period()), (8192, 8192 * 20));
        s.observe_kept(1000, 1000, 1000, 45, 0, 0.0); // within a quarter: left as programmed
        assert_eq!(s.period(), 8192 * 20);
        s.observe_kept(10, 10, 10, 10, 0, 0.0); // too few to count
        assert_eq!(s.period(), 8192 * 20);
        s.observe_kept(1000, 1000, 1000, 1000, 0, 0.0); // every op a memory access: no thinning
        assert_eq!(s.period(), 8192);
        s.observe_kept(100_000, 100_000, 100_000, 0, 0, 0.0); // no memory access: as if one had come
        assert_eq!(s.period(), 8192 * 100_000);
        // Ops without an address (not memory ops) interrupt too: 50 memory accesses among
        // 4,000 samples, a quarter of them memory ops.
        s.observe_kept(4000, 1000, 1000, 50, 0, 0.0);
        assert_eq!(s.period(), 8192 * 80);
        assert_eq!(s.set_period(4096), 0, "no ring open");
        assert_eq!((s.asked_period(), s.period()), (4096, 4096 * 80));
        let zen4 = SourceKind::IbsOp { pmu_type: 11, op_count: Some(1 << 19), miss_only: Some(1 << 16) };
        let mut z = PerfSource::for_event(zen4, 8192, SampledEvent::Misses);
        z.observe_kept(1000, 1000, 1000, 50, 0, 0.0);
        assert_eq!(z.period(), 8192);
        assert!(z.hw_misses && z.memory_only);
        // Whatever is asked, a thread is interrupted at most 20,000 times a second: 1e5
        // samples of one thread in a second at 8,192 ops each is five times that.
        z.observe_kept(100_000, 100_000, 100_000, 50_000, 1, 1.0);
        assert_eq!(z.period(), 8192 * 5);
        z.set_period(64);
        assert_eq!((z.asked_period(), z.period()), (64, 8192 * 5));
        // A policy's own lower budget lowers the interrupts further; a higher one is the cap.
        z.set_budget(Some(5_000.0));
        assert_eq!(z.period(), 8192 * 20);
        z.set_budget(Some(1e6));
        assert_eq!(z.period(), 8192 * 5);
        z.set_budget(None);
        assert_eq!(z.period(), 8192 * 5);
        // A recording keeps the period given (its trace states one).
        let mut r =
            PerfSource::new(SourceKind::IbsOp { pmu_type: 11, op_count: None, miss_only: None }, 4096).uncapped();
        r.observe_kept(100_000, 100_000, 100_000, 50_000, 1, 1.0);
        assert_eq!(r.period(), 4096);
        // IBS before Linux 6.1: no data source, nothing told apart; the samples are said to be
        // every memory op's, still thinned.
        s.observe_kept(1000, 1000, 0, 0, 0, 0.0);
        assert_eq!(s.mode(), ptb_policy::SamplingMode::Address { event: SampledEvent::Ops, period: 4096 * 80 });
        assert!(s.describe().contains("cache hits counted"), "{}", s.describe());
    }

    /// PEBS with precise stores asked for misses: a second counter per thread (stores), the
    /// cache hits of both dropped, the period thinned like IBS op's; asked for anything else,
    /// slow loads through the one load counter, as without precise stores.
    #[test]
    fn pebs_with_precise_stores_asked_for_misses_keeps_the_loads_and_stores_that_miss() {
        use ptb_policy::SamplingMode::Address;
        let pebs = SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: Some(0x82d0) };
        let misses = PerfSource::for_event(pebs.clone(), 4096, SampledEvent::Misses);
        assert!(misses.memory_only && !misses.hw_misses && !misses.ops);
        assert_eq!(misses.stores_config(), Some(0x82d0), "a store counter beside the loads");
        assert_eq!(misses.mode(), Address { event: SampledEvent::Misses, period: 4096 * 32 });
        assert_eq!(misses.asked_period(), 4096);
        let d = misses.describe();
        assert!(d.contains("Intel PEBS load latency and precise stores, memory accesses only"), "{d}");
        assert_eq!((misses.sample_kind(false), misses.sample_kind(true)), (SampleKind::Load, SampleKind::Store));
        for asked in [SampledEvent::SlowLoads, SampledEvent::Ops, SampledEvent::Cycles] {
            let slow = PerfSource::for_event(pebs.clone(), 4096, asked);
            assert_eq!(slow.mode(), Address { event: SampledEvent::SlowLoads, period: 4096 }, "asked {asked:?}");
            assert!(!slow.memory_only && slow.stores_config().is_none(), "asked {asked:?}");
            assert_eq!(slow.describe(), "pebs-loads (Intel PEBS load latency, period 4096)");
            assert_eq!(slow.sample_kind(false), SampleKind::Access);
        }
        assert_eq!(PerfSource::new(pebs, 100).mode(), Address { event: SampledEvent::SlowLoads, period: 100 });
    }

    /// The loads and stores sampled are thinned as IBS op's ops are: by the share of all the
    /// samples (both counters') that are kept, a store that missed L1 counting as kept.
    #[test]
    fn pebs_with_precise_stores_is_thinned_by_the_share_of_its_samples_kept() {
        use ptb_profile::datasrc::{encode, encode_store_l1};
        let pebs = SourceKind::PebsLoads { pmu_type: 4, config: 0x1cd, config1: 30, stores: Some(0x82d0) };
        let mut s = PerfSource::for_event(pebs, 8192, SampledEvent::Misses);
        // 1,000 samples: 100 slow loads (40 from DRAM, 60 from L3), 900 stores (860 L1 hits,
        // 40 L1 misses): 80 kept.
        let words = std::iter::repeat_n(encode(MemLevel::LocalDram, false), 40)
            .chain(std::iter::repeat_n(encode(MemLevel::Cache, false), 60))
            .chain(std::iter::repeat_n(encode_store_l1(true), 860))
            .chain(std::iter::repeat_n(encode_store_l1(false), 40));
        let (mut seen, mut kept, mut dropped) = (0, 0, 0);
        for w in words {
            let t = tally(Some(w), s.memory_only);
            (seen, kept, dropped) =
                (seen + u64::from(t.seen), kept + u64::from(t.kept), dropped + u64::from(t.dropped));
        }
        assert_eq!((seen, kept, dropped), (1000, 80, 920));
        s.observe_kept(1000, 1000, seen, kept, 0, 0.0);
        assert_eq!((s.asked_period(), s.period()), (8192, 8192 * 25 / 2));
        assert_eq!(s.mode(), ptb_policy::SamplingMode::Address { event: SampledEvent::Misses, period: 102_400 });
        // The interrupt cap holds for both counters together: 1e5 samples of one thread in a
        // second is five times the cap.
        s.observe_kept(100_000, 100_000, 100_000, 100_000, 1, 1.0);
        assert_eq!(s.period(), 102_400 * 5);
    }

    /// A precise store's word says only L1 hit or miss: the hit is a cache hit (dropped when
    /// only memory accesses are kept), the miss a kept memory access; a word with no level is
    /// kept but not seen, as before.
    #[test]
    fn a_store_that_missed_l1_counts_as_a_kept_memory_access() {
        use ptb_profile::datasrc::{encode, encode_store_l1};
        let t = |seen, kept, dropped| Tally { seen, kept, dropped };
        assert_eq!(tally(Some(encode_store_l1(false)), true), t(true, true, false));
        assert_eq!(tally(Some(encode_store_l1(true)), true), t(true, false, true));
        assert_eq!(tally(Some(encode_store_l1(true)), false), t(true, true, false), "every sample kept");
        assert_eq!(tally(Some(encode(MemLevel::RemoteDram, false)), true), t(true, true, false));
        assert_eq!(tally(Some(encode(MemLevel::Cache, false)), true), t(true, false, true));
        assert_eq!(tally(None, true), t(false, false, false));
        assert_eq!(tally(Some(0), true), t(false, false, false));
        // As the perf crate hands a PEBS store that missed L1 over.
        let store_miss = data_source(|d| {
            d.op.load = false;
            d.op.store = true;
            d.level.l1 = true;
            d.level.miss = true;
        });
        assert_eq!(tally(Some(data_src_fields(&store_miss).word()), true), t(true, true, false));
    }

    /// A data source as the perf crate hands it over: nothing known but what `f` sets.
    fn data_source(f: impl FnOnce(&mut DataSource)) -> DataSource {
        use perf_event_open::sample::record::sample as ps;
        let mut d = DataSource {
            op: ps::MemOp { na: false, load: true, store: false, prefetch: false, exec: false },
            level: ps::MemLevel {
                na: false,
                hit: false,
                miss: false,
                l1: false,
                lfb: false,
                l2: false,
                l3: false,
                loc_ram: false,
                rem_ram1: false,
                rem_ram2: false,
                rem_cce1: false,
                rem_cce2: false,
                io: false,
                unc: false,
            },
            snoop: ps::MemSnoop {
                na: true,
                none: false,
                hit: false,
                miss: false,
                hit_m: false,
                fwd: false,
                peer: false,
            },
            lock: ps::MemLock { na: true, locked: false },
            tlb: ps::MemTlb { na: true, hit: false, miss: false, l1: false, l2: false, walker: false, fault: false },
            level2: MemLevel2::Na,
            remote: false,
            block: ps::MemBlock { na: true, data: false, addr: false },
            hops: ps::MemHop::Unknown,
            region: ps::MemRegion::Na,
        };
        f(&mut d);
        d
    }

    #[test]
    fn a_zero_weight_is_no_latency() {
        use perf_event_open::sample::record::sample::Weight;
        assert_eq!(latency_ns(&Weight::Full(420), 2.1), Some(200.0));
        assert_eq!(latency_ns(&Weight::Vars { var1: 210, var2: 7, var3: 0 }, 2.1), Some(100.0));
        assert_eq!(latency_ns(&Weight::Full(0), 2.1), None, "IBS: not a load that missed the data cache");
    }

    #[test]
    fn data_sources_read_as_cache_hits_local_and_remote_dram() {
        let level = |d: DataSource| ptb_profile::datasrc::decode(data_src_fields(&d).word());
        // IBS on Linux 6.1+: lvl_num and the remote bit.
        let hit = data_source(|d| {
            d.level.hit = true;
            d.level.l1 = true;
            d.level2 = MemLevel2::L1;
        });
        assert_eq!(level(hit), Some(MemLevel::Cache));
        let ram = |remote| {
            data_source(|d| {
                d.level.hit = true;
                d.level2 = MemLevel2::Ram;
                d.remote = remote;
            })
        };
        assert_eq!(level(ram(false)), Some(MemLevel::LocalDram));
        assert_eq!(level(ram(true)), Some(MemLevel::RemoteDram));
        // PEBS on older kernels: the mem_lvl flags only; a store keeps its kind.
        let old = data_source(|d| {
            d.level.hit = true;
            d.level.rem_ram1 = true;
            d.op.store = true;
        });
        assert_eq!(level(old.clone()), Some(MemLevel::RemoteDram));
        assert_eq!(data_src_fields(&old).word() & 0x1f, 0x04, "a store");
        // Not available (IBS before 6.1): no level, so the sample counts as a memory access.
        assert_eq!(level(data_source(|d| d.level.na = true)), None);
    }

    /// Map `n` fresh anonymous pages, touch each once, unmap; return the samples that fell in
    /// them (1 MiB or less: no transparent huge page can back it, so one fault per page).
    fn touch_fresh_pages(src: &mut PerfSource, n: usize) -> usize {
        let ps = crate::sys::page_size() as usize;
        assert!(n * ps <= 1 << 20);
        // SAFETY: anonymous mapping, touched then unmapped here.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n * ps,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        for i in 0..n {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile((p as *mut u8).add(i * ps), 1) };
        }
        let mut out = vec![];
        src.drain(&mut out).unwrap();
        // SAFETY: unmapping what we mapped.
        unsafe { libc::munmap(p, n * ps) };
        let base = p as u64;
        out.iter().filter(|s| s.addr >= base && s.addr < base + (n * ps) as u64).count()
    }

    /// The period of open rings changes (PERF_EVENT_IOC_PERIOD), and paused rings deliver
    /// nothing until enabled again: the real page-fault event on this thread.
    #[test]
    fn the_period_of_open_rings_changes_and_paused_rings_are_silent() {
        let tid = nix::unistd::gettid().as_raw() as u32;
        let mut src = PerfSource::new(SourceKind::PageFaults, 1);
        assert_eq!(src.track(&[(std::process::id(), tid)]), 1, "open errors: {:?}", src.open_errors);
        let n = 256;
        let every = touch_fresh_pages(&mut src, n);
        assert!(every >= n / 2, "period 1: {every} of {n} faults seen");
        assert_eq!(src.set_period(8), 0, "no ring had to be reopened");
        assert_eq!(src.period(), 8);
        assert!(src.describe().contains("period 8"));
        let eighth = touch_fresh_pages(&mut src, n);
        assert!((n / 16..=n / 8 + 4).contains(&eighth), "period 8: {eighth} samples for {n} faults");
        src.set_enabled(false);
        assert_eq!(touch_fresh_pages(&mut src, n), 0, "a paused ring delivers nothing");
        src.set_enabled(true);
        let again = touch_fresh_pages(&mut src, n);
        assert!((n / 16..=n / 8 + 4).contains(&again), "enabled again at period 8: {again} samples");
    }

    /// The real ring: software page-fault events on this thread, touching fresh pages.
    #[test]
    fn software_page_faults_arrive_with_addresses() {
        let tid = nix::unistd::gettid().as_raw() as u32;
        let mut src = PerfSource::new(SourceKind::PageFaults, 1);
        assert_eq!(src.track(&[(std::process::id(), tid)]), 1, "open errors: {:?}", src.open_errors);
        let ps = crate::sys::page_size() as usize;
        let n = 64;
        // SAFETY: anonymous mapping, touched then unmapped in this test.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n * ps,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let base = p as u64;
        for i in 0..n {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile((p as *mut u8).add(i * ps), 1) };
        }
        let mut out = vec![];
        let st = src.drain(&mut out).unwrap();
        // SAFETY: unmapping what we mapped.
        unsafe { libc::munmap(p, n * ps) };
        let inside: Vec<_> = out.iter().filter(|s| s.addr >= base && s.addr < base + (n * ps) as u64).collect();
        assert!(inside.len() >= n / 2, "{} of {n} faults seen ({st:?})", inside.len());
        assert!(inside.iter().all(|s| s.tid == tid && s.kind == SampleKind::PageFault));
        assert_eq!(st.samples as usize, out.len());
        assert!(src.describe().contains("page-faults"));
    }
}
