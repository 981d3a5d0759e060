//! Reading (and writing) Intel MLC's `--bandwidth_matrix` / `--latency_matrix` output.
//!
//! MLC prints each matrix under a `Numa node` header, rows = CPU node, columns = memory node:
//!
//! ```text
//! Measuring Memory Bandwidths between nodes within system
//! Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)
//!                 Numa node
//! Numa node            0       1
//!        0        36482.2 18910.3
//!        1        20194.1 36376.5
//! ```
//!
//! Whether a matrix is bandwidth (MB/s) or latency (ns) is read from the text above it (the last
//! line mentioning "bandwidth" or "latenc"); a bare matrix takes the caller's default. Rows may
//! be fewer than columns (memory-only nodes such as CXL expanders have no row). A `-` entry is
//! read as "not measured". Newer MLC versions print idle latencies twice, for sequential and
//! for random access; ptb's own latency is a random pointer chase, so the random matrix is the
//! one picked when both are there. Every error names the 1-based line and the reason.

use serde::Serialize;
use std::fmt::Write as _;
use thiserror::Error;

/// A malformed MLC file: the line (1-based) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("line {line}: {reason}")]
pub struct MlcError {
    pub line: usize,
    pub reason: String,
}

/// What an MLC matrix measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MlcKind {
    /// Read bandwidth, MB/s (10^6 bytes per second).
    Bandwidth,
    /// Idle latency, ns.
    Latency,
}

impl MlcKind {
    pub fn unit(self) -> &'static str {
        match self {
            MlcKind::Bandwidth => "MB/s",
            MlcKind::Latency => "ns",
        }
    }
}

/// One node x node matrix from MLC output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MlcMatrix {
    pub kind: MlcKind,
    /// Line of the `Numa node` header (1-based).
    pub line: usize,
    /// Kernel node ids of the rows (CPU nodes), in file order.
    pub rows: Vec<u32>,
    /// Kernel node ids of the columns (memory nodes), in file order.
    pub cols: Vec<u32>,
    /// `values[r][c]`; `None` where MLC printed `-`.
    pub values: Vec<Vec<Option<f64>>>,
    /// The text above said "sequential access" (newer MLC prints such a latency matrix first).
    pub sequential: bool,
}

fn err(line: usize, reason: impl Into<String>) -> MlcError {
    MlcError { line, reason: reason.into() }
}

/// A `Numa node 0 1 ...` header: the column tokens, or `None` when the line is not one.
fn header_tokens<'a, 'b>(toks: &'b [&'a str]) -> Option<&'b [&'a str]> {
    (toks.len() > 2 && toks[0].eq_ignore_ascii_case("numa") && toks[1].eq_ignore_ascii_case("node")).then(|| &toks[2..])
}

fn node_id(tok: &str, line: usize, what: &str) -> Result<u32, MlcError> {
    tok.parse::<u32>().map_err(|_| err(line, format!("{what} `{tok}` is not a node number")))
}

/// Parse every matrix in `text`. `default` is the kind of a matrix with no hint above it.
pub fn parse(text: &str, default: Option<MlcKind>) -> Result<Vec<MlcMatrix>, MlcError> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut kind, mut sequential) = (None, false);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let toks: Vec<&str> = lines[i].split_whitespace().collect();
        let Some(head) = header_tokens(&toks) else {
            let low = lines[i].to_ascii_lowercase();
            if low.contains("bandwidth") {
                kind = Some(MlcKind::Bandwidth);
                sequential = false;
            } else if low.contains("latenc") {
                kind = Some(MlcKind::Latency);
                sequential = low.contains("sequential");
            }
            i += 1;
            continue;
        };
        let hline = i + 1;
        let k = kind.or(default).ok_or_else(|| {
            err(
                hline,
                "cannot tell whether this matrix is bandwidth or latency: no line mentioning \"Bandwidths are in \
                 MB/sec\" or \"latencies (in ns)\" above it (pass the file as --import-mlc or --latency accordingly)",
            )
        })?;
        let mut cols = Vec::with_capacity(head.len());
        for t in head {
            let id = node_id(t, hline, "column header")?;
            if cols.contains(&id) {
                return Err(err(hline, format!("node {id} appears twice in the header")));
            }
            cols.push(id);
        }
        let (mut rows, mut values) = (Vec::new(), Vec::new());
        i += 1;
        while i < lines.len() {
            let line = i + 1;
            let toks: Vec<&str> = lines[i].split_whitespace().collect();
            let Some(first) = toks.first() else { break };
            if !first.starts_with(|c: char| c.is_ascii_digit()) {
                break;
            }
            let r = node_id(first, line, "row label")?;
            if rows.contains(&r) {
                return Err(err(line, format!("a second row for node {r}")));
            }
            if toks.len() - 1 != cols.len() {
                return Err(err(
                    line,
                    format!(
                        "the row for node {r} has {} values but the header names {} nodes",
                        toks.len() - 1,
                        cols.len()
                    ),
                ));
            }
            let mut row = Vec::with_capacity(cols.len());
            for (t, c) in toks[1..].iter().zip(&cols) {
                if *t == "-" {
                    row.push(None);
                    continue;
                }
                match t.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => row.push(Some(v)),
                    Ok(_) => {
                        return Err(err(
                            line,
                            format!("node {r} -> node {c}: `{t}` is not a finite non-negative value"),
                        ))
                    }
                    Err(_) => return Err(err(line, format!("node {r} -> node {c}: `{t}` is not a number"))),
                }
            }
            rows.push(r);
            values.push(row);
            i += 1;
        }
        if rows.is_empty() {
            return Err(err(hline, "a `Numa node` header with no rows below it"));
        }
        out.push(MlcMatrix { kind: k, line: hline, rows, cols, values, sequential });
    }
    if out.is_empty() {
        return Err(err(
            lines.len().max(1),
            "no `Numa node` matrix found (expected the output of `mlc --bandwidth_matrix` or `mlc --latency_matrix`)",
        ));
    }
    Ok(out)
}

