//! firmware: the microcode amdgpu loaded at probe, and load failures in the
//! kernel log.

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{NEEDS_LIVE_AMDGPU, check, end, list, pci_function};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
use rocgate_node::facts::NodeFacts;
use rocgate_node::facts::kernel_log::{FirmwareErrorKind, FirmwareEvent, KernelLog};
use rocgate_node::facts::pci::parse_hex;

/// A GPU whose init amdgpu abandoned loads and reports no firmware: the
/// checks that read those are blocked by the one that says why, so one
/// cause is one red line.
const AFTER_INIT: &[&str] = &["amdgpu::module_live", "firmware::init_errors"];

/// The firmware layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        Check {
            gates: false,
            deps: NEEDS_LIVE_AMDGPU,
            ..check(
                "firmware::kernel_log",
                stack::FIRMWARE,
                ScopeKind::Node,
                "the kernel log has no firmware or PSP errors that name no GPU",
                kernel_log,
            )
        },
        Check {
            deps: NEEDS_LIVE_AMDGPU,
            ..check(
                "firmware::init_errors",
                stack::FIRMWARE,
                ScopeKind::PerGpu,
                "amdgpu did not abandon this GPU's init over firmware (kernel log)",
                init_errors,
            )
        },
        Check {
            deps: AFTER_INIT,
            gates: false,
            ..check(
                "firmware::load_errors",
                stack::FIRMWARE,
                ScopeKind::PerGpu,
                "every firmware file amdgpu requested for this GPU loaded (kernel log)",
                load_errors,
            )
        },
        Check {
            deps: AFTER_INIT,
            ..check(
                "firmware::versions",
                stack::FIRMWARE,
                ScopeKind::PerGpu,
                "amdgpu reports this GPU's firmware versions (fw_version/*, vbios_version)",
                versions,
            )
        },
    ]
}

/// The kernel log; without it no firmware failure can be ruled out.
fn readable_log(facts: &NodeFacts) -> Result<&KernelLog, Verdict> {
    facts
        .kernel_log()
        .as_ref()
        .map_err(|why| Verdict::unverifiable(why.clone()))
}

/// This GPU's firmware events and where they were read.
fn events_for(facts: &NodeFacts, address: &str) -> Result<(Vec<FirmwareEvent>, String), Verdict> {
    let log = readable_log(facts)?;
    let events = facts
        .firmware_events()
        .iter()
        .filter(|e| e.address.as_deref() == Some(address))
        .cloned()
        .collect();
    Ok((events, log.source.clone()))
}

