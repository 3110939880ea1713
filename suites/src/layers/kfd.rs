//! kfd: the compute driver's device node and topology, and each GPU's place
//! in it.

use super::{check, device_access, list};
use crate::context::NodeContext;
use crate::facts::NodeFacts;
use crate::facts::gpus::{Gpu, function_zero};
use crate::facts::kfd::TOPOLOGY;
use rocgate_harness::sysroot::ReadErrorKind;
use rocgate_harness::{Check, Finding, Layer, Scope, ScopeKind, Verdict};
use std::collections::{BTreeMap, BTreeSet};

/// The kfd layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        check(
            "kfd::dev_kfd",
            Layer::Kfd,
            ScopeKind::Node,
            "/dev/kfd exists",
            dev_kfd,
        ),
        Check {
            deps: &["kfd::dev_kfd"],
            ..check(
                "kfd::dev_kfd_access",
                Layer::Kfd,
                ScopeKind::Node,
                "the current user can open /dev/kfd read-write",
                dev_kfd_access,
            )
        },
        check(
            "kfd::topology",
            Layer::Kfd,
            ScopeKind::Node,
            "the KFD topology is readable and lists at least one GPU",
            topology,
        ),
        Check {
            gates: false,
            deps: &["kfd::topology"],
            ..check(
                "kfd::partitions",
                Layer::Kfd,
                ScopeKind::Node,
                "partitions sharing a unique_id sit on one PCI device with one gfx target",
                partitions,
            )
        },
        Check {
            deps: &["kfd::topology"],
            ..check(
                "kfd::topology_node",
                Layer::Kfd,
                ScopeKind::PerGpu,
                "the GPU has a KFD topology node",
                topology_node,
            )
        },
        Check {
            deps: &["kfd::dev_kfd_access"],
            ..check(
                "kfd::render_access",
                Layer::Kfd,
                ScopeKind::PerGpu,
                "the current user can open the GPU's render node read-write (ROCr needs it with /dev/kfd)",
                render_access,
            )
        },
        Check {
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::gfx_target",
                Layer::Kfd,
                ScopeKind::PerGpu,
                "the GPU's gfx target is known (gfx_target_version, or the device id on old kernels)",
                gfx_target,
            )
        },
        Check {
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::compute_units",
                Layer::Kfd,
                ScopeKind::PerGpu,
                "KFD reports compute units for the GPU (simd_count / simd_per_cu > 0)",
                compute_units,
            )
        },
        Check {
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::render_minor",
                Layer::Kfd,
                ScopeKind::PerGpu,
                "KFD's drm_render_minor is non-zero and matches the GPU's DRM render node",
                render_minor,
            )
        },
    ]
}

/// Kernel log lines about KFD, for evidence.
fn kfd_log_lines(facts: &NodeFacts) -> Vec<String> {
    facts.kernel_log().as_ref().map_or_else(
        |_| Vec::new(),
        |l| {
            let hits: Vec<String> = l
                .lines
                .iter()
                .filter(|x| x.contains("kfd") || x.contains("KFD"))
                .cloned()
                .collect();
            hits[hits.len().saturating_sub(20)..].to_vec()
        },
    )
}

/// The kernel's own words on why KFD skipped a device, if it said.
fn kfd_refusal(facts: &NodeFacts) -> String {
    kfd_log_lines(facts)
        .into_iter()
        .find(|l| l.contains("supported_devices") || l.contains("kgd2kfd_probe failed"))
        .map_or_else(String::new, |l| format!("; kernel log: {}", l.trim()))
}

const KFD_NEXT_STEP: &str = "amdgpu is loaded but KFD is not serving compute: read `dmesg | grep -i kfd` (\"DID ... is missing in supported_devices\" means this driver does not support the GPU for compute: update amdgpu/ROCm; IOMMU errors call for iommu=pt on the kernel command line); in a container pass `--device /dev/kfd`";

