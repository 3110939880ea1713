//! rocgate against the real ROCm runtime on a machine without an AMD GPU
//! (CI installs Debian's libhsa-runtime64-1 and libamdhip64-5, ROCm 5.2.3):
//! the real libraries fail exactly as on a node whose driver is broken, and
//! rocgate reports their codes and attributes the failure to the layer below.
//! Runs when `ROCGATE_REAL_ROCM=1` (CI sets it); elsewhere it says it did not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{result, rocgate};

#[test]
fn real_rocm_on_a_machine_without_gpu() {
    if std::env::var("ROCGATE_REAL_ROCM").as_deref() != Ok("1") {
        eprintln!(
            "not run: set ROCGATE_REAL_ROCM=1 on a GPU-less machine with Debian's ROCm runtime (CI does)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("host.json");
    let junit_path = dir.path().join("host.xml");
    let out = rocgate()
        .args(["run", "--no-gate", "--json"])
        .arg(&json_path)
        .arg("--junit")
        .arg(&junit_path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();

    let lib = result(&json, "node.hsa.runtime");
    assert_eq!(lib["status"], "pass", "{lib}");
    assert!(
        lib["facts"]["hsa_library"]
            .as_str()
            .unwrap()
            .contains("libhsa-runtime64.so.1"),
        "{lib}"
    );
    let init = result(&json, "node.hsa.init");
    assert_eq!(init["status"], "fail");
    assert!(
        init["message"]
            .as_str()
            .unwrap()
            .contains("HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008)"),
        "{init}"
    );

    let hip = result(&json, "node.hip.runtime");
    assert_eq!(hip["status"], "pass", "{hip}");
    assert!(
        hip["facts"]["hip_runtime_version"]
            .as_str()
            .unwrap()
            .starts_with("5.2."),
        "{hip}"
    );
    assert!(
        hip["facts"]["hip_library"]
            .as_str()
            .unwrap()
            .contains("libamdhip64.so.5"),
        "{hip}"
    );
    let count = result(&json, "node.hip.device_count");
    assert_eq!(count["finding"]["code"], "hip-no-device");
    assert!(
        count["message"]
            .as_str()
            .unwrap()
            .contains("hipErrorNoDevice (100)"),
        "{count}"
    );

    let junit = std::fs::read_to_string(&junit_path).unwrap();
    assert!(
        junit.contains(r#"<property name="hip_runtime_version" value="5.2."#),
        "{junit}"
    );
    assert!(junit.contains(r#"<property name="hsa_library" value=""#));

    // The doctor (gated) names a layer below the runtime as the cause.
    let out = rocgate().args(["doctor", "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let layer = doc["first_failing_layer"].as_str().unwrap();
    assert!(["pci", "amdgpu", "kfd"].contains(&layer), "{doc:#}");
    assert_eq!(doc["layers"]["hsa"], "not reached", "{doc:#}");

    // inventory reports the runtime libraries too.
    let out = rocgate().args(["inventory", "--json"]).output().unwrap();
    let inv: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        inv["runtime"]["hip_runtime_version"]
            .as_str()
            .unwrap()
            .starts_with("5.2."),
        "{inv:#}"
    );
}
