//! The PCIe link a GPU reaches the host through, judged through the binary
//! as amdgpu finds it: on MI300-class GPUs the slot link of the switch
//! inside the GPU's package (upstream port `1022:1500`, downstream port
//! `1002:1501`), whose GPU function always reads x16 at 32 GT/s on its own
//! virtual link (`amdgpu_device_partner_bandwidth`,
//! drivers/gpu/drm/amd/amdgpu/amdgpu_device.c); on MI210 the GPU's own link.

use crate::util::{assert_has, node, result, result_with_finding, result_with_status, run, text};
use std::path::Path;

/// Writes `value` to a PCI function's sysfs attribute.
fn set(root: &Path, address: &str, file: &str, value: &str) {
    let path = root.join(format!("sys/bus/pci/devices/{address}/{file}"));
    assert!(path.exists(), "{}", path.display());
    std::fs::write(path, format!("{value}\n")).unwrap();
}

/// Reads a PCI function's sysfs attribute.
fn get(root: &Path, address: &str, file: &str) -> String {
    std::fs::read_to_string(root.join(format!("sys/bus/pci/devices/{address}/{file}")))
        .unwrap()
        .trim()
        .to_string()
}

/// Trains the slot link of the MI300X on `bus` (both of its ends: the root
/// port and the internal switch's upstream port) to `width` and `speed`.
fn train_slot(root: &Path, bus: u8, width: &str, speed: &str) {
    let ends = [
        format!("0000:{:02x}:01.1", bus & 0xe0),
        format!("0000:{:02x}:00.0", bus - 2),
    ];
    for end in &ends {
        set(root, end, "current_link_width", width);
        set(root, end, "current_link_speed", speed);
    }
}

#[test]
fn a_slot_link_trained_narrow_behind_the_internal_switch_warns() {
    let n = node("pcie-link-degraded");
    // The GPU function reads full width: its own link is virtual.
    assert_eq!(get(&n.root, "0000:26:00.0", "current_link_width"), "16");
    assert_eq!(get(&n.root, "0000:25:00.0", "device"), "0x1501");
    assert_eq!(get(&n.root, "0000:24:00.0", "device"), "0x1500");
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 0, "a narrow link is a warning: {stdout}");
    let r = result_with_finding(&json, "gpu1.pci.link_width", "pcie-link-degraded");
    let message = text(&r["message"]);
    assert_has(message, "runs at x8, the link supports x16");
    assert_has(message, "0000:24:00.0 [1022:1500]");
    assert_has(message, "0000:20:01.1");
    assert!(
        text(&r["finding"]["next_step"]).contains("lspci -vv -s 0000:20:01.1"),
        "{r}"
    );
    assert_has(&junit, "warn [pcie-link-degraded]");
    // The other GPUs are judged on their own slot links, all x16.
    result_with_status(&json, "gpu0.pci.link_width", "pass");

    // A variant: another GPU's slot at x4.
    let n = node("mi300x-8");
    train_slot(&n.root, 0xc6, "4", "32.0 GT/s PCIe");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_finding(&json, "gpu6.pci.link_width", "pcie-link-degraded");
    assert!(text(&r["message"]).contains("runs at x4"), "{r}");
    assert_eq!(r["metrics"][0]["value"], 4.0, "{r}");
}

