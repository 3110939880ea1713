//! The verdict a CI job or a scheduler acts on, through the binary: the
//! decision table (what `run`, `doctor` and `health` exit with for each
//! kind of result), the policy file and its waivers, the selection of
//! checks, a lost GPU, containers, and the node's name.

use crate::util::{
    HANG_GUARD, assert_has, assert_lacks, doctor, node, on_sysroot, result, results, rocgate, run,
};
use serde_json::Value;
use std::path::Path;

/// `rocgate health` on `root`: exit code and its one line.
fn health(root: &Path, extra: &[&str]) -> (i32, String) {
    let out = on_sysroot(&["health"], root)
        .args(extra)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    assert_eq!(line.lines().count(), 1, "{line:?} {out:?}");
    assert!(line.chars().count() <= 80, "{line}");
    (out.status.code().unwrap_or(-1), line)
}

/// Writes a policy file beside `root` and returns its path.
fn config(root: &Path, text: &str) -> String {
    let path = root.with_extension("rocgate.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A row of the decision table: scenario, extra arguments, the exit codes
/// of `run`, `doctor` and `health`, and how health's line starts.
type Row = (
    &'static str,
    &'static [&'static str],
    i32,
    i32,
    i32,
    &'static str,
);

#[test]
fn each_row_of_the_decision_table_through_run_doctor_and_health() {
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("proc")).unwrap();
    let rows: [Row; 6] = [
        ("mi300x-8", &[], 0, 0, 0, "rocgate: ok 8 GPUs"),
        // A stock Linux default is a warning: the node works.
        (
            "numa-balancing-enabled",
            &[],
            0,
            0,
            0,
            "rocgate: ok 8 GPUs; warn numa-balancing-enabled",
        ),
        // ... unless the site fails on warnings.
        (
            "numa-balancing-enabled",
            &["--fail-on", "warn"],
            1,
            1,
            1,
            "rocgate: numa-balancing-enabled /proc/sys/kernel/numa_balancing is 1",
        ),
        ("kfd-missing", &[], 1, 1, 1, "rocgate: kfd-missing /dev/kfd"),
        // A check that could not look fails only under --strict.
        (
            "mi210-8-two-hives",
            &["--strict"],
            1,
            1,
            1,
            "rocgate: unverified node.compat.combination",
        ),
        // A lost GPU, named by the empty port above it.
        (
            "gpu-count-mismatch",
            &["--expect-gpus", "8"],
            1,
            1,
            1,
            "rocgate: gpu-count-mismatch missing 0000:a6:00.0: 7 of 8",
        ),
    ];
    for (scenario, extra, run_code, doctor_code, health_code, line) in rows {
        let n = node(scenario);
        let (code, stdout, json, _) = run(&n.root, extra);
        assert_eq!(code, run_code, "run {scenario} {extra:?}: {stdout}");
        assert_eq!(json["decision"]["exit_code"], run_code, "{scenario}");
        let (code, _) = doctor(&n.root, extra);
        assert_eq!(code, Some(doctor_code), "doctor {scenario} {extra:?}");
        let (code, got) = health(&n.root, extra);
        assert_eq!(code, health_code, "health {scenario} {extra:?}: {got}");
        assert!(got.starts_with(line), "health {scenario} {extra:?}: {got}");
    }
    // rocgate cannot see the node (no /sys): no verdict, exit 2 everywhere.
    let blind = empty.path();
    let out = on_sysroot(&["run", "--quiet"], blind).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_has(&stderr, "no verdict on this node");
    assert_has(&stderr, "pci-sysfs-unreadable");
    assert_eq!(doctor(blind, &[]).0, Some(2));
    let (code, line) = health(blind, &[]);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("rocgate: unknown rocgate cannot see this node"),
        "{line}"
    );
}

