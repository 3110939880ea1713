//! What a comparison found: the changes between two runs, the tolerances
//! they were judged with, and the rule a throughput regresses by.

use crate::document::IdentityKeys;
use crate::verdict::{MetricKind, Spread};
use std::collections::BTreeMap;

/// What the suites' reports mean by their names, which a comparison goes
/// by without knowing ROCm: who a GPU is, and what a metric that does not
/// state its kind measures (reports written before metrics said so).
#[derive(Clone, Copy, Debug)]
pub struct Terms {
    /// The properties that say who the node and its GPUs are.
    pub identity: IdentityKeys,
    /// The kind of a metric of this unit that states none.
    pub kind_of_unit: fn(&str) -> MetricKind,
}

/// The tolerated relative drop of a throughput, per metric family (the
/// metric's name before its first `.`: `gemm_tflops` of
/// `gemm_tflops.fp16`), with a default for the others.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances {
    /// For families not named in `families`.
    pub default: f64,
    /// Per family.
    pub families: BTreeMap<String, f64>,
}

impl Tolerances {
    /// `tolerance` for every family.
    pub fn flat(tolerance: f64) -> Tolerances {
        Tolerances {
            default: tolerance,
            families: BTreeMap::new(),
        }
    }

    /// The tolerance of `metric`'s family.
    pub fn of(&self, metric: &str) -> f64 {
        let family = metric.split('.').next().unwrap_or(metric);
        self.families.get(family).copied().unwrap_or(self.default)
    }
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances::flat(0.05)
    }
}

/// A version that changed.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionChange {
    /// `node` or `gpu3`.
    pub scope: String,
    /// `amdgpu`, `fw_mec`, `hip_runtime_version`.
    pub key: String,
    /// Before (None: absent).
    pub before: Option<String>,
    /// After.
    pub after: Option<String>,
    /// Why it is absent after, when the check that read it before did not
    /// pass this time (`blocked by node.amdgpu.module_live`,
    /// `node.hip.runtime failed`): it was not read, which says nothing of
    /// the version itself.
    pub not_read: Option<String>,
}

/// A check that passed before and does not now.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusChange {
    /// Test id.
    pub id: String,
    /// Status before.
    pub before: String,
    /// Status after.
    pub after: String,
    /// The message after.
    pub message: String,
    /// The check whose failure blocked this one after, when it was blocked.
    pub blocked_by: Option<String>,
}

/// A metric that got worse: a throughput beyond its tolerance and spread,
/// or a counter that grew.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricChange {
    /// Test id.
    pub id: String,
    /// Metric name.
    pub metric: String,
    /// The GPU it was measured on (its PCI address, else its serial), or
    /// the pair (`0000:46:00.0 > 0000:a6:00.0`); None on the node.
    pub on: Option<String>,
    /// Unit.
    pub unit: String,
    /// Before: the median of its repetitions, else the value.
    pub before: f64,
    /// After, likewise.
    pub after: f64,
    /// A throughput's relative change (after/before - 1); a counter's
    /// increase.
    pub change: f64,
    /// The tolerance it was judged with (throughputs).
    pub tolerance: f64,
    /// How far apart the repetitions were before (max - min), if measured.
    pub spread_before: Option<f64>,
    /// Likewise after.
    pub spread_after: Option<f64>,
}

/// A measurement the first run took and the second did not, while its
/// check still passed: a check that passes without measuring proves
/// nothing of what it measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Missing {
    /// Test id (after).
    pub id: String,
    /// Metric name (before).
    pub metric: String,
    /// The GPU or pair it was measured on, as [`MetricChange::on`].
    pub on: Option<String>,
    /// Unit.
    pub unit: String,
    /// Its value before.
    pub before: f64,
    /// Whether the second run wrote it with no value (`null`) rather than
    /// leaving it out.
    pub null: bool,
}

/// Something present in the first run and absent from the second.
#[derive(Clone, Debug, PartialEq)]
pub struct Gone {
    /// What: `GPU 0000:65:00.0` or a test id.
    pub what: String,
    /// What it was before: a check's status, or `gpu3` for a GPU.
    pub before: String,
}

/// The differences between two runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// GPUs and checks present before and absent after.
    pub gone: Vec<Gone>,
    /// The GPU count before and after, when it changed.
    pub gpu_count: Option<(usize, usize)>,
    /// Versions that changed, per scope.
    pub versions: Vec<VersionChange>,
    /// Checks that went from pass to anything else.
    pub regressions: Vec<StatusChange>,
    /// Checks that went from anything else to pass.
    pub fixed: Vec<StatusChange>,
    /// Throughputs that fell by more than their tolerance and spread.
    pub slower: Vec<MetricChange>,
    /// Error counters (RAS errors, retired pages) that grew, by any amount;
    /// `change` is the increase.
    pub grew: Vec<MetricChange>,
    /// Measurements of the first run missing from the second while their
    /// checks still passed.
    pub missing: Vec<Missing>,
    /// Why GPUs were matched by index rather than identity, when they were
    /// (a report that does not say who its GPUs are).
    pub by_index: Option<String>,
    /// Metrics in both runs that were judged (throughputs and counters).
    pub judged: usize,
    /// Metrics in both runs that are never compared (durations, readings,
    /// counts) or were not finite.
    pub not_judged: usize,
    /// The tolerances used.
    pub tolerances: Tolerances,
}

impl Comparison {
    /// Whether the second run is worse than the first.
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
            || !self.slower.is_empty()
            || !self.grew.is_empty()
            || !self.missing.is_empty()
            || !self.gone.is_empty()
            || self.gpu_count.is_some()
    }
}

/// One run's measurement of a metric: its value and, when it was repeated,
/// how the repetitions spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The value the check reported.
    pub value: f64,
    /// Its repetitions' spread, if any.
    pub spread: Option<Spread>,
}

impl Measured {
    /// What is compared: the median of the repetitions, else the value.
    pub fn centre(&self) -> f64 {
        self.spread.map_or(self.value, |s| s.median)
    }

    pub(super) fn width(&self) -> Option<f64> {
        self.spread.map(|s| s.width())
    }
}

/// Whether a throughput (higher is better) regressed from `before` to
/// `after`: its drop exceeds `tolerance` of its value before, and the
/// spread (max - min) of each run that measured one. A drop that one run's
/// own repetitions span is noise, whatever its size.
pub fn throughput_regressed(before: &Measured, after: &Measured, tolerance: f64) -> bool {
    let (b, a) = (before.centre(), after.centre());
    if !(b.is_finite() && a.is_finite()) || b <= 0.0 {
        return false;
    }
    let drop = b - a;
    drop > tolerance * b
        && [before.width(), after.width()]
            .into_iter()
            .flatten()
            .all(|w| drop > w)
}

/// Joins at most `max` items, saying how many more there were.
pub(super) fn list(items: &[&str], max: usize) -> String {
    let shown = items[..items.len().min(max)].join(", ");
    if items.len() > max {
        format!("{shown} and {} more", items.len() - max)
    } else {
        shown
    }
}
