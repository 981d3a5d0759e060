//! End to end: synthetic recordings of known programs (a trace written and read back as
//! `ptb record` does) become models whose simulated access map under the recorded placement
//! matches the recorded one; empty and malformed traces are refused with the file and why.

use ptb_linux::trace::{parse_trace, TraceRecord, TraceRegion, TraceThread, TraceWriter};
use ptb_model::patterns::Spread;
use ptb_model::{check, fit, FitOptions, Recording};
use ptb_profile::{Sample, SampleKind};
use ptb_topology::CpuId;

const PID: u32 = 100;
const START: u64 = 0x7f00_0000; // first vpn of the buffer
const NPAGES: u64 = 4096;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 17
    }
}

/// A 4-thread program on a 4-node machine (one CPU per node, plus a memory-only node).
/// `placement(page)` gives a page's node; `shared(t_ms)` says whether threads read the whole
/// buffer at that time (else each reads its quarter).
fn trace(placement: impl Fn(u64) -> u16, shared: impl Fn(u64) -> bool, seconds: u64) -> Vec<u8> {
    trace_rates(placement, shared, seconds, 3)
}

/// [`trace`] with `rate_shared` samples per thread and 10 ms in the shared phases (3 elsewhere).
fn trace_rates(
    placement: impl Fn(u64) -> u16,
    shared: impl Fn(u64) -> bool,
    seconds: u64,
    rate_shared: usize,
) -> Vec<u8> {
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=1,memonly=1").unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut w = TraceWriter::new(&mut out);
    w.write(&TraceRecord::Header {
        version: 1,
        pids: vec![PID],
        page_size: 4096,
        source: "page-faults (software page-fault events, period 1)".into(),
        period: 1,
        machine: Box::new(m),
    })
    .unwrap();
    let mut rng = Lcg(7);
    let mut cycle_pages = Vec::new();
    for ms in (0..seconds * 1000).step_by(10) {
        for j in 0..4u32 {
            // A program may be sampled more often in one phase than in another.
            for _ in 0..if shared(ms) { rate_shared } else { 3 } {
                let page = if shared(ms) { rng.next() % NPAGES } else { j as u64 * 1024 + rng.next() % 1024 };
                let vpn = START + page;
                w.write(&TraceRecord::Sample(Sample {
                    app: PID,
                    tid: PID + 1 + j,
                    cpu: CpuId(j),
                    addr: vpn * 4096 + 64,
                    kind: SampleKind::PageFault,
                    time_ns: ms * 1_000_000 + rng.next() % 1_000_000,
                    data_src: None,
                    latency_ns: None,
                    phys: None,
                }))
                .unwrap();
                cycle_pages.push((PID, vpn, placement(page)));
            }
        }
        if ms % 500 == 490 {
            cycle_pages.sort_unstable();
            cycle_pages.dedup();
            let mut resident = vec![0u64; 5];
            for p in 0..NPAGES {
                resident[placement(p) as usize] += 1;
            }
            w.write(&TraceRecord::Placement {
                time_ns: (ms + 10) * 1_000_000,
                threads: (0..4).map(|j| TraceThread { app: PID, tid: PID + 1 + j, cpu: j, node: j as u16 }).collect(),
                pages: std::mem::take(&mut cycle_pages),
                regions: vec![TraceRegion {
                    app: PID,
                    start_vpn: START,
                    npages: NPAGES,
                    name: "[anon]".into(),
                    resident,
                }],
                free_bytes: vec![1 << 30; 5],
            })
            .unwrap();
        }
    }
    w.write(&TraceRecord::End { time_ns: seconds * 1_000_000_000, samples: 0, lost: 0 }).unwrap();
    w.flush().unwrap();
    out
}

fn model(bytes: &[u8]) -> (Recording, ptb_model::Fitted, ptb_model::CheckResult) {
    let t = parse_trace(bytes, "synthetic.trace").unwrap();
    let rec = Recording::from_trace(&t, "synthetic.trace").unwrap();
    let f = fit(&rec, &FitOptions::default()).unwrap();
    let c = check(&rec, &f).unwrap();
    (rec, f, c)
}

fn spreads(f: &ptb_model::Fitted) -> String {
    f.object_fits.iter().flat_map(|o| o.spreads.clone()).collect::<Vec<_>>().join(" | ")
}

#[test]
fn partitioned_program_with_its_slices_home_is_private_and_local() {
    let (rec, f, c) = model(&trace(|p| (p / 1024) as u16, |_| false, 4));
    // The buffer's pieces are one region, and one object.
    assert_eq!(rec.regions.len(), 1, "{:?}", rec.regions);
    assert_eq!((rec.regions[0].npages, rec.regions[0].resident.iter().sum::<u64>()), (NPAGES, NPAGES));
    assert_eq!(f.objects.len(), 1);
    assert_eq!(f.workload.threads, ptb_sim::workload::Threads::Count(4));
    assert_eq!(f.phases.kinds, 1, "{:?}", f.phases);
    assert!(spreads(&f).matches("private").count() == 4, "{}", spreads(&f));
    assert_eq!(f.object_fits[0].init, "parallel");
    assert!(c.l1 <= 0.15, "L1 {}: recorded {:?} simulated {:?}", c.l1, c.recorded, c.simulated);
    // Nearly everything is local, in the recording and in the model.
    let local: f64 = (0..4).map(|i| c.simulated[i][i]).sum();
    assert!(local > 0.95, "{local}");
    // The file loads back as a workload and says how well each object fits.
    let w = ptb_sim::workload::Workload::parse(&f.toml, "model.toml").unwrap();
    assert_eq!(w, f.workload);
    assert!(f.toml.contains("# Objects (fit =") && f.toml.contains("fit 0."), "{}", f.toml);
}

