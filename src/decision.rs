//! What a run means for whoever acts on it: the exit code a CI job sees,
//! the verdict a scheduler or monitor reads, and whether the node is to be
//! drained. Every front end (`run`, `doctor`, `health`, the JSON report
//! the fleet report reads) takes it from here, so they never disagree.
//!
//! The decision table, first row that applies wins (README, "What a
//! verdict means"):
//!
//! | the run found | run, doctor | health | drain |
//! |---|---|---|---|
//! | rocgate cannot see the node (`environment` findings: no `/sys`) | 2 | unknown | no |
//! | a failure, timeout or crash no waiver covers (said beside any fault of rocgate's own) | 1 | unhealthy | yes |
//! | a fault of rocgate's own (`internal-error`) | 2 | unknown | no |
//! | interrupted or out of time before every layer was checked | 130 | unknown | no |
//! | a warning, under `--fail-on warn` | 1 | unhealthy | yes |
//! | a check that could not look, under `--strict` | 1 | unhealthy | yes |
//! | warnings, waived findings, checks that could not look | 0 | healthy | no |
//! | everything passed | 0 | healthy | no |

use crate::exit::Exit;
use rocgate_harness::doctor::{self, DiagnosedFault};
use rocgate_harness::{RunReport, Scope, Severity};
use rocgate_suites::findings::{self, Category};
use serde::Serialize;

/// The code of a rocgate defect: a fault of rocgate's own, not the node's.
pub const INTERNAL_ERROR: &str = "internal-error";

/// What a scheduler may conclude.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Fit for work as far as rocgate looked.
    Healthy,
    /// Not fit for work: drain it.
    Unhealthy,
    /// rocgate could not decide: never drain on this.
    Unknown,
}

/// A run's decision.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Decision {
    /// Healthy, unhealthy or unknown.
    pub health: Health,
    /// The exit code of `run` and `doctor` (0, 1, 2 or 130: [`Exit`]).
    pub exit_code: u8,
    /// Whether a scheduler should take the node out of service.
    pub drain: bool,
    /// Why, in one line (the cause's code, where and what, or why
    /// unknown); empty when healthy.
    pub reason: String,
    /// The finding that decided an unhealthy node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<DiagnosedFault>,
    /// Every GPU (by PCI address, else its label) where the cause's code was
    /// found: a fault on all 8 GPUs says so rather than naming one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<String>,
    /// Whether `places` is every GPU the run checked (and more than one).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub every_gpu: bool,
    /// Warnings no waiver covers.
    pub warnings: usize,
    /// Results a waiver covers.
    pub waived: usize,
    /// Checks that could not look.
    pub unverified: usize,
}

impl Decision {
    /// The row of the exit-code table that [`Decision::exit_code`] is.
    pub fn exit(&self) -> Exit {
        match self.health {
            Health::Healthy => Exit::Pass,
            Health::Unhealthy => Exit::Fail,
            Health::Unknown if self.exit_code == Exit::Interrupted.code() => Exit::Interrupted,
            Health::Unknown => Exit::NoVerdict,
        }
    }
}

/// How a scope is named where a scheduler reads it: a GPU by its PCI
/// address (`gpuN` numbering may shift when a GPU falls off the bus).
pub fn place(report: &RunReport, scope: Scope) -> String {
    match scope {
        Scope::Node => "node".to_string(),
        Scope::Gpu(_) => report
            .scope_info(scope)
            .get(rocgate_suites::stack::IDENTITY.address)
            .map_or_else(|| scope.label(), str::to_string),
    }
}

/// Whether `code` says rocgate could not see the node rather than that
/// the node is broken.
fn is_environment(code: &str) -> bool {
    findings::lookup(code).is_some_and(|c| c.category == Category::Environment)
}