#[test]
fn a_slot_link_at_a_lower_speed_warns_and_says_dpm_may_lower_it_at_idle() {
    let n = node("pcie-link-slow");
    assert_eq!(
        get(&n.root, "0000:65:00.0", "current_link_speed"),
        "32.0 GT/s PCIe"
    );
    assert_eq!(get(&n.root, "0000:65:00.0", "current_link_width"), "16");
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    let r = result_with_finding(&json, "gpu3.pci.link_width", "pcie-link-slow");
    assert_eq!(r["finding"]["severity"], "warn");
    let message = text(&r["message"]);
    assert_has(
        message,
        "2.5 GT/s PCIe (Gen1), the link supports 32.0 GT/s PCIe (Gen5)",
    );
    assert_has(message, "PCIe DPM");
    assert_has(message, "at idle can be normal");
    let next = text(&r["finding"]["next_step"]);
    assert_has(next, "under load");
    assert_has(next, "lspci -vv -s 0000:60:01.1");
    assert_has(next, "BIOS");
    assert_has(&junit, "warn [pcie-link-slow]");

    // A variant: Gen3 on another slot, sysfs's older spelling.
    let n = node("mi300x-8");
    train_slot(&n.root, 0x85, "16", "8 GT/s");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_finding(&json, "gpu4.pci.link_width", "pcie-link-slow");
    assert!(text(&r["message"]).contains("(Gen3)"), "{r}");
    // A speed the kernel cannot name is not a pass.
    let n = node("mi300x-8");
    train_slot(&n.root, 0x05, "16", "Unknown");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, "gpu0.pci.link_width", "skipped");
    assert!(text(&r["message"]).contains("\"Unknown\""), "{r}");
}

#[test]
fn a_slot_that_caps_the_link_is_no_degradation() {
    // Both ends' Link Capabilities bound the link: an x8 slot trains x8.
    let n = node("mi300x-8");
    train_slot(&n.root, 0x46, "8", "32.0 GT/s PCIe");
    set(&n.root, "0000:40:01.1", "max_link_width", "8");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, "gpu2.pci.link_width", "pass");
    assert!(
        text(&r["message"]).contains("x8 at ")
            && text(&r["message"]).contains("the port above limits it to x8"),
        "{r}"
    );
}

#[test]
fn a_gpu_without_an_internal_switch_is_judged_on_its_own_link() {
    let n = node("mi210-8-two-hives");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, "gpu0.pci.link_width", "pass");
    assert!(text(&r["message"]).starts_with("x16 at 16.0 GT/s"), "{r}");
    let gpus: Vec<(String, String)> = (0..2)
        .map(|i| {
            let r = result(&json, &format!("gpu{i}.pci.identity"));
            let address = text(&r["message"]).split(':').take(3).collect::<Vec<_>>();
            (format!("gpu{i}"), address.join(":"))
        })
        .collect();
    set(&n.root, &gpus[0].1, "current_link_width", "8");
    set(&n.root, &gpus[1].1, "current_link_speed", "5.0 GT/s PCIe");
    let (_, _, json, _) = run(&n.root, &[]);
    result_with_finding(
        &json,
        &format!("{}.pci.link_width", gpus[0].0),
        "pcie-link-degraded",
    );
    let r = result_with_finding(
        &json,
        &format!("{}.pci.link_width", gpus[1].0),
        "pcie-link-slow",
    );
    assert!(
        text(&r["message"])
            .contains("5.0 GT/s PCIe (Gen2), the link supports 16.0 GT/s PCIe (Gen4)"),
        "{r}"
    );
}

#[test]
fn a_gpu_lost_with_its_internal_switch_is_named_by_its_slot_port() {
    let n = node("gpu-count-mismatch");
    // The GPU's package took its switch with it; the root port stays.
    assert!(n.root.join("sys/bus/pci/devices/0000:a0:01.1").exists());
    assert!(!n.root.join("sys/bus/pci/devices/0000:a4:00.0").exists());
    let (code, _, json, _) = run(&n.root, &["--expect-gpus", "8"]);
    assert_eq!(code, 1);
    let r = result_with_finding(&json, "node.pci.gpu_count", "gpu-count-mismatch");
    let message = text(&r["message"]);
    assert!(
        message.starts_with("missing 0000:a6:00.0: 7 of 8")
            && message.contains("port 0000:a0:01.1 (1022:14ab) has no device below it")
            && message.contains("slot 5 of port 0000:a0:01.1: Link Down"),
        "{message}"
    );
    // The bridges above each GPU: a root port and the two internal ports.
    let r = result(&json, "node.system.pcie_acs");
    assert!(
        text(&r["message"]).contains("none of the 21 bridges"),
        "{r}"
    );
}
