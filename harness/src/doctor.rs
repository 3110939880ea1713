//! The doctor's view of a run: the first broken layer, the likely cause, and
//! every finding bottom-up.

use crate::model::{Layer, Scope};
use crate::result::RunReport;
use crate::verdict::Status;
use serde::Serialize;

/// One diagnosed fault, located.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiagnosedFault {
    /// Stable code (`kfd-permission`).
    pub code: String,
    /// The layer of the check that found it.
    pub layer: Layer,
    /// Node or GPU.
    pub scope: Scope,
    /// The test id of that check.
    pub check: String,
    /// What was observed.
    pub message: String,
    /// What to do next.
    pub next_step: String,
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
                    scope: r.scope,
                    check: r.id.clone(),
                    message: f.message.clone(),
                    next_step: f.next_step.clone(),
                },
                None => DiagnosedFault {
                    code: if r.status == Status::Timeout { "check-timeout" } else { "check-crash" }.to_string(),
                    layer: r.layer,
                    scope: r.scope,
                    check: r.id.clone(),
                    message: r.message.clone(),
                    next_step: format!(
                        "the {} layer stopped responding; rerun `rocgate run --no-gate` on this scope and read the kernel log (dmesg) for GPU resets or hangs",
                        r.layer
                    ),
                },
            };
            (order, located)
        })
        .collect();
    // Faults that stop the stack first, advisories after them: a degraded
    // PCIe link is not the likely cause when /dev/kfd is missing.
    findings.sort_by_key(|(order, f)| (report.results[*order].advisory, f.layer, f.scope, *order));
    let findings: Vec<DiagnosedFault> = findings.into_iter().map(|(_, f)| f).collect();
    Diagnosis {
        schema_version: 1,
        first_failing_layer: report.first_failing_layer(None),
        likely_cause: findings.first().cloned(),
        findings,
    }
}
