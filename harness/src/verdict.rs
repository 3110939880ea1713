//! What a check says about itself, and the outcomes the engine records.

use crate::model::Scope;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The outcome of one check instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The check ran and what it asserts holds.
    Pass,
    /// The check ran and found a fault that makes the node unfit for work
    /// (it always carries a finding of [`Severity::Fail`]): the run fails,
    /// `health` is unhealthy, and a gating check blocks the layers above.
    Fail,
    /// The check ran and found something worth fixing that does not keep
    /// the node from working (a finding of [`Severity::Warn`]: a stock
    /// Linux default, a slow path): reported, never blocking, and failing
    /// the run only under `--fail-on warn`.
    Warn,
    /// The check did not run because a check it depends on did not pass.
    Blocked,
    /// The check did not run or does not apply, for the stated reason.
    Skipped,
    /// The check did not finish within its time limit.
    Timeout,
    /// The check's code or the process running it died.
    Crash,
}

impl Status {
    /// Every status, in the order reports count them.
    pub const ALL: [Status; 7] = [
        Status::Pass,
        Status::Fail,
        Status::Warn,
        Status::Blocked,
        Status::Skipped,
        Status::Timeout,
        Status::Crash,
    ];

    /// The lowercase name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Warn => "warn",
            Status::Blocked => "blocked",
            Status::Skipped => "skipped",
            Status::Timeout => "timeout",
            Status::Crash => "crash",
        }
    }

    /// Whether this outcome is a fault found by the check itself (not a
    /// consequence of another check's fault) that fails the run: a failure,
    /// a timeout or a crash. A warning is not one.
    pub fn is_fault(self) -> bool {
        matches!(self, Status::Fail | Status::Timeout | Status::Crash)
    }

    /// Whether the check found something: a fault, or a warning.
    pub fn has_finding(self) -> bool {
        self.is_fault() || self == Status::Warn
    }

    /// Whether checks that depend on this one may run: a warning never
    /// blocks anything.
    pub fn lets_dependents_run(self) -> bool {
        matches!(self, Status::Pass | Status::Warn | Status::Skipped)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a check did not look.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    schemars::JsonSchema,
    Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// Nothing to check here (one GPU, no hive, no partitions; another
    /// check reports what is missing).
    NotApplicable,
    /// The user has not said what to expect (no floor for the metric, no
    /// `--expect-gpus`, runtime layers on a capture without libraries).
    NotConfigured,
    /// rocgate could not look (kernel log unreadable, no code object for
    /// the GPU in this build, KFD nodes hidden, a version unknown): the
    /// thing may be broken. `--strict` fails a run with any of these.
    Unverifiable,
    /// The run was interrupted before the check ran or finished.
    Interrupted,
}

impl SkipReason {
    /// The kebab-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NotApplicable => "not-applicable",
            SkipReason::NotConfigured => "not-configured",
            SkipReason::Unverifiable => "unverifiable",
            SkipReason::Interrupted => "interrupted",
        }
    }

    /// Every reason, in report order.
    pub const ALL: [SkipReason; 4] = [
        SkipReason::NotApplicable,
        SkipReason::NotConfigured,
        SkipReason::Unverifiable,
        SkipReason::Interrupted,
    ];
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How serious a finding is: the one severity model every report, exit
/// code and health verdict follows.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    schemars::JsonSchema,
    Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something worth fixing that does not keep the node from working:
    /// the result is [`Status::Warn`].
    Warn,
    /// The node is not fit for work: the result is [`Status::Fail`].
    #[default]
    Fail,
}

