//! The runtime layers (hsa, hip) end to end on synthetic nodes, with the fake
//! ROCm libraries simulating the GPUs and injecting faults: each fault lands
//! as the right outcome on the right GPU and layer, everything above it is
//! blocked, and the other GPUs stay green.

use crate::util::{
    FakeRun, RUNTIME_LAYERS, assert_gpus_pass, assert_has, assert_lacks, fake_rocm, node, result,
    result_with_finding, result_with_status, run_with, text,
};
use serde_json::Value;
use std::process::Command;

/// The quick tier on an MI300X node with `faults` injected, which must fail
/// (exit 1): its JSON document.
fn failing_with(faults: &str) -> Value {
    FakeRun::scenario("mi300x-8").faults(faults).exits(1).0
}

#[test]
fn the_quick_tier_passes_on_a_fake_8x_mi300x() {
    let (code, stdout, json, junit) = FakeRun::scenario("mi300x-8").run();
    assert_eq!(code, 0, "{stdout}");
    assert_gpus_pass(&json, 0..8, RUNTIME_LAYERS);
    let r = result(&json, "gpu5.hip.vector_add");
    assert!(
        text(&r["message"]).starts_with("vector_add over 1048576 floats verified"),
        "{r}"
    );
    assert!(
        result(&json, "gpu0.hsa.copy")["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "h2d_bandwidth")
    );
    // The loaded libraries and HIP's version are on the node suite.
    assert_has(
        &junit,
        r#"<property name="hip_runtime_version" value="6.2.41134"/>"#,
    );
    assert!(junit.contains("libamdhip64.so.6\"/>"));
    assert!(junit.contains(r#"<property name="hsa_library""#));
}

#[test]
fn a_wrong_result_fails_that_gpu_only() {
    let json = failing_with("hipModuleLaunchKernel@gpu3=wrong");
    let r = result_with_status(&json, "gpu3.hip.vector_add", "fail");
    assert_eq!(r["finding"]["code"], "hip-kernel-wrong", "{r}");
    assert!(text(&r["message"]).contains("1 of 1048576 sums are wrong"));
    assert_gpus_pass(&json, [0, 1, 2, 4, 5, 6, 7], RUNTIME_LAYERS);
    // HSA dispatch on the same GPU is unaffected: the fault is HIP's launch.
    result_with_status(&json, "gpu3.hsa.dispatch", "pass");
}

#[test]
fn a_crashing_library_costs_one_result() {
    let json = failing_with("hipMemcpy@gpu2=crash");
    let r = result_with_status(&json, "gpu2.hip.memcpy", "crash");
    assert!(
        text(&r["message"]).contains("died on SIGSEGV during hip::memcpy"),
        "{r}"
    );
    result_with_status(&json, "gpu2.hip.vector_add", "blocked");
    // A fresh worker serves the GPU's next check.
    result_with_status(&json, "gpu2.hip.module_load", "pass");
    assert_gpus_pass(&json, [0, 1, 3, 4, 5, 6, 7], RUNTIME_LAYERS);
}

#[test]
fn error_codes_are_named_with_a_next_step() {
    let (_, _, json, _) = FakeRun::scenario("mi300x-8")
        .faults("hsa_queue_create@gpu1=error:0x1002;hipModuleLoadData@gpu6=error:209")
        .run();
    let q = result_with_finding(&json, "gpu1.hsa.queue", "hsa-queue-failed");
    assert!(
        text(&q["message"]).contains("HSA_STATUS_ERROR_INVALID_QUEUE_CREATION (0x1002)"),
        "{q}"
    );
    result_with_status(&json, "gpu1.hsa.dispatch", "blocked");
    let m = result_with_finding(&json, "gpu6.hip.module_load", "hip-module-load-failed");
    assert!(
        text(&m["message"]).contains("hipErrorNoBinaryForGpu (209)"),
        "{m}"
    );
    assert!(text(&m["finding"]["next_step"]).contains("gfx target"));
}

#[test]
fn runtime_failures_are_attributed_to_the_layer_below() {
    // With amdgpu not loaded the runtime layers are blocked; forced to run,
    // the fakes answer as real ROCm does without a driver.
    let n = node("amdgpu-not-loaded");
    let (_, _, json, _) = FakeRun::on(&n.root).run();
    result_with_status(&json, "node.hsa.init", "blocked");
    let (_, _, json, _) = FakeRun::on(&n.root).args(&["--no-gate"]).run();
    let init = result_with_finding(&json, "node.hsa.init", "hsa-init-failed");
    assert!(init["message"].as_str().unwrap().contains("0x1008"));
    result_with_finding(&json, "node.hip.device_count", "hip-no-device");
    // Without gating, the lowest failure is still below the runtime.
    let first = json["first_failing_layer"].as_str().unwrap();
    assert!(["firmware", "amdgpu"].contains(&first), "{first}");
}

#[test]
fn gpus_without_a_code_object_skip_dispatch_with_the_reason() {
    let (code, _, json, _) = FakeRun::scenario("mi25-old-kernel").run();
    assert_eq!(code, 0);
    for id in [
        "gpu0.hsa.code_object",
        "gpu0.hsa.dispatch",
        "gpu0.hip.module_load",
        "gpu0.hip.vector_add",
    ] {
        let r = result_with_status(&json, id, "skipped");
        assert!(
            text(&r["message"]).starts_with("no code object for gfx900 in this build"),
            "{r}"
        );
    }
    result_with_status(&json, "gpu0.hip.memcpy", "pass");
}

#[test]
fn a_library_the_loader_refuses_is_named_with_the_loaders_words() {
    let n = node("mi300x-8");
    // A HIP runtime that needs a library nobody installed.
    let build = tempfile::tempdir().unwrap();
    std::fs::write(
        build.path().join("dep.c"),
        "int dep_fn(void) { return 1; }\n",
    )
    .unwrap();
    std::fs::write(
        build.path().join("hip.c"),
        "int dep_fn(void);\nint hipInit(unsigned f) { return dep_fn() + (int)f; }\n",
    )
    .unwrap();
    let cc = |args: &[&str]| {
        let ok = Command::new("cc")
            .current_dir(build.path())
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cc {args:?}");
    };
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        "librocgate-absent-dep.so",
        "dep.c",
    ]);
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        "libhip-stub.so",
        "hip.c",
        "-L.",
        "-lrocgate-absent-dep",
    ]);
    let rocm = fake_rocm();
    for soname in ["libamdhip64.so", "libamdhip64.so.6"] {
        let target = rocm.path().join("lib").join(soname);
        std::fs::remove_file(&target).unwrap();
        std::fs::copy(build.path().join("libhip-stub.so"), &target).unwrap();
    }
    let (_, _, json, _) = run_with(
        &n.root,
        &["--rocm-path", rocm.path().to_str().unwrap()],
        &[("ROCGATE_FAKE_NODE", n.root.to_str().unwrap())],
    );
    let r = result(&json, "node.hip.runtime");
    assert_eq!(r["finding"]["code"], "hip-library-missing", "{r}");
    let message = r["finding"]["message"].as_str().unwrap();
    assert!(
        message.contains("librocgate-absent-dep.so: cannot open shared object file"),
        "the loader's words: {message}"
    );
    let next = r["finding"]["next_step"].as_str().unwrap();
    assert_has(next, "needs librocgate-absent-dep.so");
    assert_lacks(next, "install the ROCm runtime");
}

#[test]
fn a_fault_named_wrongly_fails_the_run_naming_the_entry() {
    // A typo in ROCGATE_FAKE_FAULTS would otherwise inject nothing and let
    // the run pass: the fakes refuse the entry, and the first library call
    // crashes, saying why.
    let json = failing_with("hipMemcpyy@gpu3=wrong");
    let r = result(&json, "node.hsa.init");
    assert_eq!(r["status"], "crash", "{r}");
    // The check's captured output holds the library's last words.
    let said = text(&r["output"]);
    assert!(
        said.contains("ROCGATE_FAKE_FAULTS entry 'hipMemcpyy@gpu3=wrong'")
            && said.contains("did you mean hipMemcpy?"),
        "the crash names the entry and the export it was near: {r}"
    );
}