/// Decides `report`.
pub fn decide(report: &RunReport) -> Decision {
    let diagnosis = doctor::diagnose(report);
    let mut d = Decision {
        health: Health::Healthy,
        exit_code: Exit::Pass.code(),
        drain: false,
        reason: String::new(),
        cause: None,
        places: Vec::new(),
        every_gpu: false,
        warnings: report.warnings().len(),
        waived: report.waived().len(),
        unverified: report.unverified().len(),
    };
    let unknown = |mut d: Decision, exit: Exit, why: String| {
        d.health = Health::Unknown;
        d.exit_code = exit.code();
        d.reason = why;
        d
    };
    let faults: Vec<&DiagnosedFault> = diagnosis
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Fail)
        .collect();
    if let Some(blind) = faults.iter().find(|f| is_environment(&f.code)) {
        let why = format!(
            "rocgate cannot see this node ({}): {}",
            blind.code, blind.message
        );
        return unknown(d, Exit::NoVerdict, why);
    }
    let own = faults.iter().find(|f| f.code == INTERNAL_ERROR).copied();
    // A fault of the node decides even a run cut short, or one where
    // rocgate also failed: what was found is found, and rocgate's own
    // trouble is said beside it rather than hiding it.
    let cause = faults
        .iter()
        .find(|f| f.code != INTERNAL_ERROR)
        .copied()
        .cloned()
        .or_else(|| {
            report
                .fail_on_warn
                .then(|| diagnosis.findings.iter().find(|f| f.is_warning()).cloned())?
        });
    if let Some(cause) = cause {
        let mut d = unhealthy(d, report, &diagnosis.findings, cause);
        if let Some(own) = own {
            d.reason
                .push_str(&format!("; rocgate also failed ({})", own.test_id));
        }
        return d;
    }
    if let Some(own) = own {
        let why = format!("rocgate failed ({}): {}", own.test_id, own.message);
        return unknown(d, Exit::NoVerdict, why);
    }
    if let Some(why) = &report.interrupted {
        let why = match why.as_str() {
            "time budget" => "the time budget ran out before every layer was checked".to_string(),
            signal => format!("interrupted by {signal} before every layer was checked"),
        };
        return unknown(d, Exit::Interrupted, why);
    }
    if let (true, Some(r)) = (report.strict, report.unverified().first()) {
        let cause = DiagnosedFault {
            code: "unverified".into(),
            layer: r.layer,
            scope: r.scope,
            test_id: r.test_id.clone(),
            message: format!("{}: {}", r.test_id, r.message),
            next_step: String::new(),
            severity: Severity::Fail,
            waiver: None,
        };
        return unhealthy(d, report, &[], cause);
    }
    d.cause = diagnosis.findings.first().cloned();
    if let Some(c) = d.cause.as_ref().filter(|c| c.scope != Scope::Node) {
        d.places = vec![place(report, c.scope)];
    }
    d
}

/// `d` made unhealthy by `cause`, naming every GPU where its code was found.
fn unhealthy(
    mut d: Decision,
    report: &RunReport,
    findings: &[DiagnosedFault],
    cause: DiagnosedFault,
) -> Decision {
    // A node-wide finding that GPUs' own results share (a wedged GPU) is
    // told by those GPUs, so the line and a drain reason name them.
    let mut gpus: Vec<Scope> = findings
        .iter()
        .filter(|f| f.code == cause.code && f.layer == cause.layer && f.scope != Scope::Node)
        .map(|f| f.scope)
        .collect();
    gpus.sort();
    gpus.dedup();
    if cause.scope != Scope::Node && !gpus.contains(&cause.scope) {
        gpus.insert(0, cause.scope);
    }
    d.places = gpus.iter().map(|&s| place(report, s)).collect();
    let checked = report
        .scope_list()
        .iter()
        .filter(|s| s.gpu().is_some())
        .count();
    d.every_gpu = d.places.len() > 1 && d.places.len() == checked;
    // A GPU's own result says best what happened to it (a wedged GPU's
    // "hangs on its own" rather than the node-wide init that hung).
    let cause = match findings.iter().find(|f| {
        f.code == cause.code
            && f.layer == cause.layer
            && cause.test_id.starts_with("node.")
            && !f.test_id.starts_with("node.")
    }) {
        Some(own) => own.clone(),
        None => cause,
    };
    d.health = Health::Unhealthy;
    d.exit_code = Exit::Fail.code();
    d.drain = true;
    let first_line = cause.message.lines().next().unwrap_or("").to_string();
    d.reason = match d.places.as_slice() {
        [] => format!("{} {first_line}", cause.code),
        [one] => format!(
            "{} {one} {}",
            cause.code,
            without_gpu_label(&first_line, cause.scope)
        ),
        many => {
            let all = if d.every_gpu { "all " } else { "" };
            format!(
                "{} {all}{} GPUs: {}",
                cause.code,
                many.len(),
                without_gpu_label(&first_line, cause.scope)
            )
        }
    };
    d.cause = Some(cause);
    d
}