impl Severity {
    /// The lowercase name used in reports (`fail`, `warn`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Fail => "fail",
            Severity::Warn => "warn",
        }
    }

    /// The status of a result whose finding has this severity.
    pub fn status(self) -> Status {
        match self {
            Severity::Fail => Status::Fail,
            Severity::Warn => Status::Warn,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A diagnosed fault: a stable code, what was seen, and what to do next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Finding {
    /// Stable, kebab-case identifier (`amdgpu-not-loaded`), safe to match on.
    pub code: String,
    /// Whether it fails the run or warns.
    #[serde(default)]
    pub severity: Severity,
    /// What was observed, naming files, devices and values.
    pub message: String,
    /// The next thing an engineer should do.
    pub next_step: String,
    /// The scope the finding names as the cause, when it is not the
    /// result's own: a node-wide check that one GPU keeps from completing.
    /// Diagnoses, drain reasons and the HTML grid place the fault there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blames: Option<Scope>,
}

impl Finding {
    /// A finding of `severity` with its code, message and next step.
    pub fn new(
        code: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
        next_step: impl Into<String>,
    ) -> Self {
        Finding {
            code: code.into(),
            severity,
            message: message.into(),
            next_step: next_step.into(),
            blames: None,
        }
    }
}

/// What a metric measures, which says whether and how two runs' values of
/// it can be compared (`rocgate compare`). The checks set it, so the engine
/// needs no table of units or names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// A rate the hardware delivers (GB/s, TFLOP/s), measured over enough
    /// work to mean the same on the next run: higher is better, and a drop
    /// beyond its tolerance and its spread is a regression.
    Throughput,
    /// A count of errors (RAS, retired pages) that only grows on a healthy
    /// part until a reset: any growth is a regression.
    Counter,
    /// How long something took (a check's kernel, a compile): it follows
    /// the host's load and the work's size, so it is never compared.
    Duration,
    /// A value of the moment (a temperature, a power draw, the rate of one
    /// cold call made to check a result): shown, never compared.
    Reading,
    /// How many of something there are (GPUs, compute units, lanes, bytes):
    /// a change is a status change of the check that judges it, never a
    /// metric regression.
    Count,
}

impl MetricKind {
    /// The lowercase name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Throughput => "throughput",
            MetricKind::Counter => "counter",
            MetricKind::Duration => "duration",
            MetricKind::Reading => "reading",
            MetricKind::Count => "count",
        }
    }

    /// Whether `rocgate compare` judges metrics of this kind at all.
    pub fn compared(self) -> bool {
        matches!(self, MetricKind::Throughput | MetricKind::Counter)
    }
}

impl fmt::Display for MetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a measurement repeated within one run spread: the least, middle and
/// greatest of its timed repetitions (copies, batches of GEMM calls,
/// all-reduces), each expressed in the metric's unit. Two runs differ by
/// more than noise only when they differ by more than this.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Spread {
    /// The least sample.
    pub min: f64,
    /// The median sample (the mean of the middle two for an even count).
    pub median: f64,
    /// The greatest sample.
    pub max: f64,
    /// How many samples there were.
    pub samples: usize,
}

impl Spread {
    /// The spread of `samples`, ignoring those that are not finite; `None`
    /// when none is.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        let mut s: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        s.sort_by(f64::total_cmp);
        let (first, last) = (*s.first()?, *s.last()?);
        let mid = s.len() / 2;
        let median = if s.len() % 2 == 1 {
            s[mid]
        } else {
            (s[mid - 1] + s[mid]) / 2.0
        };
        Some(Spread {
            min: first,
            median,
            max: last,
            samples: s.len(),
        })
    }

    /// How far apart the least and greatest samples are.
    pub fn width(&self) -> f64 {
        self.max - self.min
    }
}

/// A measured number attached to a result (bandwidth, count, latency).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Metric {
    /// Metric name (`h2d_gbps`); its family, what the thresholds' compare
    /// tolerances are set for, is the part before the first `.`.
    pub name: String,
    /// The measured value.
    pub value: f64,
    /// Its unit (`GB/s`, `count`).
    pub unit: String,
    /// What it measures, which says how runs compare it; absent in reports
    /// written before metrics said so.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kind: Option<MetricKind>,
    /// How the timed repetitions behind the value spread, when there were
    /// several.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spread: Option<Spread>,
    /// The least value the check accepted, when it judged the value against
    /// a floor (the published figure less the margin): reports draw the
    /// value against it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub floor: Option<f64>,
    /// For a measurement between two scopes (a copy from `gpu0` to `gpu1`),
    /// the pair, from first: reports draw such metrics as a matrix
    /// (the GPU-pair grid); the name is then [`Metric::pair_name`].
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub between: Option<(String, String)>,
}

