//! amdgpu: the DRM kernel driver, its build for the running kernel, and the
//! render node of each GPU.

pub mod gpu_health;

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{NEEDS_LIVE_AMDGPU, check, device_access, end, list, pci_function};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
use rocgate_node::facts::NodeFacts;

/// The amdgpu layer's checks: the driver's (causes first: blacklist and
/// DKMS before the module state they explain), then the GPUs' health as
/// the driver reports it.
pub fn checks() -> Vec<Check<NodeContext>> {
    let mut checks = vec![
        Check {
            gates: false,
            ..check(
                "amdgpu::blacklist",
                stack::AMDGPU,
                ScopeKind::Node,
                "amdgpu is not disabled on the kernel command line or in modprobe.d",
                blacklist,
            )
        },
        Check {
            gates: false,
            ..check(
                "amdgpu::dkms",
                stack::AMDGPU,
                ScopeKind::Node,
                "an installed DKMS amdgpu is built for the running kernel",
                dkms,
            )
        },
        check(
            "amdgpu::module_live",
            stack::AMDGPU,
            ScopeKind::Node,
            "the amdgpu module is loaded and initialised (initstate live)",
            module_live,
        ),
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            gates: false,
            ..check(
                "amdgpu::driver_version",
                stack::AMDGPU,
                ScopeKind::Node,
                "the loaded amdgpu identifies its build (DKMS version or inbox srcversion)",
                driver_version,
            )
        },
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            ..check(
                "amdgpu::bound",
                stack::AMDGPU,
                ScopeKind::PerGpu,
                "amdgpu drives this GPU (its PCI function is bound to amdgpu)",
                bound,
            )
        },
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            ..check(
                "amdgpu::render_node",
                stack::AMDGPU,
                ScopeKind::PerGpu,
                "the GPU's render node /dev/dri/renderD<minor> exists",
                render_node,
            )
        },
    ];
    checks.extend(gpu_health::checks());
    checks
}

fn running_kernel(facts: &NodeFacts) -> String {
    facts
        .kernel_release
        .as_ref()
        .map_or_else(|_| "unknown".to_string(), Clone::clone)
}

fn blacklist(ctx: &NodeContext, _: Scope) -> Outcome {
    let facts = &ctx.facts;
    if facts.blacklist.entries.is_empty() {
        if let Some(e) = facts.blacklist.unread.first() {
            return Err(Verdict::unverifiable(format!(
                "no setting disables amdgpu in what could be read, but {e}{}",
                match facts.blacklist.unread.len() {
                    1 => String::new(),
                    n => format!(" (and {} more unreadable)", n - 1),
                }
            )));
        }
        return Ok(Verdict::pass(
            "amdgpu is not disabled on the kernel command line or in modprobe.d",
        ));
    }
    let places: Vec<String> = facts
        .blacklist
        .entries
        .iter()
        .map(|b| format!("{}: {}", b.source, b.text))
        .collect();
    let loaded = if facts.amdgpu.is_live() {
        " (amdgpu is loaded anyway, by an explicit modprobe)"
    } else {
        ""
    };
    end(Verdict::found(codes::AMDGPU_BLACKLISTED.finding(format!(
        "amdgpu is disabled by {}{loaded}",
        list(&places, 4)
    )))
    .with_output(places.join("\n")))
}

fn dkms(ctx: &NodeContext, _: Scope) -> Outcome {
    let facts = &ctx.facts;
    let kernel = facts
        .kernel_release
        .as_ref()
        .map_err(|e| Verdict::unverifiable(format!("running kernel unknown: {e}")))?;
    if !facts.dkms.is_installed() {
        // In a container the DKMS tree is the image's: a DKMS module that
        // is loaded says the host has one rocgate cannot see.
        if let (Some(c), None, Some(v)) = (
            &facts.container,
            facts.sysroot.host_root(),
            &facts.amdgpu.version,
        ) {
            return Err(Verdict::unverifiable(format!(
                "the loaded amdgpu {v} is a DKMS build, and rocgate runs in a {} container without the host's root, so the host's DKMS builds cannot be read: mount the host's / read-only at /host (`-v /:/host:ro`, or --host-root DIR)",
                c.runtime
            )));
        }
        return Err(Verdict::not_applicable(
            "no DKMS amdgpu is installed (the kernel's inbox driver is used)",
        ));
    }
    if let Some(path) = facts.dkms.build_for(kernel) {
        return Ok(Verdict::pass(format!(
            "DKMS amdgpu is built for the running kernel {kernel} ({path})"
        )));
    }
    let kernels: Vec<&str> = facts.dkms.builds.iter().map(|(k, _)| k.as_str()).collect();
    let built = if kernels.is_empty() {
        format!(
            "registered with DKMS ({}) but built for no kernel",
            list(&facts.dkms.registered, 3)
        )
    } else {
        format!("built for {}", list(&kernels, 4))
    };
    let running = if facts.amdgpu.is_live() && facts.amdgpu.version.is_none() {
        "; the loaded amdgpu is the kernel's inbox driver, not the ROCm one"
    } else {
        ""
    };
    let version = facts
        .dkms
        .registered
        .first()
        .map_or("<version>", String::as_str);
    end(Verdict::found(codes::DKMS_STALE.finding_next(format!("DKMS amdgpu is {built}, but not for the running kernel {kernel}{running}"), format!(
            "rebuild it for this kernel: <install-headers> and `sudo dkms autoinstall -k {kernel}`, then reboot; if the build fails read /var/lib/dkms/amdgpu/{version}/build/make.log; or boot a kernel it was built for"
        ))))
}

