//! Objects backed by transparent huge pages (`huge_pages = true`): every policy's moves there
//! are whole 2 MiB huge pages, planned as such (the policy layer's `whole_huge_pages`).

use ptb_policy::{Params, PolicyKind, PolicySpec};
use ptb_sim::{SimOptions, Simulation, Workload};

/// Each thread works on its own slice of data the master thread first-touched: every policy
/// that moves pages wants to move most of it.
fn workload(huge: bool) -> Workload {
    let text = format!(
        r#"
name = "private"
threads = 8
[[object]]
name = "data"
size_mib = 64
init = "thread:0"
huge_pages = {huge}
[[phase]]
name = "work"
work_ginstr = 0.4
apki = 25
mlp = 4
access = [{{ object = "data", pattern = "private" }}]
"#
    );
    Workload::parse(&text, "test").unwrap()
}

fn sim(huge: bool) -> Simulation {
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=2,dies=1").unwrap();
    Simulation::new(m, vec![workload(huge)], SimOptions::default()).unwrap()
}

#[test]
fn policies_move_whole_huge_pages_and_say_so() {
    for kind in [PolicyKind::Ptb, PolicyKind::PtbClassic, PolicyKind::Selective, PolicyKind::Autonuma] {
        let spec = PolicySpec::plain(kind);
        let mut params = Params::new();
        if kind == PolicyKind::PtbClassic {
            // Enough samples per page for ptb-classic to move pages in a short run.
            params.set_assignment("ptb-classic.min_acc=1").unwrap();
            params.set_assignment("ptb-classic.tau=0.1").unwrap();
        }
        if kind == PolicyKind::Autonuma {
            params.set_assignment("autonuma.scan_delay_ms=50").unwrap();
            params.set_assignment("autonuma.scan_period_min_ms=100").unwrap();
        }
        let base = sim(false).run_policy(spec, &params).unwrap();
        let huge = sim(true).run_policy(spec, &params).unwrap();
        assert!(base.pages_migrated > 0, "{kind}: moves nothing on base pages; the test shows nothing");
        // 64 MiB is 32 whole huge pages: whatever moves, moves in 512-page units.
        assert_eq!(huge.pages_migrated % 512, 0, "{kind}: {} pages migrated", huge.pages_migrated);
        assert!(huge.pages_migrated > 0, "{kind}: moved nothing with huge pages");
        assert!(
            huge.policy_stats.get("huge_pages_planned").is_some_and(|n| *n > 0.0),
            "{kind}: {:?}",
            huge.policy_stats
        );
        assert!(!base.policy_stats.contains_key("huge_pages_planned"));
        // Each plan names a huge page once: no huge page moves more often than planned.
        let planned = huge.policy_stats["huge_pages_planned"];
        assert!(
            huge.pages_migrated as f64 / 512.0 <= planned,
            "{kind}: {} migrated, {planned} planned",
            huge.pages_migrated / 512
        );
    }
}