impl Metric {
    /// A metric of `kind`, with no spread, floor or pair.
    pub fn new(kind: MetricKind, name: &str, value: f64, unit: &str) -> Metric {
        Metric {
            name: name.to_string(),
            value,
            unit: unit.to_string(),
            kind: Some(kind),
            spread: None,
            floor: None,
            between: None,
        }
    }

    /// The name of the metric `family` measured from `from` to `to`
    /// (`p2p_gbps.gpu0>gpu1`): unique within a result, so runs compare pair
    /// by pair.
    pub fn pair_name(family: &str, from: &str, to: &str) -> String {
        format!("{family}.{from}>{to}")
    }

    /// The family of a metric measured between two scopes (`p2p_gbps` of
    /// `p2p_gbps.gpu0>gpu1`, the inverse of [`Metric::pair_name`]); a
    /// metric of one scope is its own family.
    pub fn family(&self) -> &str {
        match &self.between {
            Some((from, to)) => self
                .name
                .strip_suffix(&format!(".{from}>{to}"))
                .unwrap_or(&self.name),
            None => &self.name,
        }
    }
}

/// A quantity sampled while a check ran (a GPU's temperature under load),
/// as (seconds since the check began, value) points, at most
/// [`Series::MAX_POINTS`] of them: a long run's samples are averaged into
/// fewer, wider steps, so a report of a day's burn-in stays small.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Series {
    /// What was sampled (`temp_junction`, `power`, `sclk`).
    pub name: String,
    /// Its unit (`C`, `W`, `MHz`).
    pub unit: String,
    /// The limit it is held to (the sensor's critical temperature, the
    /// power cap), drawn beside it; absent when the device gives none.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub limit: Option<f64>,
    /// The points, oldest first.
    pub points: Vec<[f64; 2]>,
}

impl Series {
    /// The most points a series keeps.
    pub const MAX_POINTS: usize = 600;

    /// `points` of `name` in `unit`, downsampled to at most
    /// [`Series::MAX_POINTS`] (each kept point the mean time and value of
    /// the samples it stands for); samples that are not finite are left out.
    pub fn new(name: &str, unit: &str, limit: Option<f64>, points: &[[f64; 2]]) -> Series {
        let finite: Vec<[f64; 2]> = points
            .iter()
            .copied()
            .filter(|p| p[0].is_finite() && p[1].is_finite())
            .collect();
        let per = finite.len().div_ceil(Self::MAX_POINTS).max(1);
        let points = finite
            .chunks(per)
            .map(|c| {
                let n = c.len() as f64;
                [
                    c.iter().map(|p| p[0]).sum::<f64>() / n,
                    c.iter().map(|p| p[1]).sum::<f64>() / n,
                ]
            })
            .collect();
        Series {
            name: name.to_string(),
            unit: unit.to_string(),
            limit: limit.filter(|l| l.is_finite()),
            points,
        }
    }

    /// How the values spread (min, median, max), or `None` with no point.
    pub fn spread(&self) -> Option<Spread> {
        Spread::of(&self.points.iter().map(|p| p[1]).collect::<Vec<_>>())
    }
}

/// What a check returns: pass, fail with a finding, or skipped with a reason,
/// plus optional output, metrics and facts. (Timeout and crash verdicts come
/// only from the isolation layer that runs a check in a worker process.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Pass, Fail, Warn or Skipped from checks; Timeout or Crash from
    /// isolation.
    pub status: Status,
    /// One line for humans.
    pub message: String,
    /// Present exactly when `status` is `Fail` or `Warn`.
    pub finding: Option<Finding>,
    /// Present exactly when `status` is `Skipped`.
    #[serde(default)]
    pub skip_reason: Option<SkipReason>,
    /// Longer evidence (file contents, log lines), bounded by the reports.
    pub output: String,
    /// Measured values.
    pub metrics: Vec<Metric>,
    /// Facts learned on the way (a library's path and version), reported as
    /// properties of the check's scope.
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
    /// Quantities sampled while the check ran (telemetry under load).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
}

impl Verdict {
    fn with_status(status: Status, message: impl Into<String>) -> Self {
        Verdict {
            status,
            message: message.into(),
            finding: None,
            skip_reason: None,
            output: String::new(),
            metrics: Vec::new(),
            facts: BTreeMap::new(),
            series: Vec::new(),
        }
    }

