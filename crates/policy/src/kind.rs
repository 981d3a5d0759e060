//! Choosing a policy by name: one enum, one factory.

use crate::params::{ParamDoc, Params};
use crate::{Policy, PolicyError};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Every placement policy ptb knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// ptb's own policy: bandwidth-aware, cost-aware placement of threads and pages (default).
    Ptb,
    /// ptb's first controller (v1), kept for comparison with `ptb` (v2).
    PtbV1,
    /// The published PTB algorithm, faithfully (cosine clustering + recursive KL + NodeScore).
    PtbClassic,
    /// AsymSched: thread clusters on the best-connected node sets of an asymmetric fabric.
    Asymsched,
    /// Selective migration: only recurring sampled regions move, balanced across nodes.
    Selective,
    /// Model of Linux automatic NUMA balancing (hinting faults, two-fault filter, numa groups).
    Autonuma,
    /// Pages round-robin over all nodes at allocation (`numactl --interleave=all`).
    Interleave,
    /// Pages spread in proportion to per-node bandwidth (MPOL_WEIGHTED_INTERLEAVE).
    WeightedInterleave,
    /// Linux default: pages on the node of the first touching CPU; threads unpinned.
    FirstTouch,
    /// Thread i pinned to CPU i, pages by first touch.
    Fixed,
}

impl PolicyKind {
    /// All kinds, in table order.
    pub const ALL: [PolicyKind; 10] = [
        PolicyKind::FirstTouch,
        PolicyKind::Interleave,
        PolicyKind::WeightedInterleave,
        PolicyKind::Fixed,
        PolicyKind::Autonuma,
        PolicyKind::Asymsched,
        PolicyKind::Selective,
        PolicyKind::PtbClassic,
        PolicyKind::PtbV1,
        PolicyKind::Ptb,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Ptb => "ptb",
            PolicyKind::PtbV1 => "ptb-v1",
            PolicyKind::PtbClassic => "ptb-classic",
            PolicyKind::Asymsched => "asymsched",
            PolicyKind::Selective => "selective",
            PolicyKind::Autonuma => "autonuma",
            PolicyKind::Interleave => "interleave",
            PolicyKind::WeightedInterleave => "weighted-interleave",
            PolicyKind::FirstTouch => "first-touch",
            PolicyKind::Fixed => "fixed",
        }
    }

    /// One line for listings.
    pub fn describe(self) -> &'static str {
        match self {
            PolicyKind::Ptb => "ptb's own controller: bandwidth-, phase- and cost-aware page placement",
            PolicyKind::PtbV1 => "ptb's first controller (v1), kept to compare ptb with",
            PolicyKind::PtbClassic => "the published PTB algorithm (cosine clustering, recursive KL, NodeScore)",
            PolicyKind::Asymsched => "AsymSched: clusters on the best-connected nodes, migration budget",
            PolicyKind::Selective => "selective migration of recurring sampled regions",
            PolicyKind::Autonuma => "model of Linux automatic NUMA balancing",
            PolicyKind::Interleave => "pages round-robin over all nodes at allocation",
            PolicyKind::WeightedInterleave => "pages spread in proportion to node bandwidth",
            PolicyKind::FirstTouch => "Linux default: pages where first touched",
            PolicyKind::Fixed => "thread i pinned to CPU i, pages by first touch",
        }
    }

    /// The parameters the policy reads, with defaults and meaning.
    pub fn params(self) -> &'static [ParamDoc] {
        match self {
            PolicyKind::Ptb => crate::ptb::PARAMS,
            PolicyKind::PtbV1 => crate::ptb_v1::PARAMS,
            PolicyKind::PtbClassic => crate::ptb_classic::PARAMS,
            PolicyKind::Asymsched => crate::asymsched::PARAMS,
            PolicyKind::Selective => crate::selective::PARAMS,
            PolicyKind::Autonuma => crate::autonuma::PARAMS,
            PolicyKind::Interleave => crate::interleave::PARAMS,
            PolicyKind::WeightedInterleave => crate::interleave::WEIGHTED_PARAMS,
            PolicyKind::FirstTouch => crate::first_touch::PARAMS,
            PolicyKind::Fixed => crate::fixed::PARAMS,
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL.into_iter().find(|k| k.name() == s.trim()).ok_or_else(|| PolicyError::Unknown(s.to_string()))
    }
}

/// A policy as named on the command line: a kind, optionally followed by `+selective`, which
/// puts the selective-migration filter in front of the policy's page moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PolicySpec {
    pub kind: PolicyKind,
    pub selective_filter: bool,
}

impl PolicySpec {
    pub fn plain(kind: PolicyKind) -> Self {
        PolicySpec { kind, selective_filter: false }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.selective_filter {
            write!(f, "{}+selective", self.kind)
        } else {
            write!(f, "{}", self.kind)
        }
    }
}

impl FromStr for PolicySpec {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().split_once('+') {
            None => Ok(PolicySpec::plain(s.parse()?)),
            Some((k, "selective")) => Ok(PolicySpec { kind: k.parse()?, selective_filter: true }),
            Some(_) => Err(PolicyError::Unknown(s.to_string())),
        }
    }
}

