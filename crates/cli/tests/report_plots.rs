//! The report's plots read at a glance: speed-up bars start at the 1.0x baseline and carry
//! their values, every policy keeps one colour in every chart, pages-per-cycle charts run on
//! seconds and cover every workload, titles say simulated, and the HTML reads like prose.
//! Checked on the SVG the report writes, not on the drawing code.

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::Path;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

/// One drawn element of an SVG: its tag, attributes, and text content for `<text>`.
#[derive(Debug)]
struct El {
    tag: String,
    attrs: BTreeMap<String, String>,
    text: String,
}

impl El {
    fn num(&self, k: &str) -> f64 {
        self.attrs.get(k).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }
}

/// The elements of an SVG written by plotters, in drawing order.
fn elements(svg: &str) -> Vec<El> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').unwrap();
        let head = &rest[..end];
        rest = &rest[end + 1..];
        if head.starts_with('/') || head.starts_with('?') || head.starts_with('!') {
            continue;
        }
        let tag: String = head.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let mut attrs = BTreeMap::new();
        let mut a = &head[tag.len()..];
        while let Some(eq) = a.find("=\"") {
            let key = a[..eq].trim().to_string();
            let v = &a[eq + 2..];
            let close = v.find('"').unwrap();
            attrs.insert(key, v[..close].to_string());
            a = &v[close + 1..];
        }
        let mut text = String::new();
        if tag == "text" {
            let close = rest.find("</text>").unwrap();
            text = rest[..close].trim().to_string();
            rest = &rest[close + 7..];
        }
        out.push(El { tag, attrs, text });
    }
    out
}

/// Legend entries (policy name -> swatch colour): a filled rect followed by the name.
fn legend(els: &[El], policies: &[&str]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for w in els.windows(2) {
        if w[0].tag == "rect" && w[1].tag == "text" && policies.contains(&w[1].text.as_str()) {
            m.insert(w[1].text.clone(), w[0].attrs["fill"].clone());
        }
    }
    m
}

const POLICIES: [&str; 7] = ["first-touch", "interleave", "autonuma", "selective", "ptb", "oracle-moved", "oracle"];

fn report(dir: &Path) {
    ptb()
        .args(["compare", "-m", "synthetic:nodes=2,cpus=2", "-w", "canneal,ep", "-p"])
        .arg("interleave,autonuma,selective,ptb")
        .args(["--duration-scale=0.25", "--report"])
        .arg(dir)
        .assert()
        .success();
}

#[test]
fn bars_grow_from_the_baseline_with_labels_and_colours_hold_across_charts() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("rep");
    report(&dir);

    // Speed-up bars: every bar has an edge on the 1.0x baseline (or, for a value at 1.0x, a
    // flat marker astride it), and carries its value.
    let els = elements(&std::fs::read_to_string(dir.join("speedup.svg")).unwrap());
    let base = els.iter().find(|e| e.tag == "text" && e.text == "1.0x").expect("a labelled 1.0x baseline");
    let (base_x, base_y) = (base.num("x"), base.num("y"));
    let bars: Vec<&El> = els
        .iter()
        .filter(|e| e.tag == "rect" && e.attrs["fill"] != "#FFFFFF" && e.num("x") < base_x && e.num("x") > 0.0)
        .collect();
    // canneal, ep and the geometric mean, for each of the seven columns.
    assert_eq!(bars.len(), 3 * POLICIES.len(), "{bars:?}");
    for b in &bars {
        let (y, h) = (b.num("y"), b.num("height"));
        let on_base = (y - base_y).abs() < 0.5 || (y + h - base_y).abs() < 0.5;
        let astride = h <= 6.0 && y < base_y && y + h > base_y;
        assert!(on_base || astride, "bar not on the 1.0x baseline at y={base_y}: {b:?}");
    }
    let values = els
        .iter()
        .filter(|e| {
            e.tag == "text" && e.text.len() == 4 && e.text.as_bytes()[1] == b'.' && e.text.parse::<f64>().is_ok()
        })
        .count();
    assert_eq!(values, bars.len(), "one value label per bar");

    // One colour per policy across every chart of the report.
    let mut seen: BTreeMap<String, String> = legend(&els, &POLICIES);
    assert_eq!(seen.len(), POLICIES.len(), "every column in the speed-up legend: {seen:?}");
    let mut charts = 0;
    for w in ["canneal", "ep"] {
        let svg = std::fs::read_to_string(dir.join(format!("pages-{w}.svg"))).expect("a pages chart per workload");
        assert!(svg.contains("time, s (simulated)"), "seconds on the x axis: {w}");
        assert!(svg.contains("(simulated"), "title says simulated: {w}");
        for (p, c) in legend(&elements(&svg), &POLICIES) {
            charts += 1;
            assert_eq!(seen.entry(p.clone()).or_insert_with(|| c.clone()), &c, "{p} changes colour in pages-{w}");
        }
    }
    assert!(charts > 0, "some policy moved pages");
    let colours: std::collections::BTreeSet<&String> = seen.values().collect();
    assert_eq!(colours.len(), seen.len(), "two policies share a colour: {seen:?}");

    // Every plot title says what its figures are.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "svg") {
            let els = elements(&std::fs::read_to_string(&p).unwrap());
            let title = &els.iter().find(|e| e.tag == "text").unwrap().text;
            assert!(title.contains("(simulated"), "{}: {title}", p.display());
        }
    }

    // The page: no literal backticks, the policy count in words, the best cell of each row marked.
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(!html.contains('`'), "literal backticks in the HTML");
    assert!(html.contains("7 policies") && html.contains("2 workloads"), "policy count");
    assert!(html.contains("class=\"best\""), "best value per row marked");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("**"), "best value per row marked in Markdown");
}

#[test]
fn a_report_never_overwrites_a_directory_silently() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("rep");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("index.html"), "an older report").unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/compare-small.json");
    let out = ptb().args(["report", fixture, "-o"]).arg(&dir).assert().failure().get_output().stderr.clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("not empty") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("index.html")).unwrap(), "an older report");
    ptb().args(["report", fixture, "--force", "-o"]).arg(&dir).assert().success();
    assert!(std::fs::read_to_string(dir.join("index.html")).unwrap().contains("<svg"));
    let out = ptb()
        .args(["compare", "-m", "synthetic:nodes=2,cpus=2", "-w", "ep", "-p", "interleave", "--no-oracle", "--report"])
        .arg(&dir)
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(out).unwrap().contains("--force"));
}