    /// The check passed; `message` says what was verified.
    pub fn pass(message: impl Into<String>) -> Self {
        Verdict::with_status(Status::Pass, message)
    }

    /// The check found something: a failure or a warning, as the
    /// finding's severity says.
    pub fn found(finding: Finding) -> Self {
        Verdict {
            finding: Some(finding.clone()),
            ..Verdict::with_status(finding.severity.status(), finding.message)
        }
    }

    /// The check did not look, for `reason`; `message` says why.
    pub fn skip(reason: SkipReason, message: impl Into<String>) -> Self {
        Verdict {
            skip_reason: Some(reason),
            ..Verdict::with_status(Status::Skipped, message)
        }
    }

    /// Nothing to check here; `message` says why.
    pub fn not_applicable(message: impl Into<String>) -> Self {
        Verdict::skip(SkipReason::NotApplicable, message)
    }

    /// The user has not said what to expect; `message` says what to give.
    pub fn not_configured(message: impl Into<String>) -> Self {
        Verdict::skip(SkipReason::NotConfigured, message)
    }

    /// rocgate could not look; `message` says why. Not a pass.
    pub fn unverifiable(message: impl Into<String>) -> Self {
        Verdict::skip(SkipReason::Unverifiable, message)
    }

    /// The check did not finish in time (isolation layer only).
    pub fn timeout(message: impl Into<String>) -> Self {
        Verdict::with_status(Status::Timeout, message)
    }

    /// The process running the check died (isolation layer only).
    pub fn crash(message: impl Into<String>) -> Self {
        Verdict::with_status(Status::Crash, message)
    }

    /// Adds sampled series (telemetry while the check ran).
    #[must_use]
    pub fn with_series(mut self, series: Vec<Series>) -> Self {
        self.series.extend(series);
        self
    }

    /// Records a fact for the scope's report properties.
    #[must_use]
    pub fn with_fact(mut self, name: &str, value: impl Into<String>) -> Self {
        self.facts.insert(name.to_string(), value.into());
        self
    }

