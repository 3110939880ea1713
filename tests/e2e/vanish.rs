//! A GPU that falls off the bus during a run, through the binary: the fake
//! ROCm's `hsa_init@gpuN=vanish` removes GPU N's KFD node and PCI entry from
//! the fixture when the node's worker initialises ROCr, which every GPU's
//! worker waits for (`hsa::agent` needs `hsa::init`), so each GPU's worker
//! discovers a node without it. Its checks fail `gpu-vanished` naming its
//! address (the node's fault, never rocgate's `internal-error`), and the
//! GPUs renumbered above it are still the GPUs their scopes name.

use crate::util::{
    FakeRun, HANG_GUARD, assert_gpus_pass, assert_has, assert_lacks, fake_rocm, node, on_sysroot,
    results, text,
};
use serde_json::Value;

/// The results of `scope` that carry finding `code`.
fn with_code<'a>(json: &'a Value, scope: &str, code: &str) -> Vec<&'a Value> {
    results(json)
        .iter()
        .filter(|r| r["scope"] == scope && r["finding"]["code"] == code)
        .collect()
}

#[test]
fn a_lower_gpu_that_vanishes_fails_itself_and_the_gpus_above_test_themselves() {
    // gpu0 (0000:05:00.0) goes: every GPU above it moves down one index in
    // the workers' discovery.
    let n = node("mi300x-8");
    // HIP, loaded after the GPU went, lists one device fewer than the node
    // had (node.hip.device_count fails, as it should); --no-gate runs each
    // GPU's HIP checks anyway.
    let (json, _) = FakeRun::on(&n.root)
        .faults("hsa_init@gpu0=vanish")
        .args(&["--no-gate"])
        .exits(1);
    let gone = with_code(&json, "gpu0", "gpu-vanished");
    assert!(!gone.is_empty(), "{:#}", json["results"]);
    for r in &gone {
        let said = text(&r["finding"]["message"]);
        assert_has(said, "0000:05:00.0");
        assert!(
            text(&r["finding"]["next_step"]).contains("dmesg"),
            "{}",
            r["finding"]
        );
    }
    assert!(
        results(&json)
            .iter()
            .all(|r| r["finding"]["code"] != "internal-error"),
        "{:#}",
        json["results"]
    );
    // Each GPU above is checked as itself: its HSA agent and HIP device
    // match its own KFD node, not its upper neighbour's.
    assert_gpus_pass(&json, 1..8, &["hsa", "hip"]);
}

#[test]
fn the_top_gpu_vanishing_is_unhealthy_naming_it_not_unknown() {
    // gpu7 (0000:e5:00.0), the last: its index names no GPU any more.
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let out = on_sysroot(&["health", "--budget", "300"], &n.root)
        .arg("--rocm-path")
        .arg(rocm.path())
        .env("ROCGATE_FAKE_NODE", &n.root)
        .env("ROCGATE_FAKE_FAULTS", "hsa_init@gpu7=vanish")
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = stdout.lines().next().unwrap_or_default();
    assert!(
        line.contains("0000:e5:00.0") && !line.contains("unknown"),
        "{stdout}"
    );
    assert_lacks(&stdout, "internal-error");
    eprintln!("{stdout}");
}