#[test]
fn warnings_read_as_warnings_in_every_report() {
    let n = node("pcie-acs-enabled");
    let html = n.root.with_extension("html");
    let (code, stdout, json, junit) = run(&n.root, &["--html", html.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
    assert_has(&stdout, "WARN node.system.pcie_acs");
    assert_lacks(&stdout, "FAIL");
    assert_has(&stdout, "PASSED with 1 warning");
    let r = result(&json, "node.system.pcie_acs");
    assert_eq!(r["status"], "warn");
    assert_eq!(r["finding"]["severity"], "warn");
    assert_eq!(json["warnings"][0], "node.system.pcie_acs");
    assert_eq!(json["passed"], true);
    // JUnit: a passing case whose output says it warned; no failure.
    assert_has(&junit, r#"failures="0""#);
    assert_has(&junit, "warn [pcie-acs-enabled]");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("PASSED with 1 warning"), "html verdict");
    assert!(page.contains(r#"class="cell warn""#), "html cell");
    // Under --fail-on warn the JUnit fails the case, as the exit code does.
    let (code, _, json, junit) = run(&n.root, &["--fail-on", "warn"]);
    assert_eq!(code, 1);
    assert_eq!(json["fail_on"], "warn");
    assert_has(&junit, r#"type="pcie-acs-enabled""#);
    assert_has(&junit, r#"failures="1""#);
}

#[test]
fn waivers_apply_until_they_expire_and_are_reported() {
    let n = node("firmware-load-failed");
    // Every finding on the GPU whose firmware failed (gpu7, 0000:65:00.0)
    // is waived by its address; its layers above run instead of being
    // blocked.
    let cfg = config(
        &n.root,
        r#"
[[waive]]
check = "*"
gpu = "0000:65:00.0"
reason = "RMA open, GPU is being replaced (ticket 4711)"
expires = 2099-12-31

[[waive]]
check = "firmware::*"
node = "some-other-node*"
reason = "applies elsewhere only"
"#,
    );
    let (code, stdout, json, junit) = run(&n.root, &["--config", &cfg]);
    assert_eq!(code, 0, "{stdout}");
    let r = result(&json, "gpu7.firmware.init_errors");
    assert_eq!(r["status"], "fail", "still reported as what it is: {r}");
    assert_eq!(
        r["waiver"]["reason"],
        "RMA open, GPU is being replaced (ticket 4711)"
    );
    assert_eq!(r["waiver"]["expires"], "2099-12-31");
    assert!(
        r["waiver"]["source"]
            .as_str()
            .unwrap()
            .ends_with("rocgate.toml:2"),
        "{r}"
    );
    assert!(!json["waived"].as_array().unwrap().is_empty());
    assert_eq!(json["decision"]["health"], "healthy");
    assert_has(&stdout, "WAIVED gpu7.firmware.init_errors");
    assert_has(&stdout, "waived until 2099-12-31");
    assert_has(&junit, r#"type="waived""#);
    // A waived failure blocks nothing: gpu7's layers above it ran.
    assert_ne!(result(&json, "gpu7.kfd.topology_node")["status"], "blocked");
    let (code, line) = health(&n.root, &["--config", &cfg]);
    assert_eq!(code, 0, "{line}");
    assert_has(&line, "waived");

    // An expired waiver no longer applies, and says so.
    let cfg = config(
        &n.root,
        r#"
[[waive]]
code = "firmware-load-failed"
reason = "was accepted until the firmware update"
expires = 2020-01-01
"#,
    );
    let (code, stdout, json, _) = run(&n.root, &["--config", &cfg]);
    assert_eq!(code, 1, "{stdout}");
    let r = result(&json, "gpu7.firmware.init_errors");
    assert_eq!(r["waiver"]["expired"], true, "{r}");
    assert_has(
        &stdout,
        "waiver expired on 2020-01-01: was accepted until the firmware update",
    );
    assert_eq!(health(&n.root, &["--config", &cfg]).0, 1);

    // ROCGATE_CONFIG names the file too; a broken one is refused naming
    // the file and line.
    let bad = config(&n.root, "[[waive]]\ncode = \"firmware-load-failed\"\n");
    let out = on_sysroot(&["run", "--quiet"], &n.root)
        .env("ROCGATE_CONFIG", &bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_has(&err, "rocgate.toml:1: a [[waive]] has no `reason`");
}

#[test]
fn the_policy_file_sets_what_flags_set_and_flags_win() {
    let n = node("numa-balancing-enabled");
    let cfg = config(
        &n.root,
        "fail_on = \"warn\"\nexpect_gpus = 9\nskip = [\"rccl\"]\n[timeouts]\n\"kfd::topology\" = 3\n",
    );
    let (code, stdout, json, _) = run(&n.root, &["--config", &cfg]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(json["fail_on"], "warn");
    assert_eq!(
        result(&json, "node.pci.gpu_count")["finding"]["code"],
        "gpu-count-mismatch"
    );
    let skipped = result(&json, "node.rccl.interconnect");
    assert_eq!(skipped["skip_reason"], "not-configured");
    assert!(
        skipped["message"]
            .as_str()
            .unwrap()
            .contains("skipped by 'rccl' (the config's `skip` in"),
        "{skipped}"
    );
    // A flag wins over the file.
    let (code, stdout, _, _) = run(
        &n.root,
        &["--config", &cfg, "--fail-on", "fail", "--expect-gpus", "8"],
    );
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn only_and_skip_leave_checks_out_as_skipped_never_absent() {
    let n = node("mi300x-8");
    let (code, stdout, json, _) = run(&n.root, &["--only", "kfd,pci::gpu_count"]);
    assert_eq!(code, 0, "{stdout}");
    let all = results(&json);
    let ran: Vec<&str> = all
        .iter()
        .filter(|r| r["skip_reason"] != "not-configured" || r["layer"] == "kfd")
        .map(|r| r["layer"].as_str().unwrap())
        .collect();
    assert!(ran.iter().all(|l| *l == "kfd" || *l == "pci"), "{ran:?}");
    let out = result(&json, "gpu0.amdgpu.bound");
    assert_eq!(out["status"], "skipped");
    assert_eq!(out["skip_reason"], "not-configured");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .starts_with("not selected: only kfd, pci::gpu_count run (--only)"),
        "{out}"
    );
    assert_eq!(result(&json, "gpu0.kfd.topology_node")["status"], "pass");
    // The same count of results as an unselected run: nothing vanishes.
    let (_, _, full, _) = run(&n.root, &[]);
    assert_eq!(results(&full).len(), all.len());
    // Globs and skip; a pattern that names nothing is a usage error.
    let (_, _, json, _) = run(&n.root, &["--skip", "system::*"]);
    assert_eq!(
        result(&json, "node.system.iommu")["skip_reason"],
        "not-configured"
    );
    let out = on_sysroot(&["run", "--only", "hip::memtset"], &n.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("'hip::memtset' matches no check"),
        "{out:?}"
    );
    // `list` shows what the selection leaves out, with tiers and timeouts.
    let out = rocgate()
        .args(["list", "--tier", "extended", "--skip", "hip::memtest"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("hip::memtest"))
        .unwrap_or_default();
    assert_has(line, "extended");
    assert_has(line, "not selected");
    assert_has(&text, "timeout");
    assert_has(&text, "blocks GPU's");
    // And health takes the selection too.
    let (code, line) = health(&n.root, &["--skip", "kfd"]);
    assert_eq!(code, 0, "{line}");
}

#[test]
fn a_gpu_missing_from_kfd_or_a_partition_short_is_unhealthy_naming_it() {
    for (scenario, line) in [
        (
            "gpu-missing-from-kfd",
            "rocgate: gpu-missing-from-kfd 0000:",
        ),
        ("cpx-partition-missing", "rocgate: partition-count-mismatch"),
    ] {
        let n = node(scenario);
        let (code, got) = health(&n.root, &[]);
        assert_eq!(code, 1, "{scenario}: {got}");
        assert!(got.starts_with(line), "{scenario}: {got}");
    }
}

#[test]
fn in_a_container_the_host_os_is_read_from_the_host_root_or_is_unknown() {
    // Without the host's root the image's OS is not taken for the host's:
    // the OS component is unknown, never unsupported, and nothing fails.
    let n = node("container-debian-image");
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    let compat = result(&json, "node.compat.combination");
    assert_eq!(compat["skip_reason"], "unverifiable", "{compat}");
    assert!(
        compat["message"]
            .as_str()
            .unwrap()
            .contains("without the host's root"),
        "{compat}"
    );
    assert_eq!(json["versions"]["node"]["image_os"], "debian 12");
    assert!(
        json["versions"]["node"]["os"].is_null(),
        "{}",
        json["versions"]
    );
    let dkms = result(&json, "node.amdgpu.dkms");
    assert_eq!(dkms["skip_reason"], "unverifiable", "{dkms}");
    // With the host's / at /host, the host's OS and DKMS builds are read.
    let n = node("container-host-root");
    let (code, stdout, json, _) = run(&n.root, &["--strict"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(result(&json, "node.compat.combination")["status"], "pass");
    assert_eq!(result(&json, "node.amdgpu.dkms")["status"], "pass");
    assert_eq!(json["versions"]["node"]["os"], "ubuntu 24.04");
    assert_eq!(json["versions"]["node"]["image_os"], "debian 12");
    // --host-root names another mount point.
    let moved = n.root.join("mnt-host");
    std::fs::rename(n.root.join("host"), &moved).unwrap();
    let (code, stdout, json, _) = run(&n.root, &["--host-root", "/mnt-host"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(json["versions"]["node"]["os"], "ubuntu 24.04");
}

#[test]
fn the_node_name_given_names_the_node_in_every_report_and_the_fleet() {
    let n = node("mi300x-8");
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("n.json");
    let prom = dir.path().join("n.prom");
    let out = on_sysroot(&["run", "--quiet"], &n.root)
        .env("ROCGATE_NODE_NAME", "gpu-a17")
        .arg("--json")
        .arg(&json_path)
        .arg("--prom")
        .arg(&prom)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(json["node"]["hostname"], "gpu-a17");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert_has(&text, r#"hostname="gpu-a17""#);
    let out = rocgate()
        .args(["fleet", "report", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let fleet: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fleet["nodes"][0]["node"], "gpu-a17", "{fleet}");
}
