//! `ptb calibrate`: the simulated world against what the published studies measured for whole
//! programs (NPB under interleave and balancing, PTB on canneal/fluidanimate, AsymSched's node
//! subsets, selective migration, run lengths), item by item, with each verdict.
//!
//! Every simulated figure comes from the same world `ptb compare` uses; `--perturb` and the
//! other world options apply. Known deviations are marked with their cause.

use anyhow::{bail, Result};
use ptb_calibrate::{deviations, Options, Report};
use ptb_sim::SimOptions;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Worker threads (default: the CPUs available).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// Seed of the simulated runs.
    #[arg(short, long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    world: crate::world::WorldArgs,
    /// Print the JSON document instead of the table.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the table as Markdown (as the README shows it).
    #[arg(long)]
    markdown: bool,
    /// Exit with status 1 when an item is wrong that is not a known deviation, or a known
    /// deviation is right again.
    #[arg(long)]
    check: bool,
}

pub fn run(a: Args) -> Result<()> {
    let mut base = SimOptions { seed: a.seed, ..SimOptions::default() };
    a.world.apply(&mut base);
    let mut opts = Options { base, ..Options::default() };
    if let Some(j) = a.jobs {
        if j == 0 {
            bail!("--jobs must be at least 1");
        }
        opts.jobs = j;
    }
    eprintln!("calibrating (simulated): about 15-20 s of CPU time, divided by --jobs ...");
    let report = ptb_calibrate::run(&opts)?;
    if a.json {
        let doc = serde_json::json!({
            "simulated": true,
            "world": a.world.describe(None),
            "items": report.items.iter().map(|i| {
                let mut v = serde_json::to_value(i).unwrap_or_default();
                v["known_deviation"] = serde_json::json!(deviations::cause(i.id));
                v
            }).collect::<Vec<_>>(),
            "directions_right": report.directions.1,
            "directions": report.directions.0,
            "sizes_within_30pct": report.sizes.1,
            "sizes": report.sizes.0,
            "target_met": report.passes(),
            "unexplained": report.unexplained().iter().map(|i| i.id).collect::<Vec<_>>(),
            "stale_deviations": report.stale(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if a.markdown {
        print!("{}", markdown(&report));
    } else {
        print!("{}", table(&report, &a.world.line(None)));
    }
    if a.check && (!report.unexplained().is_empty() || !report.stale().is_empty()) {
        bail!(
            "calibration check failed: unexplained {:?}, stale known deviations {:?}",
            report.unexplained().iter().map(|i| i.id).collect::<Vec<_>>(),
            report.stale()
        );
    }
    Ok(())
}

/// One item's verdict in words, "(known)" added for a known deviation.
fn verdict(i: &ptb_calibrate::Item) -> String {
    let v = match (i.verdict.direction, i.verdict.within) {
        (Some(false), _) => "WRONG DIRECTION",
        (_, Some(false)) => "size off by >30%",
        _ => "ok",
    };
    let known = if i.is_wrong() && deviations::cause(i.id).is_some() { " (known)" } else { "" };
    format!("{v}{known}")
}

/// The report as a Markdown table (simulated figures).
fn markdown(r: &Report) -> String {
    let mut s =
        String::from("| study | item | machine | published | simulated | verdict |\n|---|---|---|---|---|---|\n");
    for i in &r.items {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            i.group,
            i.what.replace('|', "/"),
            i.machine,
            i.published,
            i.simulated_text,
            verdict(i)
        );
    }
    s += &format!(
        "\nDirections right: {}/{}; sizes within 30%: {}/{} (simulated).\n",
        r.directions.1, r.directions.0, r.sizes.1, r.sizes.0
    );
    s
}

/// The report as a table people read.
fn table(r: &Report, world: &str) -> String {
    let mut s = format!("Calibration of the simulated world against published results (simulated; {world})\n\n");
    s += &format!("{:<40} {:<18} {:>12} {:>12}  {}\n", "item", "machine", "published", "simulated", "verdict");
    let mut group = "";
    for i in &r.items {
        if i.group != group {
            group = i.group;
            s += &format!("-- {group}\n");
        }
        s += &format!("{:<40} {:<18} {:>12} {:>12}  {}\n", i.id, i.machine, i.published, i.simulated_text, verdict(i));
    }
    s += &format!(
        "\ndirections right: {}/{}; sizes within 30%: {}/{}; target (every direction, 80% of sizes): {}\n",
        r.directions.1,
        r.directions.0,
        r.sizes.1,
        r.sizes.0,
        if r.passes() { "met" } else { "NOT met" }
    );
    let known: Vec<_> =
        r.items.iter().filter(|i| i.is_wrong()).filter_map(|i| deviations::cause(i.id).map(|c| (i.id, c))).collect();
    if !known.is_empty() {
        s += "\nknown deviations and their causes:\n";
        for (id, c) in known {
            s += &format!("  {id}: {c}\n");
        }
    }
    let un = r.unexplained();
    if !un.is_empty() {
        s +=
            &format!("\nwrong and not a known deviation: {}\n", un.iter().map(|i| i.id).collect::<Vec<_>>().join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptb_calibrate::{Expect, Item};

    fn item(id: &'static str, expect: Expect, sim: f64) -> Item {
        Item {
            id,
            group: "G",
            what: "a | b".into(),
            machine: "m",
            published: expect.published_text(),
            simulated: sim,
            simulated_text: expect.format(sim),
            verdict: expect.judge(sim),
            expect,
        }
    }

    #[test]
    fn markdown_has_one_row_per_item_and_marks_known_deviations() {
        let known = deviations::KNOWN[0].0;
        let r = Report {
            items: vec![
                item("x-ok", Expect::Speedup { published: 2.0 }, 2.1),
                item(known, Expect::Speedup { published: 2.0 }, 0.5),
            ],
            directions: (2, 1),
            sizes: (2, 1),
        };
        let md = markdown(&r);
        assert!(md.starts_with("| study | item | machine | published | simulated | verdict |"), "{md}");
        assert_eq!(md.lines().filter(|l| l.starts_with("| G ")).count(), 2, "{md}");
        assert!(md.contains("| a / b |"), "a pipe in a cell is escaped: {md}");
        assert!(md.contains("WRONG DIRECTION (known)"), "{md}");
        let t = table(&r, "world");
        assert!(t.contains("known deviations and their causes") && t.contains(known), "{t}");
        assert!(t.contains("NOT met"), "{t}");
    }
}