fn module_live(ctx: &NodeContext, _: Scope) -> Outcome {
    let facts = &ctx.facts;
    let m = &facts.amdgpu;
    if m.is_live() {
        return Ok(Verdict::pass("amdgpu is loaded (initstate live)"));
    }
    let mut message = match (&m.initstate, &m.error) {
        (Some(state), _) => format!("amdgpu is loaded but its initstate is '{state}', not live"),
        (None, Some(e)) => format!("the amdgpu module state is unreadable: {e}"),
        (None, None) => {
            "the amdgpu kernel module is not loaded (/sys/module/amdgpu does not exist)".to_string()
        }
    };
    if m.in_proc_modules == Some(true) && m.initstate.is_none() {
        message.push_str("; /proc/modules lists it");
    }
    let kernel = running_kernel(facts);
    let next = if let Some(c) = &facts.container {
        // A container shares the host's kernel: only the host loads modules.
        message.push_str(&format!(
            " (inside a {} container: this is the host's kernel)",
            c.runtime
        ));
        "load amdgpu on the host, not in the container (`sudo modprobe amdgpu` there, then `dmesg | grep -i amdgpu`); the container sees the host's /sys/module".to_string()
    } else if !facts.blacklist.entries.is_empty() {
        "amdgpu is disabled (see node.amdgpu.blacklist): remove that setting and reboot, or `sudo modprobe amdgpu` to load it now".to_string()
    } else if facts.dkms.is_installed() && facts.dkms.build_for(&kernel).is_none() {
        format!(
            "the DKMS amdgpu is not built for kernel {kernel} (see node.amdgpu.dkms): `sudo dkms autoinstall -k {kernel}`, then `sudo modprobe amdgpu`"
        )
    } else {
        format!(
            "`sudo modprobe amdgpu`, then read `dmesg | grep -i amdgpu` for why it did not load; if modprobe cannot find it, install the driver (amdgpu-dkms, or linux-modules-extra-{kernel} for the inbox driver)"
        )
    };
    end(Verdict::found(
        codes::AMDGPU_NOT_LOADED.finding_next(message, next),
    ))
}

fn driver_version(ctx: &NodeContext, _: Scope) -> Outcome {
    let facts = &ctx.facts;
    if !facts.amdgpu.is_live() {
        return Err(Verdict::not_applicable(
            "amdgpu is not loaded, so it has no version to report (see amdgpu.module_live)",
        ));
    }
    let kernel = running_kernel(facts);
    if let Some(e) = &facts.amdgpu.version_error {
        return Err(Verdict::unverifiable(format!(
            "amdgpu is live, but its version cannot be told: {e}"
        )));
    }
    Ok(match (&facts.amdgpu.version, &facts.amdgpu.srcversion) {
        (Some(v), _) => Verdict::pass(format!("DKMS amdgpu {v} on kernel {kernel}")),
        (None, Some(src)) => Verdict::pass(format!(
            "inbox amdgpu (srcversion {src}) on kernel {kernel}"
        )),
        (None, None) => Verdict::found(codes::AMDGPU_VERSION_UNKNOWN.finding(
            "amdgpu is live but exposes neither /sys/module/amdgpu/version nor srcversion",
        )),
    })
}

