//! The calibration tier: the simulated world against the published whole-program results.
//! Fails when a direction flips or fewer than 80% of the sizes are within 30%.

#[test]
fn the_world_reproduces_the_published_comparisons() {
    let report = ptb_calibrate::run(&ptb_calibrate::Options::default()).unwrap();
    for i in &report.items {
        println!(
            "{:<40} {:<10} published {:>8} simulated {:>8}  direction {:<5} within-30% {}",
            i.id,
            i.machine,
            i.published,
            i.simulated_text,
            i.verdict.direction.map_or("-".into(), |d| d.to_string()),
            i.verdict.within.map_or("-".into(), |d| d.to_string())
        );
    }
    println!(
        "directions {}/{} right, sizes {}/{} within 30%",
        report.directions.1, report.directions.0, report.sizes.1, report.sizes.0
    );
    let wrong: Vec<&str> = report.items.iter().filter(|i| i.verdict.direction == Some(false)).map(|i| i.id).collect();
    assert!(wrong.is_empty(), "directions flipped: {wrong:?}");
    assert!(report.passes(), "only {}/{} sizes within 30%", report.sizes.1, report.sizes.0);
}
