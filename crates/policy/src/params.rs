//! Policy parameters: `policy.key=value` from the CLI (`--set`) and `[policy]` tables from a
//! TOML config file. Each policy reads its keys through a [`Section`], which refuses unknown
//! keys and bad values with the origin, the key and the reason.

use crate::PolicyError;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// One documented parameter (for `--help`, `ptb policies` and the README).
#[derive(Clone, Copy, Debug)]
pub struct ParamDoc {
    pub key: &'static str,
    pub default: &'static str,
    pub doc: &'static str,
}

/// All parameters, grouped by policy name.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// policy -> key -> (value text, origin)
    map: BTreeMap<String, BTreeMap<String, (String, String)>>,
}

impl Params {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `policy.key=value` (from `--set`). An unknown policy name is refused.
    pub fn set_assignment(&mut self, text: &str) -> Result<(), PolicyError> {
        let bad = || PolicyError::Config(format!("--set `{text}`: expected POLICY.KEY=VALUE, e.g. ptb-classic.c2=1.5"));
        let (lhs, value) = text.split_once('=').ok_or_else(bad)?;
        let (policy, key) = lhs.trim().split_once('.').ok_or_else(bad)?;
        if policy.is_empty() || key.is_empty() {
            return Err(bad());
        }
        known_policy(policy.trim(), &format!("--set `{text}`"))?;
        self.insert(policy.trim(), key.trim(), value.trim(), "--set");
        Ok(())
    }

    /// Add the tables of a TOML config file: `[ptb-classic]\nc2 = 1.5`.
    pub fn add_toml(&mut self, text: &str, origin: &str) -> Result<(), PolicyError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| PolicyError::Config(format!("{origin}: not valid TOML: {e}")))?;
        for (policy, v) in table {
            let t = v.as_table().ok_or_else(|| {
                PolicyError::Config(format!("{origin}: `{policy}` must be a table like [{policy}] of key = value"))
            })?;
            known_policy(&policy, &format!("{origin}: table [{policy}]"))?;
            for (k, v) in t {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.insert(&policy, k, &text, origin);
            }
        }
        Ok(())
    }

    pub fn insert(&mut self, policy: &str, key: &str, value: &str, origin: &str) {
        self.map
            .entry(policy.to_string())
            .or_default()
            .insert(key.to_string(), (value.to_string(), origin.to_string()));
    }

    /// The parameters of one policy.
    pub fn section(&self, policy: &str) -> Section<'_> {
        Section { policy: policy.to_string(), map: self.map.get(policy), used: RefCell::new(BTreeSet::new()) }
    }

    /// Policy names that have parameters.
    pub fn policies(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }
}

/// Refuse a policy name no policy has (`ptbb`): its parameters would be ignored silently.
fn known_policy(name: &str, at: &str) -> Result<(), PolicyError> {
    if crate::PolicyKind::ALL.iter().any(|k| k.name() == name) {
        return Ok(());
    }
    let names: Vec<&str> = crate::PolicyKind::ALL.iter().map(|k| k.name()).collect();
    Err(PolicyError::Config(format!("{at}: no policy is called `{name}` (policies: {})", names.join(", "))))
}

/// Typed reads of one policy's parameters.
pub struct Section<'a> {
    policy: String,
    map: Option<&'a BTreeMap<String, (String, String)>>,
    used: RefCell<BTreeSet<String>>,
}

