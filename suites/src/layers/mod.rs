//! The check suites, one module per layer. A new check is a function and an
//! entry in its layer's `checks()`.

pub mod amdgpu;
pub mod compat;
mod device_access;
pub mod firmware;
pub mod hip;
mod hip_device;
pub mod hsa;
pub mod kfd;
pub mod miopen;
pub mod pci;
pub mod rccl;
pub mod rocblas;

use crate::context::NodeContext;
use crate::facts::gpus::Gpu;
use crate::facts::pci::PciDevice;
use crate::findings::codes;
use rocgate_harness::{Check, Layer, Outcome, Scope, ScopeKind, Tier, Verdict};
use std::time::Duration;

/// What a check runs: the node's context and the scope in, the verdict out,
/// ended early with `?` by whichever step finds the answer first.
type Run = fn(&NodeContext, Scope) -> Outcome;

/// Every check rocgate knows, bottom-up; within a layer, checks that find
/// causes come before checks that find their symptoms.
pub fn registry() -> Vec<Check<NodeContext>> {
    let mut all = Vec::new();
    all.extend(pci::checks());
    all.extend(firmware::checks());
    all.extend(amdgpu::checks());
    all.extend(kfd::checks());
    all.extend(compat::checks());
    all.extend(hsa::checks());
    all.extend(hip::checks());
    all.extend(rocblas::checks());
    all.extend(miopen::checks());
    all.extend(rccl::checks());
    all
}

/// Time limit for checks that read files: generous, since a wedged GPU can
/// stall a sysfs read in the kernel.
const FILE_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// A quick-tier, gating check with no explicit dependencies.
const fn check(
    id: &'static str,
    layer: Layer,
    scope: ScopeKind,
    summary: &'static str,
    run: Run,
) -> Check<NodeContext> {
    Check {
        id,
        layer,
        scope,
        tier: Tier::Quick,
        deps: &[],
        gates: true,
        timeout: FILE_CHECK_TIMEOUT,
        isolated: false,
        summary,
        run,
    }
}

/// A gating check that calls vendor libraries, so it runs in the scope's
/// worker process under its own timeout. Every runtime layer declares its
/// checks with this, naming its layer.
const fn isolated(
    id: &'static str,
    layer: Layer,
    scope: ScopeKind,
    deps: &'static [&'static str],
    timeout_s: u64,
    summary: &'static str,
    run: Run,
) -> Check<NodeContext> {
    Check {
        deps,
        isolated: true,
        timeout: Duration::from_secs(timeout_s),
        ..check(id, layer, scope, summary, run)
    }
}

/// The GPU's PCI function. Without one the GPU's absence from the bus is
/// pci.identity's finding; checks that read the function do not apply.
fn pci_function(gpu: &Gpu) -> Result<&PciDevice, Verdict> {
    gpu.pci
        .as_ref()
        .ok_or_else(|| Verdict::not_applicable("not on the PCI bus (see pci.identity)"))
}

/// A measurement against its floor in the thresholds: pass above it, fail
/// below it (naming the floor's source), skip when there is no floor.
fn judge_floor(ctx: &NodeContext, gpu: &Gpu, metric: &str, measured: f64, unit: &str) -> Verdict {
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
        .with_metric(metric, measured, unit);
    };
    let margin = floor.margin.unwrap_or(t.margin);
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
        .with_metric(metric, measured, unit);
    }
    Verdict::fail(codes::PERF_BELOW_FLOOR.finding(format!(
        "{metric} is {measured:.1} {unit}, below the floor of {:.1} {unit} less {:.0}% for {who} ({origin})",
        floor.value,
        margin * 100.0,
    )))
    .with_metric(metric, measured, unit)
}

/// Several sub-results as one verdict: the first failure; else a pass when
/// every part passed or did not apply; else a skip with the most telling
/// reason of the parts that did not look (unverifiable before
/// not-configured), listing what passed too. A part that could not look
/// never turns into a pass. `none` is the reason when there are no parts.
fn combine(verdicts: Vec<Verdict>, none: &str) -> Verdict {
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

/// Joins at most `max` items, saying how many more there were.
fn list<T: AsRef<str>>(items: &[T], max: usize) -> String {
    let shown: Vec<&str> = items.iter().take(max).map(AsRef::as_ref).collect();
    if items.len() > max {
        format!("{} and {} more", shown.join(", "), items.len() - max)
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_plans_without_cycles_and_ids_match_layers() {
        let reg = registry();
        let plan = rocgate_harness::plan(&reg, &[0, 1], Tier::Extended).unwrap();
        assert!(!plan.instances.is_empty());
        for c in &reg {
            assert_eq!(c.id.split("::").next(), Some(c.layer.as_str()), "{}", c.id);
            assert!(!c.summary.is_empty(), "{}", c.id);
        }
    }
}
