//! pci: the silicon on the bus, and who claims it.

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{check, end, list, pci_function};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
use rocgate_node::facts::pci::{self, PCI_DEVICES};
use rocgate_node::facts::{acs, aer, missing};
use rocgate_node::sysroot::ReadErrorKind;
use std::collections::BTreeMap;

/// The pci layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        check(
            "pci::amd_gpu_present",
            stack::PCI,
            ScopeKind::Node,
            "at least one AMD GPU (vendor 0x1002, display or accelerator class) is on the PCI bus",
            amd_gpu_present,
        ),
        Check {
            gates: false,
            ..check(
                "pci::gpu_count",
                stack::PCI,
                ScopeKind::Node,
                "no GPU is missing from the PCI bus: at least the expected number (--expect-gpus), and none amdgpu drove this boot is gone",
                gpu_count,
            )
        },
        check(
            "pci::identity",
            stack::PCI,
            ScopeKind::PerGpu,
            "the GPU is a PCI function with a readable vendor, device and class",
            identity,
        ),
        check(
            "pci::driver_binding",
            stack::PCI,
            ScopeKind::PerGpu,
            "the GPU is not claimed by a driver other than amdgpu (vfio-pci, pci-stub)",
            driver_binding,
        ),
        Check {
            gates: false,
            ..check(
                "pci::link_width",
                stack::PCI,
                ScopeKind::PerGpu,
                "the PCIe link to the host (on MI300-class GPUs the slot link of the GPU's internal switch) runs at its full width and speed",
                link_width,
            )
        },
        Check {
            gates: false,
            ..check(
                "pci::aer_errors",
                stack::PCI,
                ScopeKind::PerGpu,
                "the GPU's PCIe function and the bridges above it counted no uncorrectable AER errors since boot; corrected errors and amdgpu's replay count are kept as counters",
                aer_errors,
            )
        },
        Check {
            gates: false,
            ..check(
                "pci::bus_events",
                stack::PCI,
                ScopeKind::PerGpu,
                "the kernel log shows no PCIe link down, fatal or uncorrected AER error or IOMMU page fault on the GPU or the bridges above it in the run's window (--since); older ones are history",
                bus_events,
            )
        },
    ]
}

fn amd_gpu_present(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = ctx.facts.pci.as_ref().map_err(|e| {
        Verdict::found(codes::PCI_SYSFS_UNREADABLE.finding(format!("cannot list PCI devices: {e}")))
    })?;
    let unreadable: Vec<String> = scan.errors.iter().map(ToString::to_string).collect();
    // A device whose identity files did not answer may be the GPU that is
    // missing: say so rather than "no AMD GPU".
    let silent: Vec<String> = scan
        .errors
        .iter()
        .filter(|e| e.is_timeout())
        .map(|e| e.path.display().to_string())
        .collect();
    if scan.gpus.is_empty() && !silent.is_empty() {
        return Err(codes::SYSFS_READ_TIMEOUT
            .fail(format!(
                "no AMD GPU found, and {} did not answer within the read deadline",
                list(&silent, 3)
            ))
            .with_output(unreadable.join("\n")));
    }
    if scan.gpus.is_empty() {
        let mut message = format!(
            "no AMD GPU on the PCI bus: none of the {} PCI functions under {} has vendor 0x1002 with a display or accelerator class",
            scan.devices_seen, PCI_DEVICES
        );
        if !unreadable.is_empty() {
            message.push_str(&format!(" ({} entries unreadable)", unreadable.len()));
        }
        return end(Verdict::found(codes::NO_AMD_GPU.finding_next(message, "check `lspci -nn -d 1002:`; if a GPU is installed but not listed, reseat it, check its power cables and the BIOS (Above 4G decoding, slot enabled); in a VM, pass the device through"))
        .with_output(unreadable.join("\n")));
    }
    let mut by_model: BTreeMap<String, usize> = BTreeMap::new();
    for g in &scan.gpus {
        let name = rocgate_node::facts::ids::known_device(g.device_id)
            .map_or_else(|| "AMD GPU".to_string(), |k| k.product.to_string());
        *by_model
            .entry(format!("{name} [1002:{:04x}]", g.device_id))
            .or_default() += 1;
    }
    let models: Vec<String> = by_model.iter().map(|(m, n)| format!("{n}x {m}")).collect();
    let mut message = format!(
        "{} AMD GPUs on the PCI bus: {}",
        scan.gpus.len(),
        models.join(", ")
    );
    if !unreadable.is_empty() {
        message.push_str(&format!(
            " ({} other PCI entries unreadable, see output)",
            unreadable.len()
        ));
    }
    Ok(Verdict::pass(message)
        .with_count("pci_gpus", scan.gpus.len() as f64, "count")
        .with_output(unreadable.join("\n")))
}

