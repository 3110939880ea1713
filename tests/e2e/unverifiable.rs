//! What could not look is never a pass, through the binary: a check that
//! could not look is unverifiable with its reason, `--strict` fails on it
//! and passes a node where every check looked, and a driver release that
//! cannot be read is unverifiable rather than a failure.

use crate::util::{assert_has, node, result_with_status, results, run, run_with, text};
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
    // The kernel-log checks: one for the node, four per GPU (firmware
    // init and load errors, amdgpu events, bus events).
    assert_eq!(by_reason["unverifiable"], 33, "{by_reason}");
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
    assert_has(
        &junit,
        r#"<skipped message="unverifiable: kernel log not readable"#,
    );
    assert_has(
        &stdout,
        "Could not verify (33; --strict would fail the run)",
    );
    assert_has(&stdout, "33 unverifiable");
    // The ladder does not call a layer that could not look "pass".
    let gpu3 = stdout.lines().find(|l| l.starts_with("gpu3 ")).unwrap();
    assert_has(gpu3, "unverif");

    // --strict and ROCGATE_STRICT=1 fail the same run, naming why.
    for (args, env) in [
        (&["--strict"][..], &[][..]),
        (&[][..], &[("ROCGATE_STRICT", "1")][..]),
    ] {
        let (code, stdout, json, _) = run_with(&n.root, args, env);
        assert_eq!(code, 1, "{stdout}");
        assert_eq!(json["strict"], true);
        assert_eq!(json["passed"], false);
        assert_has(&stdout, "--strict: 33 could not verify");
        assert_has(&stdout, "kernel log not readable");
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
