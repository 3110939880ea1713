//! Judgements the layers share: a measurement against its floor, a round
//! trip's data and rates, several sub-results as one verdict.

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::end;
use rocgate_harness::{Outcome, Verdict};
use rocgate_node::facts::gpus::Gpu;
use std::time::Duration;

/// A throughput against its floor in the thresholds: pass above it, fail
/// below it (naming the floor's source), skip when there is no floor. The
/// verdict's last metric is the measurement, so a caller that timed
/// repetitions adds their spread with `with_samples`.
pub(crate) fn judge_floor(
    ctx: &NodeContext,
    gpu: &Gpu,
    metric: &str,
    measured: f64,
    unit: &str,
) -> Verdict {
    let t = &ctx.thresholds;
    let product = gpu
        .product
        .as_deref()
        .or(gpu.gfx_target.as_deref())
        .unwrap_or("this GPU");
    // Partitions are judged against floors for their mode only.
    let who = match gpu.partition_mode() {
        Some(mode) if mode != "SPX" => format!("a {mode} partition of {product}"),
        _ => product.to_string(),
    };
    let Some(floor) = t.floor(gpu, metric) else {
        return Verdict::not_configured(format!(
            "measured {measured:.1} {unit}, but {} has no {metric} floor for {who} (see README: thresholds)",
            t.origin
        ))
        .with_throughput(metric, measured, unit);
    };
    let margin = floor.margin.unwrap_or(t.margin);
    let least = t.least(floor);
    let origin = match &floor.workload {
        Some(w) => format!("{}; its workload: {w}", floor.source),
        None => floor.source.clone(),
    };
    if t.meets(floor, measured) {
        return Verdict::pass(format!(
            "{measured:.1} {unit} >= floor {:.1} {unit} (-{:.0}%; {origin})",
            floor.value,
            margin * 100.0,
        ))
        .with_metric_against(metric, measured, unit, least);
    }
    Verdict::found(codes::PERF_BELOW_FLOOR.finding(format!(
        "{metric} is {measured:.1} {unit}, below the floor of {:.1} {unit} less {:.0}% for {who} ({origin})",
        floor.value,
        margin * 100.0,
    )))
    .with_metric_against(metric, measured, unit, least)
}

/// A host->device->host copy of `sent` that came back as `got`, the two
/// directions taking `(h2d, d2h)`: a pass with both bandwidths, or a
/// `corrupt` failure naming the first byte that differs.
pub(crate) fn judge_round_trip(
    corrupt: crate::findings::Code,
    what: &str,
    sent: &[u32],
    got: &[u32],
    (h2d, d2h): (Duration, Duration),
) -> Outcome {
    let bytes = std::mem::size_of_val(sent);
    if let Some(i) = sent.iter().zip(got).position(|(a, b)| a != b) {
        return end(Verdict::found(corrupt.finding(format!(
            "a {} MiB {what} came back different at byte {}",
            bytes >> 20,
            i * 4
        ))));
    }
    let gbs = |d: Duration| bytes as f64 / d.as_secs_f64().max(1e-9) / 1e9;
    Ok(Verdict::pass(format!(
        "{} MiB round trip intact: host->device {:.1} GB/s, device->host {:.1} GB/s",
        bytes >> 20,
        gbs(h2d),
        gbs(d2h)
    ))
    // One cold copy each way, made to check the data: its rate is mostly
    // set-up and first touch, so it is shown, never compared across runs
    // (hip.bandwidth measures bandwidth).
    .with_reading("h2d_bandwidth", gbs(h2d), "GB/s")
    .with_reading("d2h_bandwidth", gbs(d2h), "GB/s"))
}