fn gpu_count(ctx: &NodeContext, _: Scope) -> Outcome {
    let found = ctx.facts.pci_gpu_count();
    let Ok(scan) = ctx.facts.pci.as_ref() else {
        return Err(Verdict::unverifiable(
            "the PCI bus could not be read (pci::amd_gpu_present says why)",
        ));
    };
    let log = ctx
        .facts
        .kernel_log()
        .as_ref()
        .ok()
        .map(|l| l.lines.as_slice());
    // Without an expected count, a GPU amdgpu drove this boot and that is
    // gone now is still a lost GPU.
    let gone = log.map_or_else(Vec::new, |l| missing::logged_but_gone(l, scan));
    let expected = match ctx.options.expect_gpus {
        Some(n) => n,
        None if !gone.is_empty() => found + gone.len(),
        None => {
            return Err(Verdict::not_configured(
                "no expected GPU count given (use --expect-gpus N); no GPU amdgpu drove this boot is gone",
            ));
        }
    };
    let metric = |v: Verdict| v.with_count("pci_gpus", found as f64, "count");
    // Entries that could not be read may be the GPUs not counted: then
    // the count says nothing (pci::identity names the files).
    if found < expected && found + scan.errors.len() >= expected {
        let unread: Vec<String> = scan.errors.iter().map(ToString::to_string).collect();
        return Err(metric(Verdict::unverifiable(format!(
            "{found} of {expected} expected AMD GPUs identified; {} PCI entries could not be read: {}",
            unread.len(),
            list(&unread, 4)
        ))));
    }
    if found >= expected {
        return Ok(metric(Verdict::pass(format!(
            "found {found} AMD GPUs (expected {expected})"
        ))));
    }
    let present: Vec<String> = scan.gpus.iter().map(|g| g.address.clone()).collect();
    let present = if present.is_empty() {
        "none".to_string()
    } else {
        list(&present, 16)
    };
    let places = missing::locate(&ctx.facts.sysroot, scan, log);
    let named: Vec<&str> = places.iter().filter_map(|m| m.address.as_deref()).collect();
    let evidence: Vec<String> = places
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m.address.as_deref().unwrap_or("an unnamed GPU"),
                m.evidence.join("; ")
            )
        })
        .collect();
    let counted = format!("{found} of {expected} expected AMD GPUs on the PCI bus");
    let message = match named.as_slice() {
        [] => format!(
            "{counted}; nothing names the missing one (no empty GPU port, no kernel-log line): compare `lspci -d 1002:` with a sibling node (present: {present})"
        ),
        names => format!(
            "missing {}: {counted} ({}; present: {present})",
            names.join(", "),
            evidence.join("; ")
        ),
    };
    let next = match named.as_slice() {
        [] => "a GPU that fell off the bus usually needs a cold power cycle; if it stays missing, look for PCIe/AER errors in `dmesg | grep -i -e aer -e pcie`, then reseat or replace the GPU or baseboard".to_string(),
        names => format!(
            "{} fell off the bus: cold power cycle the node (a warm reboot rarely brings it back); if it stays missing, read `dmesg | grep -i -e aer -e pciehp -e {}` and reseat or replace that GPU (or its baseboard slot)",
            names.join(", "),
            names[0]
        ),
    };
    Err(metric(Verdict::found(
        codes::GPU_COUNT_MISMATCH.finding_next(message, next),
    )))
}

