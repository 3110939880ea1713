//! What a run produced: one result per check instance, plus the identity of
//! each scope.

use crate::model::{Layer, Scope, Tier, UnknownLayer};
use crate::policy::WaiverNote;
use crate::verdict::{Finding, Metric, Series, SkipReason, Status};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The outcome of one check instance. `L` is how the layer is held: a
/// [`Layer`] in a run, its name as text in a result read back from a saved
/// report ([`SavedResult`]).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct CheckResult<L = Layer> {
    /// Test id: `<scope>.<layer>.<name>` (the report's `id`).
    #[serde(rename = "id")]
    pub test_id: String,
    /// The check's id: `<layer>::<name>` ([`crate::Check::id`]).
    pub check: String,
    /// The layer.
    pub layer: L,
    /// Node or GPU.
    pub scope: Scope,
    /// The outcome.
    pub status: Status,
    /// One line for humans.
    pub message: String,
    /// The diagnosis, for failures.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub finding: Option<Finding>,
    /// For skipped results: why the check did not look.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub skip_reason: Option<SkipReason>,
    /// The site's waiver that matched this result (its finding, or its
    /// check): a waived result is still reported, says why, blocks nothing
    /// and does not change the exit code. An expired waiver is kept here
    /// too, marked expired, and no longer applies.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub waiver: Option<WaiverNote>,
    /// For blocked results: the test id of the failed check at the root.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub blocked_by: Option<String>,
    /// Wall time of the check.
    #[serde(
        rename = "duration_ms",
        serialize_with = "as_millis",
        deserialize_with = "from_millis"
    )]
    #[schemars(with = "f64")]
    pub duration: Duration,
    /// Captured evidence, cleaned and bounded.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub output: String,
    /// Measured values.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub metrics: Vec<Metric>,
    /// Facts the check learned (library paths, versions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub facts: BTreeMap<String, String>,
    /// Quantities sampled while it ran (a burn-in's telemetry), bounded.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub series: Vec<Series>,
}

impl CheckResult {
    /// The result of check `check` (`layer::name`) on `scope`, with test id
    /// `id`, ending in `status`, before anything it observed is added (no
    /// message, finding, output, metrics or facts).
    pub fn new(id: String, check: String, layer: Layer, scope: Scope, status: Status) -> Self {
        CheckResult {
            test_id: id,
            check,
            layer,
            scope,
            status,
            message: String::new(),
            finding: None,
            skip_reason: None,
            waiver: None,
            blocked_by: None,
            duration: Duration::ZERO,
            output: String::new(),
            metrics: Vec::new(),
            facts: BTreeMap::new(),
            series: Vec::new(),
        }
    }
}

impl<L> CheckResult<L> {
    /// The check's name without its layer.
    pub fn name(&self) -> &str {
        self.check
            .split_once("::")
            .map_or(self.check.as_str(), |(_, n)| n)
    }

    /// How serious what this result found is: `warn` for a warning, else
    /// `fail` (failures, timeouts, crashes; and for results that found
    /// nothing, which no caller asks of).
    pub fn status_severity(&self) -> crate::verdict::Severity {
        if self.status == Status::Warn {
            crate::verdict::Severity::Warn
        } else {
            crate::verdict::Severity::Fail
        }
    }

    /// Whether a waiver that has not expired covers this result.
    pub fn waived(&self) -> bool {
        self.waiver.as_ref().is_some_and(|w| !w.expired)
    }

    /// Whether checks that depend on this one may run: it passed, warned or
    /// skipped, or the site waived what it found.
    pub fn lets_dependents_run(&self) -> bool {
        self.status.lets_dependents_run() || self.waived()
    }

    /// A fault (failure, timeout, crash) that no waiver covers.
    pub fn is_fault(&self) -> bool {
        self.status.is_fault() && !self.waived()
    }

    /// A warning that no waiver covers.
    pub fn is_warning(&self) -> bool {
        self.status == Status::Warn && !self.waived()
    }

