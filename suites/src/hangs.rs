//! Names the GPU behind a node-wide hang.
//!
//! ROCr's `hsa_init` and HIP's initialisation open every GPU the process
//! sees, so one wedged GPU hangs them in every process that sees it. A
//! node-wide runtime check that times out therefore says little by itself;
//! the per-GPU checks of the same layer, each in a worker that sees only its
//! GPU, still run (the executor does not block them on a node-wide hang).
//! When some of those time out while the others pass, the hung ones are the
//! culprits, and the node check's result says so.

use crate::findings::codes;
use rocgate_harness::{CheckResult, Scope, Status};
use rocgate_node::facts::gpus::Gpu;
use std::collections::BTreeSet;

/// Adds a `gpu-wedged` finding to each timed-out node-wide check in
/// `isolated_checks` whose layer's per-GPU checks hung on some GPUs before
/// any of them passed there, and all passed on the others.
pub fn name_wedged_gpus(results: &mut [CheckResult], isolated_checks: &[&str], gpus: &[Gpu]) {
    let hung_nodes: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.scope == Scope::Node
                && r.status == Status::Timeout
                && r.finding.is_none()
                && isolated_checks.contains(&r.check.as_str())
        })
        .map(|(i, _)| i)
        .collect();
    for i in hung_nodes {
        let layer = results[i].layer;
        let mut timed_out = BTreeSet::new();
        let mut passed = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for r in results.iter().filter(|r| r.layer == layer) {
            if let Some(g) = r.scope.gpu() {
                seen.insert(g);
                match r.status {
                    Status::Timeout => {
                        timed_out.insert(g);
                    }
                    Status::Pass => {
                        passed.insert(g);
                    }
                    _ => {}
                }
            }
        }
        // A GPU that passed any check of the layer in a worker that sees
        // only it got through the runtime's initialisation there (each of
        // the layer's checks needs it first), so it did not stall it: a later hang on it, a queue that
        // never comes back, is its own fault and keeps its own finding.
        let hung: BTreeSet<u32> = timed_out.difference(&passed).copied().collect();
        let fine: Vec<u32> = seen
            .iter()
            .copied()
            .filter(|g| {
                !hung.contains(g)
                    && results
                        .iter()
                        .filter(|r| r.layer == layer && r.scope == Scope::Gpu(*g))
                        .all(|r| r.status == Status::Pass)
            })
            .collect();
        if hung.is_empty() || fine.is_empty() {
            continue;
        }
        let label = |g: u32| {
            gpus.iter()
                .find(|x| x.index == g)
                .map_or_else(|| format!("gpu{g}"), Gpu::label)
        };
        let names: Vec<String> = hung.iter().map(|&g| label(g)).collect();
        let node = &mut results[i];
        let message = format!(
            "{} hung with every GPU visible; with one GPU per process, {} hung while the other {} GPU{} passed. ROCm's initialisation opens every GPU a process sees, so {} every process that can see {}",
            node.test_id,
            names.join(", "),
            fine.len(),
            if fine.len() == 1 { "" } else { "s" },
            if hung.len() == 1 {
                "that GPU stalls"
            } else {
                "those GPUs stall"
            },
            if hung.len() == 1 { "it" } else { "them" },
        );
        node.message = format!("{message} ({})", node.message);
        let addresses: Vec<&str> = hung
            .iter()
            .filter_map(|&g| gpus.iter().find(|x| x.index == g))
            .map(|g| g.pci_address.as_str())
            .collect();
        // The per-GPU results name their own GPU (filled from their scope);
        // the node's names every hung one.
        let next = |reset: &str| {
            format!(
                "reset the GPU ({reset}) or reboot the node, then rerun; until then keep jobs off it (ROCR_VISIBLE_DEVICES without it) and read `dmesg | grep -i -e amdgpu -e kfd` for the hang or a failed reset"
            )
        };
        let all = format!("`sudo amd-smi reset -G -g {}`", addresses.join(" "));
        let mut finding = codes::GPU_WEDGED.finding_next(message, next(&all));
        // One hung GPU is where the fault is: diagnoses, annotations and
        // drain reasons name it, not the node.
        if hung.len() == 1 {
            finding.blames = hung.iter().next().copied().map(Scope::Gpu);
        }
        node.finding = Some(finding);
        // Each hung GPU's own timeout says the same, so a report read by
        // GPU (a health line, a drain reason) names the GPU itself.
        for r in results.iter_mut().filter(|r| {
            r.layer == layer
                && r.status == Status::Timeout
                && r.finding.is_none()
                && r.scope.gpu().is_some_and(|g| hung.contains(&g))
        }) {
            let gpu = r.scope.gpu().map_or_else(String::new, label);
            r.finding = Some(codes::GPU_WEDGED.finding_next(
                format!(
                    "{gpu} hangs on its own, in a process that sees only it: {}",
                    r.message
                ),
                next("<reset>"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack;

    fn result(id: &str, check: &str, scope: Scope, status: Status) -> CheckResult {
        CheckResult::new(id.into(), check.into(), stack::HSA, scope, status)
    }

    /// The node's `hsa::init`, which timed out.
    fn init_timed_out() -> CheckResult {
        result("node.hsa.init", "hsa::init", Scope::Node, Status::Timeout)
    }

    /// GPU `gpu`'s result of `hsa::<check>`.
    fn on_gpu(gpu: u32, check: &str, status: Status) -> CheckResult {
        result(
            &format!("gpu{gpu}.hsa.{check}"),
            &format!("hsa::{check}"),
            Scope::Gpu(gpu),
            status,
        )
    }

    /// The finding of `rs`' first result, the node's `hsa::init`, once
    /// the GPUs that hang are named.
    fn node_finding(rs: &mut [CheckResult]) -> Option<rocgate_harness::Finding> {
        name_wedged_gpus(rs, &["hsa::init"], &[]);
        rs[0].finding.take()
    }

    #[test]
    fn a_node_hang_names_the_gpu_that_also_hangs_alone() {
        let mut rs = vec![
            init_timed_out(),
            on_gpu(0, "agent", Status::Pass),
            on_gpu(1, "agent", Status::Timeout),
            on_gpu(2, "agent", Status::Pass),
        ];
        let f = node_finding(&mut rs).unwrap();
        assert_eq!(f.code, "gpu-wedged");
        // The one hung GPU is where the node's fault is placed.
        assert_eq!(f.blames, Some(Scope::Gpu(1)));
        assert!(
            f.message
                .contains("gpu1 hung while the other 2 GPUs passed"),
            "{}",
            f.message
        );
        assert!(
            f.next_step.contains("amd-smi reset -G -g "),
            "{}",
            f.next_step
        );
        // The hung GPU's own result says so too; the others keep theirs.
        let own = rs[2].finding.as_ref().unwrap();
        assert_eq!(own.code, "gpu-wedged");
        assert!(
            own.message.starts_with("gpu1 hangs on its own"),
            "{}",
            own.message
        );
        assert!(rs[1].finding.is_none() && rs[3].finding.is_none());
    }

    #[test]
    fn nothing_is_named_when_every_gpu_hangs_or_none_does() {
        for gpu1 in [Status::Timeout, Status::Pass] {
            let mut rs = vec![
                init_timed_out(),
                on_gpu(0, "agent", gpu1),
                on_gpu(1, "agent", gpu1),
            ];
            assert!(node_finding(&mut rs).is_none());
        }
    }

    #[test]
    fn a_gpu_that_passed_a_check_before_hanging_is_not_blamed() {
        let mut rs = vec![
            init_timed_out(),
            on_gpu(0, "agent", Status::Pass),
            on_gpu(0, "queue", Status::Pass),
            on_gpu(1, "agent", Status::Timeout),
            on_gpu(2, "agent", Status::Pass),
            on_gpu(2, "queue", Status::Timeout),
        ];
        let f = node_finding(&mut rs).unwrap();
        assert!(
            f.message.contains("gpu1 hung while the other 1 GPU passed"),
            "{}",
            f.message
        );
        assert!(!f.message.contains("gpu2"), "{}", f.message);
        assert!(
            f.next_step.contains("amd-smi reset -G -g "),
            "{}",
            f.next_step
        );
        assert!(rs[3].finding.is_some());
        assert!(rs[5].finding.is_none(), "gpu2's timeout stays its own");
    }
}