fn dev_kfd(ctx: &NodeContext, _: Scope) -> Verdict {
    let facts = &ctx.facts;
    if facts.sysroot.exists("/dev/kfd") {
        return Verdict::pass("/dev/kfd exists");
    }
    let topo = if facts.sysroot.exists("/sys/class/kfd") {
        ""
    } else {
        "; /sys/class/kfd is missing too: amdkfd did not initialise"
    };
    Verdict::fail(Finding::new(
        "kfd-missing",
        format!("/dev/kfd does not exist{topo}{}", kfd_refusal(facts)),
        KFD_NEXT_STEP,
    ))
    .with_output(kfd_log_lines(facts).join("\n"))
}

fn dev_kfd_access(ctx: &NodeContext, _: Scope) -> Verdict {
    device_access::verdict(&ctx.facts, "/dev/kfd", "kfd-missing")
}

fn topology(ctx: &NodeContext, _: Scope) -> Verdict {
    let facts = &ctx.facts;
    let topo = match &facts.kfd {
        Ok(t) => t,
        Err(e) if e.is_not_found() => {
            return Verdict::fail(Finding::new(
                "kfd-missing",
                format!("the KFD topology is missing ({e}): amdkfd has not initialised"),
                KFD_NEXT_STEP,
            ))
            .with_output(kfd_log_lines(facts).join("\n"));
        }
        Err(e) => {
            return Verdict::fail(Finding::new(
                "kfd-topology-unreadable",
                format!("cannot read the KFD topology: {e}"),
                "run rocgate as a user who can read /sys/class/kfd, or check the container's device cgroup",
            ));
        }
    };
    let (hidden, damaged): (Vec<_>, Vec<_>) = topo
        .errors
        .iter()
        .partition(|e| e.kind == ReadErrorKind::PermissionDenied);
    if !damaged.is_empty() {
        let all: Vec<String> = damaged.iter().map(ToString::to_string).collect();
        return Verdict::fail(Finding::new(
            "kfd-topology-unreadable",
            format!("{} KFD topology entries are unreadable: {}", damaged.len(), all[0]),
            "the kernel exposes a damaged topology: reload amdgpu or reboot; if this is a captured node, recapture it",
        ))
        .with_output(all.join("\n"));
    }
    let gpus = topo.gpu_nodes().count();
    let cpus = topo.nodes.len() - gpus;
    if gpus == 0 {
        return Verdict::fail(Finding::new(
            "kfd-topology-empty",
            format!(
                "the KFD topology at {TOPOLOGY} has {} nodes ({cpus} CPU) and no GPU: amdgpu registered no GPU with KFD{}",
                topo.nodes.len(),
                kfd_refusal(facts)
            ),
            KFD_NEXT_STEP,
        ))
        .with_output(kfd_log_lines(facts).join("\n"));
    }
    let mut message = format!("{} nodes: {cpus} CPU, {gpus} GPU", topo.nodes.len());
    if let Some(g) = topo.generation_id {
        message.push_str(&format!(" (generation {g})"));
    }
    if !hidden.is_empty() {
        message.push_str(&format!(
            "; {} nodes hidden from this process (EPERM: device cgroup)",
            hidden.len()
        ));
    }
    Verdict::pass(message).with_metric("kfd_gpu_nodes", gpus as f64, "count")
}

/// GPUs grouped by a key, skipping GPUs without one.
fn group_by<K: Ord>(gpus: &[Gpu], key: impl Fn(&Gpu) -> Option<K>) -> BTreeMap<K, Vec<&Gpu>> {
    let mut groups: BTreeMap<K, Vec<&Gpu>> = BTreeMap::new();
    for g in gpus {
        if let Some(k) = key(g) {
            groups.entry(k).or_default().push(g);
        }
    }
    groups
}

