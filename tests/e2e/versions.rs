//! Version coherence end to end: every layer's version in inventory, JUnit
//! and JSON; the compatibility matrix (compat layer and `matrix check`);
//! snapshots that replay to the same results (`compare` as an upgrade gate
//! is in `compare`).

use crate::util::{
    FakeRun, assert_has, entry, fake_rocm, node, on_sysroot, result_with_finding,
    result_with_status, run, run_with, snapshot, snapshot_with, text,
};
use serde_json::Value;
use std::path::Path;

fn json_of(args: &[&str], root: &Path) -> (i32, Value) {
    let out = on_sysroot(args, root).output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn every_layer_reports_its_version() {
    let n = node("mi300x-8");
    let (_, inv) = json_of(&["inventory", "--json"], &n.root);
    let node = &inv["versions"]["node"];
    assert_eq!(node["kernel"], "6.8.0-79-generic");
    assert_eq!(node["os"], "ubuntu 24.04");
    assert_eq!(node["amdgpu"], "6.16.6");
    assert_eq!(node["amdgpu_release"], "30.20.1");
    assert_eq!(node["rocm"], "7.1.1");
    let gpu = &inv["versions"]["gpu3"];
    assert_eq!(gpu["fw_mec"], "0x0000009a");
    assert_eq!(gpu["vbios"], "113-M3000100-102");

    let (_, json, junit) = {
        let (c, _, j, x) = run(&n.root, &[]);
        (c, j, x)
    };
    assert_eq!(json["versions"]["node"]["rocm"], "7.1.1");
    assert_eq!(json["versions"]["gpu0"]["fw_sos"], "0x00550046");
    assert!(junit.contains(r#"<property name="rocm" value="7.1.1"/>"#));
    assert!(junit.contains(r#"<property name="fw_mec" value="0x0000009a"/>"#));
    assert!(junit.contains(r#"<property name="vbios" value="113-M3000100-102"/>"#));
}

#[test]
fn runtime_library_versions_and_the_loaded_release_are_reported() {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    // A versioned install, as /opt/rocm-7.1.1 would be.
    let versioned = rocm.path().join("rocm-7.1.1");
    std::fs::create_dir(&versioned).unwrap();
    std::fs::rename(rocm.path().join("lib"), versioned.join("lib")).unwrap();
    let path = versioned.to_str().unwrap();
    let env = [("ROCGATE_FAKE_NODE", n.root.to_str().unwrap())];
    let out = on_sysroot(&["inventory", "--json", "--rocm-path", path], &n.root)
        .envs(env)
        .output()
        .unwrap();
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    let node = &inv["versions"]["node"];
    for key in [
        "hip_runtime_version",
        "hsa_version",
        "rocblas_version",
        "miopen_version",
        "rccl_version",
    ] {
        assert!(node[key].is_string(), "{key} missing: {node:#}");
    }
    assert_eq!(node["rocm_loaded"], "7.1.1", "{node:#}");

    let (_, _, json, junit) = run_with(&n.root, &["--tier", "standard", "--rocm-path", path], &env);
    let node = &json["versions"]["node"];
    assert_eq!(node["rocm_loaded"], "7.1.1", "{node:#}");
    assert_eq!(
        node["rccl_version"],
        inv["versions"]["node"]["rccl_version"]
    );
    assert!(junit.contains(r#"<property name="rocblas_version""#));
}

#[test]
fn an_unsupported_combination_fails_compat_without_blocking_the_layers_above() {
    let (code, _, json, _) = FakeRun::scenario("compat-driver-mismatch").run();
    assert_eq!(code, 1);
    let c = result_with_finding(
        &json,
        "node.compat.combination",
        "compat-amdgpu-unsupported",
    );
    let msg = text(&c["message"]);
    assert!(
        msg.starts_with("ROCm 7.1.1 expects amdgpu 30.20.1 or 30.20.0"),
        "{msg}"
    );
    // What the node runs, and the source the verdict comes from.
    for part in [
        "this node runs 6.2.0",
        "per the ROCm 7.1.1 compatibility matrix, https://rocm.docs.amd.com/",
    ] {
        assert!(msg.contains(part), "{part:?} missing: {msg}");
    }
    result_with_status(&json, "gpu0.hip.vector_add", "pass");
    assert_eq!(json["first_failing_layer"], "compat");
}

#[test]
fn matrix_check_names_the_row_and_the_component() {
    let good = node("mi300x-8");
    let (code, doc) = json_of(&["matrix", "check", "--json"], &good.root);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["supported"], true);
    let bad = node("compat-os-unsupported");
    let (code, doc) = json_of(&["matrix", "check", "--json"], &bad.root);
    assert_eq!(code, 1);
    let os = entry(&doc["components"], "component", "os");
    assert_eq!(os["code"], "compat-os-unsupported");
    assert_eq!(os["have"], "Ubuntu 20.04.6 LTS");
    let unknown = node("compat-unknown-release");
    let (code, doc) = json_of(&["matrix", "check", "--json"], &unknown.root);
    assert_eq!(code, 1);
    assert_eq!(doc["code"], "compat-unknown-release");

    // A user's matrix replaces the built-in one; a malformed one names the line.
    let m = good.root.with_extension("matrix.toml");
    let check_with = |matrix: &str| {
        std::fs::write(&m, matrix).unwrap();
        on_sysroot(
            &["matrix", "check", "--matrix", m.to_str().unwrap()],
            &good.root,
        )
        .output()
        .unwrap()
    };
    let out = check_with(
        "schema_version = 1\n[[release]]\nrocm = \"7.1.1\"\ngpus = [\"gfx90a\"]\nsource = \"test\"\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("gpu gfx942 MISMATCH"));
    let out = check_with("schema_version = 1\n[[release]]\nrocm = [7]\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_has(&err, "matrix.toml");
    assert_has(&err, "line 3");
}

fn without_sysroot(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("sysroot");
    }
    v
}

#[test]
fn a_snapshot_replays_to_the_same_inventory_and_diagnosis() {
    for name in [
        "mi300x-8",
        "firmware-load-failed",
        "kfd-permission",
        "mi300x-8-cpx",
        "compat-driver-mismatch",
    ] {
        let n = node(name);
        let archive = n.root.with_extension("tar.zst");
        snapshot(&n.root, &archive);
        for cmd in [&["inventory", "--json"][..], &["doctor", "--json"][..]] {
            let (c1, direct) = json_of(cmd, &n.root);
            let (c2, replayed) = json_of(cmd, &archive);
            assert_eq!(c1, c2, "{name} {cmd:?}");
            assert_eq!(
                without_sysroot(direct),
                without_sysroot(replayed),
                "{name} {cmd:?}"
            );
        }
    }
}

#[test]
fn a_redacted_snapshot_hides_serials_consistently() {
    let n = node("mi300x-8-cpx");
    let archive = n.root.with_extension("tar.zst");
    snapshot_with(&["snapshot", "--redact"], &n.root, &archive);
    let (_, direct) = json_of(&["inventory", "--json"], &n.root);
    let (_, replayed) = json_of(&["inventory", "--json"], &archive);
    let ids = |v: &Value| {
        v["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["unique_id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let (a, b) = (ids(&direct), ids(&replayed));
    assert!(a.iter().zip(&b).all(|(x, y)| x != y), "serials replaced");
    // Partitions of one GPU still share one (new) serial.
    assert!(b[..8].iter().all(|x| *x == b[0]) && b[8] != b[0]);
    let (_, doc) = json_of(&["doctor", "--json"], &archive);
    assert_eq!(doc["healthy"], true);
}
