//! What the layers share: the two ways to declare a check (a file check,
//! an isolated vendor-library check), the one way to end a check with a
//! finding ([`end`]), and small helpers. Nothing here knows a layer's facts.

pub(crate) mod device_access;
pub(crate) mod events;
pub(crate) mod judge;
pub(crate) mod library;

pub(crate) use judge::{combine, judge_floor, judge_round_trip};
pub(crate) use library::LibraryName;

use crate::context::NodeContext;
use rocgate_harness::{Check, Layer, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_node::facts::pci::PciDevice;
use std::time::Duration;

/// What a check runs: the node's context and the scope in, the verdict out,
/// ended early with `?` by whichever step finds the answer first.
pub(crate) type Run = fn(&NodeContext, Scope) -> Outcome;

/// The dependency of every check that reads what the loaded amdgpu exposes
/// (firmware versions, DRM state): without the module the cause is the
/// driver, not what it would have shown.
pub(crate) const NEEDS_LIVE_AMDGPU: &[&str] = &["amdgpu::module_live"];

/// Time limit for checks that read files: generous, since a wedged GPU can
/// stall a sysfs read in the kernel.
const FILE_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// A gating check that reads files only, with no explicit dependencies:
/// it belongs to the passive tier (and so to every tier), which must be
/// safe on a node whose GPUs run jobs. A check that opens a device or
/// changes anything says `tier: Tier::Quick`.
pub(crate) const fn check(
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
pub(crate) const fn isolated(
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
        // A worker's round trip and a library call or two.
        typical: Duration::from_millis(200),
        ..check(id, layer, scope, summary, run)
    }
}

/// Ends a check (or a step of one) with `verdict`, usually a
/// `Verdict::found`: `return end(..)` at any step, `end(..)` as the last.
/// The engine reports `Ok` and `Err` alike, so a finding is always spelled
/// this one way rather than as `Ok(..)` in some checks and `Err(..)` in
/// others; the test below refuses the other spellings in `layers/`.
pub(crate) fn end<T>(verdict: Verdict) -> Result<T, Verdict> {
    Err(verdict)
}

/// Seconds of a long check's run as `42 s`, `12.5 min`, `3.0 h`.
pub(crate) fn seconds(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// The GPU's PCI function. Without one the GPU's absence from the bus is
/// pci.identity's finding; checks that read the function do not apply.
pub(crate) fn pci_function(gpu: &Gpu) -> Result<&PciDevice, Verdict> {
    gpu.pci
        .as_ref()
        .ok_or_else(|| Verdict::not_applicable("not on the PCI bus (see pci.identity)"))
}

/// Joins at most `max` items, saying how many more there were.
pub(crate) fn list<T: AsRef<str>>(items: &[T], max: usize) -> String {
    let shown: Vec<&str> = items.iter().take(max).map(AsRef::as_ref).collect();
    if items.len() > max {
        format!("{} and {} more", shown.join(", "), items.len() - max)
    } else {
        shown.join(", ")
    }
}

/// `bytes` in the binary unit that reads best: `512 KiB`, `19.66 MiB`,
/// `19.20 GiB`, `192 GiB`.
pub(crate) fn size_text(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    let (value, unit) = if b >= KIB * KIB * KIB {
        (b / (KIB * KIB * KIB), "GiB")
    } else if b >= KIB * KIB {
        (b / (KIB * KIB), "MiB")
    } else if b >= KIB {
        (b / KIB, "KiB")
    } else {
        return format!("{bytes} bytes");
    };
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_harness::Status;
    use std::path::{Path, PathBuf};

    #[test]
    fn end_ends_a_check_with_its_verdict_whatever_the_step_would_return() {
        let failed = || Verdict::unverifiable("cannot read");
        let outcome: Outcome = end(failed());
        assert_eq!(outcome.unwrap_err().message, "cannot read");
        let step: Result<u32, Verdict> = end(failed());
        assert_eq!(step.unwrap_err().status, Status::Skipped);
    }

    /// Every Rust source file under `dir`.
    fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push(path);
            }
        }
    }

    #[test]
    fn a_layer_ends_a_check_with_a_finding_one_way_only() {
        let layers = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layers");
        let mut files = Vec::new();
        sources(&layers, &mut files);
        assert!(files.len() > 10, "{}: {files:?}", layers.display());
        // Built here, so that this file does not match its own patterns.
        let spellings = ["Ok", "Err"].map(|side| format!("{side}(Verdict::found("));
        let mut mixed = Vec::new();
        for file in &files {
            let text: String = std::fs::read_to_string(file)
                .unwrap()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            for spelling in &spellings {
                if text.contains(spelling.as_str()) {
                    mixed.push(format!("{}: {spelling}", file.display()));
                }
            }
        }
        assert!(
            mixed.is_empty(),
            "write `end(Verdict::found(..))`: {mixed:#?}"
        );
    }
}
