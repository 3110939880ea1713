//! What a worker process sees of the node's GPUs.
//!
//! ROCr's `hsa_init` (and HIP's initialisation, which runs it) opens every
//! GPU the process can see, so one wedged GPU hangs init in every process
//! that sees it. Each GPU's worker is therefore given only its own GPU:
//! `ROCR_VISIBLE_DEVICES=<ordinal>`, the GPU's position among the KFD GPU
//! nodes in node order, which is what ROCr's indices count (ROCR-Runtime
//! `amd_filter_device.cpp`). An index rather than a `GPU-<uuid>` because the
//! partitions of one MI300X share their unique_id. HIP's own filters index
//! the list ROCr leaves, which is now one GPU long, so they are cleared.
//! The node's worker sees what rocgate itself sees. A ROCR_VISIBLE_DEVICES
//! the user set is kept as it is: the user chose what ROCm may see.

use rocgate_harness::Scope;
use rocgate_node::facts::NodeFacts;

/// Variables HIP reads to pick among ROCr's devices.
const HIP_FILTERS: [&str; 3] = [
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

/// The changes for the worker of `scope`; `user_rocr` is rocgate's own
/// ROCR_VISIBLE_DEVICES, if set.
pub fn worker_env(facts: &NodeFacts, scope: Scope, user_rocr: Option<&str>) -> Vec<EnvChange> {
    let Some(index) = scope.gpu() else {
        return Vec::new();
    };
    if user_rocr.is_some() {
        return Vec::new();
    }
    let ordinal = facts
        .gpus
        .iter()
        .filter(|g| g.kfd.is_some())
        .position(|g| g.index == index);
    let Some(ordinal) = ordinal else {
        // Not in KFD: ROCr cannot see it either; its checks say so.
        return Vec::new();
    };
    let mut changes = vec![EnvChange::Set("ROCR_VISIBLE_DEVICES", ordinal.to_string())];
    changes.extend(HIP_FILTERS.iter().map(|v| EnvChange::Remove(v)));
    changes
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
        let env = worker_env(&f, Scope::Gpu(13), None);
        assert_eq!(env[0], EnvChange::Set("ROCR_VISIBLE_DEVICES", "13".into()));
        assert!(env.contains(&EnvChange::Remove("HIP_VISIBLE_DEVICES")));
        assert!(worker_env(&f, Scope::Node, None).is_empty());
        assert!(worker_env(&f, Scope::Gpu(13), Some("0,1")).is_empty());
    }

    #[test]
    fn a_gpu_missing_from_kfd_gets_no_ordinal() {
        let (_d, f) = facts("gpu-missing-from-kfd");
        let missing = f.gpus.iter().find(|g| g.kfd.is_none()).unwrap();
        assert!(worker_env(&f, Scope::Gpu(missing.index), None).is_empty());
    }
}