fn identity(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let Some(pci) = &gpu.pci else {
        // The device may be there with files that could not be read: name
        // the file and the error rather than claim the GPU is gone.
        let physical = gpu.physical_address();
        let unread = ctx.facts.pci.as_ref().ok().and_then(|scan| {
            scan.errors.iter().find(|e| {
                let p = e.path.to_string_lossy();
                p.contains(&gpu.pci_address) || p.contains(physical)
            })
        });
        if let Some(e) = unread {
            if e.is_timeout() {
                return Err(codes::SYSFS_READ_TIMEOUT.fail(format!(
                    "{} cannot be identified on the PCI bus: {e}",
                    gpu.pci_address
                )));
            }
            let what = format!(
                "{} cannot be identified on the PCI bus: {e}",
                gpu.pci_address
            );
            // rocgate may not look: no verdict on the node. The kernel
            // writing garbage is the device's fault.
            return end(Verdict::found(match e.kind {
                ReadErrorKind::PermissionDenied | ReadErrorKind::NotFound => {
                    codes::PCI_SYSFS_UNREADABLE.finding_next(
                        what,
                        "run rocgate as a user who can read the device's files under /sys/bus/pci/devices (root, or a container with /sys mounted read-only), or recapture the node as root",
                    )
                }
                _ => codes::PCI_ENTRY_GARBLED.finding(what),
            }));
        }
        let node = gpu
            .kfd
            .as_ref()
            .map_or_else(String::new, |k| format!("KFD node {} reports ", k.id));
        return end(Verdict::found(codes::GPU_NOT_ON_PCI.finding(format!(
                "{node}PCI address {}, but no AMD GPU is at that address (or its function 0) under {PCI_DEVICES}",
                gpu.pci_address
            ))));
    };
    let product = gpu
        .product
        .as_deref()
        .unwrap_or("device id not in rocgate's table");
    let partition = if pci.address == gpu.pci_address {
        String::new()
    } else {
        format!(", partition of {}", pci.address)
    };
    Ok(Verdict::pass(format!(
        "{}: {product} [1002:{:04x}], class 0x{:06x}{partition}",
        gpu.pci_address, pci.device_id, pci.class
    )))
}

fn driver_binding(ctx: &NodeContext, scope: Scope) -> Outcome {
    let pci = pci_function(ctx.gpu(scope)?)?;
    Ok(match pci.driver.as_deref() {
        Some("amdgpu") => Verdict::pass(format!("{} is bound to amdgpu", pci.address)),
        None => Verdict::pass(format!(
            "{} is claimed by no other driver (none bound yet; binding to amdgpu is checked at the amdgpu layer)",
            pci.address
        )),
        Some(other) => {
            let why = match other {
                "vfio-pci" | "pci-stub" => " (reserved for passthrough to a virtual machine)",
                _ => "",
            };
            Verdict::found(codes::GPU_BOUND_TO_OTHER_DRIVER.finding_next(format!("{} is bound to {other}{why}, not amdgpu", pci.address), format!(
                    "if the GPU should serve this host, release it: remove it from {other}'s ids (e.g. vfio-pci.ids= on the kernel command line or /etc/modprobe.d), then `echo {} | sudo tee /sys/bus/pci/drivers/{other}/unbind` and `sudo modprobe amdgpu`",
                    pci.address
                )))
        }
    })
}

