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
mod links;
pub mod memtest;
pub mod miopen;
pub mod p2p;
pub mod pci;
pub mod ras;
pub mod rccl;
pub mod rocblas;
pub mod system;

use crate::context::NodeContext;
use crate::findings::{Code, codes};
use rocgate_harness::{Check, Layer, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_node::facts::pci::PciDevice;
use std::time::Duration;

/// What a check runs: the node's context and the scope in, the verdict out,
/// ended early with `?` by whichever step finds the answer first.
type Run = fn(&NodeContext, Scope) -> Outcome;

/// Every check rocgate knows, bottom-up; within a layer, checks that find
/// causes come before checks that find their symptoms.
pub fn registry() -> Vec<Check<NodeContext>> {
    let layers: [fn() -> Vec<Check<NodeContext>>; 14] = [
        system::checks,
        pci::checks,
        firmware::checks,
        amdgpu::checks,
        ras::checks,
        kfd::checks,
        compat::checks,
        hsa::checks,
        hip::checks,
        p2p::checks,
        memtest::checks,
        rocblas::checks,
        miopen::checks,
        rccl::checks,
    ];
    layers.into_iter().flat_map(|checks| checks()).collect()
}

/// The dependency of every check that reads what the loaded amdgpu exposes
/// (firmware versions, DRM state): without the module the cause is the
/// driver, not what it would have shown.
const NEEDS_LIVE_AMDGPU: &[&str] = &["amdgpu::module_live"];

/// Time limit for checks that read files: generous, since a wedged GPU can
/// stall a sysfs read in the kernel.
const FILE_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// A gating check that reads files only, with no explicit dependencies:
/// it belongs to the passive tier (and so to every tier), which must be
/// safe on a node whose GPUs run jobs. A check that opens a device or
/// changes anything says `tier: Tier::Quick`.
const fn check(
    id: &'static str,
    layer: Layer,
    scope: ScopeKind,
    summary: &'static str,
    run: Run,
) -> Check<NodeContext> {
    Check {
        tier: Tier::Passive,
        ..Check::new(id, layer, scope, FILE_CHECK_TIMEOUT, summary, run)
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
        tier: Tier::Quick,
        timeout: Duration::from_secs(timeout_s),
        ..check(id, layer, scope, summary, run)
    }
}

/// How a vendor library is named in reports and reinstalled.
struct LibraryName {
    /// As people write it (`rocBLAS`).
    name: &'static str,
    /// The prefix of the facts it returns (`rocblas_library`, `rocblas_version`).
    facts: &'static str,
    /// The package that installs it.
    package: &'static str,
    /// The code when it is missing or damaged.
    missing: Code,
}

impl LibraryName {
    /// A library named `name` in reports, `facts` in facts, installed by `package`.
    const fn new(
        name: &'static str,
        facts: &'static str,
        package: &'static str,
        missing: Code,
    ) -> Self {
        Self {
            name,
            facts,
            package,
            missing,
        }
    }

    /// The library's runtime check: it loaded and reports its version (a
    /// library that cannot say its version is damaged or not that library).
    fn loaded(&self, lib: &dyn Versioned) -> Outcome {
        let path = lib.path().display().to_string();
        let version = lib.version();
        let Self {
            name,
            facts,
            package,
            missing,
        } = self;
        let version = version.map_err(|e| {
            Verdict::found(missing.finding_next(
                format!("{path} loaded but does not report its version: {e}"),
                format!(
                    "the {name} library is damaged or not {name}; reinstall the {package} package"
                ),
            ))
        })?;
        Ok(Verdict::pass(format!("loaded {path}: {name} {version}"))
            .with_fact(&format!("{facts}_library"), path)
            .with_fact(&format!("{facts}_version"), version))
    }
}

/// A loaded vendor library that says its version.
trait Versioned {
    /// Where it was loaded from.
    fn path(&self) -> &std::path::Path;
    /// Its version, or why it did not say.
    fn version(&self) -> Result<String, String>;
}

/// Implements [`Versioned`] for libraries whose binding has `path` and
/// `version` methods.
macro_rules! versioned {
    ($($lib:ty),*) => {$(
        impl Versioned for $lib {
            fn path(&self) -> &std::path::Path {
                <$lib>::path(self)
            }
            fn version(&self) -> Result<String, String> {
                <$lib>::version(self).map_err(|e| e.to_string())
            }
        }
    )*};
}
versioned!(
    rocgate_rocm::rocblas::Rocblas,
    rocgate_rocm::miopen::Miopen,
    rocgate_rocm::rccl::Rccl
);

/// The GPU's PCI function. Without one the GPU's absence from the bus is
/// pci.identity's finding; checks that read the function do not apply.
fn pci_function(gpu: &Gpu) -> Result<&PciDevice, Verdict> {
    gpu.pci
        .as_ref()
        .ok_or_else(|| Verdict::not_applicable("not on the PCI bus (see pci.identity)"))
}

/// A throughput against its floor in the thresholds: pass above it, fail
/// below it (naming the floor's source), skip when there is no floor. The
/// verdict's last metric is the measurement, so a caller that timed
/// repetitions adds their spread with `with_samples`.
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
fn judge_round_trip(
    corrupt: crate::findings::Code,
    what: &str,
    sent: &[u32],
    got: &[u32],
    (h2d, d2h): (Duration, Duration),
) -> Outcome {
    let bytes = std::mem::size_of_val(sent);
    if let Some(i) = sent.iter().zip(got).position(|(a, b)| a != b) {
        return Err(Verdict::found(corrupt.finding(format!(
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

/// Nodes for the checks' unit tests: a fixture scenario written to a
/// temporary sysroot and opened in-process, as `rocgate run --sysroot` opens
/// it, so a check runs on it without a worker or a report.
#[cfg(test)]
pub(crate) mod fixture {
    use super::Run;
    use crate::context::{NodeContext, RunOptions};
    use crate::findings::Code;
    use rocgate_harness::{Check, Scope, ScopeKind, SkipReason, Status, Verdict};
    use rocgate_node::Sysroot;
    use std::path::Path;

    /// A fixture node opened for checking.
    pub(crate) struct Node {
        /// What the checks read.
        pub ctx: NodeContext,
        /// Some facts are read on first use, so the sysroot outlives them.
        _dir: tempfile::TempDir,
    }

    /// The fixture `scenario`, opened with the default options.
    pub(crate) fn node(scenario: &str) -> Node {
        node_with(scenario, RunOptions::default())
    }

    /// The fixture `scenario`, opened with `options`.
    pub(super) fn node_with(scenario: &str, options: RunOptions) -> Node {
        node_changed_with(scenario, options, |_| {})
    }

    /// The fixture `scenario` with its written tree changed by `change`
    /// (given the sysroot directory), opened with the default options.
    pub(super) fn node_changed(scenario: &str, change: impl FnOnce(&Path)) -> Node {
        node_changed_with(scenario, RunOptions::default(), change)
    }

    /// The fixture `scenario` with its tree changed by `change`, opened
    /// with `options`.
    pub(super) fn node_changed_with(
        scenario: &str,
        options: RunOptions,
        change: impl FnOnce(&Path),
    ) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("node");
        let fixture = rocgate_fixtures::scenario(scenario).unwrap();
        fixture.spec.write(&root).unwrap();
        change(&root);
        let ctx = NodeContext::open(Sysroot::at(&root), options, None).unwrap();
        Node { ctx, _dir: dir }
    }

    impl Node {
        /// The scope of the GPU at PCI address `address`.
        pub fn gpu(&self, address: &str) -> Scope {
            let gpu = self
                .ctx
                .facts
                .gpus
                .iter()
                .find(|g| g.pci_address == address);
            Scope::Gpu(gpu.unwrap().index)
        }

        /// Every GPU's scope.
        pub fn gpus(&self) -> Vec<Scope> {
            self.ctx
                .facts
                .gpus
                .iter()
                .map(|g| Scope::Gpu(g.index))
                .collect()
        }

        /// What `check` reports for `scope`, whichever step ended it.
        pub fn verdict(&self, check: Run, scope: Scope) -> Verdict {
            check(&self.ctx, scope).unwrap_or_else(|v| v)
        }

        /// What `check` reports for `scope`, asserted to be a pass.
        pub fn passes(&self, check: Run, scope: Scope) -> Verdict {
            let v = self.verdict(check, scope);
            assert_eq!(v.status, Status::Pass, "{scope}: {}", v.message);
            v
        }

        /// What `check` reports for `scope`, asserted to be a skip for `reason`.
        pub fn skips(&self, check: Run, scope: Scope, reason: SkipReason) -> Verdict {
            let v = self.verdict(check, scope);
            assert_eq!(v.skip_reason, Some(reason), "{scope}: {}", v.message);
            v
        }

        /// Asserts that every check of `checks` (a layer's registry) that
        /// calls a vendor library skips on each of its scopes, with a reason
        /// and a message, when this node's runtime layers cannot run: a
        /// check that could not call its library never passes and never
        /// fails. The library's own checks say that the runtime is off.
        pub fn assert_skip_without_runtime(&self, checks: &[Check<NodeContext>]) {
            let off = self.ctx.runtime.disabled.as_ref().map(|(kind, _)| *kind);
            assert!(off.is_some(), "this node's runtime layers run");
            let mut said_off = false;
            for check in checks.iter().filter(|c| c.isolated) {
                let scopes = match check.scope {
                    ScopeKind::Node => vec![Scope::Node],
                    ScopeKind::PerGpu => self.gpus(),
                };
                for scope in scopes {
                    let v = self.verdict(check.run, scope);
                    let id = check.id;
                    assert_eq!(v.status, Status::Skipped, "{id} on {scope}: {}", v.message);
                    assert!(v.skip_reason.is_some() && !v.message.is_empty(), "{id}");
                    said_off |= v.skip_reason == off && v.message.contains("runtime layers");
                }
            }
            assert!(said_off, "no check said that the runtime layers are off");
        }

        /// Asserts that each of `checks` passes on every GPU.
        pub fn assert_pass_on_every_gpu(&self, checks: &[Run]) {
            for scope in self.gpus() {
                for check in checks {
                    self.passes(*check, scope);
                }
            }
        }
    }

    /// What `check` reports for `scope` of the fixture `scenario`, asserted
    /// to be a failure with `want`'s code.
    pub(super) fn fails_with(scenario: &str, check: Run, scope: Scope, want: Code) -> Verdict {
        let v = node(scenario).verdict(check, scope);
        assert_eq!(code(&v), Some(want.code), "{}", v.message);
        v
    }

    /// As [`fails_with`], and the failure's message says `says`.
    pub(super) fn fails_saying(scenario: &str, check: Run, scope: Scope, want: Code, says: &str) {
        let v = fails_with(scenario, check, scope, want);
        assert!(v.message.contains(says), "{scenario}: {}", v.message);
    }

    /// The verdict's next step, if it failed.
    pub(super) fn next_step(v: &Verdict) -> String {
        v.finding
            .as_ref()
            .map(|f| f.next_step.clone())
            .unwrap_or_default()
    }

    /// The verdict's finding code, if it failed.
    pub(super) fn code(v: &Verdict) -> Option<&str> {
        v.finding.as_ref().map(|f| f.code.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Code;
    use crate::thresholds::Thresholds;
    use fixture::{code, node};
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
    fn every_runtime_check_skips_saying_why_when_the_runtime_cannot_run() {
        // A captured node without --rocm-path: the libraries are not run.
        let n = node("mi300x-8");
        for layer in [
            hsa::checks(),
            hip::checks(),
            rocblas::checks(),
            miopen::checks(),
            rccl::checks(),
        ] {
            n.assert_skip_without_runtime(&layer);
        }
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
schema_version = 1
margin = 0.05

[tolerance]
fp64 = 1e-12
fp32 = 1e-5
fp16 = 2e-3
bf16 = 1.6e-2

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
        n.ctx.thresholds = Thresholds::parse(FLOORS, "test floors").unwrap();
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

    #[test]
    fn registry_plans_without_cycles_and_ids_match_layers() {
        let reg = registry();
        let plan = rocgate_harness::plan(&reg, &[0, 1], rocgate_harness::Tier::Extended).unwrap();
        assert!(!plan.instances.is_empty());
        for c in &reg {
            assert_eq!(c.id.split("::").next(), Some(c.layer.as_str()), "{}", c.id);
            assert!(!c.summary.is_empty(), "{}", c.id);
        }
    }
}
