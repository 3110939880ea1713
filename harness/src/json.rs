//! The JSON results file (schema_version 1).

use crate::model::Layer;
use crate::result::{CheckResult, RunReport};
use crate::verdict::{SkipReason, Status};
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the JSON results layout; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    tool: &'a str,
    tier: &'a str,
    started_at: String,
    duration_ms: f64,
    interrupted: Option<&'a str>,
    passed: bool,
    strict: bool,
    fail_on: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'a serde_json::Value>,
    first_failing_layer: Option<Layer>,
    summary: BTreeMap<&'static str, usize>,
    skipped_by_reason: BTreeMap<&'static str, usize>,
    unverified: Vec<&'a str>,
    warnings: Vec<&'a str>,
    waived: Vec<&'a str>,
    node: BTreeMap<&'a str, &'a str>,
    versions: &'a BTreeMap<String, BTreeMap<String, String>>,
    scopes: Vec<ScopeDoc>,
    results: std::borrow::Cow<'a, [CheckResult]>,
}

#[derive(Serialize)]
struct ScopeDoc {
    scope: String,
    first_failing_layer: Option<Layer>,
    properties: BTreeMap<String, String>,
}

/// What the report says beyond the run's results.
pub struct JsonContext<'a> {
    /// The producer and its version (`rocgate 0.1.0`).
    pub tool: &'a str,
    /// The node (host name, sysroot, kernel, driver).
    pub node_properties: &'a [(String, String)],
    /// Each scope's component versions (`node`, `gpu0`, ...).
    pub versions: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// What the run means for those who act on it (exit code, health,
    /// drain), as the front end decided it.
    pub decision: Option<serde_json::Value>,
}

/// The results with every metric a finite number: serde_json writes NaN
/// and the infinities as `null`, which no reader takes for a number (and
/// which makes `fleet report` refuse the file), so one that reached here is
/// left out and named ([`CheckResult::drop_non_finite_metrics`]).
fn finite(results: &[CheckResult]) -> std::borrow::Cow<'_, [CheckResult]> {
    let bad = |r: &CheckResult| {
        r.metrics.iter().any(|m| {
            !m.value.is_finite()
                || m.floor.is_some_and(|f| !f.is_finite())
                || m.spread.is_some_and(|s| {
                    !(s.min.is_finite() && s.median.is_finite() && s.max.is_finite())
                })
        })
    };
    if !results.iter().any(bad) {
        return std::borrow::Cow::Borrowed(results);
    }
    let mut owned = results.to_vec();
    for r in &mut owned {
        r.drop_non_finite_metrics();
    }
    std::borrow::Cow::Owned(owned)
}

/// Renders a run as pretty-printed JSON.
pub fn render(report: &RunReport, ctx: &JsonContext<'_>) -> Result<String, String> {
    let JsonContext {
        tool,
        node_properties,
        versions,
        ..
    } = *ctx;
    let summary = Status::ALL
        .into_iter()
        .map(|s| (s.as_str(), report.count(s)))
        .collect();
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        tool,
        tier: report.tier.as_str(),
        started_at: report.started_at.to_rfc3339(),
        duration_ms: (report.duration.as_secs_f64() * 1e6).round() / 1e3,
        interrupted: report.interrupted.as_deref(),
        passed: report.all_passed(),
        strict: report.strict,
        fail_on: if report.fail_on_warn { "warn" } else { "fail" },
        decision: ctx.decision.as_ref(),
        first_failing_layer: report.first_failing_layer(None),
        summary,
        skipped_by_reason: SkipReason::ALL
            .into_iter()
            .map(|r| (r.as_str(), report.count_skipped(r)))
            .collect(),
        unverified: report.unverified().iter().map(|r| r.id.as_str()).collect(),
        warnings: report.warnings().iter().map(|r| r.id.as_str()).collect(),
        waived: report.waived().iter().map(|r| r.id.as_str()).collect(),
        node: node_properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        versions,
        scopes: report
            .scope_list()
            .into_iter()
            .map(|s| ScopeDoc {
                scope: s.label(),
                first_failing_layer: report.first_failing_layer(Some(s)),
                properties: report.scope_info(s).properties.into_iter().collect(),
            })
            .collect(),
        results: finite(&report.results),
    };
    serde_json::to_string_pretty(&doc)
        .map_err(|e| format!("failed to serialise the JSON report: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Scope;
    use crate::model::test_stack::A;

    #[test]
    fn a_metric_that_is_not_finite_is_never_written_as_null() {
        let mut r = crate::test_support::result("gpu0.a.x", A, Scope::Gpu(0), Status::Pass);
        r.metrics = crate::verdict::Verdict::pass("")
            .with_reading("temp_junction", f64::NAN, "°C")
            .with_reading("power", 300.0, "W")
            .metrics;
        let clean = [r.clone()];
        let kept = finite(&clean);
        assert_eq!(kept[0].metrics.len(), 1);
        let text = serde_json::to_string(&*kept).unwrap();
        assert!(!text.contains("null"), "{text}");
        r.metrics.remove(0);
        let fine = [r];
        assert!(matches!(finite(&fine), std::borrow::Cow::Borrowed(_)));
    }
}