#[test]
fn shared_program_on_one_node_is_uniform_and_first_touched_by_one_thread() {
    let (_, f, c) = model(&trace(|_| 2, |_| true, 4));
    assert!(spreads(&f).matches("uniform").count() == 4, "{}", spreads(&f));
    assert_eq!(f.object_fits[0].init, "thread:2");
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
    assert!((0..4).all(|r| c.simulated[r][2] > 0.2), "{:?}", c.simulated);
}

#[test]
fn phased_program_gets_two_phase_kinds() {
    // 1 s partitioned, 1 s shared, ...; each thread's quarter on its node; the shared phases
    // sampled 3 times as often (the recorded map weighs them 3:1, so must the model).
    let (_, f, c) = model(&trace_rates(|p| (p / 1024) as u16, |ms| (ms / 1000) % 2 == 1, 6, 9));
    assert_eq!(f.phases.kinds, 2, "{:?}", f.phases);
    assert_eq!(f.workload.phases.len(), 2);
    assert_eq!(f.workload.iterations, 3);
    let s = spreads(&f);
    assert!(s.contains("private") && s.contains("uniform"), "{s}");
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
    // A quarter of the samples private (all local), three quarters spread (a quarter local).
    let local: f64 = (0..4).map(|i| c.recorded[i][i]).sum();
    assert!((local - (0.25 + 0.75 * 0.25)).abs() < 0.03, "{local}");
}

#[test]
fn interleaved_pages_are_said_to_be_spread_and_a_wrong_model_fails_the_check() {
    let (_, f, _) = model(&trace(|p| (p % 5) as u16, |_| true, 3));
    assert!(f.object_fits[0].init_note.contains("spread over nodes"), "{}", f.object_fits[0].init_note);
    // The check can fail: a partitioned program modelled as all-uniform is far from its map.
    let (rec2, mut f2, good) = model(&trace(|p| (p / 1024) as u16, |_| false, 3));
    assert!(good.l1 <= 0.15);
    for ph in &mut f2.workload.phases {
        for a in &mut ph.access {
            a.pattern = ptb_sim::workload::Pattern::Uniform;
        }
    }
    let bad = check(&rec2, &f2).unwrap();
    assert!(bad.l1 > 1.0, "a wrong model should be far off: L1 {}", bad.l1);
}

#[test]
fn thread_order_follows_the_data_not_the_tids() {
    // Thread j reads quarter 3 - j: the model orders threads so its slices line up.
    let bytes = trace(|p| (3 - p / 1024) as u16, |_| false, 3);
    let text = String::from_utf8(bytes).unwrap();
    // Swap the quarters: rewrite each sample's page to the mirrored quarter.
    let mirrored: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["type"] == "sample" {
                let vpn = v["addr"].as_u64().unwrap() / 4096 - START;
                let q = vpn / 1024;
                let new = START + (3 - q) * 1024 + vpn % 1024;
                v["addr"] = serde_json::json!(new * 4096);
            }
            if v["type"] == "placement" {
                let pages: Vec<serde_json::Value> = v["pages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        let vpn = p[1].as_u64().unwrap() - START;
                        let new = START + (3 - vpn / 1024) * 1024 + vpn % 1024;
                        serde_json::json!([PID, new, 3 - (3 - vpn / 1024)])
                    })
                    .collect();
                v["pages"] = serde_json::json!(pages);
            }
            format!("{v}\n")
        })
        .collect();
    let (_, f, c) = model(mirrored.as_bytes());
    let order: Vec<u32> = f.threads.iter().map(|t| t.tid - PID - 1).collect();
    assert_eq!(order, vec![3, 2, 1, 0]);
    assert!(spreads(&f).matches("private").count() == 4, "{}", spreads(&f));
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
}

#[test]
fn empty_and_malformed_traces_are_refused_with_file_and_reason() {
    let full = trace(|_| 0, |_| true, 1);
    let text = String::from_utf8(full).unwrap();
    let header = text.lines().next().unwrap().to_string();
    // Only the header: no samples.
    let t = parse_trace(format!("{header}\n").as_bytes(), "empty.trace").unwrap();
    let e = Recording::from_trace(&t, "empty.trace").unwrap_err().to_string();
    assert!(e.contains("empty.trace") && e.contains("no samples"), "{e}");
    // A sample line that is not JSON: the trace reader names the line.
    let bad = format!("{header}\n{{\"type\":\"sample\",\"app\":1\n");
    let e = parse_trace(bad.as_bytes(), "bad.trace").unwrap_err();
    assert!(e.contains("bad.trace: line 2"), "{e}");
    // A trace without placements fits, but cannot be checked.
    let samples_only: String =
        text.lines().filter(|l| !l.contains("\"placement\"")).map(|l| format!("{l}\n")).collect();
    let t = parse_trace(samples_only.as_bytes(), "noplace.trace").unwrap();
    let rec = Recording::from_trace(&t, "noplace.trace").unwrap();
    let f = fit(&rec, &FitOptions::default()).unwrap();
    assert_eq!(f.object_fits[0].init, "thread:0");
    let e = check(&rec, &f).unwrap_err().to_string();
    assert!(e.contains("noplace.trace") && e.contains("placement"), "{e}");
}