fn bound(ctx: &NodeContext, scope: Scope) -> Outcome {
    let pci = pci_function(ctx.gpu(scope)?)?;
    Ok(match pci.driver.as_deref() {
        Some("amdgpu") => {
            let card = ctx
                .facts
                .drm
                .card_by_device
                .get(&pci.address)
                .map_or_else(String::new, |c| format!(" (card{c})"));
            Verdict::pass(format!("{} is bound to amdgpu{card}", pci.address))
        }
        other => {
            let log = ctx.facts.kernel_log().as_ref().map_or_else(
                |_| String::new(),
                |l| {
                    let mine: Vec<&str> = l
                        .lines
                        .iter()
                        .filter(|x| x.contains(&pci.address))
                        .map(String::as_str)
                        .collect();
                    mine[mine.len().saturating_sub(20)..].join("\n")
                },
            );
            Verdict::found(codes::AMDGPU_PROBE_FAILED.finding_next(format!(
                    "amdgpu is loaded but does not drive {} (bound to: {}): its probe failed or this driver does not support device 0x{:04x}",
                    pci.address,
                    other.unwrap_or("nothing"),
                    pci.device_id
                ), format!(
                    "read `dmesg | grep {}` for the probe error; a device this driver does not know needs a newer amdgpu (DKMS) or kernel",
                    pci.address
                )))
            .with_output(log)
        }
    })
}

fn render_node(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let Some(minor) = gpu.render_minor(&ctx.facts.drm) else {
        return end(Verdict::found(codes::RENDER_NODE_MISSING.finding_next(format!(
                "no render node is known for {}: KFD gives no drm_render_minor and /sys/class/drm has no renderD* for it",
                gpu.pci_address
            ), "the driver did not register a DRM device for this GPU: read `dmesg | grep -i drm`")));
    };
    let path = format!("/dev/dri/renderD{minor}");
    if ctx.facts.sysroot.exists(&path) {
        return Ok(Verdict::pass(format!("{path} exists")));
    }
    if let Some(v) = device_access::not_passed(&ctx.facts, &path) {
        return Err(v);
    }
    end(Verdict::found(codes::RENDER_NODE_MISSING.finding_next(format!(
            "{path} (the render node of {}) does not exist",
            gpu.pci_address
        ), format!(
            "on the host, udev did not create it: `sudo udevadm trigger` and check /lib/udev/rules.d; in a container, pass it: `--device {path}` (or all of /dev/dri)"
        ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{code, fails_with, next_step, node};
    use rocgate_harness::{SkipReason, Status};

    #[test]
    fn a_healthy_node_runs_a_live_dkms_amdgpu_that_drives_every_gpu() {
        let n = node("mi300x-8");
        for check in [blacklist, dkms, module_live, driver_version] {
            n.passes(check, Scope::Node);
        }
        n.assert_pass_on_every_gpu(&[bound, render_node]);
    }

    #[test]
    fn in_a_container_the_host_loads_amdgpu_and_passes_the_render_nodes() {
        let v = fails_with(
            "container-amdgpu-not-loaded",
            module_live,
            Scope::Node,
            codes::AMDGPU_NOT_LOADED,
        );
        let next = next_step(&v);
        assert!(
            next.starts_with("load amdgpu on the host, not in the container"),
            "{next}"
        );
        let n = node("container-devices-not-passed");
        let v = n.verdict(render_node, n.gpus()[0]);
        assert_eq!(
            code(&v),
            Some(codes::CONTAINER_DEVICE_NOT_PASSED.code),
            "{}",
            v.message
        );
    }

    #[test]
    fn an_unloaded_driver_fails_and_has_no_version_to_report() {
        let n = node("amdgpu-not-loaded");
        let v = n.verdict(module_live, Scope::Node);
        assert_eq!(
            code(&v),
            Some(codes::AMDGPU_NOT_LOADED.code),
            "{}",
            v.message
        );
        let v = n.verdict(driver_version, Scope::Node);
        assert_eq!(v.skip_reason, Some(SkipReason::NotApplicable));
    }

    #[test]
    fn a_blacklist_fails_and_is_the_next_step_for_the_unloaded_driver() {
        let n = node("amdgpu-blacklisted");
        let v = n.verdict(blacklist, Scope::Node);
        assert_eq!(code(&v), Some(codes::AMDGPU_BLACKLISTED.code));
        let v = n.verdict(module_live, Scope::Node);
        let next = v.finding.map(|f| f.next_step).unwrap_or_default();
        assert!(next.contains("see node.amdgpu.blacklist"), "{next}");
    }

    #[test]
    fn a_dkms_build_for_another_kernel_is_stale() {
        let v = fails_with("dkms-stale", dkms, Scope::Node, codes::DKMS_STALE);
        assert!(v.message.contains("6.8.0-85-generic"), "{}", v.message);
    }

    #[test]
    fn an_inbox_driver_has_no_dkms_to_check_and_reports_its_srcversion() {
        let n = node("mi210-8-two-hives");
        let v = n.verdict(dkms, Scope::Node);
        assert_eq!(v.skip_reason, Some(SkipReason::NotApplicable));
        let v = n.verdict(driver_version, Scope::Node);
        assert_eq!(v.status, Status::Pass);
        assert!(v.message.starts_with("inbox amdgpu"), "{}", v.message);
    }
}
