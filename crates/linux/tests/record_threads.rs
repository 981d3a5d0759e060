//! `ptb record` samples a program's threads from about 20 ms after they start, not from the
//! next cycle: the test program's workers are created after the recording starts and the
//! program ends before the first (2 s) cycle does, yet their page faults are in the trace.

use ptb_linux::procfs::ProcRoot;
use ptb_linux::record::{record, RecordConfig};
use std::time::Duration;

#[test]
fn a_programs_threads_are_recorded_before_the_first_cycle_ends() {
    let root = ProcRoot::new("/");
    let m = ptb_linux::live::machine(&root).expect("this machine's topology");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ptb-testapp"))
        .args(["--threads", "2", "--mb", "4", "--seconds", "0.6", "--partition", "--refault-ms", "50"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the test program starts");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.trace");
    let cfg = RecordConfig { seconds: 5.0, cycle: Duration::from_secs(2), source: "page-faults".into(), period: None };
    let sum = record(&root, &m, child.id(), &out, &cfg);
    assert!(child.wait().unwrap().success());
    let sum = sum.expect("recorded with software page-fault events");
    let trace = ptb_linux::trace::read_trace(&out).unwrap();
    let tids: std::collections::BTreeSet<u32> =
        trace.samples.iter().filter(|s| s.tid != child.id()).map(|s| s.tid).collect();
    assert!(sum.threads_seen >= 3, "the main thread and two workers: {sum:?}");
    assert!(tids.len() >= 2, "samples of both workers, from {} samples: {tids:?}", trace.samples.len());
}