fn partitions(ctx: &NodeContext, _: Scope) -> Verdict {
    let by_serial = group_by(&ctx.facts.gpus, |g| {
        g.kfd.as_ref().and_then(|k| k.unique_id).filter(|&u| u != 0)
    });
    let partitioned: Vec<_> = by_serial
        .iter()
        .filter(|(_, members)| members.len() > 1)
        .collect();
    if partitioned.is_empty() {
        return Verdict::skip("no partitioned GPU (no unique_id is shared by two KFD nodes)");
    }
    let mut problems = Vec::new();
    for (serial, members) in &partitioned {
        let devices: BTreeSet<String> = members
            .iter()
            .filter_map(|g| function_zero(&g.pci_address))
            .collect();
        let targets: BTreeSet<&str> = members
            .iter()
            .filter_map(|g| g.gfx_target.as_deref())
            .collect();
        if devices.len() > 1 || targets.len() > 1 {
            problems.push(format!(
                "unique_id 0x{serial:016x} is shared by {} nodes on {} devices ({}) with gfx targets {}",
                members.len(),
                devices.len(),
                list(&devices.iter().collect::<Vec<_>>().iter().map(|s| s.as_str()).collect::<Vec<_>>(), 4),
                targets.iter().copied().collect::<Vec<_>>().join("/")
            ));
        }
    }
    if !problems.is_empty() {
        return Verdict::fail(Finding::new(
            "partition-mismatch",
            problems[0].clone(),
            "partitions of one GPU must share its PCI device and gfx target: check the partition mode on every GPU (`amd-smi partition`) and reset it consistently, then reload amdgpu",
        ))
        .with_output(problems.join("\n"));
    }
    let sizes: BTreeSet<usize> = partitioned.iter().map(|(_, m)| m.len()).collect();
    let cus: BTreeSet<u64> = partitioned
        .iter()
        .flat_map(|(_, m)| m.iter().filter_map(|g| g.compute_units()))
        .collect();
    Verdict::pass(format!(
        "{} GPUs partitioned into {} partitions each ({} CUs per partition)",
        partitioned.len(),
        sizes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/"),
        cus.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/")
    ))
}

fn topology_node(ctx: &NodeContext, scope: Scope) -> Verdict {
    let gpu = match ctx.gpu(scope) {
        Ok(g) => g,
        Err(v) => return v,
    };
    if let Some(k) = &gpu.kfd {
        let id = k
            .gpu_id
            .map_or_else(String::new, |g| format!(", gpu_id {g}"));
        return Verdict::pass(format!("KFD node {}{id} at {}", k.id, gpu.pci_address));
    }
    let hidden = ctx.facts.kfd.as_ref().is_ok_and(|t| {
        t.errors
            .iter()
            .any(|e| e.kind == ReadErrorKind::PermissionDenied)
    });
    if hidden {
        return Verdict::skip(format!(
            "{} has no readable KFD node; some KFD nodes are hidden from this process by the device cgroup",
            gpu.pci_address
        ));
    }
    Verdict::fail(Finding::new(
        "gpu-missing-from-kfd",
        format!("{} is on the PCI bus and driven by amdgpu, but has no KFD topology node", gpu.label()),
        format!(
            "ROCm cannot see this GPU: read `dmesg | grep -i -e kfd -e {}` (\"DID ... is missing in supported_devices\" means this amdgpu does not support it for compute: update amdgpu/ROCm); otherwise reload amdgpu or reboot",
            gpu.physical_address()
        ),
    ))
    .with_output(kfd_log_lines(&ctx.facts).join("\n"))
}

fn gfx_target(ctx: &NodeContext, scope: Scope) -> Verdict {
    let gpu = match ctx.gpu(scope) {
        Ok(g) => g,
        Err(v) => return v,
    };
    let version = gpu.kfd.as_ref().and_then(|k| k.gfx_target_version);
    match (&gpu.gfx_target, version) {
        (Some(t), Some(v)) if !gpu.gfx_from_device_table => {
            Verdict::pass(format!("{t} (gfx_target_version {v})"))
        }
        (Some(t), _) => Verdict::pass(format!(
            "{t} (from device id 0x{:04x}: this kernel's KFD gives no usable gfx_target_version)",
            gpu.device_id.unwrap_or(0)
        )),
        (None, v) => Verdict::fail(Finding::new(
            "gfx-target-unknown",
            format!(
                "the gfx target of {} is unknown: gfx_target_version {} and device id 0x{:04x} is not in rocgate's table",
                gpu.label(),
                v.map_or_else(
                    || "absent".to_string(),
                    |v| format!("{v} is not a valid target")
                ),
                gpu.device_id.unwrap_or(0)
            ),
            "update rocgate; if KFD reports a malformed gfx_target_version, the kernel's amdkfd does not support this GPU",
        )),
    }
}

