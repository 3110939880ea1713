//! The GPUs a Slurm job was given, as this node's GPUs.
//!
//! Slurm numbers a node's GPUs by PCI bus id: "The device number is created
//! by sorting the GPUs by PCI bus ID and then numbering them starting from
//! the smallest bus ID" (gres.conf(5), `Links`, Slurm 23.11 to 25.11; the
//! AutoDetect plugins, `gpu/rsmi` for AMD, number them so; a gres.conf with
//! `File=/dev/dri/renderD[128-135]` lists them in the same order on the
//! usual board, where render minors follow the bus). `SLURM_JOB_GPUS` holds
//! those numbers. rocgate's inventory lists KFD's GPU nodes first and the
//! PCI GPUs KFD lacks after them, so its indices shift when a GPU drops out
//! of KFD: Slurm's are matched to the GPUs sorted by PCI address instead
//! (a partition's address carries its partition in the function, so the
//! partitions of a device sort after one another, as the AMD SMI lists
//! them). A GPU Slurm gave the job that this node does not have is a fault
//! of the node: the job would start without it.

use rocgate_node::facts::gpus::Gpu;

/// Why the job's GPUs are not known.
#[derive(Debug, PartialEq, Eq)]
pub enum JobGpus {
    /// Nothing names them, or not as indices: rocgate cannot tell.
    Unknown(String),
    /// A GPU the job was given is not on this node: the line to print.
    Missing(String),
}

/// The job's GPUs, as inventory indices: SLURM_JOB_GPUS (Slurm's numbers),
/// else ROCR_VISIBLE_DEVICES (ROCr's ordinals, among KFD's GPU nodes in node
/// order: ROCR-Runtime `amd_filter_device.cpp`).
pub fn job_gpus(gpus: &[Gpu]) -> Result<Vec<u32>, JobGpus> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(list) = var("SLURM_JOB_GPUS") {
        let mut by_bus: Vec<&Gpu> = gpus.iter().collect();
        by_bus.sort_by(|a, b| a.pci_address.cmp(&b.pci_address));
        return resolve("SLURM_JOB_GPUS", &list, &by_bus, "by PCI bus id");
    }
    if let Some(list) = var("ROCR_VISIBLE_DEVICES") {
        let kfd: Vec<&Gpu> = gpus.iter().filter(|g| g.kfd.is_some()).collect();
        return resolve("ROCR_VISIBLE_DEVICES", &list, &kfd, "in KFD");
    }
    Err(JobGpus::Unknown(
        "neither SLURM_JOB_GPUS nor ROCR_VISIBLE_DEVICES names the job's GPUs".into(),
    ))
}

/// The GPUs `list` (from `var`) numbers in `order`.
fn resolve(var: &str, list: &str, order: &[&Gpu], counted: &str) -> Result<Vec<u32>, JobGpus> {
    let mut chosen = Vec::new();
    let mut absent = Vec::new();
    for token in list.split(',').map(str::trim) {
        let Ok(i) = token.parse::<usize>() else {
            return Err(JobGpus::Unknown(format!(
                "{var}={list} is not a list of GPU indices; rocgate checks a job's GPUs by index"
            )));
        };
        match order.get(i) {
            Some(g) => chosen.push(g.index),
            None => absent.push(token.to_string()),
        }
    }
    if !absent.is_empty() {
        let (s, are) = if absent.len() == 1 {
            ("", "is")
        } else {
            ("s", "are")
        };
        return Err(JobGpus::Missing(format!(
            "gpu-count-mismatch {var}={list}: GPU{s} {} {are} not on this node ({} GPUs {counted})",
            absent.join(","),
            order.len()
        )));
    }
    chosen.sort_unstable();
    chosen.dedup();
    Ok(chosen)
}
