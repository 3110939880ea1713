//! The doctor's view of a run: the first broken layer, the likely cause, and
//! every finding bottom-up.

use crate::model::{Layer, Scope};
use crate::result::RunReport;
use serde::Serialize;

/// One diagnosed fault, located.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiagnosedFault {
    /// Stable code (`kfd-permission`).
    pub code: String,
    /// The layer of the check that found it.
    pub layer: Layer,
    /// Node or GPU: the result's, or the one its finding blames.
    pub scope: Scope,
    /// The test id of that check.
    pub check: String,
    /// What was observed.
    pub message: String,
    /// What to do next.
    pub next_step: String,
    /// Whether the check is advisory: its fault does not stop the stack.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub advisory: bool,
}

/// The doctor's summary of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnosis {
    /// Layout version of this document.
    pub schema_version: u32,
    /// The lowest layer with a fault anywhere on the node.
    pub first_failing_layer: Option<Layer>,
    /// The first finding of the first failing layer.
    pub likely_cause: Option<DiagnosedFault>,
    /// All findings, bottom-up (layer, then node before GPUs, then check order).
    pub findings: Vec<DiagnosedFault>,
}

/// Summarises a run into findings.
pub fn diagnose(report: &RunReport) -> Diagnosis {
    let mut findings: Vec<(usize, DiagnosedFault)> = report
        .results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status.is_fault())
        .map(|(order, r)| {
            let located = match &r.finding {
                Some(f) => DiagnosedFault {
                    code: f.code.clone(),
                    layer: r.layer,
                    scope: f.blames.unwrap_or(r.scope),
                    check: r.id.clone(),
                    message: f.message.clone(),
                    next_step: f.next_step.clone(),
                    advisory: r.advisory,
                },
                // The suites name every fault; a stack that does not still
                // gets the fault diagnosed, by its status.
                None => DiagnosedFault {
                    code: r.status.as_str().to_string(),
                    layer: r.layer,
                    scope: r.scope,
                    check: r.id.clone(),
                    message: r.message.clone(),
                    next_step: "no finding names this fault; read the check's output".to_string(),
                    advisory: r.advisory,
                },
            };
            (order, located)
        })
        .collect();
    // Faults that stop the stack first, advisories after them: a degraded
    // PCIe link is not the likely cause when /dev/kfd is missing.
    findings.sort_by_key(|(order, f)| (f.advisory, f.layer, f.scope, *order));
    let findings: Vec<DiagnosedFault> = findings.into_iter().map(|(_, f)| f).collect();
    Diagnosis {
        schema_version: 1,
        first_failing_layer: report.first_failing_layer(None),
        likely_cause: findings.first().cloned(),
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Scope;
    use crate::result::CheckResult;
    use crate::result::tests::report;
    use crate::verdict::Finding;
    use crate::verdict::Status;

    const LOW: Layer = Layer::new("low", 0);
    const HIGH: Layer = Layer::new("high", 1);

    fn result(
        id: &str,
        layer: Layer,
        status: Status,
        finding: Option<Finding>,
        advisory: bool,
    ) -> CheckResult {
        let mut r = CheckResult::new(id.into(), id.into(), layer, Scope::Node, status);
        r.message = format!("{id} said so");
        r.finding = finding;
        r.advisory = advisory;
        r
    }

    #[test]
    fn stopping_faults_come_before_advisories_and_lower_layers_first() {
        let d = diagnose(&report(vec![
            result(
                "low.advice",
                LOW,
                Status::Fail,
                Some(Finding::new("slow", "m", "n")),
                true,
            ),
            result(
                "high.stop",
                HIGH,
                Status::Fail,
                Some(Finding::new("broken", "m", "n")),
                false,
            ),
            result("low.pass", LOW, Status::Pass, None, false),
            result(
                "low.stop",
                LOW,
                Status::Fail,
                Some(Finding::new("gone", "m", "n")),
                false,
            ),
        ]));
        let codes: Vec<&str> = d.findings.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, ["gone", "broken", "slow"]);
        assert_eq!(
            d.likely_cause.map(|f| f.check),
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
            false,
        )]));
        let f = &d.findings[0];
        assert_eq!(f.code, "timeout");
        assert_eq!(f.message, "low.hang said so");
        assert!(f.next_step.contains("output"), "{}", f.next_step);
    }
}
