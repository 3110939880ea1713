//! A GPU's health beyond pass/fail, through the real binary: RAS counts and
//! retired pages in the reports and the inventory, a GPU whose correctable
//! errors grow between two runs caught by `compare`, and the system layer
//! advising without blocking.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{HANG_GUARD, entry, node, result_with_finding, rocgate, run};
use serde_json::Value;
use std::fs;

#[test]
fn ras_counts_are_gpu_properties_in_the_reports_and_the_inventory() {
    let n = node("ras-uncorrectable");
    let (code, _, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 1);
    result_with_finding(&json, "gpu3.amdgpu.ras_errors", "ras-uncorrectable");
    let gpu3 = entry(&json["scopes"], "scope", "gpu3");
    assert_eq!(gpu3["properties"]["ras_ue"], "2", "{gpu3}");
    assert_eq!(gpu3["properties"]["ras_ce"], "31", "{gpu3}");
    assert!(junit.contains(r#"<property name="ras_ue" value="2"/>"#));
    // The GPU's layers above are blocked: its results cannot be trusted.
    let kfd = common::result(&json, "gpu3.kfd.topology_node");
    assert_eq!(kfd["status"], "blocked", "{kfd}");

    let out = rocgate()
        .args(["inventory", "--json", "--sysroot"])
        .arg(&n.root)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = entry(&inv["gpus"], "pci_address", "0000:65:00.0");
    assert_eq!(gpu["health"]["ras_ue"], "2", "{gpu}");
    assert_eq!(gpu["health"]["ras_bad_pages"], "0", "{gpu}");
    assert_eq!(gpu["health"]["temp_junction"], "38", "{gpu}");
}

#[test]
fn correctable_errors_that_grow_between_runs_are_a_regression() {
    let n = node("mi300x-8");
    let before = n.root.with_extension("before.json");
    let (_, _, json, _) = run(&n.root, &[]);
    fs::write(&before, json.to_string()).unwrap();
    // The same GPU, later: 5 correctable UMC errors (MI300X counts through
    // ACA), and hotter, which is not a regression.
    let aca = n.root.join("sys/bus/pci/devices/0000:26:00.0/ras/aca_umc");
    fs::write(&aca, "ue: 0\nce: 5\nde: 0\n").unwrap();
    let (code, _, after, _) = run(&n.root, &[]);
    assert_eq!(code, 0, "correctable errors alone do not fail a run");
    let after_file = n.root.with_extension("after.json");
    fs::write(&after_file, after.to_string()).unwrap();
    let out = rocgate()
        .arg("compare")
        .arg(&before)
        .arg(&after_file)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("Error counters that grew"), "{text}");
    assert!(
        text.contains("gpu1.amdgpu.ras_errors ras_ce.umc 0 -> 5 errors (+5)"),
        "{text}"
    );
}

#[test]
fn the_system_layer_advises_without_blocking_what_works() {
    let n = node("iommu-translated");
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1, "{stdout}");
    let v = result_with_finding(&json, "node.system.iommu", "iommu-not-passthrough");
    assert_eq!(v["advisory"], true, "{v}");
    assert!(
        v["finding"]["next_step"]
            .as_str()
            .unwrap()
            .contains("iommu=pt"),
        "{v}"
    );
    // Nothing above it is blocked.
    assert!(
        json["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] != "blocked"),
        "{stdout}"
    );
}