/// The matrix of `kind` to use among `all`: the first one not measured with sequential access,
/// else the first one.
pub fn pick(all: &[MlcMatrix], kind: MlcKind) -> Option<&MlcMatrix> {
    let mut of_kind = all.iter().filter(|m| m.kind == kind);
    all.iter().find(|m| m.kind == kind && !m.sequential).or_else(|| of_kind.next())
}

/// The matrix of `kind` in `text` (see [`pick`]; a bare matrix counts as `kind`).
pub fn parse_one(text: &str, kind: MlcKind) -> Result<MlcMatrix, MlcError> {
    let all = parse(text, Some(kind))?;
    let n = text.lines().count().max(1);
    pick(&all, kind)
        .cloned()
        .ok_or_else(|| err(n, format!("no {} matrix in this file (found only other MLC matrices)", kind.unit())))
}

/// Write a matrix the way MLC prints it (so [`parse`] reads it back).
pub fn format(m: &MlcMatrix) -> String {
    let mut s = String::new();
    match m.kind {
        MlcKind::Bandwidth => {
            s.push_str("Measuring Memory Bandwidths between nodes within system\n");
            s.push_str("Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)\n");
        }
        MlcKind::Latency if m.sequential => s.push_str("Measuring idle latencies for sequential access (in ns)...\n"),
        MlcKind::Latency => s.push_str("Measuring idle latencies (in ns)...\n"),
    }
    s.push_str("\t\tNuma node\nNuma node");
    for c in &m.cols {
        let _ = write!(s, "\t{c:>6}");
    }
    s.push('\t');
    for (r, row) in m.rows.iter().zip(&m.values) {
        let _ = write!(s, "\n{r:>8}");
        for v in row {
            match v {
                Some(v) => {
                    let _ = write!(s, "\t{v:>6.1}");
                }
                None => s.push_str("\t     -"),
            }
        }
        s.push('\t');
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BW: &str = "Intel(R) Memory Latency Checker - v3.9\nCommand line parameters: --bandwidth_matrix\n\n\
        Using buffer size of 100.000MiB/thread for reads and an additional 100.000MiB/thread for writes\n\
        Measuring Memory Bandwidths between nodes within system\n\
        Bandwidths are in MB/sec (1 MB/sec = 1,000,000 Bytes/sec)\n\
        Using all the threads from each core if Hyper-threading is enabled\nUsing Read-only traffic type\n\
        \t\tNuma node\nNuma node\t     0\t     1\t\n       0\t36482.2\t18910.3\t\n       1\t20194.1\t36376.5\t\n";

    #[test]
    fn reads_a_bandwidth_matrix_with_its_kind_from_the_text_above() {
        let m = parse(BW, None).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].kind, MlcKind::Bandwidth);
        assert_eq!(m[0].line, 10);
        assert_eq!(m[0].rows, vec![0, 1]);
        assert_eq!(m[0].values[1][0], Some(20194.1));
    }

    #[test]
    fn reads_both_matrices_of_a_default_mlc_run_and_cpu_less_columns() {
        let text = "Measuring idle latencies for random access (in ns)...\n\t\tNuma node\n\
            Numa node\t     0\t     1\t     2\n       0\t  84.5\t 140.0\t 564.5\n\n\
            Measuring Peak Injection Memory Bandwidths for the system\nALL Reads        :\t30600.1\n\n\
            Measuring Memory Bandwidths between nodes within system\n\t\tNuma node\n\
            Numa node\t     0\t     1\t     2\n       0\t30600.0\t-\t4800.0\n";
        let m = parse(text, None).unwrap();
        assert_eq!((m[0].kind, m[1].kind), (MlcKind::Latency, MlcKind::Bandwidth));
        assert_eq!(m[0].cols, vec![0, 1, 2]);
        assert_eq!(m[1].values[0], vec![Some(30600.0), None, Some(4800.0)]);
        assert_eq!(parse_one(text, MlcKind::Bandwidth).unwrap().line, 11);
    }

    #[test]
    fn the_random_access_latency_matrix_wins_over_the_sequential_one() {
        let text = "Measuring idle latencies for sequential access (in ns)...\nNuma node 0\n0 70.0\n\n\
            Measuring idle latencies for random access (in ns)...\nNuma node 0\n0 90.0\n";
        let all = parse(text, None).unwrap();
        assert!(all[0].sequential && !all[1].sequential);
        assert_eq!(parse_one(text, MlcKind::Latency).unwrap().values[0][0], Some(90.0));
        let only_seq = "Measuring idle latencies for sequential access (in ns)...\nNuma node 0\n0 70.0\n";
        assert!(parse_one(only_seq, MlcKind::Latency).unwrap().sequential);
    }

    #[test]
    fn bad_files_are_refused_with_line_and_reason() {
        let cases = [
            ("", 1, "no `Numa node` matrix"),
            ("Numa node 0 1\n0 1 2\n", 1, "cannot tell"),
            ("latency\nNuma node 0 x\n0 1 2\n", 2, "`x` is not a node number"),
            ("latency\nNuma node 0 0\n0 1 2\n", 2, "appears twice"),
            ("latency\nNuma node 0 1\n0 1\n", 3, "has 1 values but the header names 2"),
            ("latency\nNuma node 0 1\n0 1 abc\n", 3, "`abc` is not a number"),
            ("latency\nNuma node 0 1\n0 1 -5\n", 3, "not a finite non-negative"),
            ("latency\nNuma node 0 1\n0 1 2\n0 1 2\n", 4, "a second row for node 0"),
            ("latency\nNuma node 0 1\n\n", 2, "no rows"),
            ("latency\nNuma node 0\n9x 1\n", 3, "row label `9x`"),
        ];
        for (text, line, why) in cases {
            let e = parse(text, None).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(why), "{text:?}: {e}");
        }
        assert!(parse_one(BW, MlcKind::Latency).unwrap_err().reason.contains("no ns matrix"));
    }

    fn matrix() -> impl Strategy<Value = MlcMatrix> {
        (1usize..6, 1usize..6, any::<bool>(), any::<bool>()).prop_flat_map(|(nr, extra, bw, seq)| {
            let nc = nr + extra - 1;
            proptest::collection::vec(
                proptest::collection::vec(proptest::option::weighted(0.9, 0u32..2_000_000), nc),
                nr,
            )
            .prop_map(move |v| MlcMatrix {
                kind: if bw { MlcKind::Bandwidth } else { MlcKind::Latency },
                line: if bw { 4 } else { 3 },
                rows: (0..nr as u32).collect(),
                cols: (0..nc as u32).collect(),
                values: v.into_iter().map(|r| r.into_iter().map(|x| x.map(|x| x as f64 / 10.0)).collect()).collect(),
                sequential: seq && !bw,
            })
        })
    }

    proptest! {
        #[test]
        fn never_panics_and_errors_name_a_line_of_the_file(text in "(Numa node|latency| |\t|[0-9]|\\.|-|x|\n){0,200}") {
            if let Err(e) = parse(&text, None) {
                prop_assert!(e.line >= 1 && e.line <= text.lines().count().max(1), "{e}");
            }
        }

        #[test]
        fn never_panics_on_arbitrary_text(text in "\\PC{0,300}") {
            let _ = parse(&text, Some(MlcKind::Latency));
        }

        #[test]
        fn format_then_parse_round_trips(m in matrix()) {
            let back = parse(&format(&m), None).unwrap();
            prop_assert_eq!(back, vec![m]);
        }

        #[test]
        fn a_corrupted_value_is_reported_on_its_line(m in matrix(), r in 0usize..6, c in 0usize..6) {
            let (r, c) = (r % m.rows.len(), c % m.cols.len());
            let text = format(&m);
            let header = m.line;
            let mut lines: Vec<String> = text.lines().map(String::from).collect();
            let mut toks: Vec<String> = lines[header + r].split_whitespace().map(String::from).collect();
            toks[1 + c] = "1.2.3".into();
            lines[header + r] = toks.join("\t");
            let e = parse(&lines.join("\n"), None).unwrap_err();
            prop_assert_eq!(e.line, header + r + 1);
        }
    }
}