/// Build a policy from its spec and parameters, its plans passed through
/// [`crate::huge::whole_huge_pages`]. Unknown or bad parameters are errors.
pub fn build(spec: PolicySpec, params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    let inner: Box<dyn Policy> = match spec.kind {
        PolicyKind::Ptb => Box::new(crate::ptb::Ptb::from_params(params)?),
        PolicyKind::PtbV1 => Box::new(crate::ptb_v1::PtbV1::from_params(params)?),
        PolicyKind::PtbClassic => Box::new(crate::ptb_classic::PtbClassic::from_params(params)?),
        PolicyKind::Asymsched => Box::new(crate::asymsched::AsymSched::from_params(params)?),
        PolicyKind::Selective => Box::new(crate::selective::Selective::from_params(params)?),
        PolicyKind::Autonuma => Box::new(crate::autonuma::AutoNuma::from_params(params)?),
        PolicyKind::Interleave => Box::new(crate::interleave::Interleave::from_params(params, false)?),
        PolicyKind::WeightedInterleave => Box::new(crate::interleave::Interleave::from_params(params, true)?),
        PolicyKind::FirstTouch => Box::new(crate::first_touch::FirstTouch::from_params(params)?),
        PolicyKind::Fixed => Box::new(crate::fixed::Fixed::from_params(params)?),
    };
    let inner: Box<dyn Policy> =
        if spec.selective_filter { Box::new(crate::selective::SelectiveFilter::wrap(inner, params)?) } else { inner };
    // Every plan gives each huge page one node (a no-op where no region has huge pages).
    Ok(Box::new(crate::huge::WholeHugePages::wrap(inner)))
}

/// Check the parameters of every policy named in `params` (not only the one that will run):
/// a bad value or an unknown key is an error even for a policy not chosen this time.
pub fn check_params(params: &Params) -> Result<(), PolicyError> {
    for name in params.policies() {
        let kind: PolicyKind = name.parse()?;
        build(PolicySpec::plain(kind), params)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_of_every_named_policy_are_checked() {
        let mut p = Params::new();
        p.set_assignment("selective.epoch_ms=0").unwrap();
        assert!(check_params(&p).unwrap_err().to_string().contains("epoch_ms"));
        let mut p = Params::new();
        p.set_assignment("asymsched.cycle_ms=0").unwrap();
        assert!(check_params(&p).is_err());
        let mut p = Params::new();
        p.set_assignment("ptb.period=8").unwrap();
        check_params(&p).unwrap();
    }

    #[test]
    fn names_round_trip_and_every_kind_builds() {
        for k in PolicyKind::ALL {
            assert_eq!(k.name().parse::<PolicyKind>().unwrap(), k);
            let p = build(PolicySpec::plain(k), &Params::new()).unwrap();
            assert_eq!(p.name(), k.name());
        }
        let s: PolicySpec = "ptb-classic+selective".parse().unwrap();
        assert!(s.selective_filter && s.kind == PolicyKind::PtbClassic);
        assert!("nope".parse::<PolicySpec>().is_err());
        assert!("ptb+foo".parse::<PolicySpec>().is_err());
    }

    /// Every documented default of `kind` set explicitly; defaults that are not values (such
    /// as `from machine`) are left out.
    fn documented(kind: PolicyKind) -> Params {
        let mut p = Params::new();
        for d in kind.params().iter().filter(|d| !d.default.contains(' ')) {
            p.set_assignment(&format!("{}.{}={}", kind.name(), d.key, d.default)).unwrap();
        }
        p
    }

    #[test]
    fn documented_defaults_are_the_defaults_the_code_uses() {
        for k in PolicyKind::ALL {
            build(PolicySpec::plain(k), &documented(k)).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        let none = Params::new();
        use crate::{asymsched, autonuma, ptb, ptb_classic, selective};
        let d = documented(PolicyKind::Ptb);
        assert_eq!(ptb::PtbParams::from_params(&d).unwrap(), ptb::PtbParams::from_params(&none).unwrap());
        assert_eq!(ptb::PtbParams::from_params(&none).unwrap(), ptb::PtbParams::default());
        let d = documented(PolicyKind::PtbV1);
        assert_eq!(crate::ptb_v1::PtbParams::from_params(&d).unwrap(), crate::ptb_v1::PtbParams::default());
        let d = documented(PolicyKind::PtbClassic);
        assert_eq!(
            ptb_classic::PtbClassic::from_params(&d).unwrap().config(),
            ptb_classic::PtbClassic::from_params(&none).unwrap().config()
        );
        let d = documented(PolicyKind::Asymsched);
        assert_eq!(asymsched::Config::from_params(&d).unwrap(), asymsched::Config::from_params(&none).unwrap());
        let d = documented(PolicyKind::Selective);
        assert_eq!(selective::Config::from_params(&d).unwrap(), selective::Config::from_params(&none).unwrap());
        let d = documented(PolicyKind::Autonuma);
        assert_eq!(
            format!("{:?}", autonuma::AutoNuma::from_params(&d).unwrap()),
            format!("{:?}", autonuma::AutoNuma::from_params(&none).unwrap())
        );
    }
}