fn compute_units(ctx: &NodeContext, scope: Scope) -> Verdict {
    let gpu = match ctx.gpu(scope) {
        Ok(g) => g,
        Err(v) => return v,
    };
    let Some(k) = &gpu.kfd else {
        return Verdict::skip("no KFD node (see kfd.topology_node)");
    };
    match k.compute_units() {
        Some(cu) if cu > 0 => {
            let xcc = k.num_xcc.map_or_else(String::new, |x| format!(", {x} XCC"));
            Verdict::pass(format!(
                "{cu} compute units ({} SIMDs / {} per CU{xcc})",
                k.simd_count,
                k.simd_per_cu.unwrap_or(0)
            ))
            .with_metric("compute_units", cu as f64, "count")
        }
        _ => Verdict::fail(Finding::new(
            "no-compute-units",
            format!(
                "KFD reports no compute units for {} (simd_count {}, simd_per_cu {})",
                gpu.label(),
                k.simd_count,
                k.simd_per_cu
                    .map_or_else(|| "absent".to_string(), |v| v.to_string())
            ),
            "the GPU's compute engines did not come up: read `dmesg | grep -i amdgpu` for init errors, then reset the GPU or reboot",
        )),
    }
}

fn render_minor(ctx: &NodeContext, scope: Scope) -> Verdict {
    let gpu = match ctx.gpu(scope) {
        Ok(g) => g,
        Err(v) => return v,
    };
    let Some(k) = &gpu.kfd else {
        return Verdict::skip("no KFD node (see kfd.topology_node)");
    };
    let Some(minor) = k.drm_render_minor else {
        return Verdict::skip("this kernel's KFD does not report drm_render_minor");
    };
    if minor == 0 {
        return Verdict::fail(Finding::new(
            "render-minor-missing",
            format!(
                "KFD reports drm_render_minor 0 for {}: the GPU has no render node, so ROCr cannot use it",
                gpu.label()
            ),
            "the DRM side of amdgpu did not register this GPU: read `dmesg | grep -i drm` and reload amdgpu",
        ));
    }
    let drm = &ctx.facts.drm;
    let Ok(minor32) = u32::try_from(minor) else {
        return Verdict::fail(Finding::new(
            "render-minor-mismatch",
            format!("KFD reports drm_render_minor {minor}, which is not a valid minor"),
            "the topology is damaged: reload amdgpu or recapture the node",
        ));
    };
    if drm.render_minors.is_empty() {
        return Verdict::pass(format!("renderD{minor} (no /sys/class/drm to cross-check)"));
    }
    if !drm.render_minors.contains(&minor32) {
        return Verdict::fail(Finding::new(
            "render-minor-mismatch",
            format!(
                "KFD names renderD{minor} for {}, but /sys/class/drm has no renderD{minor}",
                gpu.label()
            ),
            "KFD and DRM disagree: reload amdgpu or reboot",
        ));
    }
    match drm.device_of_render(minor32) {
        Some(dev)
            if crate::facts::pci::is_pci_address(dev)
                && dev != gpu.pci_address
                && dev != gpu.physical_address() =>
        {
            Verdict::fail(Finding::new(
                "render-minor-mismatch",
                format!(
                    "KFD names renderD{minor} for {}, but that render node belongs to {dev}",
                    gpu.label()
                ),
                "KFD and DRM disagree about which GPU owns the render node: reload amdgpu or reboot",
            ))
        }
        _ => Verdict::pass(format!("renderD{minor}, present in /sys/class/drm")),
    }
}

fn render_access(ctx: &NodeContext, scope: Scope) -> Verdict {
    let gpu = match ctx.gpu(scope) {
        Ok(g) => g,
        Err(v) => return v,
    };
    let Some(minor) = gpu.render_minor(&ctx.facts.drm) else {
        return Verdict::skip("no render node known (see amdgpu.render_node)");
    };
    device_access::verdict(
        &ctx.facts,
        &format!("/dev/dri/renderD{minor}"),
        "render-node-missing",
    )
}