/// The verdict in the words every view of a run uses: `PASSED`, `PASSED
/// with 2 warnings, 1 waived`, `FAILED`, `FAILED (--strict: 3 could not
/// verify)`, `FAILED (--fail-on warn)`, `NO VERDICT` (rocgate could not
/// see the node) or `INTERRUPTED`.
pub fn headline(report: &RunReport, d: &Decision) -> String {
    if report.interrupted.is_some() && d.health != Health::Unhealthy {
        return "INTERRUPTED".into();
    }
    match d.health {
        Health::Unknown => "NO VERDICT".into(),
        Health::Unhealthy => match &d.cause {
            Some(c) if c.code == "unverified" => {
                format!("FAILED (--strict: {} could not verify)", d.unverified)
            }
            Some(c) if c.severity == Severity::Warn => "FAILED (--fail-on warn)".into(),
            _ => "FAILED".into(),
        },
        Health::Healthy => {
            let mut extra = Vec::new();
            if d.warnings > 0 {
                let s = if d.warnings == 1 { "" } else { "s" };
                extra.push(format!("{} warning{s}", d.warnings));
            }
            if d.waived > 0 {
                extra.push(format!("{} waived", d.waived));
            }
            if extra.is_empty() {
                "PASSED".into()
            } else {
                format!("PASSED with {}", extra.join(", "))
            }
        }
    }
}

