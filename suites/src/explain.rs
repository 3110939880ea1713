//! What a run's results mean on a ROCm node beyond what each check said: a
//! vendor library that ended its worker left only its words behind, and a
//! GPU whose checks hang in a worker that sees only it is the one that hangs
//! the node-wide checks. The engine reports what happened; this names why.

use crate::NodeContext;
use crate::findings::codes;
use rocgate_harness::{Check, CheckResult, Status};
use rocgate_node::facts::NodeFacts;

/// Adds findings to the faults in `results` that have none: known vendor
/// messages in their output, the wedged GPUs behind node-wide hangs of
/// `registry`'s isolated checks, firmware that differs from the other GPUs
/// of a model ([`crate::firmware_peers`]), and else the catalogue's `check-timeout` or
/// `check-crash`, so every fault in a report carries a code and a next step;
/// then fills every next step's placeholders ([`crate::next_steps`]).
pub fn explain_results(
    results: &mut [CheckResult],
    registry: &[Check<NodeContext>],
    facts: &NodeFacts,
) {
    let gpus = &facts.gpus;
    for r in results
        .iter_mut()
        .filter(|r| r.status.is_fault() && r.finding.is_none())
    {
        r.finding = crate::vendor_messages::explain(&r.output);
    }
    let isolated: Vec<&str> = registry
        .iter()
        .filter(|c| c.isolated)
        .map(|c| c.id)
        .collect();
    crate::hangs::name_wedged_gpus(results, &isolated, gpus);
    crate::firmware_peers::compare_with_peers(results, gpus);
    crate::burnin_peers::compare_with_peers(results);
    for r in results.iter_mut().filter(|r| r.finding.is_none()) {
        let code = match r.status {
            Status::Timeout => codes::CHECK_TIMEOUT,
            Status::Crash => codes::CHECK_CRASH,
            // A check's failure always carries its finding.
            Status::Fail => codes::INTERNAL_ERROR,
            _ => continue,
        };
        r.finding = Some(code.finding(r.message.clone()));
    }
    crate::next_steps::fill_results(results, facts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_harness::Scope;

    fn result(status: Status, output: &str) -> CheckResult {
        let id = "gpu0.hip.memcpy".to_string();
        let mut r = CheckResult::new(
            id,
            "hip::memcpy".into(),
            crate::stack::HIP,
            Scope::Gpu(0),
            status,
        );
        r.message = "the check's own words".into();
        r.output = output.into();
        r
    }

    fn code(r: &CheckResult) -> Option<&str> {
        r.finding.as_ref().map(|f| f.code.as_str())
    }

    #[test]
    fn every_fault_leaves_with_a_code_and_nothing_else_gains_one() {
        let mut results = vec![
            result(Status::Timeout, ""),
            result(Status::Crash, "Segmentation fault"),
            result(
                Status::Crash,
                "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory",
            ),
            result(Status::Pass, ""),
            result(Status::Blocked, ""),
        ];
        let dir = tempfile::tempdir().unwrap();
        let facts = NodeFacts::discover(rocgate_node::Sysroot::at(dir.path()));
        explain_results(&mut results, &[], &facts);
        let codes: Vec<Option<&str>> = results.iter().map(code).collect();
        assert_eq!(codes[..2], [Some("check-timeout"), Some("check-crash")]);
        assert_eq!(
            codes[2],
            Some("rocblas-no-kernels-for-arch"),
            "the library's words name the cause"
        );
        assert_eq!(codes[3..], [None, None]);
        assert_eq!(
            results[0].finding.as_ref().map(|f| f.message.as_str()),
            Some("the check's own words")
        );
    }
}
