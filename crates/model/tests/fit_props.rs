//! Property tests of the whole fitter: any recording (random threads, CPUs, addresses, times,
//! sample kinds, regions and page nodes, with or without a machine) either becomes a model
//! that the simulator accepts and `--check` can simulate, or is refused with the file named;
//! never a panic, never a model the simulator refuses. Any mutation of a valid `ptb record`
//! trace is read, fitted or refused the same way.

use proptest::prelude::*;
use ptb_linux::trace::{parse_trace, TraceRecord, TraceRegion, TraceThread, TraceWriter};
use ptb_model::recording::{RecRegion, RecSample};
use ptb_model::{check, fit, FitOptions, ModelError, Recording};
use ptb_profile::{Sample, SampleKind};
use ptb_sim::Workload;
use ptb_topology::CpuId;

const KINDS: [SampleKind; 4] = [SampleKind::Load, SampleKind::Store, SampleKind::Access, SampleKind::PageFault];
const BASE: u64 = 0x7f00_0000;

/// (thread, cpu, page, time ms, kind) of each sample.
type Raw = (u32, u32, u64, u64, usize);

fn recording(raw: &[Raw], span: u64, regions: &[(u64, u64)], nodes: &[u16], machine: bool, period: bool) -> Recording {
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=1,memonly=1").unwrap();
    let mut samples: Vec<RecSample> = raw
        .iter()
        .map(|&(t, cpu, page, ms, k)| RecSample {
            tid: 1000 + t,
            cpu,
            vpn: BASE + page % span,
            time_ns: ms * 1_000_000,
            kind: KINDS[k % KINDS.len()],
        })
        .collect();
    samples.sort_by_key(|s| s.time_ns);
    let page_nodes =
        samples.iter().zip(nodes.iter().cycle()).map(|(s, n)| (s.time_ns + 1, s.vpn, *n % 5)).collect::<Vec<_>>();
    Recording {
        origin: "prop.trace".into(),
        source: if period { "ibs-op".into() } else { "page-faults".into() },
        period: period.then_some(4096),
        page_size: 4096,
        machine: machine.then_some(m),
        pid: 1000,
        samples,
        regions: regions
            .iter()
            .map(|&(s, n)| RecRegion {
                start_vpn: BASE + s % span,
                npages: n,
                name: "[anon]".into(),
                resident: vec![n / 2, n - n / 2, 0, 0, 0],
            })
            .collect(),
        page_nodes: if nodes.is_empty() { vec![] } else { page_nodes },
        notes: vec![],
    }
}

/// The fit is a model the simulator accepts, or a refusal that names the file.
fn fit_and_check(rec: &Recording) -> Result<(), TestCaseError> {
    match fit(rec, &FitOptions::default()) {
        Err(e @ (ModelError::Sim(_) | ModelError::Io(_))) => {
            return Err(TestCaseError::fail(format!("the fitter emitted what the simulator refuses: {e}")))
        }
        Err(e) => {
            let s = e.to_string();
            prop_assert!(s.contains(&rec.origin), "an error without the file: {}", s);
        }
        Ok(f) => {
            let w = Workload::parse(&f.toml, "model.toml")
                .map_err(|e| TestCaseError::fail(format!("the written model does not parse: {e}\n{}", f.toml)))?;
            prop_assert_eq!(w.objects.len(), f.objects.len());
            prop_assert!(f.samples_used <= rec.samples.len());
            for o in &f.object_fits {
                prop_assert!((0.0..=1.0 + 1e-9).contains(&o.score), "score {}", o.score);
            }
            if rec.machine.is_some() {
                match check(rec, &f) {
                    Ok(c) => {
                        prop_assert!(c.l1.is_finite() && (0.0..=2.0 + 1e-9).contains(&c.l1), "L1 {}", c.l1);
                        for m in [&c.recorded, &c.simulated] {
                            let sum: f64 = m.iter().flatten().sum();
                            prop_assert!(sum <= 1.0 + 1e-6 && m.iter().flatten().all(|x| *x >= 0.0));
                        }
                    }
                    Err(e @ ModelError::Sim(_)) => {
                        return Err(TestCaseError::fail(format!("the check's placement was refused: {e}")))
                    }
                    Err(e) => prop_assert!(e.to_string().contains(&rec.origin), "{}", e),
                }
            }
        }
    }
    Ok(())
}

