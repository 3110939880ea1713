//! system: the host settings AMD's Instinct guides require or recommend for
//! GPU nodes. Its findings are warnings and never gate: a setting that
//! slows or hinders the GPUs never blocks the layers above, which still show
//! whether the stack works.
//!
//! Sources: ROCm's "AMD Instinct MI300X system optimization"
//! (rocm.docs.amd.com/en/latest/how-to/system-optimization/mi300x.html:
//! `iommu=pt`, `echo 0 > /proc/sys/kernel/numa_balancing`) and AMD's
//! Instinct system acceptance kernel parameters (instinct.docs.amd.com,
//! system-acceptance, common/kernel-parameters: `iommu=pt` required,
//! `numa_balancing=disable` and `transparent_hugepage=always` optional).
//! PCIe ACS: AMD's "Multi-node network configuration for AMD Instinct
//! accelerators" (rocm.docs.amd.com/projects/gpu-cluster-networking,
//! how-to/multi-node-config.html: "Disable ACS (ACS forces P2P transactions
//! through the PCIe root complex)"; with virtual devices ACS should stay
//! on) and "AMD Instinct MI300X workload optimization"
//! (rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/
//! workload.html, "Disable ACS for multi-node RCCL": a `disable_acs.sh` that
//! runs `setpci -s <bdf> ECAP_ACS+0x6.w=0000` on every device with ACS, as
//! root). CPU governor: the MI300X and MI200 system optimization guides set
//! C-states only (`cpupower idle-set -d 2`); AMD's "Reproducing the AMD
//! Instinct GPUs MLPerf Inference v5.1 Submission"
//! (rocm.blogs.amd.com/artificial-intelligence/mlperf-inference5.1-repro)
//! sets `cpupower frequency-set -g performance` with them. On every EPYC
//! host Linux itself turns ACS redirect on at boot (the AMD IOMMU driver
//! asks for it: `pci_request_acs()` in drivers/iommu/amd/init.c, applied by
//! `pci_std_enable_acs` in drivers/pci/pci.c), so a stock node shows the
//! ACS warning, with the kernel parameter that keeps it off.

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{check, end, list};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
use rocgate_node::facts::acs::{self, Acs};
use rocgate_node::facts::system::{self, IommuMode};

/// The system layer's checks: node-wide, none gating.
pub fn checks() -> Vec<Check<NodeContext>> {
    [
        check(
            "system::iommu",
            stack::SYSTEM,
            ScopeKind::Node,
            "the IOMMU passes the GPUs' DMA through (iommu=pt) or is off",
            iommu,
        ),
        check(
            "system::numa_balancing",
            stack::SYSTEM,
            ScopeKind::Node,
            "automatic NUMA balancing is off (/proc/sys/kernel/numa_balancing = 0)",
            numa_balancing,
        ),
        check(
            "system::amdgpu_parameters",
            stack::SYSTEM,
            ScopeKind::Node,
            "no amdgpu module parameter turns off what the GPU checks read (RAS, page retirement)",
            amdgpu_parameters,
        ),
        check(
            "system::transparent_hugepages",
            stack::SYSTEM,
            ScopeKind::Node,
            "transparent huge pages are not disabled",
            transparent_hugepages,
        ),
        check(
            "system::pcie_acs",
            stack::SYSTEM,
            ScopeKind::Node,
            "no PCIe bridge above a GPU redirects peer-to-peer traffic (ACS off)",
            pcie_acs,
        ),
        check(
            "system::cpu_governor",
            stack::SYSTEM,
            ScopeKind::Node,
            "every CPU runs the performance frequency governor",
            cpu_governor,
        ),
    ]
    .into_iter()
    .map(|c| Check { gates: false, ..c })
    .collect()
}

fn unreadable(e: impl std::fmt::Display) -> Verdict {
    Verdict::unverifiable(e.to_string())
}