/// Judges the PCIe link the GPU reaches the host through: on MI300-class
/// GPUs the slot link of the GPU's internal switch, not the GPU function's
/// own (virtual) link; see [`pci::PhysicalLink`] for how it is found and
/// which attributes describe it.
fn link_width(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = pci_function(ctx.gpu(scope)?)?;
    let link = pci::physical_link(&ctx.facts.sysroot, &gpu.address).map_err(|e| {
        Verdict::unverifiable(format!(
            "the PCIe link of {} cannot be found: the bridges above it cannot be read: {e}",
            gpu.address
        ))
    })?;
    // Which link, said once in every verdict.
    let at = match (&link.device_ids, &link.partner) {
        (Some((v, d)), Some(p)) => format!(
            " (the slot link between {} [{v:04x}:{d:04x}], the upstream port of the GPU's internal switch, and {p}; the GPU's own link to {} is internal)",
            link.device,
            link.internal.first().map_or("it", String::as_str)
        ),
        (Some((v, d)), None) => format!(
            " (the link of {} [{v:04x}:{d:04x}], the upstream port of the GPU's internal switch)",
            link.device
        ),
        (None, _) => String::new(),
    };
    let (Some(cur), Some(max)) = (link.current_width, link.max_width) else {
        return Err(Verdict::unverifiable(match link.unread.first() {
            Some(e) => format!("the link width of {} cannot be read: {e}", link.device),
            None => format!("{} exposes no link width in sysfs{at}", link.device),
        }));
    };
    let speed = link.current_speed.as_deref().unwrap_or("speed unknown");
    let cur_mts = link
        .current_speed
        .as_deref()
        .and_then(pci::parse_link_speed);
    let max_mts = link.max_speed.as_deref().and_then(pci::parse_link_speed);
    let lspci = link.partner.as_deref().unwrap_or(&link.device);
    let width = |v: Verdict| {
        let v = v.with_count("link_width", f64::from(cur), "lanes");
        match cur_mts {
            Some(m) => v.with_count("link_speed", f64::from(m) / 1000.0, "GT/s"),
            None => v,
        }
    };
    if cur < max {
        let slower = match (cur_mts, max_mts) {
            (Some(c), Some(m)) if c < m => format!(
                "; it also runs at {speed} of {}",
                link.max_speed.as_deref().unwrap_or("?")
            ),
            _ => String::new(),
        };
        return Err(width(Verdict::found(codes::PCIE_LINK_DEGRADED.finding_next(
            format!(
                "the PCIe link of {} runs at x{cur}, the link supports x{max} ({speed}){slower}{at}",
                gpu.address
            ),
            format!(
                "reseat the GPU or its riser/cable; `sudo lspci -vv -s {lspci}` shows LnkSta and AER errors; a narrower link cuts host<->device bandwidth"
            ),
        ))));
    }
    let (Some(c), Some(m)) = (cur_mts, max_mts) else {
        // sysfs prints "Unknown" for a speed the kernel cannot name
        // (pci_speed_string, drivers/pci/probe.c).
        return Err(width(Verdict::unverifiable(format!(
            "x{cur} of x{max}, but the link speed cannot be judged: {} reads {:?} of {:?}{at}",
            link.device,
            link.current_speed.as_deref().unwrap_or("nothing"),
            link.max_speed.as_deref().unwrap_or("nothing")
        ))));
    };
    let generation =
        |mts: u32| pci::pcie_generation(mts).map_or_else(String::new, |g| format!(" (Gen{g})"));
    let max_speed = link.max_speed.as_deref().unwrap_or("?");
    if c < m {
        return Err(width(Verdict::found(codes::PCIE_LINK_SLOW.finding_next(
            format!(
                "the PCIe link of {} runs at {speed}{}, the link supports {max_speed}{} (x{cur} of x{max}){at}; an idle GPU may lower its link speed under PCIe DPM (amdgpu's pcie_dpm, pp_dpm_pcie), so a lower speed at idle can be normal",
                gpu.address,
                generation(c),
                generation(m)
            ),
            format!(
                "check the speed under load: `sudo lspci -vv -s {lspci}` LnkSta while a host<->device copy runs (and `cat {}/pp_dpm_pcie`); if it stays at {speed}, reseat the GPU or its riser/cable and check the slot's link speed setting in the BIOS (a slot forced to a lower PCIe generation)",
                gpu.sysfs_dir()
            ),
        ))));
    }
    let limit = link.slot_limit.as_deref().map_or_else(String::new, |l| {
        format!("; the port above limits it to {l}")
    });
    // Past the two checks above the link runs as wide and as fast as both
    // its ends allow.
    Ok(width(Verdict::pass(format!(
        "x{cur} at {speed}{}, as wide and fast as the link trains{limit}{at}",
        generation(c)
    ))))
}

fn bus_events(ctx: &NodeContext, scope: Scope) -> Outcome {
    crate::layers::support::events::judge(ctx, ctx.gpu(scope)?, true)
}