fn lines(events: &[FirmwareEvent]) -> String {
    events
        .iter()
        .map(|e| {
            if e.by_context {
                format!("{} (attributed by the preceding line)", e.line)
            } else {
                e.line.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where a requested firmware file is on disk, if anywhere.
fn firmware_on_disk(facts: &NodeFacts, file: &str) -> Option<String> {
    ["", ".zst", ".xz"]
        .iter()
        .map(|ext| format!("/lib/firmware/{file}{ext}"))
        .find(|p| facts.sysroot.exists(p))
}

fn missing_files_advice(facts: &NodeFacts, events: &[FirmwareEvent]) -> String {
    let mut files: Vec<&str> = events.iter().filter_map(|e| e.file.as_deref()).collect();
    files.dedup();
    if files.is_empty() {
        return "read the GPU's kernel log (`dmesg | grep -i -e psp -e firmware`); reinstall the firmware that matches the driver (amdgpu-dkms-firmware for DKMS, linux-firmware for the inbox driver) and reboot; if it persists, update the GPU's firmware bundle (PLDM/IFWI)".into();
    }
    let (present, absent): (Vec<&str>, Vec<&str>) = files
        .iter()
        .partition(|f| firmware_on_disk(facts, f).is_some());
    let mut advice = Vec::new();
    if !absent.is_empty() {
        advice.push(format!(
            "{} missing from /lib/firmware: install the firmware matching the driver (amdgpu-dkms-firmware for DKMS, linux-firmware for the inbox driver)",
            list(&absent, 4)
        ));
    }
    if !present.is_empty() {
        advice.push(format!(
            "{} present in /lib/firmware but did not load: the initramfs is likely stale; run <update-initramfs>",
            list(&present, 4)
        ));
    }
    format!("{}; then reboot", advice.join("; "))
}

fn kernel_log(ctx: &NodeContext, _: Scope) -> Outcome {
    let log = readable_log(&ctx.facts)?;
    let stray: Vec<FirmwareEvent> = ctx
        .facts
        .firmware_events()
        .iter()
        .filter(|e| e.address.is_none())
        .cloned()
        .collect();
    if stray.is_empty() {
        return Ok(Verdict::pass(format!(
            "no firmware errors without a GPU address in {}",
            log.source
        )));
    }
    end(Verdict::found(codes::FIRMWARE_LOAD_DEGRADED.finding_next(
        format!(
            "{} firmware/PSP error lines in {} name no GPU: {}",
            stray.len(),
            log.source,
            stray[0].line
        ),
        missing_files_advice(&ctx.facts, &stray),
    ))
    .with_output(lines(&stray)))
}

fn init_errors(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let (events, source) = events_for(&ctx.facts, gpu.physical_address())?;
    let fatal: Vec<&FirmwareEvent> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                FirmwareErrorKind::FatalInit | FirmwareErrorKind::Psp
            )
        })
        .collect();
    if fatal.is_empty() {
        return Ok(Verdict::pass(format!(
            "no GPU-init or PSP errors for {} in {source}",
            gpu.physical_address()
        )));
    }
    let loads: Vec<&FirmwareEvent> = events
        .iter()
        .filter(|e| e.kind == FirmwareErrorKind::Load)
        .collect();
    let (code, cause) = match loads.iter().find_map(|e| e.file.as_deref()) {
        Some(file) => (
            codes::FIRMWARE_LOAD_FAILED,
            format!("after {file} failed to load"),
        ),
        None if !loads.is_empty() => (
            codes::FIRMWARE_LOAD_FAILED,
            "after a firmware load failure".to_string(),
        ),
        None => (codes::GPU_INIT_FAILED, "with PSP/init errors".to_string()),
    };
    end(Verdict::found(code.finding_next(
        format!(
            "{}: amdgpu failed this GPU's init {cause}: {}",
            gpu.label(),
            fatal.last().map_or("", |e| e.line.as_str())
        ),
        missing_files_advice(&ctx.facts, &events),
    ))
    .with_output(lines(&events)))
}

fn load_errors(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let (events, source) = events_for(&ctx.facts, gpu.physical_address())?;
    let loads: Vec<FirmwareEvent> = events
        .into_iter()
        .filter(|e| e.kind == FirmwareErrorKind::Load)
        .collect();
    if loads.is_empty() {
        return Ok(Verdict::pass(format!(
            "no firmware load failures for {} in {source}",
            gpu.physical_address()
        )));
    }
    let files: Vec<&str> = loads.iter().filter_map(|e| e.file.as_deref()).collect();
    let what = if files.is_empty() {
        "firmware".to_string()
    } else {
        list(&files, 4)
    };
    end(Verdict::found(codes::FIRMWARE_LOAD_DEGRADED.finding_next(format!("{}: {what} failed to load (see output); features that need it are off even if the GPU initialised", gpu.label()), missing_files_advice(&ctx.facts, &loads)))
    .with_output(lines(&loads)))
}

fn versions(ctx: &NodeContext, scope: Scope) -> Outcome {
    let gpu = ctx.gpu(scope)?;
    let pci = pci_function(gpu)?;
    let root = &ctx.facts.sysroot;
    let dir = format!("{}/fw_version", pci.sysfs_dir());
    let names = root.list_dir(&dir).map_err(|e| {
        if e.is_not_found() {
            Verdict::found(codes::FIRMWARE_NOT_REPORTED.finding_next(format!(
                    "amdgpu exposes no firmware versions for {} ({} does not exist): the driver did not finish initialising this GPU",
                    pci.address, dir
                ), format!("read this GPU's kernel log: `dmesg | grep {}`", pci.address)))
        } else {
            Verdict::found(codes::FIRMWARE_VERSION_UNREADABLE.finding_next(e.to_string(), "run rocgate as a user who can read the GPU's sysfs files, or check the device cgroup"))
        }
    })?;
    let mut found = Vec::new();
    let mut bad = Vec::new();
    let mut mec_zero = false;
    // What was read becomes the GPU's report properties (`fw_mec`, `vbios`),
    // whatever the verdict: a version is worth knowing most when it is wrong.
    let mut learned = Vec::new();
    for name in names.iter().filter(|n| n.ends_with("_fw_version")) {
        let host = format!("{dir}/{name}");
        let ip = name.trim_end_matches("_fw_version").to_uppercase();
        match root.read_text(&host) {
            Ok(text) => match parse_hex(&text) {
                Some(v) => {
                    mec_zero |= ip == "MEC" && v == 0;
                    found.push(format!("{ip} 0x{v:08x}"));
                    learned.push((format!("fw_{}", ip.to_lowercase()), format!("0x{v:08x}")));
                }
                None => bad.push(format!("failed to parse {}: '{text}' is not 0x-hex", host)),
            },
            Err(e) => bad.push(e.to_string()),
        }
    }
    let vbios = root
        .read_opt(&format!("{}/vbios_version", pci.sysfs_dir()))
        .ok()
        .flatten()
        .filter(|v| !v.is_empty());
    if let Some(v) = &vbios {
        learned.push(("vbios".to_string(), v.clone()));
    }
    let with_learned = |verdict: Verdict| {
        learned
            .iter()
            .fold(verdict, |acc, (k, v)| acc.with_fact(k, v.clone()))
    };
    if !bad.is_empty() {
        return Err(with_learned(Verdict::found(codes::FIRMWARE_VERSION_UNREADABLE.finding_next(format!("{} firmware version files of {} are unreadable: {}", bad.len(), pci.address, bad[0]), "the driver exposes damaged firmware information; read `dmesg | grep -i firmware` and reload amdgpu"))
        .with_output(bad.join("\n"))));
    }
    if found.is_empty() {
        return end(Verdict::found(codes::FIRMWARE_NOT_REPORTED.finding_next(
            format!("{dir} lists no *_fw_version files"),
            format!("read this GPU's kernel log: `dmesg | grep {}`", pci.address),
        )));
    }
    if mec_zero {
        return Err(with_learned(Verdict::found(codes::FIRMWARE_LOAD_FAILED.finding_next(format!(
                "{}: the MEC (compute) firmware version is 0: its microcode is not loaded",
                gpu.label()
            ), "reinstall the GPU firmware matching the driver and reboot; read `dmesg | grep -i mec`"))
        .with_output(found.join("\n"))));
    }
    let summary: Vec<&String> = found
        .iter()
        .filter(|f| {
            ["MEC ", "SOS ", "SMC ", "SDMA ", "RLC "]
                .iter()
                .any(|p| f.starts_with(p))
        })
        .collect();
    let mut message = format!(
        "{} firmware versions: {}",
        found.len(),
        summary
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(v) = &vbios {
        message.push_str(&format!("; VBIOS {v}"));
    }
    let mut output = found.join("\n");
    if let Some(v) = vbios {
        output.push_str(&format!("\nVBIOS {v}"));
    }
    Ok(with_learned(Verdict::pass(message).with_output(output)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{code, node};
    use rocgate_harness::Status;

    #[test]
    fn a_healthy_node_reports_its_firmware_and_no_errors() {
        let n = node("mi300x-8");
        n.passes(kernel_log, Scope::Node);
        n.assert_pass_on_every_gpu(&[init_errors, load_errors, versions]);
        let v = n.verdict(versions, n.gpus()[0]);
        assert!(v.facts.contains_key("fw_mec"), "{:?}", v.facts);
    }

    #[test]
    fn a_missing_psp_firmware_fails_the_init_of_its_gpu_alone_naming_the_file() {
        let n = node("firmware-load-failed");
        let failed: Vec<Verdict> = n
            .gpus()
            .into_iter()
            .map(|scope| n.verdict(init_errors, scope))
            .filter(|v| v.status != Status::Pass)
            .collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(code(&failed[0]), Some(codes::FIRMWARE_LOAD_FAILED.code));
        assert!(
            failed[0].message.contains("psp_13_0_6_toc.bin"),
            "{}",
            failed[0].message
        );
    }
}
