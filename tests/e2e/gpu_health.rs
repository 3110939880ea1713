//! A GPU's health beyond pass/fail, through the real binary: RAS counts and
//! retired pages in the reports and the inventory, and the system layer
//! advising without blocking (IOMMU, PCIe ACS on the bridges above the
//! GPUs, the CPU frequency governor).

use crate::util;
use crate::util::{
    assert_has, entry, node, result_with_finding, result_with_status, results, run, text,
};
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
    let kfd = util::result(&json, "gpu3.kfd.topology_node");
    assert_eq!(kfd["status"], "blocked", "{kfd}");

    let out = util::inventory_json(&n.root);
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = entry(&inv["gpus"], "pci_address", "0000:65:00.0");
    assert_eq!(gpu["health"]["ras_ue"], "2", "{gpu}");
    assert_eq!(gpu["health"]["ras_bad_pages"], "0", "{gpu}");
    assert_eq!(gpu["health"]["temp_junction"], "38", "{gpu}");
}

/// Runs scenario `name`, which the system layer's check `id` warns about
/// with `code` without blocking anything above it and without failing the
/// run (unless it fails on warnings); returns the node and that check's
/// result.
fn advises(name: &str, id: &str, code: &str) -> (util::Node, Value) {
    let n = node(name);
    let (exit, stdout, json, _) = run(&n.root, &["--fail-on", "warn"]);
    assert_eq!(exit, 1, "--fail-on warn: {stdout}");
    let (exit, stdout, json2, _) = run(&n.root, &[]);
    assert_eq!(exit, 0, "a warning passes: {stdout}");
    assert_has(&stdout, "PASSED with 1 warning");
    assert_eq!(json2["decision"]["health"], "healthy", "{json2}");
    let v = result_with_finding(&json, id, code);
    assert_eq!(v["status"], "warn", "{v}");
    assert!(
        results(&json).iter().all(|r| r["status"] != "blocked"),
        "{stdout}"
    );
    let v = v.clone();
    (n, v)
}

#[test]
fn the_system_layer_advises_without_blocking_what_works() {
    let (_, v) = advises(
        "iommu-translated",
        "node.system.iommu",
        "iommu-not-passthrough",
    );
    assert!(text(&v["finding"]["next_step"]).contains("iommu=pt"), "{v}");
}

#[test]
fn bridges_that_redirect_gpu_traffic_are_named_and_a_user_capture_is_unverifiable() {
    let (n, v) = advises(
        "pcie-acs-enabled",
        "node.system.pcie_acs",
        "pcie-acs-enabled",
    );
    let message = text(&v["message"]);
    assert!(
        message.contains("at 8 of 24 bridges")
            && message.contains("0000:e0:01.1 (ReqRedir CmpltRedir on; above 0000:e5:00.0)"),
        "{message}"
    );
    let next = text(&v["finding"]["next_step"]);
    assert_has(next, "setpci -s $b ECAP_ACS+0x6.w=0000");
    assert_has(next, "0000:00:01.1");

    // A redacted snapshot keeps each bridge's config byte for byte: the
    // replay finds the same bridges.
    let archive = n.root.with_extension("tar.zst");
    util::snapshot_with(&["snapshot", "--redact"], &n.root, &archive);
    let (_, _, replayed, _) = run(&archive, &[]);
    let r = result_with_finding(&replayed, "node.system.pcie_acs", "pcie-acs-enabled");
    assert_eq!(r["message"], v["message"], "{r}");

    // What sysfs gives a reader without CAP_SYS_ADMIN: 64 bytes of each
    // config. The check could not look, and says how it could.
    for entry in fs::read_dir(n.root.join("sys/bus/pci/devices")).unwrap() {
        let config = entry.unwrap().path().join("config");
        if let Ok(bytes) = fs::read(&config) {
            fs::write(&config, &bytes[..64]).unwrap();
        }
    }
    let (code, stdout, json, _) = run(&n.root, &["--strict"]);
    assert_eq!(code, 1, "--strict fails on what could not look: {stdout}");
    let v = result_with_status(&json, "node.system.pcie_acs", "skipped");
    assert_eq!(v["skip_reason"], "unverifiable", "{v}");
    let message = text(&v["message"]);
    assert!(
        message.contains("24 of 24 bridges") && message.contains("run rocgate as root"),
        "{v}"
    );
    assert!(
        json["unverified"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id == "node.system.pcie_acs"),
        "{}",
        json["unverified"]
    );
}

#[test]
fn cpus_off_the_performance_governor_are_counted_without_blocking() {
    let (_, v) = advises(
        "cpu-governor-powersave",
        "node.system.cpu_governor",
        "cpu-governor-not-performance",
    );
    assert!(
        text(&v["message"]).contains("powersave on 8 of 8 CPUs"),
        "{v}"
    );
    assert!(
        text(&v["finding"]["next_step"]).contains("cpupower frequency-set -g performance"),
        "{v}"
    );
}

