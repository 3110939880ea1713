//! The JSON results file (schema_version 1).

use crate::document::{Document, ScopeEntry};
use crate::model::Layer;
use crate::result::{CheckResult, RunReport};
use crate::verdict::{SkipReason, Status};
use std::collections::BTreeMap;

/// Version of the JSON results layout; bumped on incompatible changes.
pub use crate::document::SCHEMA_VERSION;

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

/// The run as its report document: every result with its metrics finite,
/// the node's properties, each scope with its identity, the versions and
/// the decision.
pub fn document(report: &RunReport, ctx: &JsonContext<'_>) -> Document {
    let owned = |v: Vec<&CheckResult>| v.iter().map(|r| r.test_id.clone()).collect();
    Document {
        schema_version: SCHEMA_VERSION,
        tool: ctx.tool.to_string(),
        tier: report.tier.as_str().to_string(),
        started_at: report.started_at.to_rfc3339(),
        duration_ms: (report.duration.as_secs_f64() * 1e6).round() / 1e3,
        interrupted: report.interrupted.clone(),
        passed: report.all_passed(),
        strict: report.strict,
        fail_on: Some(if report.fail_on_warn { "warn" } else { "fail" }.to_string()),
        decision: ctx.decision.clone(),
        first_failing_layer: report.first_failing_layer(None).map(layer_name),
        summary: Status::ALL
            .into_iter()
            .map(|s| (s.as_str().to_string(), report.count(s)))
            .collect(),
        skipped_by_reason: SkipReason::ALL
            .into_iter()
            .map(|r| (r.as_str().to_string(), report.count_skipped(r)))
            .collect(),
        unverified: owned(report.unverified()),
        warnings: owned(report.warnings()),
        waived: owned(report.waived()),
        node: ctx.node_properties.iter().cloned().collect(),
        versions: ctx.versions.clone(),
        scopes: report
            .scope_list()
            .into_iter()
            .map(|s| ScopeEntry {
                scope: s.label(),
                first_failing_layer: report.first_failing_layer(Some(s)).map(layer_name),
                properties: report.scope_info(s).properties.into_iter().collect(),
            })
            .collect(),
        results: finite(&report.results).into_owned(),
    }
}

fn layer_name(l: Layer) -> String {
    l.as_str().to_string()
}

/// Renders a run as pretty-printed JSON.
pub fn render(report: &RunReport, ctx: &JsonContext<'_>) -> Result<String, String> {
    serde_json::to_string_pretty(&document(report, ctx))
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
