//! `ptb characterize`: measure this machine's Bandwidth Graph and latency matrix, or import
//! them from Intel MLC output, and write a machine file that every `--machine` option reads.

use crate::plot;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ptb_characterize::import;
use ptb_characterize::mlc::{self, MlcKind};
use ptb_characterize::{llc, model, CharError, Characterisation, Options};
use ptb_topology::{file, Machine, Matrix};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write the measured machine as a machine file (TOML; JSON when it ends in `.json`).
    #[arg(short, long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// A much shorter run (smaller buffers, one short sample per step): less accurate.
    #[arg(long)]
    quick: bool,
    /// Print the results as JSON on stdout (progress and messages go to stderr).
    #[arg(long)]
    json: bool,
    /// Rows of the Bandwidth Graph: the machine's CPU groups (dies / LLC domains) or one per node.
    #[arg(long, value_enum, default_value = "die")]
    groups: GroupsArg,
    /// Also draw heatmaps: PREFIX-uncontended, PREFIX-contended and PREFIX-latency (.png and .svg).
    #[arg(long, value_name = "PREFIX")]
    heatmap: Option<PathBuf>,
    /// Samples per entry (the entry is their median; the spread is max - min). Default 3, quick 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    repeats: Option<u32>,
    /// Most threads per CPU group in the thread-count sweep (default: all its CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_threads: Option<u32>,
    /// Import Intel MLC `--bandwidth_matrix` output (MB/s) instead of measuring.
    #[arg(long, value_name = "FILE")]
    import_mlc: Option<PathBuf>,
    /// With --import-mlc: MLC `--latency_matrix` output (ns). Default: the latency matrix in the
    /// --import-mlc file, if it has one (a plain `mlc` run prints both).
    #[arg(long, value_name = "FILE", requires = "import_mlc")]
    latency: Option<PathBuf>,
    /// With --import-mlc: the machine to attach the matrices to (preset, `synthetic:SPEC` or
    /// machine file). Default: this machine when its nodes match MLC's, else a placeholder.
    #[arg(short, long, value_name = "MACHINE", requires = "import_mlc")]
    machine: Option<String>,
    /// With --import-mlc and a placeholder structure: CPUs per node to invent (1 to 4096).
    #[arg(long, value_name = "N", default_value_t = 4, requires = "import_mlc",
          value_parser = clap::value_parser!(u32).range(1..=ptb_characterize::import::MAX_CPUS_PER_NODE as i64))]
    cpus_per_node: u32,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum GroupsArg {
    /// The machine's CPU groups (dies / last-level-cache domains), as `ptb topology` shows them.
    Die,
    /// One group per NUMA node.
    Node,
}

pub fn run(args: Args) -> Result<()> {
    if let Some(out) = &args.out {
        check_writable(out)?;
    }
    if let Some(prefix) = &args.heatmap {
        check_writable(&with_suffix(prefix, "-uncontended.png"))?;
    }
    match &args.import_mlc {
        Some(path) => import_mlc(&args, path),
        None => measure(&args),
    }
}