#[test]
fn each_gpu_s_kernel_log_events_fail_or_warn_on_that_gpu_and_an_old_day_is_history() {
    let n = node("gpu-faults-logged");
    let (code, _, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 1);
    for (gpu, want) in [
        ("gpu0", "gpu-reset-failed"),
        ("gpu1", "gpu-job-timeout"),
        ("gpu2", "gpu-page-fault"),
        ("gpu3", "gpu-throttled"),
        ("gpu4", "gpu-shader-error"),
        ("gpu5", "gpu-ras-event"),
        ("gpu6", "gpu-thermal-shutdown"),
    ] {
        result_with_finding(&json, &format!("{gpu}.amdgpu.gpu_events"), want);
    }
    result_with_status(&json, "gpu7.amdgpu.gpu_events", "pass");
    let fault = util::result(&json, "gpu2.amdgpu.gpu_events");
    let message = fault["message"].as_str().unwrap();
    assert!(message.contains("by python3 (pid 48213)"), "{message}");
    assert!(message.contains("14.6 h ago"), "{message}");
    // The timeout names no device: the reset after it does, and the
    // output says the line was placed by its neighbours.
    let timeout = util::result(&json, "gpu1.amdgpu.gpu_events");
    assert!(
        text(&timeout["output"]).contains("attributed by the lines around it"),
        "{timeout}"
    );
    assert!(junit.contains("gpu-thermal-shutdown"));

    // The same log judged over the last hour: every event is history, a
    // warning, and the run passes.
    let (code, _, json, _) = run(&n.root, &["--since", "1h"]);
    assert_eq!(code, 0);
    for gpu in 0..7 {
        result_with_finding(
            &json,
            &format!("gpu{gpu}.amdgpu.gpu_events"),
            "gpu-event-history",
        );
    }
    let old = util::result(&json, "gpu0.amdgpu.gpu_events");
    assert!(
        text(&old["message"]).starts_with("reset failed on gpu0 (0000:05:00.0"),
        "{old}"
    );
    assert!(
        text(&old["output"]).contains("[before the window] [39602.530117]"),
        "{old}"
    );
    // A window that covers them judges them again.
    let (code, _, json, _) = run(&n.root, &["--since", "24h"]);
    assert_eq!(code, 1);
    result_with_finding(&json, "gpu6.amdgpu.gpu_events", "gpu-thermal-shutdown");
}

#[test]
fn bus_events_land_on_the_gpu_below_the_port_and_corrected_errors_are_counted_only() {
    let n = node("bus-faults-logged");
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    for (gpu, want) in [
        ("gpu0", "pcie-link-down"),
        ("gpu1", "pcie-fatal-error"),
        ("gpu2", "pcie-error-logged"),
        ("gpu3", "iommu-page-fault"),
    ] {
        result_with_finding(&json, &format!("{gpu}.pci.bus_events"), want);
    }
    // gpu4's root port corrected a bad TLP: counted, not judged.
    let gpu4 = result_with_status(&json, "gpu4.pci.bus_events", "pass");
    assert!(
        text(&gpu4["message"]).contains("(2 not judged: PCIe corrected error x2)"),
        "{gpu4}"
    );
    // amdgpu's events are not the bus's.
    result_with_status(&json, "gpu0.amdgpu.gpu_events", "pass");
}

#[test]
fn aer_counters_are_counters_that_compare_sees_grow() {
    let n = node("pcie-aer-uncorrected");
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 0, "a warning");
    let r = result_with_finding(&json, "gpu6.pci.aer_errors", "pcie-aer-uncorrected");
    assert_eq!(r["status"], "warn");
    let metric = |r: &Value, name: &str| {
        r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| (m["value"].as_f64().unwrap(), m["kind"].clone()))
    };
    assert_eq!(
        metric(r, "aer_nonfatal"),
        Some((2.0, Value::from("counter")))
    );
    assert_eq!(metric(r, "pcie_replays").map(|m| m.0), Some(17.0));
    // One more replay since: compare calls it a regression.
    let before = n.root.with_extension("before.json");
    fs::write(&before, serde_json::to_string(&json).unwrap()).unwrap();
    fs::write(
        n.root
            .join("sys/bus/pci/devices/0000:c6:00.0/pcie_replay_count"),
        "18\n",
    )
    .unwrap();
    let (_, _, after_json, _) = run(&n.root, &[]);
    let after = n.root.with_extension("after.json");
    fs::write(&after, serde_json::to_string(&after_json).unwrap()).unwrap();
    let out = util::rocgate()
        .args(["compare"])
        .arg(&before)
        .arg(&after)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("pcie_replays"), "{said}");
}