/// A small valid `ptb record` trace: 2 threads on a 2-node machine.
fn small_trace() -> String {
    let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=1").unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut w = TraceWriter::new(&mut out);
    w.write(&TraceRecord::Header {
        version: 1,
        pids: vec![7],
        page_size: 4096,
        source: "page-faults (software page-fault events, period 1)".into(),
        period: 1,
        machine: Box::new(m),
    })
    .unwrap();
    for k in 0..40u64 {
        let j = (k % 2) as u32;
        w.write(&TraceRecord::Sample(Sample {
            app: 7,
            tid: 8 + j,
            cpu: CpuId(j),
            addr: (BASE + j as u64 * 8 + k % 8) * 4096,
            kind: SampleKind::PageFault,
            time_ns: k * 5_000_000,
            data_src: None,
            latency_ns: None,
            phys: None,
        }))
        .unwrap();
        if k % 10 == 9 {
            w.write(&TraceRecord::Placement {
                time_ns: (k + 1) * 5_000_000,
                threads: (0..2).map(|j| TraceThread { app: 7, tid: 8 + j, cpu: j, node: j as u16 }).collect(),
                pages: (0..16).map(|p| (7, BASE + p, (p / 8) as u16)).collect(),
                regions: vec![TraceRegion {
                    app: 7,
                    start_vpn: BASE,
                    npages: 16,
                    name: "[anon]".into(),
                    resident: vec![8, 8],
                }],
                free_bytes: vec![1 << 30; 2],
            })
            .unwrap();
        }
    }
    w.write(&TraceRecord::End { time_ns: 200_000_000, samples: 40, lost: 0 }).unwrap();
    w.flush().unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_small_trace_is_modelled() {
    let text = small_trace();
    let t = parse_trace(text.as_bytes(), "small.trace").unwrap();
    let rec = Recording::from_trace(&t, "small.trace").unwrap();
    let f = fit(&rec, &FitOptions::default()).unwrap();
    assert_eq!(f.threads.len(), 2);
    let c = check(&rec, &f).unwrap();
    assert!(c.l1 <= 0.15, "L1 {}", c.l1);
}

#[test]
fn a_file_name_with_a_newline_stays_in_its_comment() {
    let raw: Vec<Raw> = (0..200u64).map(|k| ((k % 2) as u32, (k % 2) as u32, k, k * 5, 3)).collect();
    let mut rec = recording(&raw, 64, &[(0, 64)], &[0, 1], true, false);
    rec.origin = "evil\n[[object]]\nname = \"x\"\n.trace".into();
    let f = fit(&rec, &FitOptions::default()).unwrap();
    let w = Workload::parse(&f.toml, "m.toml").unwrap();
    assert_eq!(w.objects.len(), 1, "{}", f.toml);
}

#[test]
fn a_thread_on_a_cpu_the_machine_lacks_is_refused_by_the_check_with_the_cpu() {
    let raw: Vec<Raw> = (0..200u64).map(|k| ((k % 2) as u32, if k % 2 == 0 { 0 } else { 9 }, k, k * 5, 3)).collect();
    let rec = recording(&raw, 64, &[(0, 64)], &[0, 1], true, false);
    let f = fit(&rec, &FitOptions::default()).unwrap();
    let e = check(&rec, &f).unwrap_err().to_string();
    assert!(e.contains("prop.trace") && e.contains("CPU 9") && e.contains("--machine"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_recording_is_modelled_or_refused_with_the_file(
        raw in proptest::collection::vec((0u32..6, 0u32..4, any::<u64>(), 0u64..3000, 0usize..4), 0..400),
        stray_cpu in proptest::option::weighted(0.1, 4u32..1 << 20),
        span in 1u64..5000,
        regions in proptest::collection::vec((any::<u64>(), 1u64..6000), 0..3),
        nodes in proptest::collection::vec(any::<u16>(), 0..8),
        machine in any::<bool>(),
        period in any::<bool>(),
    ) {
        let mut raw = raw;
        if let (Some(c), Some(first)) = (stray_cpu, raw.first_mut()) {
            first.1 = c; // a CPU the machine does not have
        }
        let rec = recording(&raw, span, &regions, &nodes, machine, period);
        fit_and_check(&rec)?;
    }

    #[test]
    fn mutated_traces_are_modelled_or_refused(line in 0usize..60, cut in 0usize..200, junk in "[ -~]{0,12}") {
        let text = small_trace();
        let mut lines: Vec<String> = text.lines().map(|l| l.to_string()).collect();
        let i = line % lines.len();
        let l = &lines[i];
        let at = (0..=cut.min(l.len())).rev().find(|k| l.is_char_boundary(*k)).unwrap_or(0);
        lines[i] = format!("{}{junk}{}", &l[..at], &l[(at + junk.len()).min(l.len()).max(at)..]);
        let mutated = lines.join("\n");
        match parse_trace(mutated.as_bytes(), "mut.trace") {
            Err(e) => prop_assert!(e.contains("mut.trace"), "{}", e),
            Ok(t) => match Recording::from_trace(&t, "mut.trace") {
                Err(e) => prop_assert!(e.to_string().contains("mut.trace"), "{}", e),
                Ok(rec) => fit_and_check(&rec)?,
            },
        }
    }
}