    /// Removes the metrics whose value is not a finite number (NaN, an
    /// infinity: JSON has no such number, and no report may show one as a
    /// reading), naming each in the result's output; a floor that is not
    /// finite is dropped from its metric, and so is such a spread. The
    /// checks validate what they read, so this is the last guard that no
    /// report carries one.
    pub fn drop_non_finite_metrics(&mut self) {
        let mut dropped = Vec::new();
        self.metrics.retain_mut(|m| {
            if !m.value.is_finite() {
                dropped.push(format!("{} ({})", m.name, m.value));
                return false;
            }
            m.floor = m.floor.filter(|f| f.is_finite());
            m.spread = m
                .spread
                .filter(|s| s.min.is_finite() && s.median.is_finite() && s.max.is_finite());
            true
        });
        if !dropped.is_empty() {
            if !self.output.is_empty() {
                self.output.push('\n');
            }
            self.output.push_str(&format!(
                "metrics left out, not being finite numbers: {}",
                dropped.join(", ")
            ));
        }
    }

    /// The result after [`CheckResult::drop_non_finite_metrics`].
    #[must_use]
    pub fn with_finite_metrics(mut self) -> Self {
        self.drop_non_finite_metrics();
        self
    }

    /// A check that could not look (skipped as unverifiable) that no
    /// waiver covers.
    pub fn is_unverified(&self) -> bool {
        self.status == Status::Skipped
            && self.skip_reason == Some(SkipReason::Unverifiable)
            && !self.waived()
    }
}

/// A result read back from a saved JSON report. Its layer stays the name
/// as written: a report carries no ranks, and a report from another
/// release may name a layer this one does not know.
pub type SavedResult = CheckResult<String>;

impl SavedResult {
    /// The result with its layer found among `layers` (the stack's layers,
    /// bottom-up), or the error naming the layer `layers` lacks.
    pub fn resolve(self, layers: &[Layer]) -> Result<CheckResult, UnknownLayer> {
        Ok(CheckResult {
            layer: Layer::named(&self.layer, layers)?,
            test_id: self.test_id,
            check: self.check,
            scope: self.scope,
            status: self.status,
            message: self.message,
            finding: self.finding,
            skip_reason: self.skip_reason,
            waiver: self.waiver,
            blocked_by: self.blocked_by,
            duration: self.duration,
            output: self.output,
            metrics: self.metrics,
            facts: self.facts,
            series: self.series,
        })
    }
}

fn as_millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    // Microsecond resolution: node checks take well under a millisecond.
    s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
}

fn from_millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let ms = f64::deserialize(d)?;
    Duration::try_from_secs_f64(ms / 1e3).map_err(serde::de::Error::custom)
}

/// Identity of one scope (a GPU's PCI address, gfx target, serial...), carried
/// into reports as properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScopeInfo {
    /// Ordered `(name, value)` pairs.
    pub properties: Vec<(String, String)>,
}

impl ScopeInfo {
    /// Adds a property.
    pub fn push(&mut self, name: &str, value: impl Into<String>) {
        self.properties.push((name.to_string(), value.into()));
    }

    /// The value of a property.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Everything one run produced.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The tier that was planned.
    pub tier: Tier,
    /// When the run started.
    pub started_at: chrono::DateTime<chrono::Local>,
    /// Wall time of the whole run.
    pub duration: Duration,
    /// Results in plan order.
    pub results: Vec<CheckResult>,
    /// Identity of the node (index 0 of this list is not special; keyed by scope).
    pub scopes: Vec<(Scope, ScopeInfo)>,
    /// Set when the run was cut short, with the reason (`SIGINT`).
    pub interrupted: Option<String>,
    /// `--strict`: a check that could not verify fails the run.
    pub strict: bool,
    /// `--fail-on warn`: a warning fails the run.
    pub fail_on_warn: bool,
}

impl RunReport {
    /// A run of `tier` that started now with `results`: no time taken, no
    /// scope's identity, not interrupted, judged by default (neither
    /// `--strict` nor `--fail-on warn`). The front ends' base for a run
    /// that holds nothing (or only what a test gives it).
    pub fn new(tier: Tier, results: Vec<CheckResult>) -> RunReport {
        RunReport {
            tier,
            started_at: chrono::Local::now(),
            duration: Duration::ZERO,
            results,
            scopes: Vec::new(),
            interrupted: None,
            strict: false,
            fail_on_warn: false,
        }
    }

