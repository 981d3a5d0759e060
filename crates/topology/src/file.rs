//! Machine files: a [`Machine`] written as TOML (or JSON, chosen by a `.json` extension).
//!
//! The schema is the serialised [`Machine`] itself, documented field by field in
//! `docs/machine-file.md`; `save` then `load` gives back the same machine. Loading is strict:
//!
//! 1. syntax and types: TOML/JSON errors keep the parser's line and column;
//! 2. unknown fields (typos such as `memory_byte`) are refused with their path, because serde
//!    would otherwise silently drop them. The `schema` and `summary` fields that
//!    `ptb topology --json` adds are accepted, so a saved `--json` output loads back;
//! 3. `source` may be left out; it then is `{ kind = "file", path = <the file> }`. A file
//!    never counts as this machine's live model: `{ kind = "sysfs", root = "/" }` is read as
//!    the file source too (save then load gives the same machine for every other source);
//! 4. consistency: [`crate::validate::validate`] (dense indices, CPUs in one node, matrix
//!    shapes, links and routes naming real ends, non-negative numbers).

use crate::error::TopologyError;
use crate::machine::Machine;
use serde_json::Value;
use std::path::Path;

/// Top-level fields that `ptb topology --json` adds and that loading ignores.
const JSON_EXTRAS: [&str; 2] = ["schema", "summary"];

/// Load and validate a machine file.
pub fn load(path: &Path) -> Result<Machine, TopologyError> {
    let text = crate::input::read_text(path, "machine file", crate::input::cap::MACHINE)?;
    let is_json = path.extension().is_some_and(|e| e == "json");
    parse(&text, is_json, path)
}

/// Parse and validate the text of a machine file; `path` names it in errors.
pub fn parse(text: &str, is_json: bool, path: &Path) -> Result<Machine, TopologyError> {
    let perr = |what: &str, reason: String| TopologyError::Parse { path: path.into(), what: what.into(), reason };
    let tomlerr = |e: toml::de::Error| perr("machine file (TOML)", e.to_string().trim_end().into());
    let jsonerr = |e: serde_json::Error| perr("machine file (JSON)", e.to_string());
    // A value of the wrong type: name its field (`nodes[0].memory_bytes`) besides the position.
    let toml_path = |e: serde_path_to_error::Error<toml::de::Error>| {
        let at = e.path().to_string();
        let msg = e.into_inner().to_string();
        perr(
            "machine file (TOML)",
            if at == "." { msg.trim_end().into() } else { format!("field `{at}`: {}", msg.trim_end()) },
        )
    };
    let json_path = |e: serde_path_to_error::Error<serde_json::Error>| {
        let at = e.path().to_string();
        let msg = e.into_inner().to_string();
        perr("machine file (JSON)", if at == "." { msg } else { format!("field `{at}`: {msg}") })
    };
    let from_toml = |t: &str| -> Result<Machine, TopologyError> {
        serde_path_to_error::deserialize(toml::Deserializer::parse(t).map_err(tomlerr)?).map_err(toml_path)
    };
    let from_json = |t: &str| -> Result<Machine, TopologyError> {
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(t)).map_err(json_path)
    };
    // `source` may be left out: the machine then comes from this file.
    let source = crate::machine::ModelSource::File { path: path.display().to_string() };
    let (m, raw): (Machine, Value) = if is_json {
        let mut raw: Value = serde_json::from_str(text).map_err(jsonerr)?;
        let m = match raw.as_object_mut() {
            Some(o) if !o.contains_key("source") => {
                o.insert("source".into(), serde_json::to_value(&source).map_err(jsonerr)?);
                from_json(&raw.to_string())?
            }
            _ => from_json(text)?,
        };
        (m, raw)
    } else {
        let mut raw: Value = toml::from_str(text).map_err(tomlerr)?;
        let m = match raw.as_object_mut() {
            Some(o) if !o.contains_key("source") => {
                o.insert("source".into(), serde_json::to_value(&source).map_err(jsonerr)?);
                // Appended as a table, so the line numbers of errors stay those of the file.
                let table = toml::to_string(&source).map_err(|e| perr("machine file (TOML)", e.to_string()))?;
                from_toml(&format!("{text}\n[source]\n{table}"))?
            }
            _ => from_toml(text)?,
        };
        (m, raw)
    };
    let origin = path.display().to_string();
    let known = serde_json::to_value(&m).map_err(|e| TopologyError::invalid(&origin, "machine", e.to_string()))?;
    if let Some(field) = unknown_field(&raw, &known, "", true) {
        return Err(TopologyError::invalid(
            &origin,
            field,
            "unknown field (a typo?); the fields are listed in docs/machine-file.md",
        ));
    }
    crate::validate::validate(&m, &origin)?;
    let mut m = m;
    if m.source.is_live() {
        // A file is a copy: it may come from another machine, so it never counts as this
        // machine's own model (which alone may drive real moves).
        m.source = source;
    }
    Ok(m)
}

