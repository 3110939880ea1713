//! What a worker process sees of the node's GPUs.
//!
//! ROCr's `hsa_init` (and HIP's initialisation, which runs it) opens every
//! GPU the process can see, so one wedged GPU hangs init in every process
//! that sees it. Each GPU's worker is therefore given only its own GPU:
//! `ROCR_VISIBLE_DEVICES=<ordinal>`, the GPU's position among the KFD GPU
//! nodes in node order, which is what ROCr's indices count (ROCR-Runtime
//! `amd_filter_device.cpp`). An index rather than a `GPU-<uuid>` because the
//! partitions of one MI300X share their unique_id on kernels up to 2025 (a
//! 2025 change gives each its own; the index holds for both). HIP's own filters index
//! the list ROCr leaves, which is now one GPU long, so they are cleared.
//!
//! The node's worker sees every GPU KFD lists: its checks count ROCr's
//! agents and HIP's devices against KFD's GPU nodes. A filter rocgate was
//! started under is never passed on: under Slurm it is the job's view
//! (slurmd sets `ROCR_VISIBLE_DEVICES` beside `SLURM_JOB_GPUS`, for the
//! prolog too), not the node's, and a worker that inherited it would find
//! GPUs "missing" that are only hidden. Which GPUs rocgate checks is
//! `--gpus` (the prolog's: the job's GPUs); what a worker sees is rocgate's
//! to decide, as it is here.

use rocgate_harness::Scope;
use rocgate_node::facts::NodeFacts;

/// The variable ROCr reads to pick among KFD's GPUs.
pub const ROCR_FILTER: &str = "ROCR_VISIBLE_DEVICES";

/// Variables HIP reads to pick among ROCr's devices.
pub const HIP_FILTERS: [&str; 3] = [
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
];

/// A change to a worker's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvChange {
    /// Set the variable.
    Set(&'static str, String),
    /// Remove the variable.
    Remove(&'static str),
}

/// The changes for the worker of `scope`: every filter rocgate's own
/// environment may hold is replaced or removed.
pub fn worker_env(facts: &NodeFacts, scope: Scope) -> Vec<EnvChange> {
    let clear_hip = HIP_FILTERS.iter().map(|v| EnvChange::Remove(v));
    let Some(index) = scope.gpu() else {
        return std::iter::once(EnvChange::Remove(ROCR_FILTER))
            .chain(clear_hip)
            .collect();
    };
    let Some(ordinal) = rocr_ordinal(facts, index) else {
        // Not in KFD: ROCr cannot see it either, and its checks say so
        // without starting ROCm; set but empty, ROCr shows no GPU.
        return std::iter::once(EnvChange::Set(ROCR_FILTER, String::new()))
            .chain(clear_hip)
            .collect();
    };
    std::iter::once(EnvChange::Set(ROCR_FILTER, ordinal.to_string()))
        .chain(clear_hip)
        .collect()
}

/// The changes for a node worker that must see only `gpus` (inventory
/// indices): a try of the all-reduce search, whose GPUs would otherwise all
/// be opened by ROCr's start, so one GPU whose start hangs would fail every
/// try. Each GPU by its ROCr ordinal, as a GPU's own worker gets it, in the
/// order given; a GPU KFD does not list is left out (ROCr cannot open it
/// either), and with none left the list is set but empty (no GPU).
pub fn worker_env_seeing(facts: &NodeFacts, gpus: &[u32]) -> Vec<EnvChange> {
    let ordinals: Vec<String> = gpus
        .iter()
        .filter_map(|&g| rocr_ordinal(facts, g))
        .map(|o| o.to_string())
        .collect();
    std::iter::once(EnvChange::Set(ROCR_FILTER, ordinals.join(",")))
        .chain(HIP_FILTERS.iter().map(|v| EnvChange::Remove(v)))
        .collect()
}

/// GPU `index`'s position among the KFD GPU nodes in node order, which is
/// what ROCr's `ROCR_VISIBLE_DEVICES` indices count; `None` when KFD does
/// not list it.
fn rocr_ordinal(facts: &NodeFacts, index: u32) -> Option<usize> {
    facts
        .gpus
        .iter()
        .filter(|g| g.kfd.is_some())
        .position(|g| g.index == index)
}

/// Applies `changes` to a command.
pub fn apply(cmd: &mut std::process::Command, changes: &[EnvChange]) {
    for c in changes {
        match c {
            EnvChange::Set(k, v) => {
                cmd.env(k, v);
            }
            EnvChange::Remove(k) => {
                cmd.env_remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_fixtures::scenario;

    fn facts(name: &str) -> (tempfile::TempDir, NodeFacts) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(name);
        scenario(name).unwrap().spec.write(&root).unwrap();
        let f = NodeFacts::discover(rocgate_node::Sysroot::at(&root));
        (dir, f)
    }

    #[test]
    fn a_gpu_worker_sees_its_own_kfd_ordinal_and_no_hip_filter() {
        let (_d, f) = facts("mi300x-8-cpx");
        let env = worker_env(&f, Scope::Gpu(13));
        assert_eq!(env[0], EnvChange::Set("ROCR_VISIBLE_DEVICES", "13".into()));
        assert!(env.contains(&EnvChange::Remove("HIP_VISIBLE_DEVICES")));
    }

    #[test]
    fn the_node_worker_sees_every_kfd_gpu_whatever_filter_rocgate_inherited() {
        let (_d, f) = facts("mi300x-8");
        let env = worker_env(&f, Scope::Node);
        for v in [
            "ROCR_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
        ] {
            assert!(env.contains(&EnvChange::Remove(v)), "{v}: {env:?}");
        }
    }

    #[test]
    fn a_narrowing_try_sees_its_gpus_by_their_kfd_ordinals() {
        let (_d, f) = facts("mi300x-8-cpx");
        let env = worker_env_seeing(&f, &[13, 2, 40]);
        assert_eq!(
            env[0],
            EnvChange::Set("ROCR_VISIBLE_DEVICES", "13,2,40".into())
        );
        assert!(env.contains(&EnvChange::Remove("CUDA_VISIBLE_DEVICES")));
        let (_d, f) = facts("gpu-missing-from-kfd");
        let missing = f.gpus.iter().find(|g| g.kfd.is_none()).unwrap().index;
        assert_eq!(
            worker_env_seeing(&f, &[missing])[0],
            EnvChange::Set("ROCR_VISIBLE_DEVICES", String::new())
        );
    }

    #[test]
    fn a_gpu_missing_from_kfd_gets_no_ordinal() {
        let (_d, f) = facts("gpu-missing-from-kfd");
        let missing = f.gpus.iter().find(|g| g.kfd.is_none()).unwrap();
        assert_eq!(
            worker_env(&f, Scope::Gpu(missing.index))[0],
            EnvChange::Set("ROCR_VISIBLE_DEVICES", String::new())
        );
    }
}