impl Section<'_> {
    fn raw(&self, key: &str) -> Option<&(String, String)> {
        self.used.borrow_mut().insert(key.to_string());
        self.map.and_then(|m| m.get(key))
    }

    fn err(&self, key: &str, origin: &str, reason: String) -> PolicyError {
        PolicyError::Param { origin: origin.to_string(), policy: self.policy.clone(), key: key.to_string(), reason }
    }

    /// Parse a value with `FromStr`, or return `default` when absent.
    pub fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, PolicyError> {
        match self.raw(key) {
            None => Ok(default),
            Some((v, origin)) => v
                .parse::<T>()
                .map_err(|_| self.err(key, origin, format!("`{v}` is not a valid {}", std::any::type_name::<T>()))),
        }
    }

    /// A finite float within `[lo, hi]`.
    pub fn f64_in(&self, key: &str, default: f64, lo: f64, hi: f64) -> Result<f64, PolicyError> {
        let v: f64 = self.get(key, default)?;
        if !v.is_finite() || v < lo || v > hi {
            let origin = self.raw(key).map(|x| x.1.clone()).unwrap_or_default();
            return Err(self.err(key, &origin, format!("{v} is outside [{lo}, {hi}]")));
        }
        Ok(v)
    }

    /// An integer within `[lo, hi]` (a value outside is refused, never clamped: `period=0`
    /// or `epoch_ms=0` is a mistake to report, not to correct silently).
    pub fn u64_in(&self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, PolicyError> {
        let v: u64 = self.get(key, default)?;
        if v < lo || v > hi {
            // An upper bound that is the type's own is no bound a person needs to read.
            let reason = if hi == u64::MAX {
                format!("{v} is too small: it must be at least {lo}")
            } else {
                format!("{v} is outside {lo}..={hi}")
            };
            return Err(self.err(key, &self.origin(key), reason));
        }
        Ok(v)
    }

    /// Where the value of `key` came from (`--set`, a config file path), or `default` when the
    /// key was not given: for policies that check values themselves and report the origin.
    pub fn origin(&self, key: &str) -> String {
        self.map.and_then(|m| m.get(key)).map_or_else(|| "default".to_string(), |(_, o)| o.clone())
    }

    /// Fail on any key that the policy did not read.
    pub fn finish(self) -> Result<(), PolicyError> {
        if let Some(m) = self.map {
            let used = self.used.borrow();
            if let Some((k, (_, origin))) = m.iter().find(|(k, _)| !used.contains(*k)) {
                let known: Vec<&str> = used.iter().map(String::as_str).collect();
                let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                return Err(self.err(k, origin, format!("unknown parameter (known: {known})")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CONFIG: &str = "[ptb]\npayback = 2.5\nperiod = 4096\n[ptb-classic]\nc2 = 1.5\nmin_acc = 8\n\
                          [selective]\nepoch_ms = 100\n[weighted-interleave]\nweights = \"0:3,1:1\"\n";

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// Fuzz target of `--config` files and `--set`: a valid config with bytes inserted, cut
        /// or replaced, and random assignments, are taken or refused with their origin, never
        /// a panic, also when every named policy is built from them.
        #[test]
        fn mutated_configs_never_panic(
            edits in proptest::collection::vec((0.0f64..1.0, 0u8..3, "[a-z0-9=\\[\\]\"\n._:,-]{0,8}"), 1..5),
            set in "[a-z_.-]{0,12}=[a-z0-9.:,-]{0,8}",
        ) {
            let t = ptb_topology::input::mutate(CONFIG, &edits);
            let mut p = Params::new();
            if let Err(e) = p.add_toml(&t, "fuzz.toml") {
                prop_assert!(e.to_string().contains("fuzz.toml"), "{}", e);
            }
            let _ = p.set_assignment(&set);
            let _ = crate::check_params(&p);
        }
    }

    #[test]
    fn reads_set_and_toml_and_refuses_unknown_keys() {
        let mut p = Params::new();
        p.set_assignment("ptb-classic.c2=1.25").unwrap();
        p.add_toml("[ptb-classic]\nmin_acc = 8\n", "cfg.toml").unwrap();
        let s = p.section("ptb-classic");
        assert_eq!(s.f64_in("c2", 1.5, 1.0, 10.0).unwrap(), 1.25);
        assert_eq!(s.get::<u32>("min_acc", 16).unwrap(), 8);
        assert_eq!(s.get::<u32>("slots", 15000).unwrap(), 15000);
        s.finish().unwrap();

        p.set_assignment("ptb-classic.bogus=1").unwrap();
        let s = p.section("ptb-classic");
        let _ = s.get::<u32>("min_acc", 16);
        let e = s.finish().unwrap_err().to_string();
        assert!(e.contains("bogus") && e.contains("--set"), "{e}");
        assert!(p.set_assignment("nodot=1").is_err());
        // Unknown policy names were accepted (and their parameters ignored).
        let e = p.set_assignment("ptbb.x=1").unwrap_err().to_string();
        assert!(e.contains("`ptbb`") && e.contains("ptb-classic"), "{e}");
        let e = p.add_toml("[ptbb]\nx = 1\n", "f.toml").unwrap_err().to_string();
        assert!(e.contains("f.toml") && e.contains("[ptbb]"), "{e}");
        p.set_assignment("ptb.period=0").unwrap();
        let e = p.section("ptb").u64_in("period", 8192, 1, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("period") && e.contains("must be at least 1"), "{e}");
        assert!(!e.contains("18446744073709551615"), "no bound a person needs to read: {e}");
        let e = p.section("ptb").u64_in("period", 8192, 1, 100).unwrap_err().to_string();
        assert!(e.contains("0 is outside 1..=100"), "{e}");
        assert!(p.add_toml("x = 1", "f.toml").unwrap_err().to_string().contains("f.toml"));
    }
}