    /// Every scope present in the results, node first.
    pub fn scope_list(&self) -> Vec<Scope> {
        let mut scopes: Vec<Scope> = self.results.iter().map(|r| r.scope).collect();
        scopes.extend(self.scopes.iter().map(|(s, _)| *s));
        scopes.sort();
        scopes.dedup();
        scopes
    }

    /// The layers the views show, bottom-up: every layer of the stack with
    /// a result, and a layer beside the stack ([`Layer::beside`]) only
    /// when one of its results says something of the node: one whose every
    /// result is not applicable is something the node does not have (the
    /// network layer of a node without RDMA cards), kept in the reports,
    /// left out of the grids.
    pub fn layers(&self) -> Vec<Layer> {
        let present: BTreeSet<Layer> = self
            .results
            .iter()
            .filter(|r| !r.layer.is_beside() || r.skip_reason != Some(SkipReason::NotApplicable))
            .map(|r| r.layer)
            .collect();
        present.into_iter().collect()
    }

    /// Properties of a scope: its identity, then the facts its checks learned.
    pub fn scope_info(&self, scope: Scope) -> ScopeInfo {
        let mut info = self
            .scopes
            .iter()
            .find(|(s, _)| *s == scope)
            .map(|(_, i)| i.clone())
            .unwrap_or_default();
        for r in self.results.iter().filter(|r| r.scope == scope) {
            for (k, v) in &r.facts {
                if info.get(k).is_none() {
                    info.push(k, v.clone());
                }
            }
        }
        info
    }

    /// The lowest layer with a fault in `scope` (or across all scopes if
    /// `None`); with only warnings, the lowest of those. Waived results
    /// count for neither.
    pub fn first_failing_layer(&self, scope: Option<Scope>) -> Option<Layer> {
        let here = |r: &&CheckResult| scope.is_none_or(|s| r.scope == s);
        let lowest = |keep: fn(&CheckResult) -> bool| {
            self.results
                .iter()
                .filter(here)
                .filter(|r| keep(r))
                .map(|r| r.layer)
                .min()
        };
        lowest(CheckResult::is_fault).or_else(|| lowest(CheckResult::is_warning))
    }

    /// How many results have each status.
    pub fn count(&self, status: Status) -> usize {
        self.results.iter().filter(|r| r.status == status).count()
    }

    /// How many skipped results have `reason`.
    pub fn count_skipped(&self, reason: SkipReason) -> usize {
        self.results
            .iter()
            .filter(|r| r.status == Status::Skipped && r.skip_reason == Some(reason))
            .count()
    }

    /// The checks that could not verify what they check (and no waiver
    /// covers).
    pub fn unverified(&self) -> Vec<&CheckResult> {
        self.results.iter().filter(|r| r.is_unverified()).collect()
    }

    /// The warnings no waiver covers.
    pub fn warnings(&self) -> Vec<&CheckResult> {
        self.results.iter().filter(|r| r.is_warning()).collect()
    }

    /// The results a waiver covers.
    pub fn waived(&self) -> Vec<&CheckResult> {
        self.results.iter().filter(|r| r.waived()).collect()
    }

    /// Whether `r` fails this run: a fault or a blocked check, a warning
    /// under `--fail-on warn`, a check that could not look under
    /// `--strict`; never a waived result.
    pub fn fails_run(&self, r: &CheckResult) -> bool {
        r.is_fault()
            || (r.status == Status::Blocked && !r.waived())
            || (self.fail_on_warn && r.is_warning())
            || (self.strict && r.is_unverified())
    }