/// What an IOMMU group type means for the GPU in it. The kernel names the
/// group's default domain (drivers/iommu/iommu.c `iommu_group_show_type`):
/// `identity` passthrough, `DMA` and `DMA-FQ` translated (strict or with a
/// flush queue), `unmanaged` a domain a VFIO/iommufd user owns, `blocked`
/// no DMA at all, `unknown` anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum GroupKind {
    Passthrough,
    Held,
    Unknown,
    Translated,
    Blocked,
}

fn group_kind(kind: &str) -> GroupKind {
    match kind {
        "identity" => GroupKind::Passthrough,
        "DMA" | "DMA-FQ" => GroupKind::Translated,
        "unmanaged" => GroupKind::Held,
        "blocked" => GroupKind::Blocked,
        _ => GroupKind::Unknown,
    }
}

fn iommu(ctx: &NodeContext, _: Scope) -> Outcome {
    let mut addresses: Vec<&str> = ctx
        .facts
        .gpus
        .iter()
        .map(|g| g.physical_address())
        .collect();
    addresses.dedup();
    if addresses.is_empty() {
        return Err(Verdict::not_applicable("no GPU to map"));
    }
    let mut by_kind: std::collections::BTreeMap<GroupKind, Vec<String>> = Default::default();
    for address in &addresses {
        match system::iommu_mode(&ctx.facts.sysroot, address).map_err(unreadable)? {
            IommuMode::Translated(kind) => by_kind
                .entry(group_kind(&kind))
                .or_default()
                .push(format!("{address} ({kind})")),
            IommuMode::Passthrough => by_kind
                .entry(GroupKind::Passthrough)
                .or_default()
                .push(format!("{address} (identity)")),
            IommuMode::Off => {}
        }
    }
    let named = |kind: GroupKind| by_kind.get(&kind).map(|v| list(v, 4));
    let count = |kind: GroupKind| by_kind.get(&kind).map_or(0, Vec::len);
    // What the GPUs vfio holds are, said in every verdict: the host's DMA
    // setting is not theirs (pci::driver_binding judges the binding).
    let held = named(GroupKind::Held).map_or_else(String::new, |h| {
        format!("; held by vfio (group type unmanaged: a VFIO user, not the host's DMA API, maps their DMA): {h}")
    });
    let total = addresses.len();
    if let Some(blocked) = named(GroupKind::Blocked) {
        return end(Verdict::found(codes::IOMMU_DMA_BLOCKED.finding(format!(
            "the IOMMU blocks all DMA of {} of {total} GPUs (group type blocked): {blocked}{held}",
            count(GroupKind::Blocked)
        ))));
    }
    if let Some(translated) = named(GroupKind::Translated) {
        return end(Verdict::found(codes::IOMMU_NOT_PASSTHROUGH.finding(
            format!(
                "the IOMMU translates the DMA of {} of {total} GPUs: {translated}{held}",
                count(GroupKind::Translated)
            ),
        )));
    }
    if let Some(unknown) = named(GroupKind::Unknown) {
        return Err(Verdict::unverifiable(format!(
            "the kernel names no known IOMMU group type for {} of {total} GPUs: {unknown}{held}",
            count(GroupKind::Unknown)
        )));
    }
    let passthrough = count(GroupKind::Passthrough);
    if passthrough == 0 && count(GroupKind::Held) > 0 {
        return Err(Verdict::not_applicable(format!(
            "no GPU's DMA is the host's to map{held}"
        )));
    }
    Ok(Verdict::pass(match passthrough {
        0 => "no GPU is in an IOMMU group: the IOMMU is off".to_string(),
        n => format!("{n} GPUs in passthrough (identity) IOMMU groups{held}"),
    }))
}

fn numa_balancing(ctx: &NodeContext, _: Scope) -> Outcome {
    let value = system::numa_balancing(&ctx.facts.sysroot)
        .map_err(unreadable)?
        .ok_or_else(|| Verdict::not_applicable("this kernel has no automatic NUMA balancing"))?;
    if value == "0" {
        return Ok(Verdict::pass("automatic NUMA balancing is off"));
    }
    end(Verdict::found(codes::NUMA_BALANCING_ENABLED.finding(format!(
        "/proc/sys/kernel/numa_balancing is {value}: the kernel migrates pages under the GPUs' host buffers"
    ))))
}

