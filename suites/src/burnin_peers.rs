//! The burn-in's results judged across the node's GPUs: every GPU runs the
//! same integer work from the same seeds (`hip::burnin`), and integer
//! arithmetic has one right answer on any GPU, so every GPU's checksum
//! must be the same. Each GPU's check compares its own iterations; this
//! pass, after the run, compares what they agreed on (their
//! `burnin_checksum` facts): a GPU that is wrong in every iteration alike
//! looks consistent on its own and differs only here.

use crate::findings::codes;
use rocgate_harness::{CheckResult, Status};
use std::collections::BTreeMap;

/// The check whose facts are compared.
const BURNIN: &str = "hip::burnin";
/// Each workload's common checksum, and what the workload is called.
const FACTS: &[(&str, &str)] = &[
    ("burnin_checksum", "integer work"),
    ("burnin_triad_checksum", "HBM triad"),
    ("burnin_gemm_checksum", "GEMM (inputs whose sums are exact)"),
];

/// Turns the `hip::burnin` results of GPUs whose checksum differs from the
/// one most of the node's GPUs computed into `gpu-result-mismatch`
/// failures; when no checksum has a majority, every GPU that differs from
/// another is named.
pub fn compare_with_peers(results: &mut [CheckResult]) {
    for &(fact, work) in FACTS {
        compare_fact(results, fact, work);
    }
}

/// [`compare_with_peers`] of one workload's fact.
fn compare_fact(results: &mut [CheckResult], fact: &str, work: &str) {
    let judged =
        |r: &CheckResult| r.check == BURNIN && !r.status.is_fault() && r.facts.contains_key(fact);
    let mut by_sum: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in results.iter().filter(|r| judged(r)) {
        by_sum
            .entry(r.facts[fact].clone())
            .or_default()
            .push(r.scope.label());
    }
    if by_sum.len() < 2 {
        return;
    }
    let most = by_sum.values().map(Vec::len).max().unwrap_or(0);
    let leaders: Vec<&String> = by_sum
        .iter()
        .filter(|(_, g)| g.len() == most)
        .map(|(s, _)| s)
        .collect();
    let common = (leaders.len() == 1).then(|| leaders[0].clone());
    for r in results.iter_mut().filter(|r| judged(r)) {
        let mine = r.facts[fact].clone();
        if Some(&mine) == common.as_ref() {
            continue;
        }
        let others = match &common {
            Some(c) => format!(
                "where {} of the node's other GPUs ({}) computed {c}",
                by_sum[c].len(),
                by_sum[c].join(", ")
            ),
            None => format!(
                "and no checksum has a majority: {}",
                by_sum
                    .iter()
                    .map(|(s, g)| format!("{s} on {}", g.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        let message = format!(
            "{} computed checksum {mine} for the burn-in's {work} (its iterations' common result), {others}: the same {work} must give the same bits on every GPU",
            r.scope.label()
        );
        r.status = Status::Fail;
        r.skip_reason = None;
        r.message = message.clone();
        r.finding = Some(codes::GPU_RESULT_MISMATCH.finding(message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_harness::Scope;

    fn burnin(gpu: u32, sum: &str) -> CheckResult {
        let mut r = CheckResult::new(
            format!("gpu{gpu}.hip.burnin"),
            BURNIN.into(),
            crate::stack::HIP,
            Scope::Gpu(gpu),
            Status::Pass,
        );
        r.facts.insert(FACTS[0].0.into(), sum.into());
        r
    }

    #[test]
    fn the_gpu_that_differs_from_the_majority_fails_by_name() {
        let mut results: Vec<CheckResult> = (0..4)
            .map(|g| burnin(g, if g == 2 { "0xbad" } else { "0x600d" }))
            .collect();
        compare_with_peers(&mut results);
        let failed: Vec<_> = results
            .iter()
            .filter(|r| r.status == Status::Fail)
            .collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].scope, Scope::Gpu(2));
        let f = failed[0].finding.as_ref().unwrap();
        assert_eq!(f.code, "gpu-result-mismatch");
        assert!(f.message.contains("0xbad") && f.message.contains("gpu0, gpu1, gpu3"));
    }

    #[test]
    fn two_gpus_that_disagree_are_both_named_and_agreement_is_left_alone() {
        let mut results = vec![burnin(0, "0xa"), burnin(1, "0xb")];
        compare_with_peers(&mut results);
        assert!(results.iter().all(|r| r.status == Status::Fail));
        assert!(results[0].message.contains("no checksum has a majority"));
        let mut same = vec![burnin(0, "0xa"), burnin(1, "0xa")];
        compare_with_peers(&mut same);
        assert!(same.iter().all(|r| r.status == Status::Pass));
    }

    #[test]
    fn the_gemm_s_checksum_is_compared_on_its_own() {
        let mut results: Vec<CheckResult> = (0..3)
            .map(|g| {
                let mut r = burnin(g, "0x600d");
                let gemm = if g == 1 { "0xbad" } else { "0xfeed" };
                r.facts.insert("burnin_gemm_checksum".into(), gemm.into());
                r
            })
            .collect();
        compare_with_peers(&mut results);
        assert_eq!(results[1].status, Status::Fail);
        assert!(
            results[1].message.contains("the burn-in's GEMM"),
            "{}",
            results[1].message
        );
        assert_eq!(results[0].status, Status::Pass);
    }
}
