//! The results the executor writes itself: blocked, timed out, crashed,
//! interrupted, and a check's verdict turned into a bounded result.

use crate::model::Scope;
use crate::output;
use crate::plan::Plan;
use crate::result::CheckResult;
use crate::verdict::{Finding, Status, Verdict};
use std::time::Duration;

/// Instance `i`'s result with its identity filled in and nothing observed.
pub(super) fn base_result<C>(plan: &Plan<'_, C>, i: usize) -> CheckResult {
    let inst = &plan.instances[i];
    let check = plan.check(inst);
    CheckResult::new(
        inst.test_id.clone(),
        check.id.to_string(),
        check.layer,
        inst.scope,
        Status::Skipped,
    )
}

/// A result the executor decides (a timeout, a crash of the pool).
pub(super) fn engine_result<C>(
    plan: &Plan<'_, C>,
    i: usize,
    status: Status,
    message: String,
    duration: Duration,
) -> CheckResult {
    CheckResult {
        status,
        message,
        duration,
        ..base_result(plan, i)
    }
}

/// What a check thread brought back: the verdict, its text cleaned and
/// bounded, or a crash for a panic.
pub(super) fn completed_result<C>(
    plan: &Plan<'_, C>,
    i: usize,
    outcome: Result<Verdict, String>,
    elapsed: Duration,
    output_limit: usize,
) -> CheckResult {
    match outcome {
        Ok(v) => CheckResult {
            status: v.status,
            message: output::clean(&v.message, output_limit),
            finding: v.finding.map(|f| Finding {
                code: output::clean(&f.code, 128),
                severity: f.severity,
                message: output::clean(&f.message, output_limit),
                next_step: output::clean(&f.next_step, output_limit),
                blames: f.blames,
            }),
            skip_reason: v.skip_reason,
            duration: elapsed,
            output: output::clean(&v.output, output_limit),
            metrics: v.metrics,
            facts: v.facts,
            series: v.series,
            ..base_result(plan, i)
        }
        .with_finite_metrics(),
        Err(panic) => engine_result(
            plan,
            i,
            Status::Crash,
            format!("check panicked: {panic}"),
            elapsed,
        ),
    }
}

/// Instance `i` blocked by `blocker`, naming the root of the chain.
pub(super) fn blocked_result<C>(
    plan: &Plan<'_, C>,
    i: usize,
    blocker: &CheckResult,
    results: &[Option<CheckResult>],
) -> CheckResult {
    // Name the root cause, not the chain of blocked checks in between.
    let root = match &blocker.blocked_by {
        Some(root_id) => results
            .iter()
            .flatten()
            .find(|r| &r.test_id == root_id)
            .unwrap_or(blocker),
        None => blocker,
    };
    let message = match root.status {
        Status::Timeout if root.scope != Scope::Node && root.scope == plan.instances[i].scope => {
            format!(
                "blocked: GPU unresponsive after {} (timed out)",
                root.test_id
            )
        }
        _ => format!("blocked by {}: {}", root.test_id, root.message),
    };
    CheckResult {
        status: Status::Blocked,
        message,
        blocked_by: Some(root.test_id.clone()),
        ..base_result(plan, i)
    }
}