/// amdgpu parameters that hide what the GPU-health checks read
/// (amdgpu_drv.c: `ras_enable` "0 = disabled", `bad_page_threshold` "0 =
/// disable bad page retirement").
const WEAKENING: &[(&str, &str, &str)] = &[
    ("ras_enable", "0", "RAS is off: no error is counted"),
    (
        "bad_page_threshold",
        "0",
        "bad-page retirement is off: failing VRAM stays in use",
    ),
];

/// Whether amdgpu itself set `bad_page_threshold` to 0: it does on the
/// MI300A (amdgpu_ras.c, `amdgpu_ras_check_supported`: "bad page feature is
/// not applicable to specific app platform"), for the whole module, so a
/// node whose GPUs are all MI300As shows 0 that nobody set.
fn set_by_the_driver(ctx: &NodeContext) -> bool {
    !ctx.facts.gpus.is_empty()
        && ctx.facts.gpus.iter().all(|g| {
            rocgate_node::facts::bad_page_threshold::driver_disables_retirement(g.device_id)
        })
}

fn amdgpu_parameters(ctx: &NodeContext, _: Scope) -> Outcome {
    let dir = "/sys/module/amdgpu/parameters";
    if !ctx.facts.sysroot.exists(dir) {
        return Err(Verdict::not_applicable("amdgpu is not loaded"));
    }
    let mut set = Vec::new();
    for (name, value, meaning) in WEAKENING {
        let path = format!("{dir}/{name}");
        let Some(text) = ctx.facts.sysroot.read_opt(&path).map_err(unreadable)? else {
            continue;
        };
        if text.trim() == *value {
            // On the MI300A amdgpu sets bad_page_threshold=0 itself, and
            // the parameter shows that variable: nobody set it, and no
            // setting brings retirement back there.
            if *name == "bad_page_threshold" && set_by_the_driver(ctx) {
                continue;
            }
            set.push(format!("amdgpu.{name}={value} ({meaning})"));
        }
    }
    if set.is_empty() {
        return Ok(Verdict::pass(
            "amdgpu's RAS and page retirement are as the driver sets them",
        ));
    }
    end(Verdict::found(
        codes::AMDGPU_CHECKS_WEAKENED.finding(set.join("; ")),
    ))
}

fn transparent_hugepages(ctx: &NodeContext, _: Scope) -> Outcome {
    let mode = system::transparent_hugepages(&ctx.facts.sysroot)
        .map_err(unreadable)?
        .ok_or_else(|| Verdict::not_applicable("this kernel has no transparent huge pages"))?;
    if mode != "never" {
        return Ok(Verdict::pass(format!("transparent huge pages: {mode}")));
    }
    end(Verdict::found(codes::THP_DISABLED.finding(
        "transparent huge pages are disabled (never): host buffers the GPUs read are mapped in 4 KiB pages",
    )))
}

/// Each bridge above a GPU, nearest the root first, with the GPUs below it.
fn bridges_above_gpus(ctx: &NodeContext) -> Result<Vec<(String, Vec<String>)>, Verdict> {
    let scan = ctx.facts.pci.as_ref().map_err(unreadable)?;
    if scan.gpus.is_empty() {
        return Err(Verdict::not_applicable("no GPU on the PCI bus"));
    }
    let mut below: Vec<(String, Vec<String>)> = Vec::new();
    for gpu in &scan.gpus {
        for bridge in acs::bridges_above(&ctx.facts.sysroot, &gpu.address).map_err(unreadable)? {
            match below.iter_mut().find(|(b, _)| *b == bridge) {
                Some((_, gpus)) => gpus.push(gpu.address.clone()),
                None => below.push((bridge, vec![gpu.address.clone()])),
            }
        }
    }
    if below.is_empty() {
        return Err(Verdict::not_applicable(
            "no PCI bridge above any GPU: they sit on their root bus",
        ));
    }
    Ok(below)
}