    /// Whether the run passes: complete, and no result fails it
    /// ([`RunReport::fails_run`]).
    pub fn all_passed(&self) -> bool {
        self.interrupted.is_none() && !self.results.iter().any(|r| self.fails_run(r))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::test_stack::{self, A, B, C, D};
    use crate::test_support::run as report;
    use crate::verdict::{Finding, Severity};

    #[test]
    fn metrics_that_are_not_finite_are_left_out_and_named() {
        let mut r = CheckResult::new(
            "gpu0.a.thermals".into(),
            "a::thermals".into(),
            A,
            Scope::Gpu(0),
            Status::Pass,
        );
        r.metrics = crate::verdict::Verdict::pass("")
            .with_reading("temp_junction", f64::NAN, "°C")
            .with_reading("power", f64::INFINITY, "W")
            .with_metric_against("h2d_gbps", 50.0, "GB/s", f64::NEG_INFINITY)
            .metrics;
        r.drop_non_finite_metrics();
        assert_eq!(r.metrics.len(), 1);
        assert_eq!(r.metrics[0].floor, None);
        assert!(
            r.output.contains("temp_junction (NaN)") && r.output.contains("power (inf)"),
            "{}",
            r.output
        );
    }

    fn result(id: &str, layer: Layer, status: Status) -> CheckResult {
        let mut r = CheckResult::new(id.into(), id.into(), layer, Scope::Node, status);
        let severity = match status {
            Status::Warn => Severity::Warn,
            _ => Severity::Fail,
        };
        r.finding = status
            .has_finding()
            .then(|| Finding::new("x", severity, "broken", "fix"));
        r
    }

    #[test]
    fn layers_and_the_first_failing_one_go_by_rank() {
        let r = report(vec![
            result("c", C, Status::Fail),
            result("b", B, Status::Warn),
            result("a", A, Status::Pass),
            result("c2", C, Status::Pass),
        ]);
        assert_eq!(r.layers(), [A, B, C]);
        // Not applicable: shown for a layer of the stack, left out beside.
        let beside = Layer::beside("e", 4);
        let mut with_absent = r.clone();
        for layer in [D, beside] {
            let mut absent = result("x", layer, Status::Skipped);
            absent.skip_reason = Some(SkipReason::NotApplicable);
            with_absent.results.push(absent);
        }
        assert_eq!(with_absent.layers(), [A, B, C, D]);
        // The lowest fault, not the lowest warning.
        assert_eq!(r.first_failing_layer(None), Some(C));
        let warnings_only = report(vec![
            result("c", C, Status::Warn),
            result("b", B, Status::Warn),
        ]);
        assert_eq!(warnings_only.first_failing_layer(None), Some(B));
    }

    /// A waiver with `reason`, expired or not.
    fn waiver(expired: bool) -> WaiverNote {
        WaiverNote {
            reason: "accepted".into(),
            expires: Some("2027-01-01".into()),
            expired,
            source: "rocgate.toml:3".into(),
        }
    }

    #[test]
    fn warnings_pass_unless_fail_on_warn_and_waivers_take_faults_out() {
        let mut r = report(vec![
            result("a", A, Status::Pass),
            result("b", B, Status::Warn),
        ]);
        assert!(r.all_passed());
        assert_eq!(r.warnings().len(), 1);
        r.fail_on_warn = true;
        assert!(!r.all_passed());
        r.results[1].waiver = Some(waiver(false));
        assert!(r.all_passed(), "a waived warning does not fail the run");
        assert_eq!(r.first_failing_layer(None), None);

        let mut f = report(vec![result("c", C, Status::Fail)]);
        assert!(!f.all_passed());
        f.results[0].waiver = Some(waiver(true));
        assert!(!f.all_passed(), "an expired waiver no longer applies");
        assert!(!f.results[0].lets_dependents_run());
        f.results[0].waiver = Some(waiver(false));
        assert!(f.all_passed() && f.results[0].lets_dependents_run());
        assert_eq!(f.waived().len(), 1);
    }

    #[test]
    fn a_saved_result_keeps_its_layer_as_text_until_resolved() {
        let json = serde_json::to_string(&result("node.b.x", B, Status::Pass)).unwrap();
        let saved: SavedResult = serde_json::from_str(&json).unwrap();
        assert_eq!(saved.layer, "b");
        assert_eq!(
            saved.clone().resolve(test_stack::ALL),
            Ok(result("node.b.x", B, Status::Pass))
        );
        // A layer this stack does not have is an error value.
        let err = saved.resolve(&[A, C]).unwrap_err();
        assert_eq!(err.name, "b");
        assert_eq!(err.known, "a, c");
        // A layer that is not text is a parse error.
        let bad = json.replace(r#""layer":"b""#, r#""layer":7"#);
        assert_ne!(bad, json);
        assert!(serde_json::from_str::<SavedResult>(&bad).is_err());
    }
}
