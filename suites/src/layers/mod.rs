//! The check suites, one module per layer. A new check is a function and an
//! entry in its layer's `checks()`.

pub mod amdgpu;
mod device_access;
pub mod firmware;
pub mod hip;
pub mod hsa;
pub mod kfd;
pub mod pci;

use crate::context::NodeContext;
use rocgate_harness::{Check, Layer, Scope, ScopeKind, Tier, Verdict};
use std::time::Duration;

/// Every check rocgate knows, bottom-up; within a layer, checks that find
/// causes come before checks that find their symptoms.
pub fn registry() -> Vec<Check<NodeContext>> {
    let mut all = Vec::new();
    all.extend(pci::checks());
    all.extend(firmware::checks());
    all.extend(amdgpu::checks());
    all.extend(kfd::checks());
    all.extend(hsa::checks());
    all.extend(hip::checks());
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
    run: fn(&NodeContext, Scope) -> Verdict,
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
/// worker process under its own timeout.
const fn isolated(
    id: &'static str,
    layer: Layer,
    scope: ScopeKind,
    deps: &'static [&'static str],
    timeout_s: u64,
    summary: &'static str,
    run: fn(&NodeContext, Scope) -> Verdict,
) -> Check<NodeContext> {
    Check {
        deps,
        isolated: true,
        timeout: Duration::from_secs(timeout_s),
        ..check(id, layer, scope, summary, run)
    }
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
