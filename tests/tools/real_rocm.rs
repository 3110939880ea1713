//! rocgate against the real ROCm runtime on a machine without an AMD GPU
//! (CI installs Debian's libhsa-runtime64-1 and libamdhip64-5, ROCm 5.2.3):
//! the real libraries fail exactly as on a node whose driver is broken, and
//! rocgate reports their codes and attributes the failure to the layer below.
//! Without those libraries the trial fails on CI (`CI=true`) and is ignored
//! with the reason elsewhere; on a host with an AMD GPU it is ignored, since
//! the real runtime then works.

use crate::util;
use crate::util::{assert_exit, assert_has, result, result_with_status, rocgate, text};
use libtest_mimic::{Completion, Failed, Trial};

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![Trial::ignorable_test(
        "real_rocm_on_a_machine_without_gpu",
        real_rocm_on_a_machine_without_gpu,
    )]
}

/// An AMD GPU on this host's PCI bus.
fn host_has_amd_gpu() -> bool {
    std::fs::read_dir("/sys/bus/pci/devices").is_ok_and(|d| {
        d.flatten().any(|e| {
            let read = |f: &str| std::fs::read_to_string(e.path().join(f)).unwrap_or_default();
            read("vendor").trim() == "0x1002"
                && (read("class").starts_with("0x03") || read("class").starts_with("0x12"))
        })
    })
}

fn real_rocm_on_a_machine_without_gpu() -> Result<Completion, Failed> {
    for soname in ["libhsa-runtime64.so.1", "libamdhip64.so.5"] {
        if rocgate_fixtures::hostile::system_library(&[soname]).is_none() {
            return util::missing(&format!("Debian's ROCm 5.2.3 {soname} is not installed"));
        }
    }
    if host_has_amd_gpu() {
        return Ok(Completion::ignored_with(
            "this host has an AMD GPU: the real runtime works, so its no-GPU failures cannot be shown",
        ));
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
    assert_exit(&out, 1);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();

    let lib = result_with_status(&json, "node.hsa.runtime", "pass");
    assert!(
        text(&lib["facts"]["hsa_library"]).contains("libhsa-runtime64.so.1"),
        "{lib}"
    );
    let init = result_with_status(&json, "node.hsa.init", "fail");
    assert!(
        text(&init["message"]).contains("HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008)"),
        "{init}"
    );

    let hip = result_with_status(&json, "node.hip.runtime", "pass");
    assert!(
        text(&hip["facts"]["hip_runtime_version"]).starts_with("5.2."),
        "{hip}"
    );
    assert!(
        text(&hip["facts"]["hip_library"]).contains("libamdhip64.so.5"),
        "{hip}"
    );
    let count = result(&json, "node.hip.device_count");
    assert_eq!(count["finding"]["code"], "hip-no-device");
    assert!(
        text(&count["message"]).contains("hipErrorNoDevice (100)"),
        "{count}"
    );

    let junit = std::fs::read_to_string(&junit_path).unwrap();
    assert_has(
        &junit,
        r#"<property name="hip_runtime_version" value="5.2."#,
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
        text(&inv["runtime"]["hip_runtime_version"]).starts_with("5.2."),
        "{inv:#}"
    );
    Ok(Completion::Completed)
}