/// `message` without the GPU's own label at its start (`gpu3 (0000:65:00.0,
/// AMD Instinct MI300X): `), which the reason already gives as the address.
pub fn without_gpu_label(message: &str, scope: Scope) -> &str {
    let Scope::Gpu(i) = scope else {
        return message;
    };
    message
        .strip_prefix(&format!("gpu{i} ("))
        .and_then(|rest| rest.split_once(')'))
        .map_or(message, |(_, rest)| {
            rest.trim_start_matches(':').trim_start()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_harness::{CheckResult, Finding, Layer, ScopeInfo, Status, Tier, WaiverNote};
    use std::time::Duration;

    const L: Layer = rocgate_suites::stack::HSA;

    fn result(scope: Scope, status: Status, code: Option<&str>) -> CheckResult {
        let id = format!("{}.hsa.x", scope.label());
        let mut r = CheckResult::new(id, "hsa::x".into(), L, scope, status);
        r.message = "it said so".into();
        r.finding = code.map(|c| Finding::new(c, r.status_severity(), "it said so", "n"));
        r
    }

    fn report(results: Vec<CheckResult>, gpus: u32) -> RunReport {
        RunReport {
            tier: Tier::Quick,
            started_at: chrono::Local::now(),
            duration: Duration::ZERO,
            results,
            scopes: (0..gpus)
                .map(|g| {
                    let mut info = ScopeInfo::default();
                    info.push(
                        rocgate_suites::stack::IDENTITY.address,
                        format!("0000:{g:02x}:00.0"),
                    );
                    (Scope::Gpu(g), info)
                })
                .collect(),
            interrupted: None,
            strict: false,
            fail_on_warn: false,
        }
    }

    #[test]
    fn every_row_of_the_table() {
        // Everything passed.
        let ok = decide(&report(vec![result(Scope::Node, Status::Pass, None)], 0));
        assert_eq!(
            (ok.health, ok.exit_code, ok.drain),
            (Health::Healthy, 0, false)
        );
        // Warnings only: healthy, unless the run fails on warnings.
        let mut warn = report(vec![result(Scope::Gpu(1), Status::Warn, Some("slow"))], 2);
        let d = decide(&warn);
        assert_eq!((d.health, d.exit_code, d.warnings), (Health::Healthy, 0, 1));
        warn.fail_on_warn = true;
        let d = decide(&warn);
        assert_eq!(
            (d.health, d.exit_code, d.drain),
            (Health::Unhealthy, 1, true)
        );
        assert_eq!(d.reason, "slow 0000:01:00.0 it said so");
        // A waived failure is healthy and counted.
        let mut waived = report(vec![result(Scope::Gpu(0), Status::Fail, Some("x"))], 1);
        waived.results[0].waiver = Some(WaiverNote {
            reason: "r".into(),
            expires: None,
            expired: false,
            source: "s".into(),
        });
        let d = decide(&waived);
        assert_eq!((d.health, d.exit_code, d.waived), (Health::Healthy, 0, 1));
        // rocgate's own error and a blind environment decide nothing.
        let own = decide(&report(
            vec![result(Scope::Node, Status::Fail, Some(INTERNAL_ERROR))],
            0,
        ));
        assert_eq!(
            (own.health, own.exit_code, own.drain),
            (Health::Unknown, 2, false)
        );
        // ... but never hides a fault of the node: both are said.
        let both = decide(&report(
            vec![
                result(Scope::Node, Status::Fail, Some(INTERNAL_ERROR)),
                result(Scope::Gpu(3), Status::Fail, Some("broken")),
            ],
            8,
        ));
        assert_eq!(
            (both.health, both.exit_code, both.drain),
            (Health::Unhealthy, 1, true)
        );
        assert!(
            both.reason.starts_with("broken 0000:03:00.0")
                && both.reason.ends_with("; rocgate also failed (node.hsa.x)"),
            "{}",
            both.reason
        );
        let blind = decide(&report(
            vec![result(
                Scope::Node,
                Status::Fail,
                Some("pci-sysfs-unreadable"),
            )],
            0,
        ));
        assert_eq!((blind.health, blind.exit_code), (Health::Unknown, 2));
        assert!(
            blind.reason.starts_with("rocgate cannot see this node"),
            "{}",
            blind.reason
        );
        // Interrupted without a fault: unknown; with one: the fault.
        let mut cut = report(vec![result(Scope::Node, Status::Pass, None)], 0);
        cut.interrupted = Some("time budget".into());
        assert_eq!(decide(&cut).exit_code, Exit::Interrupted.code());
        assert_eq!(decide(&cut).exit(), Exit::Interrupted);
        assert_eq!(decide(&cut).health, Health::Unknown);
        cut.results
            .push(result(Scope::Node, Status::Fail, Some("broken")));
        assert_eq!(decide(&cut).health, Health::Unhealthy);
        // Unverified under --strict.
        let mut strict = report(vec![result(Scope::Node, Status::Skipped, None)], 0);
        strict.results[0].skip_reason = Some(rocgate_harness::SkipReason::Unverifiable);
        assert_eq!(decide(&strict).health, Health::Healthy);
        strict.strict = true;
        assert_eq!(decide(&strict).health, Health::Unhealthy);
    }

    #[test]
    fn a_fault_on_every_gpu_names_them_all() {
        let all = decide(&report(
            (0..8)
                .map(|g| result(Scope::Gpu(g), Status::Timeout, Some("gpu-wedged")))
                .collect(),
            8,
        ));
        assert_eq!(all.places.len(), 8);
        assert_eq!(all.reason, "gpu-wedged all 8 GPUs: it said so");
        let some = decide(&report(
            (0..3)
                .map(|g| result(Scope::Gpu(g), Status::Timeout, Some("gpu-wedged")))
                .collect(),
            8,
        ));
        assert_eq!(some.reason, "gpu-wedged 3 GPUs: it said so");
        let one = decide(&report(
            vec![result(Scope::Gpu(5), Status::Fail, Some("broken"))],
            8,
        ));
        assert_eq!(one.places, ["0000:05:00.0"]);
    }
}