fn pcie_acs(ctx: &NodeContext, _: Scope) -> Outcome {
    let bridges = bridges_above_gpus(ctx)?;
    let mut redirecting = Vec::new();
    let mut unseen = Vec::new();
    let mut withheld = false;
    let mut not_stored = false;
    // A short config means something else when root read it: the kernel
    // gives root all of it, so a capture taken as root that holds less did
    // not store it (and on a live node the device did not answer in full).
    let by_root = ctx.facts.user.as_ref().is_some_and(|u| u.uid == 0);
    let live = ctx.facts.sysroot.is_live();
    let mut clear = 0;
    for (bridge, gpus) in &bridges {
        match acs::read(&ctx.facts.sysroot, bridge) {
            Ok(found) if found.redirects() != 0 => {
                redirecting.push((bridge, gpus, found.redirects()));
            }
            Ok(Acs::Present { .. } | Acs::Absent) => clear += 1,
            // drivers/pci/pci-sysfs.c: a reader without CAP_SYS_ADMIN gets
            // the first 64 bytes of config space (128 for a CardBus bridge).
            Ok(Acs::Hidden { bytes }) if bytes < 0x100 && by_root && !live => {
                not_stored = true;
                unseen.push(format!("{bridge} (the capture holds {bytes} bytes of its config space although it was taken as root: the capture did not store it)"));
            }
            Ok(Acs::Hidden { bytes }) if bytes < 0x100 && by_root => unseen.push(format!(
                "{bridge} (the kernel gave root only {bytes} bytes of its config space: the device did not answer in full)"
            )),
            Ok(Acs::Hidden { bytes }) if bytes < 0x100 => {
                withheld = true;
                unseen.push(format!("{bridge} (the kernel gave {bytes} bytes of its config space: the rest is for root)"));
            }
            Ok(Acs::Hidden { bytes }) => unseen.push(format!(
                "{bridge} (no PCIe extended config space exposed: {bytes} bytes)"
            )),
            Ok(Acs::Broken(why)) => unseen.push(format!("{bridge} ({why})")),
            Err(e) => unseen.push(e.to_string()),
        }
    }
    if !redirecting.is_empty() {
        let named: Vec<String> = redirecting
            .iter()
            .map(|(bridge, gpus, bits)| {
                format!(
                    "{bridge} ({} on; above {})",
                    acs::bit_names(*bits).join(" "),
                    list(gpus, 4)
                )
            })
            .collect();
        let mut message = format!(
            "ACS sends peer-to-peer traffic up to the root complex at {} of {} bridges above the GPUs: {}",
            redirecting.len(),
            bridges.len(),
            list(&named, 8)
        );
        if !unseen.is_empty() {
            message.push_str(&format!("; not seen: {}", list(&unseen, 4)));
        }
        let addresses: Vec<&str> = redirecting.iter().map(|(b, _, _)| b.as_str()).collect();
        // Linux turns the redirects on itself at boot: once an IOMMU driver
        // calls pci_request_acs() (the AMD IOMMU does in detect_ivrs,
        // drivers/iommu/amd/init.c, iommu=pt or not), pci_enable_acs ->
        // pci_std_enable_acs (drivers/pci/pci.c) sets SrcValid, ReqRedir,
        // CmpltRedir and UpstreamFwd on every port that has them. So the
        // lasting fix is a kernel parameter that pci_enable_acs honours
        // after that (Documentation/admin-guide/kernel-parameters.txt):
        // `pci=disable_acs_redir=` clears ReqRedir, CmpltRedir and
        // EgressCtrl; `pci=config_acs=` takes flags bit 6 (DirectTrans)
        // down to bit 0 (SrcValid), 'x' unchanged, so `x0x00xx` clears the
        // same three. A device is a BDF or `pci:<vendor>:<device>`, which
        // names every port with those ids in one word.
        let mut ids: Vec<String> = Vec::new();
        for a in &addresses {
            if let Ok((v, d)) = rocgate_node::facts::pci::function_ids(&ctx.facts.sysroot, a) {
                let id = format!("pci:{v:04x}:{d:04x}");
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        let by_ids = if ids.is_empty() {
            String::new()
        } else {
            format!(
                " (or by their ids, every port that has them: `pci=disable_acs_redir={}`)",
                ids.join(";")
            )
        };
        return end(Verdict::found(codes::PCIE_ACS_ENABLED.finding_next(
            message,
            format!(
                "as root: `for b in {}; do setpci -s $b ECAP_ACS+0x6.w=0000; done` (AMD's disable_acs.sh does this for every device with ACS), or disable ACS in the BIOS; setpci does not survive a reboot: to keep the redirects off from boot, add `pci=disable_acs_redir={}`{by_ids} (Linux 4.19 and later) or `pci=config_acs={}` (Linux 6.11 and later) to the kernel command line; keep ACS on if the GPUs are passed through to virtual machines",
                addresses.join(" "),
                addresses.join(";"),
                addresses
                    .iter()
                    .map(|a| format!("x0x00xx@{a}"))
                    .collect::<Vec<_>>()
                    .join(";")
            ),
        )));
    }
    if !unseen.is_empty() {
        let mut message = format!(
            "the ACS of {} of {} bridges above the GPUs could not be read: {}",
            unseen.len(),
            bridges.len(),
            list(&unseen, 4)
        );
        if withheld {
            message.push_str("; run rocgate as root (or take the snapshot as root) to read it");
        }
        if not_stored {
            message.push_str("; capture the node again to store it");
        }
        return Ok(Verdict::unverifiable(message));
    }
    Ok(Verdict::pass(format!(
        "none of the {clear} bridges above the GPUs redirects peer-to-peer traffic (ACS off or absent)"
    )))
}

fn cpu_governor(ctx: &NodeContext, _: Scope) -> Outcome {
    let governors = system::cpu_governors(&ctx.facts.sysroot)
        .map_err(unreadable)?
        .ok_or_else(|| {
            Verdict::not_applicable(
                "no CPU exposes cpufreq (/sys/devices/system/cpu/cpu*/cpufreq): the firmware or a hypervisor keeps the frequency",
            )
        })?;
    let unit = governors.unit;
    let total: usize = governors.counts.values().sum();
    let others: Vec<String> = governors
        .counts
        .iter()
        .filter(|(name, _)| *name != "performance")
        .map(|(name, n)| format!("{name} on {n} of {total} {unit}"))
        .collect();
    if others.is_empty() {
        return Ok(Verdict::pass(format!(
            "all {total} {unit} run the performance governor"
        )));
    }
    end(Verdict::found(codes::CPU_GOVERNOR_NOT_PERFORMANCE.finding(
        format!(
            "the CPU frequency governor is not performance: {}",
            others.join(", ")
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Code;
    use crate::layers::fixture::{code, fails_saying, next_step, node, node_changed};
    use crate::layers::support::Run;
    use rocgate_harness::SkipReason;

    /// Clears the ACS Control register of every bridge, as AMD's
    /// disable_acs.sh does.
    fn acs_off(root: &std::path::Path) {
        rocgate_fixtures::hostile::acs_off(root).unwrap();
    }

    #[test]
    fn a_node_set_up_as_amd_says_passes_the_system_layer() {
        // A stock EPYC node: Linux turned ACS redirect on (a warning).
        let stock = node("mi300x-8");
        let v = stock.verdict(pcie_acs, Scope::Node);
        assert_eq!(code(&v), Some(codes::PCIE_ACS_ENABLED.code));
        assert_eq!(v.status, rocgate_harness::Status::Warn);
        let n = node_changed("mi300x-8", acs_off);
        for run in [
            iommu,
            numa_balancing,
            transparent_hugepages,
            amdgpu_parameters,
            pcie_acs,
            cpu_governor,
        ] {
            n.passes(run, Scope::Node);
        }
        // Root ports with ACS, the GPUs' internal switch ports without:
        // 24 bridges over 8 GPUs, none redirecting.
        let v = n.passes(pcie_acs, Scope::Node);
        assert!(
            v.message.contains("none of the 24 bridges"),
            "{}",
            v.message
        );
        assert_eq!(stack::SYSTEM.rank(), 0);
    }

    #[test]
    fn each_setting_off_the_guide_is_named() {
        let cases: [(&str, Run, Code, &str); 5] = [
            (
                "iommu-translated",
                iommu,
                codes::IOMMU_NOT_PASSTHROUGH,
                "DMA-FQ",
            ),
            (
                "ras-disabled",
                amdgpu_parameters,
                codes::AMDGPU_CHECKS_WEAKENED,
                "amdgpu.ras_enable=0",
            ),
            (
                "numa-balancing-enabled",
                numa_balancing,
                codes::NUMA_BALANCING_ENABLED,
                "numa_balancing",
            ),
            (
                "pcie-acs-enabled",
                pcie_acs,
                codes::PCIE_ACS_ENABLED,
                "0000:00:01.1 (ReqRedir CmpltRedir on; above 0000:05:00.0)",
            ),
            (
                "cpu-governor-powersave",
                cpu_governor,
                codes::CPU_GOVERNOR_NOT_PERFORMANCE,
                "powersave on 8 of 8 CPUs",
            ),
        ];
        for (scenario, check, code, says) in cases {
            fails_saying(scenario, check, Scope::Node, code, says);
        }
    }

    #[test]
    fn redirecting_bridges_are_named_with_the_command_that_clears_them() {
        let v = node("pcie-acs-enabled").verdict(pcie_acs, Scope::Node);
        // The root ports redirect; the GPUs' internal ports have no ACS.
        assert!(v.message.contains("at 8 of 24 bridges"), "{}", v.message);
        assert!(!v.message.contains("0000:04:00.0"), "{}", v.message);
        let next = next_step(&v);
        assert!(
            next.contains("for b in 0000:00:01.1 0000:20:01.1 ")
                && next.contains("setpci -s $b ECAP_ACS+0x6.w=0000")
                && next.contains("reboot")
                && next.contains("pci=disable_acs_redir=0000:00:01.1;0000:20:01.1;")
                && next.contains("pci=disable_acs_redir=pci:1022:14ab"),
            "{next}"
        );
    }

    #[test]
    fn a_bridge_config_only_root_may_read_is_unverifiable() {
        // What sysfs gives a reader without CAP_SYS_ADMIN: 64 bytes.
        let n = node_changed("pcie-acs-enabled", |root| {
            for bridge in ["0000:20:01.1", "0000:25:00.0"] {
                let config = root.join(format!("sys/bus/pci/devices/{bridge}/config"));
                let bytes = std::fs::read(&config).unwrap();
                std::fs::write(&config, &bytes[..64]).unwrap();
            }
        });
        // The other redirecting bridges are still a finding.
        let v = n.verdict(pcie_acs, Scope::Node);
        assert_eq!(code(&v), Some(codes::PCIE_ACS_ENABLED.code));
        assert!(v.message.contains("at 7 of 24 bridges"), "{}", v.message);
        assert!(
            v.message
                .contains("0000:20:01.1 (the kernel gave 64 bytes of its config space"),
            "{}",
            v.message
        );
        let n = node_changed("mi300x-8", |root| {
            acs_off(root);
            let config = root.join("sys/bus/pci/devices/0000:25:00.0/config");
            let bytes = std::fs::read(&config).unwrap();
            std::fs::write(&config, &bytes[..64]).unwrap();
        });
        let v = n.skips(pcie_acs, Scope::Node, SkipReason::Unverifiable);
        assert!(
            v.message.contains("1 of 24 bridges") && v.message.contains("run rocgate as root"),
            "{}",
            v.message
        );
    }

    #[test]
    fn with_nothing_to_look_at_the_checks_do_not_apply() {
        // GPUs on their root bus have no bridge above them.
        node("rx7900xtx-1").skips(pcie_acs, Scope::Node, SkipReason::NotApplicable);
        let n = node_changed("mi300x-8", |root| {
            std::fs::remove_dir_all(root.join("sys/devices/system/cpu")).unwrap();
        });
        let v = n.skips(cpu_governor, Scope::Node, SkipReason::NotApplicable);
        assert!(v.message.contains("cpufreq"), "{}", v.message);
    }
}
