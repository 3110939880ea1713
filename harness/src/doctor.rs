//! The doctor's view of a run: the first broken layer, the likely cause, and
//! every finding bottom-up.

use crate::model::{Layer, Scope};
use crate::policy::WaiverNote;
use crate::result::{CheckResult, RunReport};
use crate::verdict::Severity;
use serde::Serialize;

/// One diagnosed fault, located.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DiagnosedFault {
    /// Stable code (`kfd-permission`).
    pub code: String,
    /// The layer of the check that found it.
    pub layer: Layer,
    /// Node or GPU: the result's, or the one its finding blames.
    pub scope: Scope,
    /// The test id of that check (`gpu3.kfd.topology_node`), written as
    /// `check` in doctor's JSON, which readers already take.
    #[serde(rename = "check")]
    pub test_id: String,
    /// What was observed.
    pub message: String,
    /// What to do next.
    pub next_step: String,
    /// `fail` (the node is not fit for work) or `warn`.
    pub severity: Severity,
    /// The site's waiver of it, when one applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiver: Option<WaiverNote>,
}

impl DiagnosedFault {
    /// Whether it is only a warning.
    pub fn is_warning(&self) -> bool {
        self.severity == Severity::Warn
    }
}

/// The doctor's summary of a run.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Diagnosis {
    /// Layout version of this document.
    pub schema_version: u32,
    /// The lowest layer with a fault anywhere on the node.
    pub first_failing_layer: Option<Layer>,
    /// The first finding of the first failing layer.
    pub likely_cause: Option<DiagnosedFault>,
    /// All findings, faults before warnings, each bottom-up (layer, then
    /// node before GPUs, then check order); waived ones are not here.
    pub findings: Vec<DiagnosedFault>,
    /// The findings a site's waiver covers, in the same order.
    pub waived: Vec<DiagnosedFault>,
}

/// Summarises a run into findings.
pub fn diagnose(report: &RunReport) -> Diagnosis {
    let located = |waived: bool| {
        let mut found: Vec<(usize, DiagnosedFault)> = report
            .results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.status.has_finding() && r.waived() == waived)
            .map(|(order, r)| (order, locate(r)))
            .collect();
        // Faults first, warnings after them: a NUMA setting is not the
        // likely cause when /dev/kfd is missing.
        found.sort_by_key(|(order, f)| (f.is_warning(), f.layer, f.scope, *order));
        found.into_iter().map(|(_, f)| f).collect::<Vec<_>>()
    };
    let findings = located(false);
    Diagnosis {
        schema_version: 1,
        first_failing_layer: report.first_failing_layer(None),
        likely_cause: findings.first().cloned(),
        findings,
        waived: located(true),
    }
}

/// A result that found something, as the doctor lists it.
fn locate(r: &CheckResult) -> DiagnosedFault {
    match &r.finding {
        Some(f) => DiagnosedFault {
            code: f.code.clone(),
            layer: r.layer,
            scope: f.blames.unwrap_or(r.scope),
            test_id: r.test_id.clone(),
            message: f.message.clone(),
            next_step: f.next_step.clone(),
            severity: r.status_severity(),
            waiver: r.waiver.clone(),
        },
        // The suites name every fault; a stack that does not still gets
        // the fault diagnosed, by its status.
        None => DiagnosedFault {
            code: r.status.as_str().to_string(),
            layer: r.layer,
            scope: r.scope,
            test_id: r.test_id.clone(),
            message: r.message.clone(),
            next_step: "no finding names this fault; read the check's output".to_string(),
            severity: r.status_severity(),
            waiver: r.waiver.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Scope;
    use crate::result::CheckResult;
    use crate::test_support::run as report;
    use crate::verdict::{Finding, Status};

    const LOW: Layer = Layer::new("low", 0);
    const HIGH: Layer = Layer::new("high", 1);

    fn result(id: &str, layer: Layer, status: Status, code: Option<&str>) -> CheckResult {
        let mut r = crate::test_support::result(id, layer, Scope::Node, status);
        r.message = format!("{id} said so");
        r.finding = code.map(|c| Finding::new(c, r.status_severity(), "m", "n"));
        r
    }

    #[test]
    fn faults_come_before_warnings_and_lower_layers_first() {
        let mut waived = result("low.waived", LOW, Status::Fail, Some("accepted"));
        waived.waiver = Some(WaiverNote {
            reason: "known".into(),
            expires: None,
            expired: false,
            source: "f:1".into(),
        });
        let d = diagnose(&report(vec![
            result("low.advice", LOW, Status::Warn, Some("slow")),
            result("high.stop", HIGH, Status::Fail, Some("broken")),
            result("low.pass", LOW, Status::Pass, None),
            waived,
            result("low.stop", LOW, Status::Fail, Some("gone")),
        ]));
        let codes: Vec<&str> = d.findings.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, ["gone", "broken", "slow"]);
        assert_eq!(d.findings[2].severity, Severity::Warn);
        assert_eq!(d.waived.len(), 1);
        assert_eq!(d.waived[0].code, "accepted");
        assert_eq!(
            d.likely_cause.map(|f| f.test_id),
            Some("low.stop".to_string())
        );
        assert_eq!(d.first_failing_layer, Some(LOW));
    }

    #[test]
    fn a_fault_without_a_finding_is_diagnosed_by_its_status() {
        let d = diagnose(&report(vec![result(
            "low.hang",
            LOW,
            Status::Timeout,
            None,
        )]));
        let f = &d.findings[0];
        assert_eq!(f.code, "timeout");
        assert_eq!(f.message, "low.hang said so");
        assert!(f.next_step.contains("output"), "{}", f.next_step);
    }
}