    /// Attaches evidence text.
    #[must_use]
    pub fn with_output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }

    /// Attaches a metric of `kind`.
    #[must_use]
    pub fn with_metric(mut self, kind: MetricKind, name: &str, value: f64, unit: &str) -> Self {
        self.metrics.push(Metric::new(kind, name, value, unit));
        self
    }

    /// Attaches a throughput (higher is better; compared across runs).
    #[must_use]
    pub fn with_throughput(self, name: &str, value: f64, unit: &str) -> Self {
        self.with_metric(MetricKind::Throughput, name, value, unit)
    }

    /// Attaches an error counter (any growth between runs is a regression).
    #[must_use]
    pub fn with_counter(self, name: &str, value: f64, unit: &str) -> Self {
        self.with_metric(MetricKind::Counter, name, value, unit)
    }

    /// Attaches how long something took, in milliseconds (never compared).
    #[must_use]
    pub fn with_duration_ms(self, name: &str, ms: f64) -> Self {
        self.with_metric(MetricKind::Duration, name, ms, "ms")
    }

    /// Attaches a value of the moment (never compared).
    #[must_use]
    pub fn with_reading(self, name: &str, value: f64, unit: &str) -> Self {
        self.with_metric(MetricKind::Reading, name, value, unit)
    }

    /// Attaches how many of something there are (never compared).
    #[must_use]
    pub fn with_count(self, name: &str, value: f64, unit: &str) -> Self {
        self.with_metric(MetricKind::Count, name, value, unit)
    }

    /// Records on the metric attached last the spread of the timed
    /// repetitions behind it, each in that metric's unit; nothing when
    /// there is no metric or no finite sample.
    #[must_use]
    pub fn with_samples(mut self, samples: &[f64]) -> Self {
        if let Some(m) = self.metrics.last_mut() {
            m.spread = Spread::of(samples);
        }
        self
    }

    /// Attaches a throughput that was judged against `floor`, the least
    /// value the check accepted (floors are for rates, where higher is
    /// better).
    #[must_use]
    pub fn with_metric_against(mut self, name: &str, value: f64, unit: &str, floor: f64) -> Self {
        self.metrics.push(Metric {
            floor: Some(floor),
            ..Metric::new(MetricKind::Throughput, name, value, unit)
        });
        self
    }

    /// Marks the metrics of `other` as measured from scope `from` to scope
    /// `to` and attaches them, named [`Metric::pair_name`].
    #[must_use]
    pub fn with_metrics_between(mut self, other: Vec<Metric>, from: &str, to: &str) -> Self {
        for mut m in other {
            m.name = Metric::pair_name(&m.name, from, to);
            m.between = Some((from.to_string(), to.to_string()));
            self.metrics.push(m);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_metric_is_named_for_its_pair_and_read_back_to_its_family() {
        let m = Verdict::pass("")
            .with_metrics_between(
                vec![Metric::new(MetricKind::Throughput, "p2p_gbps", 1.0, "GB/s")],
                "gpu0",
                "gpu1",
            )
            .metrics;
        assert_eq!(m[0].name, Metric::pair_name("p2p_gbps", "gpu0", "gpu1"));
        assert_eq!(m[0].name, "p2p_gbps.gpu0>gpu1");
        assert_eq!(m[0].family(), "p2p_gbps");
        let plain = Metric::new(MetricKind::Throughput, "h2d_gbps", 1.0, "GB/s");
        assert_eq!(plain.family(), "h2d_gbps");
    }

    #[test]
    fn a_finding_carries_its_message_and_its_severity_sets_the_status() {
        let v = Verdict::found(Finding::new(
            "kfd-missing",
            Severity::Fail,
            "/dev/kfd is absent",
            "load amdgpu",
        ));
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.message, "/dev/kfd is absent");
        assert_eq!(
            v.finding.as_ref().map(|f| f.code.as_str()),
            Some("kfd-missing")
        );
        let w = Verdict::found(Finding::new("numa", Severity::Warn, "on", "turn it off"));
        assert_eq!(w.status, Status::Warn);
        assert!(!w.status.is_fault() && w.status.has_finding());
    }

    #[test]
    fn a_spread_is_the_least_middle_and_greatest_finite_sample() {
        let s = Spread::of(&[3.0, f64::NAN, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.samples), (1.0, 2.0, 3.0, 3));
        assert_eq!(Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::INFINITY]), None);
        let v = Verdict::pass("")
            .with_throughput("h2d_gbps", 50.0, "GB/s")
            .with_samples(&[49.0, 50.0, 48.0]);
        assert_eq!(v.metrics[0].spread.map(|s| s.width()), Some(2.0));
        assert_eq!(v.metrics[0].kind, Some(MetricKind::Throughput));
    }

    proptest::proptest! {
        #[test]
        fn a_spread_is_ordered_whatever_the_samples(samples in proptest::collection::vec(proptest::num::f64::ANY, 0..9)) {
            if let Some(s) = Spread::of(&samples) {
                proptest::prop_assert!(s.min <= s.median && s.median <= s.max, "{:?}", s);
                proptest::prop_assert!(s.samples >= 1 && s.samples <= samples.len());
            }
        }
    }

    #[test]
    fn a_metric_without_a_kind_reads_and_serialises_without_it() {
        let old: Metric = serde_json::from_str(r#"{"name":"t","value":1.0,"unit":"ms"}"#).unwrap();
        assert_eq!(old.kind, None);
        let text = serde_json::to_string(&old).unwrap();
        assert!(!text.contains("kind") && !text.contains("spread"), "{text}");
        let new = Verdict::pass("").with_counter("ras_ce.umc", 0.0, "errors");
        let text = serde_json::to_string(&new.metrics[0]).unwrap();
        assert!(text.contains(r#""kind":"counter""#), "{text}");
    }

    #[test]
    fn only_pass_warn_and_skip_let_dependents_run() {
        assert!(Status::Pass.lets_dependents_run());
        assert!(Status::Warn.lets_dependents_run());
        assert!(Status::Skipped.lets_dependents_run());
        for s in [
            Status::Fail,
            Status::Blocked,
            Status::Timeout,
            Status::Crash,
        ] {
            assert!(!s.lets_dependents_run(), "{s}");
        }
        assert!(!Status::Blocked.is_fault());
        assert!(Status::Crash.is_fault());
    }
}
