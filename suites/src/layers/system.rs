//! system: the host settings AMD's Instinct guides require or recommend for
//! GPU nodes. Advisory: a setting that slows or hinders the GPUs never
//! blocks the layers above, which still show whether the stack works.
//!
//! Sources: ROCm's "AMD Instinct MI300X system optimization"
//! (rocm.docs.amd.com/en/latest/how-to/system-optimization/mi300x.html:
//! `iommu=pt`, `echo 0 > /proc/sys/kernel/numa_balancing`) and AMD's
//! Instinct system acceptance kernel parameters (instinct.docs.amd.com,
//! system-acceptance, common/kernel-parameters: `iommu=pt` required,
//! `numa_balancing=disable` and `transparent_hugepage=always` optional).

use super::check;
use crate::context::NodeContext;
use crate::findings::codes;
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
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
    ]
    .into_iter()
    .map(|c| Check { gates: false, ..c })
    .collect()
}

fn unreadable(e: impl std::fmt::Display) -> Verdict {
    Verdict::unverifiable(e.to_string())
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
    let mut translated = Vec::new();
    let mut passthrough = 0;
    for address in &addresses {
        match system::iommu_mode(&ctx.facts.sysroot, address).map_err(unreadable)? {
            IommuMode::Translated(kind) => translated.push(format!("{address} ({kind})")),
            IommuMode::Passthrough => passthrough += 1,
            IommuMode::Off => {}
        }
    }
    if translated.is_empty() {
        return Ok(Verdict::pass(match passthrough {
            0 => "no GPU is in an IOMMU group: the IOMMU is off".to_string(),
            n => format!("{n} GPUs in passthrough (identity) IOMMU groups"),
        }));
    }
    Ok(Verdict::fail(codes::IOMMU_NOT_PASSTHROUGH.finding(
        format!(
            "the IOMMU translates the DMA of {} of {} GPUs: {}",
            translated.len(),
            addresses.len(),
            super::list(&translated, 4)
        ),
    )))
}

fn numa_balancing(ctx: &NodeContext, _: Scope) -> Outcome {
    let value = system::numa_balancing(&ctx.facts.sysroot)
        .map_err(unreadable)?
        .ok_or_else(|| Verdict::not_applicable("this kernel has no automatic NUMA balancing"))?;
    if value == "0" {
        return Ok(Verdict::pass("automatic NUMA balancing is off"));
    }
    Ok(Verdict::fail(codes::NUMA_BALANCING_ENABLED.finding(format!(
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
            set.push(format!("amdgpu.{name}={value} ({meaning})"));
        }
    }
    if set.is_empty() {
        return Ok(Verdict::pass(
            "amdgpu's RAS and page retirement are as the driver sets them",
        ));
    }
    Ok(Verdict::fail(
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
    Ok(Verdict::fail(codes::THP_DISABLED.finding(
        "transparent huge pages are disabled (never): host buffers the GPUs read are mapped in 4 KiB pages",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::Code;
    use crate::layers::Run;
    use crate::layers::fixture::{fails_saying, node};

    #[test]
    fn a_node_set_up_as_amd_says_passes_the_system_layer() {
        let n = node("mi300x-8");
        for run in [
            iommu,
            numa_balancing,
            transparent_hugepages,
            amdgpu_parameters,
        ] {
            n.passes(run, Scope::Node);
        }
        assert_eq!(stack::SYSTEM.rank(), 0);
    }

    #[test]
    fn each_setting_off_the_guide_is_named() {
        let cases: [(&str, Run, Code, &str); 3] = [
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
        ];
        for (scenario, check, code, says) in cases {
            fails_saying(scenario, check, Scope::Node, code, says);
        }
    }
}
