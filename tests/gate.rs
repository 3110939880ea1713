//! The gate through the real binary: what could not look is never a pass
//! (skip reasons, `--strict`), compare follows GPUs by identity, doctor leads
//! with what stops the stack, a driver release that cannot be read is
//! unverifiable, and a file that does not answer hangs nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{
    HANG_GUARD, TOPO, doctor, finding_codes, node, on_sysroot, result_with_status, results,
    rocgate, run, run_with, text,
};
use serde_json::Value;
use std::path::Path;

fn unverified_ids(json: &Value) -> Vec<&str> {
    json["unverified"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

#[test]
fn checks_that_could_not_look_are_unverifiable_and_strict_fails_on_them() {
    let n = node("mi300x-8");
    std::fs::remove_file(n.root.join("var/log/kern.log")).unwrap();

    // Without --strict the run passes and says what it could not verify.
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    let by_reason = &json["skipped_by_reason"];
    // The firmware log checks: one for the node, two per GPU.
    assert_eq!(by_reason["unverifiable"], 17, "{by_reason}");
    // No --rocm-path on a capture: the runtime layers are not configured,
    // which is not a verdict on the node.
    assert!(by_reason["not-configured"].as_u64().unwrap() > 0);
    assert_eq!(json["strict"], false);
    let r = result_with_status(&json, "gpu3.firmware.load_errors", "skipped");
    assert_eq!(r["skip_reason"], "unverifiable");
    assert!(
        text(&r["message"]).contains("/var/log/kern.log does not exist"),
        "{r}"
    );
    assert!(unverified_ids(&json).contains(&"gpu3.firmware.load_errors"));
    assert!(
        junit.contains(r#"<skipped message="unverifiable: kernel log not readable"#),
        "{junit}"
    );
    assert!(
        stdout.contains("Could not verify (17; --strict would fail the run)"),
        "{stdout}"
    );
    assert!(stdout.contains("17 unverifiable"), "{stdout}");
    // The ladder does not call a layer that could not look "pass".
    let gpu3 = stdout.lines().find(|l| l.starts_with("gpu3 ")).unwrap();
    assert!(gpu3.contains("unverif"), "{gpu3}");

    // --strict and ROCGATE_STRICT=1 fail the same run, naming why.
    for (args, env) in [
        (&["--strict"][..], &[][..]),
        (&[][..], &[("ROCGATE_STRICT", "1")][..]),
    ] {
        let (code, stdout, json, _) = run_with(&n.root, args, env);
        assert_eq!(code, 1, "{stdout}");
        assert_eq!(json["strict"], true);
        assert_eq!(json["passed"], false);
        assert!(stdout.contains("--strict: 17 could not verify"), "{stdout}");
        assert!(stdout.contains("kernel log not readable"), "{stdout}");
    }
}

#[test]
fn strict_passes_a_node_where_every_check_looked() {
    let n = node("mi300x-8");
    let (code, stdout, json, _) = run(&n.root, &["--strict"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(json["skipped_by_reason"]["unverifiable"], 0);
    // Not-configured and not-applicable skips are not reasons to fail.
    assert!(
        json["skipped_by_reason"]["not-configured"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        json["skipped_by_reason"]["not-applicable"]
            .as_u64()
            .unwrap()
            > 0
    );
    for r in results(&json) {
        if r["status"] == "skipped" {
            assert!(r["skip_reason"].is_string(), "a skip without a reason: {r}");
        }
    }
}

#[test]
fn doctor_names_what_stops_the_stack_before_an_advisory() {
    let n = node("pcie-link-degraded");
    std::fs::remove_file(n.root.join("dev/kfd")).unwrap();
    let (code, doc) = doctor(&n.root, &[]);
    assert_eq!(code, Some(1));
    assert_eq!(doc["first_failing_layer"], "kfd", "{doc}");
    assert_eq!(doc["likely_cause"]["code"], "kfd-missing", "{doc}");
    assert_eq!(doc["layers"]["pci"], "degraded");
    assert_eq!(doc["layers"]["kfd"], "broken");
    assert_eq!(finding_codes(&doc), ["kfd-missing", "pcie-link-degraded"]);

    // `run` agrees on the first failing layer.
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    assert_eq!(json["first_failing_layer"], "kfd");
    assert!(
        stdout.contains("Failures (first failing layer: kfd)"),
        "{stdout}"
    );

    // With only the advisory, it is the likely cause.
    let n = node("pcie-link-degraded");
    let (_, doc) = doctor(&n.root, &[]);
    assert_eq!(doc["likely_cause"]["code"], "pcie-link-degraded", "{doc}");
}

fn results_json(root: &Path) -> std::path::PathBuf {
    let (_, _, _, _) = run(root, &[]);
    root.with_extension("results.json")
}

fn compare(before: &Path, after: &Path, extra: &[&str]) -> (i32, String) {
    let out = rocgate()
        .arg("compare")
        .arg(before)
        .arg(after)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn compare_follows_gpus_by_pci_address_when_one_falls_off_the_bus() {
    let before = node("mi300x-8");
    // gpu5 (0000:a6:00.0) is gone: what was gpu6 (0000:c6:00.0) is gpu5
    // now, and its slot link trained at x8 (read at the upstream port of
    // its internal switch, 0000:c4:00.0).
    let after = node("gpu-count-mismatch");
    let width = after
        .root
        .join("sys/bus/pci/devices/0000:c4:00.0/current_link_width");
    assert!(width.exists(), "{}", width.display());
    std::fs::write(&width, "8\n").unwrap();
    let (b, a) = (results_json(&before.root), results_json(&after.root));

    // A generous tolerance hides no gone GPU, and the degraded link is
    // charged to the GPU that has it, under its new index.
    let (code, text) = compare(&b, &a, &["--tolerance", "0.5"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("GPU count changed: 8 -> 7"), "{text}");
    assert!(text.contains("GPU 0000:a6:00.0 (was gpu5)"), "{text}");
    assert!(
        text.contains("gpu5.pci.link_width (was gpu6) pass -> warn"),
        "{text}"
    );
    assert!(text.contains("REGRESSED"), "{text}");
    // The gone GPU's firmware is not listed version by version.
    assert!(text.contains("Versions changed: 0"), "{text}");

    // The same runs the other way round: a GPU that appeared is a count change.
    let (code, text) = compare(&a, &b, &["--tolerance", "0.5"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("GPU count changed: 7 -> 8"), "{text}");

    // And a run compared with itself is no regression.
    let (code, text) = compare(&b, &b, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("NO REGRESSION"), "{text}");
}

/// A node as a container sees it: no dpkg database, no DKMS tree.
fn container_view(root: &Path) {
    std::fs::remove_dir_all(root.join("var/lib/dpkg")).unwrap();
    std::fs::remove_dir_all(root.join("var/lib/dkms")).unwrap();
}

#[test]
fn a_driver_release_that_cannot_be_read_is_unverifiable_not_a_failure() {
    // Without dpkg's record, the DKMS build number names the release.
    let n = node("mi300x-8");
    std::fs::remove_dir_all(n.root.join("var/lib/dpkg")).unwrap();
    let (code, stdout, json, _) = run(&n.root, &["--strict"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(json["node"]["amdgpu_release"], "30.20.1");

    // Without DKMS records either, the loaded module's version still names
    // the releases that shipped it (the matrix's driver rows).
    let n = node("mi300x-8");
    container_view(&n.root);
    let (code, stdout, json, _) = run(&n.root, &["--strict"]);
    assert_eq!(code, 0, "{stdout}");
    let r = result_with_status(&json, "node.compat.combination", "pass");
    assert!(
        text(&r["message"]).contains("from amdgpu module 6.16.6"),
        "{r}"
    );

    // The kernel's own amdgpu has no version: nothing names a release.
    std::fs::remove_file(n.root.join("sys/module/amdgpu/version")).unwrap();
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    let r = result_with_status(&json, "node.compat.combination", "skipped");
    assert_eq!(r["skip_reason"], "unverifiable", "{r}");
    assert!(
        text(&r["message"]).contains("amdgpu cannot be checked"),
        "{r}"
    );
    assert!(
        junit.contains(r#"<skipped message="unverifiable: ROCm 7.1.1: amdgpu cannot be checked"#)
    );
    let (code, stdout, _, _) = run(&n.root, &["--strict"]);
    assert_eq!(code, 1, "{stdout}");
}

/// Replaces a file with a FIFO nobody writes to: the stand-in for a sysfs
/// file of a wedged GPU.
fn wedge(path: &Path) {
    std::fs::remove_file(path).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn doctor_answers_on_a_node_with_a_kfd_file_that_does_not_answer() {
    let n = node("mi300x-8");
    // KFD node 5 is gpu3 (nodes 0 and 1 are the CPUs).
    let props = n.root.join(format!("{TOPO}/5/properties"));
    wedge(&props);
    let (code, doc) = doctor(&n.root, &[]);
    assert_eq!(code, Some(1), "{doc}");
    let cause = &doc["likely_cause"];
    assert_eq!(cause["code"], "sysfs-read-timeout", "{doc}");
    assert!(
        text(&cause["message"]).contains("topology/nodes/5/properties"),
        "names the file: {cause}"
    );
    // The rest of the node is still reported.
    assert_eq!(doc["layers"]["pci"], "ok", "{doc}");

    for cmd in [&["inventory", "--json"][..], &["run"][..]] {
        let out = on_sysroot(cmd, &n.root)
            .timeout(HANG_GUARD)
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{cmd:?} did not finish: {out:?}"
        );
    }
}