/// Several sub-results as one verdict: the first failure; else a pass when
/// every part passed or did not apply; else a skip with the most telling
/// reason of the parts that did not look (unverifiable before
/// not-configured), listing what passed too. A part that could not look
/// never turns into a pass. `none` is the reason when there are no parts.
pub(crate) fn combine(verdicts: Vec<Verdict>, none: &str) -> Verdict {
    use rocgate_harness::{SkipReason, Status};
    if verdicts.is_empty() {
        return Verdict::not_configured(none);
    }
    let metrics: Vec<rocgate_harness::Metric> =
        verdicts.iter().flat_map(|v| v.metrics.clone()).collect();
    let message = verdicts
        .iter()
        .map(|v| v.message.clone())
        .collect::<Vec<_>>()
        .join("; ");
    let missing = [SkipReason::Unverifiable, SkipReason::NotConfigured]
        .into_iter()
        .find(|r| verdicts.iter().any(|v| v.skip_reason == Some(*r)));
    let passed = verdicts.iter().any(|v| v.status == Status::Pass);
    let mut out = match verdicts.iter().find(|v| v.status == Status::Fail) {
        Some(f) => f.clone(),
        None => match missing {
            Some(reason) => Verdict::skip(reason, message),
            None if passed => Verdict::pass(message),
            None => Verdict::not_applicable(message),
        },
    };
    out.metrics = metrics;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Code;
    use crate::layers::fixture::{self, code, node};
    use rocgate_harness::{Finding, SkipReason, Status};

    fn fail(code: Code, message: &str) -> Verdict {
        Verdict::found(code.finding(message))
    }

    /// The parts combined, with a message for none that no test expects.
    fn combined(parts: Vec<Verdict>) -> Verdict {
        combine(parts, "no parts")
    }

    fn metrics(v: &Verdict) -> Vec<(&str, f64)> {
        v.metrics
            .iter()
            .map(|m| (m.name.as_str(), m.value))
            .collect()
    }

    #[test]
    fn combine_passes_when_every_part_passed_or_did_not_apply() {
        let v = combined(vec![
            Verdict::pass("h2d ok").with_throughput("h2d", 50.0, "GB/s"),
            Verdict::not_applicable("no d2h on this GPU"),
            Verdict::pass("d2h ok").with_throughput("d2h", 40.0, "GB/s"),
        ]);
        assert_eq!(v.status, Status::Pass);
        assert_eq!(v.message, "h2d ok; no d2h on this GPU; d2h ok");
        assert_eq!(metrics(&v), [("h2d", 50.0), ("d2h", 40.0)]);
    }

    #[test]
    fn combine_reports_the_first_failure_with_every_part_s_metrics() {
        let v = combined(vec![
            Verdict::pass("fp64 ok").with_throughput("fp64", 70.0, "TFLOP/s"),
            Verdict::unverifiable("fp16 could not be measured"),
            fail(codes::PERF_BELOW_FLOOR, "fp32 is slow").with_throughput("fp32", 1.0, "TFLOP/s"),
            fail(codes::INTERNAL_ERROR, "bf16 broke"),
        ]);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.message, "fp32 is slow");
        assert_eq!(code(&v), Some(codes::PERF_BELOW_FLOOR.code));
        assert_eq!(metrics(&v), [("fp64", 70.0), ("fp32", 1.0)]);
    }

    #[test]
    fn combine_never_turns_a_part_that_could_not_look_into_a_pass() {
        let parts = |skips: Vec<Verdict>| {
            let mut all = vec![Verdict::pass("a passed").with_count("a", 1.0, "count")];
            all.extend(skips);
            combined(all)
        };
        let v = parts(vec![Verdict::not_configured("b has no floor")]);
        assert_eq!(v.status, Status::Skipped);
        assert_eq!(v.skip_reason, Some(SkipReason::NotConfigured));
        assert_eq!(v.message, "a passed; b has no floor");
        assert_eq!(metrics(&v), [("a", 1.0)]);
        // Unverifiable says more than not-configured, whatever the order.
        let v = parts(vec![
            Verdict::not_configured("b has no floor"),
            Verdict::unverifiable("c cannot be read"),
            Verdict::not_applicable("d does not apply"),
        ]);
        assert_eq!(v.skip_reason, Some(SkipReason::Unverifiable));
        assert_eq!(
            v.message,
            "a passed; b has no floor; c cannot be read; d does not apply"
        );
    }

    #[test]
    fn combine_of_parts_that_do_not_apply_does_not_apply() {
        let v = combined(vec![
            Verdict::not_applicable("no fp16"),
            Verdict::not_applicable("no bf16"),
        ]);
        assert_eq!(v.status, Status::Skipped);
        assert_eq!(v.skip_reason, Some(SkipReason::NotApplicable));
        assert_eq!(v.message, "no fp16; no bf16");
    }

    #[test]
    fn combine_of_nothing_is_not_configured_for_the_given_reason() {
        let v = combine(Vec::new(), "no GEMM data type has a floor");
        assert_eq!(v.status, Status::Skipped);
        assert_eq!(v.skip_reason, Some(SkipReason::NotConfigured));
        assert_eq!(v.message, "no GEMM data type has a floor");
        assert!(v.metrics.is_empty() && v.finding.is_none());
    }

    /// Floors for MI300X host<->device bandwidth: by gfx target with the
    /// file's margin, by product name with its own margin and workload, and
    /// one for CPX partitions.
    const FLOORS: &str = r#"