/// The path of the first field of `raw` that the parsed machine (`known`, re-serialised)
/// does not have. Fields set to `null` are ignored (they mean "absent").
fn unknown_field(raw: &Value, known: &Value, at: &str, top: bool) -> Option<String> {
    match (raw, known) {
        (Value::Object(r), Value::Object(k)) => {
            for (key, v) in r {
                let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
                match k.get(key) {
                    Some(kv) => {
                        if let Some(p) = unknown_field(v, kv, &path, false) {
                            return Some(p);
                        }
                    }
                    None if v.is_null() || (top && JSON_EXTRAS.contains(&key.as_str())) => {}
                    None => return Some(path),
                }
            }
            None
        }
        (Value::Array(r), Value::Array(k)) => {
            r.iter().zip(k).enumerate().find_map(|(i, (rv, kv))| unknown_field(rv, kv, &format!("{at}[{i}]"), false))
        }
        _ => None,
    }
}

/// The TOML text of a machine file for `m` (what `ptb characterize --out` writes).
pub fn to_toml(m: &Machine) -> Result<String, TopologyError> {
    toml::to_string(m).map_err(|e| TopologyError::invalid(&m.name, "machine", format!("cannot serialise: {e}")))
}

/// Write `m` as a machine file (TOML, or JSON when the path ends in `.json`).
pub fn save(m: &Machine, path: &Path) -> Result<(), TopologyError> {
    let text = if path.extension().is_some_and(|e| e == "json") {
        serde_json::to_string_pretty(m).map_err(|e| TopologyError::invalid(&m.name, "machine", e.to_string()))?
    } else {
        to_toml(m)?
    };
    crate::input::write_text(path, "machine file", &text).map_err(TopologyError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toml_of(spec: &str) -> String {
        to_toml(&crate::synthetic::synthetic(spec).unwrap()).unwrap()
    }

    fn err(text: &str) -> String {
        parse(text, false, Path::new("m.toml")).unwrap_err().to_string()
    }

    #[test]
    fn toml_round_trips() {
        let m = crate::synthetic::synthetic("nodes=2,cpus=4,dies=2,memonly=1").unwrap();
        assert_eq!(parse(&to_toml(&m).unwrap(), false, Path::new("m.toml")).unwrap(), m);
    }

    #[test]
    fn the_address_sampler_round_trips_and_a_wrong_one_is_named() {
        for sampler in [
            crate::AddressSampler::IbsOp { op_count: true, miss_filter: false },
            crate::AddressSampler::IbsOp { op_count: false, miss_filter: true },
            crate::AddressSampler::PebsLoads { stores: false },
            crate::AddressSampler::PebsLoads { stores: true },
        ] {
            let m = crate::Machine { sampler: Some(sampler), ..crate::synthetic::synthetic("nodes=2").unwrap() };
            let text = to_toml(&m).unwrap();
            assert!(text.contains("[sampler]"), "{text}");
            assert_eq!(parse(&text, false, Path::new("m.toml")).unwrap(), m);
        }
        // An unknown kind, a missing field: the error names the file and what is wrong.
        for (sampler, named) in [("kind = \"ibs\"", "ibs"), ("kind = \"ibs-op\"\nop_count = true", "miss_filter")] {
            let e = err(&format!("{}\n[sampler]\n{sampler}\n", toml_of("nodes=2")));
            assert!(e.contains("m.toml") && e.contains(named), "{e}");
        }
    }

    #[test]
    fn syntax_errors_carry_the_line() {
        let mut t = toml_of("nodes=2");
        t.push_str("\nthis is not toml\n");
        let e = err(&t);
        assert!(e.contains("m.toml") && e.contains("line"), "{e}");
    }

    #[test]
    fn typos_are_refused_with_their_path() {
        let t = toml_of("nodes=2").replacen("memory_bytes", "memory_byte", 1);
        let e = err(&t);
        assert!(e.contains("m.toml") && e.contains("memory_byte"), "{e}");
        let t = toml_of("nodes=2") + "\ncolour = \"red\"\n";
        let e = err(&t);
        assert!(e.contains("colour`"), "{e}");
    }

    #[test]
    fn source_defaults_to_the_file() {
        let t = toml_of("nodes=2").replace("[source]\nkind = \"synthetic\"\nspec = \"nodes=2\"\n", "");
        assert!(!t.contains("[source]"), "{t}");
        let m = parse(&t, false, Path::new("dir/m.toml")).unwrap();
        assert_eq!(m.source, crate::machine::ModelSource::File { path: "dir/m.toml".into() });
        let mut v = serde_json::to_value(crate::synthetic::synthetic("nodes=2").unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("source");
        let m = parse(&v.to_string(), true, Path::new("m.json")).unwrap();
        assert_eq!(m.source, crate::machine::ModelSource::File { path: "m.json".into() });
    }

    #[test]
    fn a_file_is_never_the_live_machine() {
        let mut m = crate::synthetic::synthetic("nodes=1,cpus=2").unwrap();
        m.source = crate::machine::ModelSource::Sysfs { root: "/".into() };
        let back = parse(&to_toml(&m).unwrap(), false, Path::new("m.toml")).unwrap();
        assert!(!back.source.is_live());
        assert_eq!(back.nodes, m.nodes);
    }

    #[test]
    fn json_output_of_ptb_topology_loads_back() {
        let m = crate::synthetic::synthetic("nodes=2,cpus=4").unwrap();
        let text = serde_json::to_string(&crate::render::to_json(&m)).unwrap();
        assert_eq!(parse(&text, true, Path::new("m.json")).unwrap(), m);
    }
}