/// Refuse an output path before spending a minute measuring.
fn check_writable(p: &Path) -> Result<()> {
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!("cannot write {}: directory {} does not exist (choose another path)", p.display(), dir.display());
    }
    if p.is_dir() {
        bail!("cannot write {}: it is a directory (give a file name)", p.display());
    }
    let existed = p.symlink_metadata().is_ok();
    // The same checks as the final write: a regular file of ours, not through a symlink.
    ptb_topology::input::create(p, "output", true)?;
    if !existed {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Messages go to stderr with --json (stdout is the JSON), else to stdout.
fn say(json: bool, text: &str) {
    if json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

fn measure(args: &Args) -> Result<()> {
    let live =
        ptb_topology::sysfs::read_machine(Path::new("/")).context("reading this machine's topology from /sys")?;
    let m = match args.groups {
        GroupsArg::Die => live,
        GroupsArg::Node => model::group_by_node(&live),
    };
    let cpus: Vec<u32> = m.cpus().iter().map(|c| c.0).collect();
    let llc_bytes = llc::llc_bytes(Path::new("/"), &cpus);
    let mut o = if args.quick { Options::quick(llc_bytes) } else { Options::full(llc_bytes, m.groups.len()) };
    if let Some(r) = args.repeats {
        o.repeats = r as usize;
    }
    if let Some(t) = args.max_threads {
        o.max_threads = t as usize;
    }
    let mem = m.memory_nodes();
    let (ng, nm) = (m.groups.len(), mem.len());
    say(
        args.json,
        &format!(
            "Characterising {}: {ng} CPU group(s) x {nm} memory node(s), {} CPUs, last-level cache {} MiB{}",
            m.name,
            m.n_cpus(),
            llc_bytes >> 20,
            if args.quick { " (quick run: less accurate)" } else { "" }
        ),
    );
    if ng == 1 && nm == 1 {
        say(
            args.json,
            &format!(
                "This machine has a single NUMA node with one CPU group: measuring the 1x1 case only (local \
                 bandwidth and latency of {} to node {}). There are no remote pairs to measure.",
                m.groups[0].name,
                m.nodes[mem[0].ix()].id.0
            ),
        );
    }
    if let Some(load) = busy(m.n_cpus()) {
        say(
            args.json,
            &format!(
                "warning: this machine is busy (load average {load:.1} on {} CPUs): the measuring threads share \
                 their CPUs, so figures will be low and noisy. Measure on an idle machine for a trustworthy graph.",
                m.n_cpus()
            ),
        );
    }
    let memonly: Vec<String> =
        m.nodes.iter().filter(|n| n.has_memory() && !n.has_cpus()).map(|n| n.id.0.to_string()).collect();
    if !memonly.is_empty() {
        say(args.json, &format!("Memory-only node(s) {} are measured as destinations.", memonly.join(", ")));
    }
    let bar = ProgressBar::new(1);
    if std::io::stderr().is_terminal() {
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ~{eta} left  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let c = ptb_characterize::characterize(&m, &o, &mut |s| {
        bar.set_length(s.total);
        bar.set_position(s.done);
        bar.set_message(s.what.to_string());
    })
    .map_err(explain)?;
    bar.finish_and_clear();
    let mut out_machine = model::with_measurements(&m, &c, args.out.as_deref().and_then(Path::to_str));
    // The address sampler `ptb run` would use here, so that a simulation on this file samples
    // as this machine does (none named: a software or no PMU; each policy then gets what it asks).
    out_machine.sampler = ptb_linux::perf::detect(Path::new("/")).found.iter().find_map(|k| k.sampler());
    if let Some(s) = out_machine.sampler {
        out_machine.notes.push(format!("address sampler: {} (found by ptb characterize)", s.describe()));
    }
    say(args.json, &format!("Measured in {:.1} s.", c.seconds));
    say(
        args.json,
        &match out_machine.sampler {
            Some(s) => format!("Address sampler: {}.", s.describe()),
            None => "Address sampler: none found (no IBS op or PEBS load latency here): the file names none.".into(),
        },
    );
    if !args.json {
        print_results(&out_machine, &c);
    }
    finish(args, &out_machine, Some(&c))
}

/// The 1-minute load average when it exceeds half the CPUs (other work competes with the
/// measurement), read from /proc/loadavg.
fn busy(cpus: usize) -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    (load > cpus.max(1) as f64 * 0.5).then_some(load)
}

/// Add what to do to low-level errors.
fn explain(e: CharError) -> anyhow::Error {
    match e {
        CharError::Bind { .. } | CharError::Misplaced { .. } => {
            anyhow::Error::new(e).context("binding measurement memory to a node (ptb characterize needs mbind)")
        }
        other => anyhow::Error::new(other),
    }
}

/// Save, draw and print JSON: the common tail of measuring and importing.
fn finish(args: &Args, m: &Machine, c: Option<&Characterisation>) -> Result<()> {
    if let Some(out) = &args.out {
        file::save(m, out).with_context(|| format!("writing the machine file {}", out.display()))?;
        say(
            args.json,
            &format!(
                "Wrote {} (show it with `ptb topology --machine {0}`, use it with `--machine {0}`).",
                out.display()
            ),
        );
    }
    if let Some(prefix) = &args.heatmap {
        let written = draw_heatmaps(m, prefix)?;
        say(args.json, &format!("Heatmaps: {}", written.join(", ")));
    }
    if args.json {
        let v = serde_json::json!({
            "machine": m.name,
            "out": args.out,
            "rows": m.groups.iter().map(|g| &g.name).collect::<Vec<_>>(),
            "columns": m.nodes.iter().map(|n| n.id.0).collect::<Vec<_>>(),
            "bandwidth": m.bandwidth,
            "characterisation": c,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(())
}

fn row_labels(m: &Machine) -> Vec<String> {
    m.groups
        .iter()
        .map(|g| {
            let node = m.nodes[g.node.ix()].id.0;
            if g.name == format!("node{node}") {
                g.name.clone()
            } else {
                format!("{} (node {node})", g.name)
            }
        })
        .collect()
}

fn draw_heatmaps(m: &Machine, prefix: &Path) -> Result<Vec<String>> {
    let Some(bg) = &m.bandwidth else { bail!("no Bandwidth Graph to draw") };
    let cols: Vec<String> = m.nodes.iter().map(|n| format!("node {}", n.id.0)).collect();
    let rows = row_labels(m);
    let mut written = Vec::new();
    let mut one = |suffix: &str, title: &str, mx: &Matrix| -> Result<()> {
        let (png, svg) =
            (with_suffix(prefix, &format!("-{suffix}.png")), with_suffix(prefix, &format!("-{suffix}.svg")));
        plot::heatmap(title, &rows, &cols, &mx.rows, &mx.unit, &png, &svg)?;
        written.push(png.display().to_string());
        written.push(svg.display().to_string());
        Ok(())
    };
    one(
        "uncontended",
        &format!("{}: bandwidth, one CPU group active ({})", m.name, bg.uncontended.unit),
        &bg.uncontended,
    )?;
    if let Some(c) = &bg.contended {
        one("contended", &format!("{}: bandwidth, all CPU groups active ({})", m.name, c.unit), c)?;
    }
    if let Some(l) = &bg.latency {
        one("latency", &format!("{}: idle latency ({})", m.name, l.unit), l)?;
    }
    Ok(written)
}

/// A matrix as text, MLC style: rows = CPU groups, columns = nodes, `±spread` when measured,
/// and an optional extra per entry (e.g. `[3t]` for the thread count).
pub fn text_matrix(title: &str, m: &Machine, mx: &Matrix, extra: Option<&Vec<Vec<usize>>>) -> String {
    let rows = row_labels(m);
    let lw = rows.iter().map(|r| r.len()).max().unwrap_or(9).max(9);
    let cell = |r: usize, c: usize| -> String {
        let v = mx.get(r, c);
        if !m.nodes[c].has_memory() {
            return "-".into();
        }
        let mut s = plot::fmt_value(v);
        if let Some(sp) = mx.spread.as_ref().map(|s| s[r][c]) {
            s.push_str(&format!(" ±{}", plot::fmt_value(sp)));
        }
        if let Some(t) = extra.map(|e| e[r][c]).filter(|t| *t > 0) {
            s.push_str(&format!(" [{t}t]"));
        }
        s
    };
    let cells: Vec<Vec<String>> = (0..mx.n_rows()).map(|r| (0..mx.n_cols()).map(|c| cell(r, c)).collect()).collect();
    let cw = cells.iter().flatten().map(String::len).max().unwrap_or(6).max(7) + 2;
    // Padded by hand: `format!` widths panic above 65,535 (a group name may be longer).
    let pad = ptb_topology::render::pad;
    let mut s =
        format!("{title}\n{}  {}\n{}", pad("", lw, true), pad("Numa node", cw, false), pad("CPU group", lw, true));
    for n in &m.nodes {
        s.push_str(&pad(&n.id.0.to_string(), cw, false));
    }
    for (r, row) in cells.iter().enumerate() {
        s.push('\n');
        s.push_str(&pad(&rows[r], lw, false));
        for v in row {
            s.push_str(&pad(v, cw, false));
        }
    }
    s.push('\n');
    s
}

fn print_results(m: &Machine, c: &Characterisation) {
    let r = c.options.repeats;
    let how = if r > 1 { format!("median of {r}, ± = max - min") } else { "one sample, no spread".into() };
    println!();
    print!(
        "{}",
        text_matrix(
            &format!("Bandwidth, one CPU group active (GB/s; {how}; [Nt] = threads at the plateau)"),
            m,
            &c.uncontended,
            Some(&c.plateau_threads)
        )
    );
    println!();
    print!(
        "{}",
        text_matrix(&format!("Bandwidth, all CPU groups active at once (GB/s; {how})"), m, &c.contended, None)
    );
    println!();
    print!("{}", text_matrix(&format!("Idle latency (ns; {how})"), m, &c.latency, None));
    if let Some(s) = &c.sanity {
        println!(
            "\nSanity check: local bandwidth {} -> node {} is {:.2} GB/s (pseudo-random triad, {} thread(s)); a plain \
             sequential copy (memcpy) with the same threads and node gets {:.2} GB/s; ratio {:.2}.",
            s.group, s.node, s.kernel_gbps, s.threads, s.copy_gbps, s.ratio
        );
    }
    for n in &c.notes {
        println!("note: {n}");
    }
}

fn read(path: &Path) -> Result<String> {
    Ok(ptb_topology::input::read_text(path, "MLC output", ptb_topology::input::cap::MLC)?)
}

fn mlc_err(path: &Path) -> impl Fn(mlc::MlcError) -> anyhow::Error + '_ {
    move |error| CharError::Mlc { path: path.into(), error }.into()
}

fn import_mlc(args: &Args, path: &Path) -> Result<()> {
    let text = read(path)?;
    let all = mlc::parse(&text, Some(MlcKind::Bandwidth)).map_err(mlc_err(path))?;
    let bw = mlc::pick(&all, MlcKind::Bandwidth).cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "{}: has only a latency matrix; pass the `mlc --bandwidth_matrix` output to --import-mlc and this file \
             to --latency",
            path.display()
        )
    })?;
    let lat = match &args.latency {
        Some(lp) => Some((mlc::parse_one(&read(lp)?, MlcKind::Latency).map_err(mlc_err(lp))?, lp.as_path())),
        None => mlc::pick(&all, MlcKind::Latency).cloned().map(|l| (l, path)),
    };
    let name = path.file_stem().map_or("mlc".into(), |s| s.to_string_lossy().to_string());
    let base = match &args.machine {
        Some(arg) => ptb_topology::resolve(arg).with_context(|| format!("loading machine `{arg}`"))?,
        None => match ptb_topology::sysfs::read_machine(Path::new("/")) {
            Ok(here) if import::fits(&here, &bw) => here,
            _ => {
                eprintln!(
                    "note: MLC's nodes do not match this machine's, so the structure is a placeholder ({} CPUs per \
                     node, numbered densely; 16 GiB per memory node). Pass --machine to attach the matrices to a \
                     known machine.",
                    args.cpus_per_node
                );
                import::placeholder(&bw, &name, args.cpus_per_node as usize)?
            }
        },
    };
    let lat_origin = lat.as_ref().map(|(_, p)| p.display().to_string());
    let lat_ref = lat.as_ref().zip(lat_origin.as_deref()).map(|((l, _), o)| (l, o));
    let mut m = import::import(&base, &bw, lat_ref, &path.display().to_string())?;
    if let Some(out) = args.out.as_deref().and_then(Path::to_str) {
        m.source = ptb_topology::ModelSource::File { path: out.to_string() };
    }
    if !args.json {
        let bg = m.bandwidth.as_ref().expect("import sets the Bandwidth Graph");
        println!("Imported from {}: {} CPU group(s) x {} node(s)\n", path.display(), m.groups.len(), m.nodes.len());
        print!("{}", text_matrix("Bandwidth, one source node active (GB/s, from MLC)", &m, &bg.uncontended, None));
        if let Some(l) = &bg.latency {
            println!();
            print!("{}", text_matrix("Idle latency (ns, from MLC)", &m, l, None));
        }
    }
    finish(args, &m, None)
}