[[floor]]
gpu = "gfx942"
metric = "h2d_gbps"
value = 50.0
source = "fleet median"

[[floor]]
gpu = "AMD Instinct MI300X"
metric = "d2h_gbps"
value = 50.0
margin = 0.2
workload = "256 MiB pinned copies"
source = "vendor sheet"

[[floor]]
gpu = "gfx942"
metric = "h2d_gbps"
partition = "CPX"
value = 10.0
source = "CPX fleet median"
"#;

    /// A node of `scenario` judged against [`FLOORS`], and its first GPU.
    fn judged(scenario: &str) -> (fixture::Node, Gpu) {
        let mut n = node(scenario);
        n.ctx.thresholds = fixture::thresholds(0.05, FLOORS);
        let gpu = n.ctx.facts.gpus[0].clone();
        (n, gpu)
    }

    #[test]
    fn a_measurement_at_or_above_its_floor_less_the_margin_passes() {
        let (n, gpu) = judged("mi300x-8");
        let v = judge_floor(&n.ctx, &gpu, "h2d_gbps", 47.5, "GB/s");
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert_eq!(
            v.message,
            "47.5 GB/s >= floor 50.0 GB/s (-5%; fleet median)"
        );
        assert_eq!(metrics(&v), [("h2d_gbps", 47.5)]);
        // A floor's own margin and workload replace the file's.
        let v = judge_floor(&n.ctx, &gpu, "d2h_gbps", 40.0, "GB/s");
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert_eq!(
            v.message,
            "40.0 GB/s >= floor 50.0 GB/s (-20%; vendor sheet; its workload: 256 MiB pinned copies)"
        );
    }

    #[test]
    fn a_measurement_below_its_floor_fails_naming_the_floor_and_its_source() {
        let (n, gpu) = judged("mi300x-8");
        let v = judge_floor(&n.ctx, &gpu, "h2d_gbps", 47.4, "GB/s");
        assert_eq!(v.status, Status::Fail);
        let Finding { code, message, .. } = v.finding.clone().unwrap();
        assert_eq!(code, codes::PERF_BELOW_FLOOR.code);
        let product = gpu.product.as_deref().unwrap();
        let want = format!(
            "h2d_gbps is 47.4 GB/s, below the floor of 50.0 GB/s less 5% for {product} (fleet median)"
        );
        assert_eq!(message, want);
        assert_eq!(metrics(&v), [("h2d_gbps", 47.4)]);
    }

    #[test]
    fn a_metric_without_a_floor_is_not_configured_and_keeps_the_measurement() {
        let (n, gpu) = judged("mi300x-8");
        let v = judge_floor(&n.ctx, &gpu, "allreduce_busbw_gbps", 12.0, "GB/s");
        assert_eq!(v.status, Status::Skipped);
        assert_eq!(v.skip_reason, Some(SkipReason::NotConfigured));
        let product = gpu.product.as_deref().unwrap();
        let want = format!(
            "measured 12.0 GB/s, but test floors has no allreduce_busbw_gbps floor for {product} (see README: thresholds)"
        );
        assert_eq!(v.message, want);
        assert_eq!(metrics(&v), [("allreduce_busbw_gbps", 12.0)]);
    }

    #[test]
    fn a_partition_is_judged_only_against_floors_for_its_mode() {
        let (n, gpu) = judged("mi300x-8-cpx");
        assert_eq!(gpu.partition_mode(), Some("CPX"));
        // 12 GB/s would fail the whole GPU's floor of 50; the CPX floor is 10.
        let v = judge_floor(&n.ctx, &gpu, "h2d_gbps", 12.0, "GB/s");
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert!(v.message.contains("CPX fleet median"), "{}", v.message);
        let v = judge_floor(&n.ctx, &gpu, "h2d_gbps", 9.0, "GB/s");
        assert!(v.finding.unwrap().message.contains(&format!(
            "for a CPX partition of {}",
            gpu.product.as_deref().unwrap()
        )));
        // The whole GPU's d2h floor does not apply to a partition.
        let v = judge_floor(&n.ctx, &gpu, "d2h_gbps", 45.0, "GB/s");
        assert_eq!(v.skip_reason, Some(SkipReason::NotConfigured));
        let said = &v.message;
        assert!(said.contains("for a CPX partition of"), "{said}");
    }
}