#[test]
fn spreads_are_the_public_patterns() {
    assert_eq!(Spread::Private.describe(), "private");
}

#[test]
fn page_level_fragments_are_one_object_and_a_touching_stack_is_trimmed_off() {
    let text = String::from_utf8(trace(|p| (p / 1024) as u16, |_| false, 3)).unwrap();
    let mut n = 0u64;
    let out: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["type"] == "placement" {
                n += 1;
                // The buffer in fragments of 1..64 pages that differ per record, and a thread's
                // stack (512 pages) ending where the buffer begins.
                let mut regs = vec![serde_json::json!({"app": PID, "start_vpn": START - 512, "npages": 512,
                                                       "name": "[anon]", "resident": [8, 0, 0, 0, 0]})];
                let mut at = 0u64;
                while at < NPAGES {
                    let len = (1 + (at * 7 + n * 13) % 64).min(NPAGES - at);
                    regs.push(serde_json::json!({"app": PID, "start_vpn": START + at, "npages": len,
                                                 "name": "[anon]", "resident": [len, 0, 0, 0, 0]}));
                    at += len;
                }
                v["regions"] = serde_json::json!(regs);
            }
            format!("{v}\n")
        })
        .collect();
    // A few samples on the stack's top pages.
    let stack: String = (0..10)
        .map(|i| {
            format!(
                "{{\"type\":\"sample\",\"app\":{PID},\"tid\":{},\"cpu\":0,\"addr\":{},\"kind\":\"page-fault\",\"time_ns\":{}}}\n",
                PID + 1,
                (START - 1 - i % 3) * 4096,
                1000 + i
            )
        })
        .collect();
    let (head, rest) = out.split_once('\n').unwrap();
    let (rec, f, c) = model(format!("{head}\n{stack}{rest}").as_bytes());
    assert_eq!(rec.regions.len(), 1, "touching same-name pieces are one region");
    assert_eq!(f.objects.len(), 1);
    // The stack's few used pages right below the buffer may stay in (they hold samples too).
    let o = &f.objects[0];
    assert!(o.start_vpn <= START && START - o.start_vpn <= 8, "{:?} {:?}", o, f.notes);
    assert_eq!(o.start_vpn + o.npages, START + NPAGES);
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
}

#[test]
fn samples_whose_page_node_was_not_told_take_a_nearby_pages() {
    // As on kernels that do not tell the node of a page under PROT_NONE: the placement
    // records know only every fourth page.
    let text = String::from_utf8(trace(|p| (p / 1024) as u16, |_| false, 3)).unwrap();
    let out: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["type"] == "placement" {
                let keep: Vec<serde_json::Value> = v["pages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| p[1].as_u64().unwrap() % 4 == 0)
                    .cloned()
                    .collect();
                v["pages"] = serde_json::json!(keep);
            }
            format!("{v}\n")
        })
        .collect();
    let (_, _, c) = model(out.as_bytes());
    assert!(c.nearby > c.samples / 2, "{} of {}", c.nearby, c.samples);
    // Every thread's row keeps its weight (a quarter each) and stays local.
    for i in 0..4 {
        assert!((c.recorded[i][i] - 0.25).abs() < 0.02, "{:?}", c.recorded);
    }
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
}

#[test]
fn samples_with_no_known_page_node_keep_their_threads_weight() {
    // The placement records know only every 400th page of thread 0's quarter (and its last):
    // most of thread 0's samples have no page node, not even a nearby one. Its row still weighs a quarter (all
    // its samples), spread as its samples with a known node are.
    let text = String::from_utf8(trace(|p| (p / 1024) as u16, |_| false, 3)).unwrap();
    let out: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["type"] == "placement" {
                let keep: Vec<serde_json::Value> = v["pages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| {
                        let vpn = p[1].as_u64().unwrap();
                        vpn >= START + 1024 || (vpn - START).is_multiple_of(400) || vpn == START + 1023
                    })
                    .cloned()
                    .collect();
                v["pages"] = serde_json::json!(keep);
            }
            format!("{v}\n")
        })
        .collect();
    let (_, _, c) = model(out.as_bytes());
    assert!(c.unknown * 6 > c.samples, "{} unknown, {} in the map", c.unknown, c.samples);
    for i in 0..4 {
        assert!((c.recorded[i].iter().sum::<f64>() - 0.25).abs() < 0.02, "{:?}", c.recorded);
    }
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
}