/// Reads the AER counters of the GPU's function and of every bridge above
/// it (a root port counts what it received from below, the switch ports
/// inside an MI300 package their own links), and amdgpu's replay count.
/// The counters count since boot, so a count is history until a later
/// run shows it grow (`compare`): uncorrectable ones warn, corrected ones
/// and replays are counters only.
fn aer_errors(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = pci_function(ctx.gpu(scope)?)?;
    let root = &ctx.facts.sysroot;
    let unreadable = |e: rocgate_node::ReadError| {
        Verdict::unverifiable(format!("the AER counters cannot be read: {e}"))
    };
    let mut path = aer::read(root, &gpu.address).map_err(unreadable)?;
    if path.classes.is_empty() {
        return Err(Verdict::not_applicable(format!(
            "{} exposes no AER counters (aer_dev_*): the function has no AER capability, or the kernel runs without AER (CONFIG_PCIEAER off, or `pci=noaer` on its command line)",
            gpu.address
        )));
    }
    let mut functions = vec![std::mem::take(&mut path)];
    // The bridges are read best-effort: the GPU's own counters are the
    // verdict's ground; a bridge that cannot be read is said, not fatal.
    let mut unread = Vec::new();
    match acs::bridges_above(root, &gpu.address) {
        Ok(bridges) => {
            for b in bridges.iter().rev() {
                match aer::read(root, b) {
                    Ok(f) if !f.classes.is_empty() => functions.push(f),
                    Ok(_) => {}
                    Err(e) => unread.push(e.to_string()),
                }
            }
        }
        Err(e) => unread.push(e.to_string()),
    }
    let sum = |class: aer::Class| -> u64 {
        functions
            .iter()
            .filter_map(|f| f.total(class))
            .fold(0u64, u64::saturating_add)
    };
    let replays = aer::replay_count(root, &gpu.address).unwrap_or_else(|e| {
        unread.push(e.to_string());
        None
    });
    let counters = |mut v: Verdict| {
        for class in aer::Class::ALL {
            v = v.with_counter(
                &format!("aer_{}", class.name()),
                sum(class) as f64,
                "errors",
            );
        }
        if let Some(n) = replays {
            v = v.with_counter("pcie_replays", n as f64, "replays");
        }
        v
    };
    // Each function's counts above zero, as `lspci -vv` would point at them.
    let detail: Vec<String> = functions
        .iter()
        .flat_map(|f| {
            f.classes.iter().flat_map(move |(class, n)| {
                n.errors
                    .iter()
                    .map(move |(e, c)| format!("{} {} {e} {c}", f.address, class.name()))
            })
        })
        .collect();
    let output = detail
        .iter()
        .chain(&unread)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    let (nonfatal, fatal, corrected) = (
        sum(aer::Class::NonFatal),
        sum(aer::Class::Fatal),
        sum(aer::Class::Correctable),
    );
    let replay_text = replays.map_or_else(String::new, |n| format!(", {n} PCIe replays"));
    if nonfatal + fatal > 0 {
        let at: Vec<&str> = functions
            .iter()
            .filter(|f| {
                f.total(aer::Class::NonFatal).unwrap_or(0) + f.total(aer::Class::Fatal).unwrap_or(0)
                    > 0
            })
            .map(|f| f.address.as_str())
            .collect();
        let names: Vec<String> = functions
            .iter()
            .flat_map(|f| {
                f.classes
                    .iter()
                    .filter(|(c, _)| *c != aer::Class::Correctable)
                    .flat_map(|(_, n)| n.errors.iter().map(|(e, c)| format!("{e} x{c}")))
            })
            .collect();
        let lspci = at.first().copied().unwrap_or(gpu.address.as_str());
        return Err(counters(Verdict::found(codes::PCIE_AER_UNCORRECTED.finding_next(
            format!(
                "{nonfatal} non-fatal and {fatal} fatal uncorrectable AER errors since boot on {} ({}); {corrected} corrected{replay_text}",
                list(&at.iter().map(|a| (*a).to_string()).collect::<Vec<_>>(), 3),
                list(&names, 4)
            ),
            format!(
                "read which errors and when: `sudo lspci -vv -s {lspci}` (UESta) and `dmesg | grep -i -e aer -e {lspci}`; reseat the GPU or its riser/cable if they recur; the counts only grow until reboot, so compare the next run with this one (`rocgate compare`) to see whether they still grow"
            ),
        )))
        .with_output(output));
    }
    let bridges = functions.len() - 1;
    Ok(counters(Verdict::pass(format!(
        "no uncorrectable AER errors on the GPU and {bridges} bridge{} above it; {corrected} corrected{replay_text}",
        if bridges == 1 { "" } else { "s" }
    )))
    .with_output(output))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::RunOptions;
    use crate::layers::fixture::{
        assert_found, code, fails_with, node, node_changed_with, node_with,
    };
    use rocgate_harness::SkipReason;

    #[test]
    fn a_healthy_node_shows_every_gpu_identified_and_bound_at_full_width() {
        let n = node("mi300x-8");
        let v = n.passes(amd_gpu_present, Scope::Node);
        assert_eq!(v.metrics[0].value, 8.0);
        n.assert_pass_on_every_gpu(&[identity, driver_binding, link_width, aer_errors]);
    }

    #[test]
    fn a_node_without_an_amd_gpu_fails_presence() {
        fails_with(
            "no-amd-gpu",
            amd_gpu_present,
            Scope::Node,
            codes::NO_AMD_GPU,
        );
    }

    #[test]
    fn the_gpu_count_needs_an_expectation_and_fails_below_it() {
        let v = node("mi300x-8").verdict(gpu_count, Scope::Node);
        assert_eq!(v.skip_reason, Some(SkipReason::NotConfigured));
        let options = RunOptions {
            expect_gpus: Some(8),
            ..RunOptions::default()
        };
        let v = node_with("gpu-count-mismatch", options.clone()).verdict(gpu_count, Scope::Node);
        assert_eq!(code(&v), Some(codes::GPU_COUNT_MISMATCH.code));
        assert_eq!(
            v.status,
            rocgate_harness::Status::Fail,
            "a lost GPU is no warning"
        );
        // The empty port above it and the kernel log name the lost GPU.
        assert!(
            v.message
                .starts_with("missing 0000:a6:00.0: 7 of 8 expected"),
            "{}",
            v.message
        );
        assert!(
            v.message
                .contains("port 0000:a0:01.1 (1022:14ab) has no device below it")
        );
        assert!(v.message.contains("Link Down"), "{}", v.message);
        assert_eq!(v.metrics[0].value, 7.0);
        // Without an expected count, a GPU amdgpu drove this boot that is
        // gone is still missing.
        let v = node("gpu-count-mismatch").verdict(gpu_count, Scope::Node);
        assert!(
            v.message.starts_with("missing 0000:a6:00.0: 7 of 8"),
            "{}",
            v.message
        );
        // With no trace left, the finding says that nothing names it.
        let traceless = node_changed_with("gpu-count-mismatch", options, |root| {
            std::fs::remove_file(root.join("sys/bus/pci/devices/0000:a0:01.1")).unwrap();
            std::fs::write(root.join("var/log/kern.log"), "").unwrap();
        });
        let v = traceless.verdict(gpu_count, Scope::Node);
        assert_found(
            &v,
            codes::GPU_COUNT_MISMATCH,
            "nothing names the missing one",
        );
    }

    #[test]
    fn uncorrectable_aer_errors_warn_on_their_gpu_and_every_count_is_a_counter() {
        let n = node("pcie-aer-uncorrected");
        let v = n.verdict(aer_errors, n.gpu("0000:c6:00.0"));
        assert_found(&v, codes::PCIE_AER_UNCORRECTED, "2 non-fatal and 0 fatal");
        assert_eq!(v.status, rocgate_harness::Status::Warn);
        assert!(
            v.message.contains("on 0000:c6:00.0 (CmpltTO x2)"),
            "{}",
            v.message
        );
        assert!(
            v.message.contains("41 corrected, 17 PCIe replays"),
            "{}",
            v.message
        );
        assert!(
            v.output.contains("0000:c0:01.1 correctable BadTLP 41"),
            "{}",
            v.output
        );
        let value = |v: &Verdict, name: &str| {
            v.metrics
                .iter()
                .find(|m| m.name == name)
                .map(|m| (m.value, m.kind))
        };
        assert_eq!(
            value(&v, "aer_nonfatal"),
            Some((2.0, Some(rocgate_harness::MetricKind::Counter)))
        );
        assert_eq!(value(&v, "aer_correctable").map(|m| m.0), Some(41.0));
        assert_eq!(value(&v, "pcie_replays").map(|m| m.0), Some(17.0));
        // Its neighbours count nothing.
        let ok = n.passes(aer_errors, n.gpu("0000:05:00.0"));
        assert!(
            ok.message
                .contains("3 bridges above it; 0 corrected, 0 PCIe replays"),
            "{}",
            ok.message
        );
        assert_eq!(value(&ok, "aer_fatal").map(|m| m.0), Some(0.0));
    }

    #[test]
    fn aer_counters_absent_are_not_applicable_and_garbage_is_unverifiable() {
        let gone = node_changed_with("mi300x-8", RunOptions::default(), |root| {
            for class in ["correctable", "nonfatal", "fatal"] {
                std::fs::remove_file(
                    root.join(format!("sys/bus/pci/devices/0000:05:00.0/aer_dev_{class}")),
                )
                .unwrap();
            }
            std::fs::write(
                root.join("sys/bus/pci/devices/0000:26:00.0/aer_dev_fatal"),
                "DLP lots\n",
            )
            .unwrap();
        });
        let v = gone.skips(
            aer_errors,
            gone.gpu("0000:05:00.0"),
            SkipReason::NotApplicable,
        );
        assert!(v.message.contains("pci=noaer"), "{}", v.message);
        let v = gone.skips(
            aer_errors,
            gone.gpu("0000:26:00.0"),
            SkipReason::Unverifiable,
        );
        assert!(v.message.contains("aer_dev_fatal"), "{}", v.message);
    }

    #[test]
    fn a_gpu_reserved_for_passthrough_fails_driver_binding() {
        let n = node("gpu-bound-to-vfio");
        let v = n.verdict(driver_binding, n.gpu("0000:46:00.0"));
        assert_found(&v, codes::GPU_BOUND_TO_OTHER_DRIVER, "bound to vfio-pci");
        n.passes(driver_binding, n.gpu("0000:05:00.0"));
    }

    #[test]
    fn a_narrow_link_fails_link_width_with_its_lanes() {
        let n = node("pcie-link-degraded");
        let v = n.verdict(link_width, n.gpu("0000:26:00.0"));
        assert_found(&v, codes::PCIE_LINK_DEGRADED, "0000:24:00.0 [1022:1500]");
        assert_eq!(v.metrics[0].value, 8.0);
    }

    #[test]
    fn a_slow_slot_link_is_its_own_warning() {
        let n = node("pcie-link-slow");
        let v = n.verdict(link_width, n.gpu("0000:65:00.0"));
        assert_eq!(code(&v), Some(codes::PCIE_LINK_SLOW.code));
        assert_eq!(v.status, rocgate_harness::Status::Warn);
        assert_eq!(v.metrics[1].value, 2.5);
        assert!(v.message.contains("PCIe DPM"), "{}", v.message);
        n.passes(link_width, n.gpu("0000:05:00.0"));
    }

    #[test]
    fn a_vendor_id_that_cannot_be_read_above_the_gpu_is_unverifiable() {
        let n = node_changed_with("mi300x-8", RunOptions::default(), |root| {
            std::fs::write(root.join("sys/bus/pci/devices/0000:04:00.0/vendor"), "zz\n").unwrap();
        });
        let v = n.skips(link_width, n.gpu("0000:05:00.0"), SkipReason::Unverifiable);
        assert!(v.message.contains("0000:04:00.0/vendor"), "{}", v.message);
    }

    #[test]
    fn a_scope_that_names_no_gpu_is_an_internal_error_not_a_panic() {
        let n = node("mi300x-8");
        for scope in [Scope::Node, Scope::Gpu(99)] {
            for check in [identity, driver_binding, link_width] {
                let v = n.verdict(check, scope);
                assert_eq!(code(&v), Some(codes::INTERNAL_ERROR.code), "{scope}");
            }
        }
    }
}
