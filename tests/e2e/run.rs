//! `rocgate run` end to end: gating, exit codes, GPU selection, JSON and
//! JUnit structure.

use crate::util;
use crate::util::{
    assert_has, assert_lacks, entry, node, on_sysroot, result, result_with_status, results,
    rocgate, run,
};

#[test]
fn healthy_node_passes_with_exit_zero() {
    let n = node("mi300x-8");
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["passed"], true);
    // Only the ACS advisory warns: Linux turns ACS redirect on at boot on
    // an EPYC host.
    assert!(results(&json).iter().all(|r| r["status"] == "pass"
        || r["status"] == "skipped"
        || (r["status"] == "warn" && r["id"] == "node.system.pcie_acs")));
    assert_eq!(result(&json, "gpu3.kfd.compute_units")["status"], "pass");
    assert!(stdout.contains("PASSED"));
    // One flat suite per scope.
    assert_eq!(junit.matches("<testsuite ").count(), 9);
    assert!(junit.contains(r#"<property name="pci_address" value="0000:65:00.0"/>"#));
    assert!(junit.contains(r#"<property name="gfx_target" value="gfx942"/>"#));
    assert!(junit.contains(r#"<property name="first_failing_layer" value="none"/>"#));
}

#[test]
fn a_node_failure_blocks_every_gpu_above_it() {
    let n = node("amdgpu-not-loaded");
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 1);
    let failed: Vec<&str> = results(&json)
        .iter()
        .filter(|r| r["status"] == "fail")
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["node.amdgpu.module_live"]);
    for gpu in 0..8 {
        for check in ["firmware.versions", "amdgpu.bound", "kfd.topology_node"] {
            let r = result(&json, &format!("gpu{gpu}.{check}"));
            assert_eq!(r["status"], "blocked", "{r}");
            assert_eq!(r["blocked_by"], "node.amdgpu.module_live");
        }
    }
    assert_eq!(json["first_failing_layer"], "amdgpu");
    assert!(junit.contains(r#"<skipped message="blocked by node.amdgpu.module_live: the amdgpu kernel module is not loaded"#));
    assert!(junit.contains(r#"type="amdgpu-not-loaded""#));
    assert_has(&stdout, "Failures (first failing layer: amdgpu)");
}

#[test]
fn no_gate_runs_everything() {
    let n = node("amdgpu-not-loaded");
    let (code, _, json, _) = run(&n.root, &["--no-gate"]);
    assert_eq!(code, 1);
    assert!(results(&json).iter().all(|r| r["status"] != "blocked"));
    assert_eq!(result(&json, "gpu0.amdgpu.bound")["status"], "fail");
}

#[test]
fn a_gpu_failure_blocks_only_that_gpu() {
    let n = node("firmware-load-failed");
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    // The GPU that failed init is not in KFD, so it is listed after the seven that are.
    assert_eq!(result(&json, "gpu7.firmware.init_errors")["status"], "fail");
    assert_eq!(result(&json, "gpu7.amdgpu.bound")["status"], "blocked");
    assert_eq!(
        result(&json, "gpu7.kfd.topology_node")["blocked_by"],
        "gpu7.firmware.init_errors"
    );
    for gpu in 0..7 {
        assert_eq!(
            result(&json, &format!("gpu{gpu}.kfd.compute_units"))["status"],
            "pass"
        );
    }
    let scope = entry(&json["scopes"], "scope", "gpu7");
    assert_eq!(scope["first_failing_layer"], "firmware");
    assert_eq!(scope["properties"]["pci_address"], "0000:65:00.0");
}

fn scope_names(json: &serde_json::Value) -> Vec<&str> {
    json["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scope"].as_str().unwrap())
        .collect()
}

#[test]
fn gpu_selection_by_index_and_address() {
    let n = node("mi300x-8-cpx");
    let (code, _, json, junit) = run(&n.root, &["--gpus", "0,3"]);
    assert_eq!(code, 0);
    let scopes = scope_names(&json);
    assert_eq!(scopes, ["node", "gpu0", "gpu3"]);
    assert_eq!(junit.matches("<testsuite ").count(), 3);

    // A device's address selects its eight partitions.
    let (_, _, json, _) = run(&n.root, &["--gpus", "26:00.0"]);
    let scopes = scope_names(&json);
    assert_eq!(
        scopes,
        [
            "node", "gpu8", "gpu9", "gpu10", "gpu11", "gpu12", "gpu13", "gpu14", "gpu15"
        ]
    );

    let out = on_sysroot(&["run", "--gpus", "64"], &n.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no GPU matches '64'"));
}

#[test]
fn expect_gpus_fails_the_count_without_blocking() {
    let n = node("gpu-count-mismatch");
    let (code, _, json, _) = run(&n.root, &["--expect-gpus", "8"]);
    assert_eq!(code, 1);
    let r = result_with_status(&json, "node.pci.gpu_count", "fail");
    assert_eq!(r["finding"]["code"], "gpu-count-mismatch");
    assert_eq!(result(&json, "gpu6.kfd.compute_units")["status"], "pass");
    let (code, _, json, _) = run(&n.root, &["--expect-gpus", "7"]);
    assert_eq!(code, 0);
    assert_eq!(result(&json, "node.pci.gpu_count")["status"], "pass");
}

#[test]
fn usage_and_configuration_errors_exit_two() {
    let out = rocgate()
        .args(["run", "--sysroot", "/nonexistent/rocgate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/rocgate"));
    let out = rocgate()
        .args(["run", "--tier", "ludicrous"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let n = node("mi300x-8");
    std::fs::write(
        n.root.join("rocgate-capture.toml"),
        "[user]\nname = \"ci\"\nuid = \"zero\"\n",
    )
    .unwrap();
    let out = on_sysroot(&["run"], &n.root).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_has(&err, "rocgate-capture.toml");
    assert_has(&err, "line 3");
}

#[test]
fn inventory_json_describes_partitions_and_hives() {
    let n = node("mi300x-8-cpx");
    let out = on_sysroot(&["inventory", "--json"], &n.root)
        .output()
        .unwrap();
    assert!(out.status.success());
    let inv: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(inv["schema_version"], 1);
    let gpus = inv["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 64);
    let g9 = &gpus[9];
    assert_eq!(g9["index"], 9);
    assert_eq!(g9["kfd_node"], 11);
    assert_eq!(g9["pci_address"], "0000:26:00.1");
    assert_eq!(g9["device_id"], "0x74a1");
    assert_eq!(g9["product"], "AMD Instinct MI300X");
    assert_eq!(g9["gfx_target"], "gfx942");
    assert_eq!(g9["compute_units"], 38);
    assert_eq!(g9["num_xcc"], 1);
    assert_eq!(g9["vram_bytes"], 24u64 << 30);
    assert_eq!(g9["unique_id"], gpus[8]["unique_id"]);
    assert_eq!(g9["hive_id"], "0x5a3c71e09d24b6f1");
    assert_eq!(g9["drm_render_minor"], 137);

    let old = node("mi25-old-kernel");
    let out = on_sysroot(&["inventory", "--json"], &old.root)
        .output()
        .unwrap();
    let inv: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let g = &inv["gpus"][0];
    assert_eq!(g["gfx_target"], "gfx900");
    assert_eq!(g["hive_id"], serde_json::Value::Null);
    assert_eq!(g["num_xcc"], serde_json::Value::Null);
    assert_eq!(g["compute_units"], 64);
}

#[test]
fn list_shows_checks_and_test_ids() {
    let out = rocgate().arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kfd::topology_node"));
    let n = node("rx7900xtx-1");
    let out = on_sysroot(&["list"], &n.root).output().unwrap();
    let ids = String::from_utf8_lossy(&out.stdout);
    assert!(ids.lines().any(|l| l == "gpu0.kfd.topology_node"), "{ids}");
    assert!(ids.lines().any(|l| l == "node.amdgpu.module_live"));
}

#[test]
fn the_long_version_names_the_gpus_this_build_has_kernels_for() {
    let out = util::rocgate().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("rocgate {}\n", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let built: Vec<&str> = rocgate_kernels::CODE_OBJECTS
        .iter()
        .map(|c| c.target)
        .collect();
    if built.is_empty() {
        assert_has(&text, "no GPU kernels in this build");
    } else {
        let line = format!("GPU kernels (code object v5) for {}\n", built.join(", "));
        assert_has(&text, &line);
        assert_has(&text, "built by ");
    }
    for (target, _) in rocgate_kernels::SKIPPED_TARGETS {
        assert_has(&text, format!("no kernels for {target}: "));
    }
    // A clang too old for a target is said in one line that says what to
    // do, not in clang's own words.
    for line in text.lines().filter(|l| l.starts_with("no kernels for ")) {
        assert_lacks(line, "error: invalid target ID");
        if line.starts_with("no kernels for gfx950: clang") {
            assert_has(line, "needs LLVM 20 or newer");
        }
    }
}

#[test]
fn the_live_host_run_finishes_and_reports() {
    // Whatever this machine is, the run completes with a verdict and valid reports.
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("host.xml");
    let out = rocgate()
        .args(["run", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let out = rocgate().args(["doctor", "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["healthy"].is_boolean());
}

#[test]
fn a_worker_that_cannot_read_what_its_parent_wrote_is_an_internal_error() {
    // The run writes its workers' configuration itself: one they cannot
    // read is rocgate's own defect (70), not the user's usage (2).
    let n = node("mi300x-8");
    let config = n.root.join("worker-config.json");
    std::fs::write(&config, "not json").unwrap();
    let out = rocgate()
        .args(["__worker", "--scope", "node", "--worker-config"])
        .arg(&config)
        .arg("--sysroot")
        .arg(&n.root)
        .output()
        .unwrap();
    util::assert_exit(&out, 70);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("worker configuration"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
