//! kfd: the compute driver's device node and topology, and each GPU's place
//! in it.

pub(crate) mod links;

use crate::context::{GpuHolders, NodeContext};
use crate::findings::codes;
use crate::layers::support::{check, device_access, end, list, size_text};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_node::facts::gpus::{Gpu, function_zero};
use rocgate_node::facts::kfd::{KfdNode, TOPOLOGY};
use rocgate_node::facts::{NodeFacts, kfd_procs};
use rocgate_node::sysroot::ReadErrorKind;
use std::collections::{BTreeMap, BTreeSet};

/// The kfd layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        check(
            "kfd::dev_kfd",
            stack::KFD,
            ScopeKind::Node,
            "/dev/kfd exists",
            dev_kfd,
        ),
        Check {
            deps: &["kfd::dev_kfd"],
            // Opening /dev/kfd creates a KFD process: not passive.
            tier: Tier::Quick,
            ..check(
                "kfd::dev_kfd_access",
                stack::KFD,
                ScopeKind::Node,
                "the current user can open /dev/kfd read-write",
                dev_kfd_access,
            )
        },
        check(
            "kfd::topology",
            stack::KFD,
            ScopeKind::Node,
            "the KFD topology is readable and lists at least one GPU",
            topology,
        ),
        Check {
            gates: false,
            deps: &["kfd::topology"],
            ..check(
                "kfd::partitions",
                stack::KFD,
                ScopeKind::Node,
                "the partitions of each PCI device share one gfx target, a unique_id names one device, and each device shows the partitions its mode gives",
                partitions,
            )
        },
        Check {
            deps: &["kfd::topology"],
            ..check(
                "kfd::topology_node",
                stack::KFD,
                ScopeKind::PerGpu,
                "the GPU has a KFD topology node",
                topology_node,
            )
        },
        Check {
            gates: false,
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::gpu_holders",
                stack::KFD,
                ScopeKind::PerGpu,
                "no process other than rocgate held the GPU's VRAM or queues when rocgate started (a failure when a job is about to start on it)",
                gpu_holders,
            )
        },
        Check {
            deps: &["kfd::dev_kfd_access"],
            // Opening a render node creates a DRM client with its own GPU
            // VM on the device: not passive.
            tier: Tier::Quick,
            ..check(
                "kfd::render_access",
                stack::KFD,
                ScopeKind::PerGpu,
                "the current user can open the GPU's render node read-write (ROCr needs it with /dev/kfd)",
                render_access,
            )
        },
        Check {
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::gfx_target",
                stack::KFD,
                ScopeKind::PerGpu,
                "the GPU's gfx target is known (gfx_target_version, or the device id on old kernels)",
                gfx_target,
            )
        },
        Check {
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::compute_units",
                stack::KFD,
                ScopeKind::PerGpu,
                "KFD reports compute units for the GPU (simd_count / simd_per_cu > 0)",
                compute_units,
            )
        },
        Check {
            deps: &["kfd::topology_node"],
            ..check(
                "kfd::render_minor",
                stack::KFD,
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

fn dev_kfd(ctx: &NodeContext, _: Scope) -> Outcome {
    let facts = &ctx.facts;
    if facts.sysroot.exists("/dev/kfd") {
        return Ok(Verdict::pass("/dev/kfd exists"));
    }
    if let Some(v) = device_access::not_passed(facts, "/dev/kfd") {
        return Err(v);
    }
    let topo = if facts.sysroot.exists("/sys/class/kfd") {
        ""
    } else {
        "; /sys/class/kfd is missing too: amdkfd did not initialise"
    };
    end(Verdict::found(codes::KFD_MISSING.finding_next(
        format!("/dev/kfd does not exist{topo}{}", kfd_refusal(facts)),
        KFD_NEXT_STEP,
    ))
    .with_output(kfd_log_lines(facts).join("\n")))
}

fn dev_kfd_access(ctx: &NodeContext, _: Scope) -> Outcome {
    Ok(device_access::verdict(
        &ctx.facts,
        "/dev/kfd",
        codes::KFD_MISSING,
    ))
}

fn topology(ctx: &NodeContext, _: Scope) -> Outcome {
    let facts = &ctx.facts;
    let topo = facts.kfd.as_ref().map_err(|e| {
        if e.is_not_found() {
            Verdict::found(codes::KFD_MISSING.finding_next(
                format!("the KFD topology is missing ({e}): amdkfd has not initialised"),
                KFD_NEXT_STEP,
            ))
            .with_output(kfd_log_lines(facts).join("\n"))
        } else {
            Verdict::found(codes::KFD_TOPOLOGY_UNREADABLE.finding_next(format!("cannot read the KFD topology: {e}"), "run rocgate as a user who can read /sys/class/kfd, or check the container's device cgroup"))
        }
    })?;
    // Nodes hidden by the device cgroup and nodes that did not answer are
    // their GPUs' problem (kfd.topology_node), not a damaged topology.
    let (skipped, damaged): (Vec<_>, Vec<_>) = topo
        .errors
        .iter()
        .partition(|e| e.kind == ReadErrorKind::PermissionDenied || e.is_timeout());
    let hidden: Vec<_> = skipped.iter().filter(|e| !e.is_timeout()).collect();
    let silent: Vec<_> = skipped.iter().filter(|e| e.is_timeout()).collect();
    if !damaged.is_empty() {
        let all: Vec<String> = damaged.iter().map(ToString::to_string).collect();
        return end(Verdict::found(codes::KFD_TOPOLOGY_UNREADABLE.finding_next(format!("{} KFD topology entries are unreadable: {}", damaged.len(), all[0]), "the kernel exposes a damaged topology: reload amdgpu or reboot; if this is a captured node, recapture it"))
        .with_output(all.join("\n")));
    }
    let gpus = topo.gpu_nodes().count();
    let cpus = topo.nodes.len() - gpus;
    if gpus == 0 {
        return end(Verdict::found(codes::KFD_TOPOLOGY_EMPTY.finding_next(format!(
                "the KFD topology at {TOPOLOGY} has {} nodes ({cpus} CPU) and no GPU: amdgpu registered no GPU with KFD{}",
                topo.nodes.len(),
                kfd_refusal(facts)
            ), KFD_NEXT_STEP))
        .with_output(kfd_log_lines(facts).join("\n")));
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
    if !silent.is_empty() {
        message.push_str(&format!(
            "; {} nodes did not answer (see their GPUs' kfd.topology_node)",
            silent.len()
        ));
    }
    Ok(Verdict::pass(message).with_count("kfd_gpu_nodes", gpus as f64, "count"))
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

/// The compute partitions of each PCI device agree with each other and
/// with the device's mode. Partitions are grouped by device (the function-0
/// address of KFD's `location_id` and `domain`), never by `unique_id`: the
/// partitions of one GPU share the device's serial on kernels up to 2025
/// (`amdgpu_amdkfd_get_unique_id`), and each has its own since a 2025
/// change, where a grouping by serial finds no partitioned GPU at all.
fn partitions(ctx: &NodeContext, _: Scope) -> Outcome {
    let by_device = group_by(&ctx.facts.gpus, |g| {
        g.kfd.as_ref()?;
        function_zero(&g.pci_address)
    });
    let mut problems = Vec::new();
    for (device, members) in by_device.iter().filter(|(_, m)| m.len() > 1) {
        let targets: BTreeSet<&str> = members
            .iter()
            .filter_map(|g| g.gfx_target.as_deref())
            .collect();
        if targets.len() > 1 {
            problems.push(format!(
                "the {} partitions of {device} have gfx targets {}",
                members.len(),
                targets.iter().copied().collect::<Vec<_>>().join("/")
            ));
        }
    }
    // A serial, shared or not, names one device: partitions of one serial
    // on two devices are not one GPU's.
    let by_serial = group_by(&ctx.facts.gpus, |g| {
        g.kfd.as_ref().and_then(|k| k.unique_id).filter(|&u| u != 0)
    });
    for (serial, members) in by_serial.iter().filter(|(_, m)| m.len() > 1) {
        let devices: BTreeSet<String> = members
            .iter()
            .filter_map(|g| function_zero(&g.pci_address))
            .collect();
        if devices.len() > 1 {
            let named: Vec<&str> = devices.iter().map(String::as_str).collect();
            problems.push(format!(
                "unique_id 0x{serial:016x} is shared by {} nodes on {} devices ({})",
                members.len(),
                devices.len(),
                list(&named, 4),
            ));
        }
    }
    if !problems.is_empty() {
        return Err(codes::PARTITION_MISMATCH
            .fail(problems[0].clone())
            .with_output(problems.join("\n")));
    }
    let counts = partition_counts(ctx);
    if let Some(first) = counts.problems.first() {
        return Err(codes::PARTITION_COUNT_MISMATCH
            .fail(first.clone())
            .with_output(counts.problems.join("\n")));
    }
    if counts.partitioned == 0 {
        return Err(Verdict::not_applicable(
            "no partitioned GPU (no device shows several KFD nodes or a mode other than SPX)",
        ));
    }
    let cus: BTreeSet<u64> = ctx
        .facts
        .gpus
        .iter()
        .filter(|g| {
            counts
                .devices
                .iter()
                .any(|d| Some(d) == function_zero(&g.pci_address).as_ref())
        })
        .filter_map(Gpu::compute_units)
        .collect();
    Ok(Verdict::pass(format!(
        "{} GPUs partitioned ({}; {} CUs per partition)",
        counts.partitioned,
        counts.summary.join(", "),
        cus.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/")
    )))
}

/// What the partition counts of the node's devices show.
#[derive(Default)]
struct PartitionCounts {
    /// Devices with more than one partition (or a mode other than SPX).
    partitioned: usize,
    /// Their function-0 addresses.
    devices: Vec<String>,
    /// `8 in CPX` per distinct (count, mode).
    summary: Vec<String>,
    /// Devices whose count is not what their mode gives or their siblings show.
    problems: Vec<String>,
}

/// Compares each device's KFD partitions with what its compute partition
/// mode gives (`current_compute_partition` on the device; without it, the
/// XCDs of the product over each partition's `num_xcc`), and with its
/// siblings in the same mode. A device that shows 7 of its 8 CPX partitions
/// has a partition ROCm cannot use.
fn partition_counts(ctx: &NodeContext) -> PartitionCounts {
    let by_device = group_by(&ctx.facts.gpus, |g| {
        g.kfd.as_ref()?;
        function_zero(&g.pci_address)
    });
    let mut out = PartitionCounts::default();
    // (device, product, shown, expected, mode)
    let mut rows: Vec<(String, String, u64, Option<u64>, String)> = Vec::new();
    for (device, members) in &by_device {
        let first = members[0];
        let shown = members.len() as u64;
        let xcds = first.device_id.and_then(rocgate_node::facts::ids::xcds);
        let mode = first.pci.as_ref().and_then(|p| {
            ctx.facts
                .sysroot
                .read_opt(&format!("{}/current_compute_partition", p.sysfs_dir()))
                .ok()
                .flatten()
                .map(|m| m.trim().to_ascii_uppercase())
                .filter(|m| !m.is_empty())
        });
        let per_partition = first
            .kfd
            .as_ref()
            .and_then(|k| k.num_xcc)
            .filter(|&n| n > 0);
        let expected = match (&mode, xcds) {
            (Some(m), Some(x)) => rocgate_node::facts::ids::partitions_in_mode(m, x),
            (None, Some(x)) => per_partition.map(|n| x / n),
            _ => None,
        };
        let mode = mode
            .map(|m| format!("{m} mode"))
            .unwrap_or_else(|| per_partition.map_or_else(String::new, |n| format!("{n} XCC each")));
        if shown > 1 || expected.is_some_and(|e| e > 1) {
            out.partitioned += 1;
            out.devices.push(device.clone());
        }
        let product = first.product.clone().unwrap_or_else(|| "GPU".into());
        rows.push((device.clone(), product, shown, expected, mode));
    }
    for (device, product, shown, expected, mode) in &rows {
        if let Some(e) = expected.filter(|e| e != shown) {
            out.problems.push(format!(
                "{device} ({product}) shows {shown} KFD partitions; {} gives {e}",
                if mode.is_empty() {
                    "its mode".to_string()
                } else {
                    mode.clone()
                }
            ));
            continue;
        }
        // Siblings: the same product in the same mode should agree.
        let most = rows
            .iter()
            .filter(|r| &r.1 == product && &r.4 == mode)
            .map(|r| r.2)
            .max()
            .unwrap_or(*shown);
        if !mode.is_empty() && *shown < most {
            out.problems.push(format!(
                "{device} ({product}) shows {shown} KFD partitions ({mode}), where the other {product}s show {most}"
            ));
        }
    }
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (device, _, shown, _, mode) in &rows {
        if out.devices.contains(device) {
            *kinds
                .entry(format!("{shown} partitions ({mode})"))
                .or_default() += 1;
        }
    }
    out.summary = kinds
        .into_iter()
        .map(|(k, n)| format!("{n} with {k}"))
        .collect();
    out
}

/// The GPU's KFD node. Without one the GPU's absence from the topology is
/// kfd.topology_node's finding; checks that read the node do not apply.
fn kfd_node(gpu: &Gpu) -> Result<&KfdNode, Verdict> {
    gpu.kfd
        .as_ref()
        .ok_or_else(|| Verdict::not_applicable("no KFD node (see kfd.topology_node)"))
}

/// Who else holds the GPU, from KFD's process list as rocgate found it
/// before its own workers opened a GPU ([`NodeFacts::kfd_processes`]).
/// The GPU's `mem_info_vram_used` (amdgpu_device.c, "%llu\n", the whole
/// device's VRAM in use) is kept as a reading beside it.
fn gpu_holders(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let reading = |v: Verdict| match gpu.pci.as_ref().map(|p| {
        ctx.facts
            .sysroot
            .read_opt(&format!("{}/mem_info_vram_used", p.sysfs_dir()))
    }) {
        Some(Ok(Some(text))) => match text.parse::<u64>() {
            Ok(bytes) => v.with_reading("vram_used", bytes as f64, "bytes"),
            Err(_) => v,
        },
        _ => v,
    };
    let listed = match &ctx.facts.kfd_processes {
        Ok(Some(listed)) => listed,
        Ok(None) => {
            return Err(Verdict::unverifiable(format!(
                "KFD lists no processes ({} is missing: amdkfd is not loaded, or the kernel is older than 5.8), so who holds the GPU cannot be seen",
                kfd_procs::PROC
            )));
        }
        Err(e) => {
            return Err(Verdict::unverifiable(format!(
                "KFD's process list cannot be read: {e}"
            )));
        }
    };
    let Some(gpu_id) = gpu.kfd.as_ref().and_then(|k| k.gpu_id) else {
        return Err(Verdict::unverifiable(format!(
            "{} has no KFD gpu_id, which KFD's process list names GPUs by",
            gpu.label()
        )));
    };
    let holders: Vec<(&kfd_procs::KfdProcess, u64, u32)> = listed
        .processes
        .iter()
        .filter_map(|p| p.holds(gpu_id).map(|(vram, queues)| (p, vram, queues)))
        .collect();
    if holders.is_empty() {
        if !listed.errors.is_empty() {
            let errors: Vec<String> = listed.errors.iter().map(ToString::to_string).collect();
            return Err(Verdict::unverifiable(format!(
                "part of KFD's process list cannot be read, so a process holding the GPU may be missed: {}",
                list(&errors, 3)
            )));
        }
        return Ok(reading(Verdict::pass(format!(
            "no other process holds VRAM or queues on the GPU (KFD lists {} other process{})",
            listed.processes.len(),
            if listed.processes.len() == 1 {
                ""
            } else {
                "es"
            }
        ))));
    }
    let held: Vec<String> = holders
        .iter()
        .map(|(p, vram, queues)| {
            format!(
                "{} holds {} of VRAM and {queues} queue{}",
                p.label(),
                size_text(*vram),
                if *queues == 1 { "" } else { "s" }
            )
        })
        .collect();
    let pids: Vec<String> = holders.iter().map(|(p, _, _)| p.pid.to_string()).collect();
    let total: u64 = holders.iter().map(|(_, v, _)| *v).sum();
    let on = gpu.label();
    let verdict =
        |v: Verdict| reading(v.with_reading("vram_held_by_others", total as f64, "bytes"));
    let what = format!("{} on {on}", list(&held, 3));
    match ctx.options.gpu_holders {
        GpuHolders::Expected => Ok(verdict(Verdict::pass(format!(
            "{what}: jobs run on the node, so the GPU is theirs"
        )))),
        GpuHolders::Unexpected => Err(verdict(Verdict::found(codes::GPU_IN_USE.finding_next(
            format!("{what} as rocgate starts: the checks share the GPU with it"),
            format!(
                "see what it is (`ps -o pid,user,etime,cmd -p {}`, `amd-smi process`); if it is a job's leftover, end it before the GPU is given to work",
                pids.join(",")
            ),
        )))),
        GpuHolders::Forbidden => Err(verdict(Verdict::found(
            codes::GPU_HELD_AT_JOB_START.finding_next(
                format!("{what} as a job is about to start on it: the job will not get the GPU it was promised"),
                format!(
                    "end it (`kill {}`; `ps -o pid,user,etime,cmd -p {}` says whose it is), find why the previous job's epilog left it, and resume the node",
                    pids.join(" "),
                    pids.join(",")
                ),
            ),
        ))),
    }
}

fn topology_node(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    if let Some(k) = &gpu.kfd {
        let id = k
            .gpu_id
            .map_or_else(String::new, |g| format!(", gpu_id {g}"));
        return Ok(Verdict::pass(format!(
            "KFD node {}{id} at {}",
            k.id, gpu.pci_address
        )));
    }
    // A KFD node that did not answer may be this GPU's.
    let silent: Vec<String> = ctx.facts.kfd.as_ref().map_or_else(
        |_| Vec::new(),
        |t| {
            t.errors
                .iter()
                .filter(|e| e.is_timeout())
                .map(|e| e.path.display().to_string())
                .collect()
        },
    );
    if !silent.is_empty() {
        return Err(codes::SYSFS_READ_TIMEOUT.fail(format!(
            "{} has no readable KFD node: {} did not answer within the read deadline, so this GPU's node cannot be read",
            gpu.label(),
            list(&silent, 3)
        )));
    }
    let hidden = ctx.facts.kfd.as_ref().is_ok_and(|t| {
        t.errors
            .iter()
            .any(|e| e.kind == ReadErrorKind::PermissionDenied)
    });
    if hidden {
        return Err(Verdict::unverifiable(format!(
            "{} has no readable KFD node; some KFD nodes are hidden from this process by the device cgroup",
            gpu.pci_address
        )));
    }
    end(Verdict::found(codes::GPU_MISSING_FROM_KFD.finding_next(format!("{} is on the PCI bus and driven by amdgpu, but has no KFD topology node", gpu.label()), format!(
            "ROCm cannot see this GPU: read `dmesg | grep -i -e kfd -e {}` (\"DID ... is missing in supported_devices\" means this amdgpu does not support it for compute: update amdgpu/ROCm); otherwise reload amdgpu or reboot",
            gpu.physical_address()
        )))
    .with_output(kfd_log_lines(&ctx.facts).join("\n")))
}

fn gfx_target(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let version = gpu.kfd.as_ref().and_then(|k| k.gfx_target_version);
    Ok(match (&gpu.gfx_target, version) {
        (Some(t), Some(v)) if !gpu.gfx_from_device_table => {
            Verdict::pass(format!("{t} (gfx_target_version {v})"))
        }
        (Some(t), _) => Verdict::pass(format!(
            "{t} (from device id 0x{:04x}: this kernel's KFD gives no usable gfx_target_version)",
            gpu.device_id.unwrap_or(0)
        )),
        (None, v) => Verdict::found(codes::GFX_TARGET_UNKNOWN.finding(format!(
                "the gfx target of {} is unknown: gfx_target_version {} and device id 0x{:04x} is not in rocgate's table",
                gpu.label(),
                v.map_or_else(
                    || "absent".to_string(),
                    |v| format!("{v} is not a valid target")
                ),
                gpu.device_id.unwrap_or(0)
            ))),
    })
}

fn compute_units(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let k = kfd_node(gpu)?;
    Ok(match k.compute_units() {
        Some(cu) if cu > 0 => {
            let xcc = k.num_xcc.map_or_else(String::new, |x| format!(", {x} XCC"));
            Verdict::pass(format!(
                "{cu} compute units ({} SIMDs / {} per CU{xcc})",
                k.simd_count,
                k.simd_per_cu.unwrap_or(0)
            ))
            .with_count("compute_units", cu as f64, "count")
        }
        _ => Verdict::found(codes::NO_COMPUTE_UNITS.finding(format!(
                "KFD reports no compute units for {} (simd_count {}, simd_per_cu {})",
                gpu.label(),
                k.simd_count,
                k.simd_per_cu
                    .map_or_else(|| "absent".to_string(), |v| v.to_string())
            ))),
    })
}

fn render_minor(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let k = kfd_node(gpu)?;
    let Some(minor) = k.drm_render_minor else {
        return Err(Verdict::unverifiable(
            "this kernel's KFD does not report drm_render_minor",
        ));
    };
    if minor == 0 {
        return end(Verdict::found(codes::RENDER_MINOR_MISSING.finding(format!(
                "KFD reports drm_render_minor 0 for {}: the GPU has no render node, so ROCr cannot use it",
                gpu.label()
            ))));
    }
    let drm = &ctx.facts.drm;
    let minor32 = u32::try_from(minor).map_err(|_| {
        Verdict::found(codes::RENDER_MINOR_MISMATCH.finding_next(
            format!("KFD reports drm_render_minor {minor}, which is not a valid minor"),
            "the topology is damaged: reload amdgpu or recapture the node",
        ))
    })?;
    if drm.render_minors.is_empty() {
        return Ok(Verdict::pass(format!(
            "renderD{minor} (no /sys/class/drm to cross-check)"
        )));
    }
    if !drm.render_minors.contains(&minor32) {
        return end(Verdict::found(codes::RENDER_MINOR_MISMATCH.finding_next(
            format!(
                "KFD names renderD{minor} for {}, but /sys/class/drm has no renderD{minor}",
                gpu.label()
            ),
            "KFD and DRM disagree: reload amdgpu or reboot",
        )));
    }
    Ok(match drm.device_of_render(minor32) {
        Some(dev)
            if rocgate_node::facts::pci::is_pci_address(dev)
                && dev != gpu.pci_address
                && dev != gpu.physical_address() =>
        {
            Verdict::found(codes::RENDER_MINOR_MISMATCH.finding(format!(
                "KFD names renderD{minor} for {}, but that render node belongs to {dev}",
                gpu.label()
            )))
        }
        _ => Verdict::pass(format!("renderD{minor}, present in /sys/class/drm")),
    })
}

fn render_access(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let Some(minor) = gpu.render_minor(&ctx.facts.drm) else {
        return Err(Verdict::not_applicable(
            "no render node known (see amdgpu.render_node)",
        ));
    };
    Ok(device_access::verdict(
        &ctx.facts,
        &format!("/dev/dri/renderD{minor}"),
        codes::RENDER_NODE_MISSING,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{code, fails_saying, fails_with, next_step, node};
    use rocgate_harness::{SkipReason, Status};

    #[test]
    fn a_healthy_node_has_kfd_and_a_topology_node_per_gpu() {
        let n = node("mi300x-8");
        for check in [dev_kfd, dev_kfd_access, topology] {
            n.passes(check, Scope::Node);
        }
        let v = n.verdict(partitions, Scope::Node);
        assert_eq!(v.skip_reason, Some(SkipReason::NotApplicable));
        n.assert_pass_on_every_gpu(&[
            topology_node,
            render_access,
            gfx_target,
            compute_units,
            render_minor,
            gpu_holders,
        ]);
    }

    #[test]
    fn a_process_holding_a_gpu_warns_in_a_run_fails_a_prolog_and_is_the_job_on_a_busy_node() {
        use crate::context::RunOptions;
        use crate::layers::fixture::{assert_found, node_with};
        let mode = |gpu_holders| RunOptions {
            gpu_holders,
            ..RunOptions::default()
        };
        let n = node("gpu-in-use");
        let v = n.verdict(gpu_holders, n.gpu("0000:46:00.0"));
        assert_found(
            &v,
            codes::GPU_IN_USE,
            "pid 48213 (python3) holds 151 GiB of VRAM and 4 queues on gpu2 (0000:46:00.0, AMD Instinct MI300X) as rocgate starts",
        );
        assert_eq!(v.status, Status::Warn);
        assert!(next_step(&v).contains("ps -o pid,user,etime,cmd -p 48213"));
        let held = v.metrics.iter().find(|m| m.name == "vram_held_by_others");
        assert_eq!(held.map(|m| m.value), Some((151u64 << 30) as f64));
        // amd-smi opened every GPU but holds none; the other GPUs are free.
        let free = n.passes(gpu_holders, n.gpu("0000:05:00.0"));
        assert!(
            free.message.contains("KFD lists 2 other processes"),
            "{}",
            free.message
        );

        let prolog = node_with("gpu-in-use", mode(GpuHolders::Forbidden));
        let v = prolog.verdict(gpu_holders, prolog.gpu("0000:46:00.0"));
        assert_found(
            &v,
            codes::GPU_HELD_AT_JOB_START,
            "as a job is about to start on it",
        );
        assert_eq!(v.status, Status::Fail);
        assert!(next_step(&v).contains("kill 48213"));

        let busy = node_with("gpu-in-use", mode(GpuHolders::Expected));
        let v = busy.passes(gpu_holders, busy.gpu("0000:46:00.0"));
        assert!(v.message.contains("jobs run on the node"), "{}", v.message);
    }

    #[test]
    fn without_kfd_s_process_list_who_holds_a_gpu_is_unverifiable() {
        let n = crate::layers::fixture::node_changed("mi300x-8", |root| {
            std::fs::remove_dir_all(root.join("sys/class/kfd/kfd/proc")).unwrap();
        });
        let v = n.skips(gpu_holders, n.gpu("0000:05:00.0"), SkipReason::Unverifiable);
        assert!(v.message.contains("older than 5.8"), "{}", v.message);
    }

    #[test]
    fn in_a_container_a_missing_or_foreign_device_says_how_to_start_it() {
        for (scenario, check, want, fix) in [
            (
                "container-devices-not-passed",
                dev_kfd as crate::layers::support::Run,
                codes::CONTAINER_DEVICE_NOT_PASSED,
                "--device=/dev/kfd --device=/dev/dri",
            ),
            (
                "container-gid-mismatch",
                dev_kfd_access,
                codes::DEVICE_GID_MISMATCH,
                "--group-add 110",
            ),
        ] {
            let next = next_step(&fails_with(scenario, check, Scope::Node, want));
            assert!(next.contains(fix), "{scenario}: {next}");
        }
    }

    #[test]
    fn a_missing_dev_kfd_fails() {
        fails_with("kfd-missing", dev_kfd, Scope::Node, codes::KFD_MISSING);
    }

    #[test]
    fn a_user_outside_the_render_group_cannot_open_dev_kfd() {
        fails_with(
            "kfd-permission",
            dev_kfd_access,
            Scope::Node,
            codes::KFD_PERMISSION,
        );
    }

    #[test]
    fn a_topology_without_gpus_fails_quoting_the_kernel() {
        fails_saying(
            "kfd-topology-empty",
            topology,
            Scope::Node,
            codes::KFD_TOPOLOGY_EMPTY,
            "DID 74a1",
        );
    }

    #[test]
    fn a_gpu_missing_from_kfd_fails_and_its_node_checks_do_not_apply() {
        let n = node("gpu-missing-from-kfd");
        let gpu = n.gpu("0000:c6:00.0");
        let v = n.verdict(topology_node, gpu);
        assert_eq!(code(&v), Some(codes::GPU_MISSING_FROM_KFD.code));
        for check in [compute_units, render_minor] {
            let v = n.verdict(check, gpu);
            assert_eq!(v.skip_reason, Some(SkipReason::NotApplicable));
            assert_eq!(v.message, "no KFD node (see kfd.topology_node)");
        }
    }

    #[test]
    fn partitions_pass_in_cpx_and_fail_when_one_is_missing() {
        let v = node("mi300x-8-cpx").verdict(partitions, Scope::Node);
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        fails_with(
            "cpx-partition-missing",
            partitions,
            Scope::Node,
            codes::PARTITION_COUNT_MISMATCH,
        );
    }
}
