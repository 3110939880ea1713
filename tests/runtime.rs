//! The runtime layers (hsa, hip) end to end on synthetic nodes, with the fake
//! ROCm libraries simulating the GPUs and injecting faults: each fault lands
//! as the right outcome on the right GPU and layer, everything above it is
//! blocked, and the other GPUs stay green.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{
    FakeRun, RUNTIME_LAYERS, assert_gpus_pass, node, result, result_timed_out, result_with_finding,
    result_with_status, run_fake, run_fake_scenario, text,
};

#[test]
fn the_quick_tier_passes_on_a_fake_8x_mi300x() {
    let (code, stdout, json, junit) = run_fake_scenario("mi300x-8", "", &[]);
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
    assert!(
        junit.contains(r#"<property name="hip_runtime_version" value="6.2.41134"/>"#),
        "{junit}"
    );
    assert!(junit.contains("libamdhip64.so.6\"/>"));
    assert!(junit.contains(r#"<property name="hsa_library""#));
}

#[test]
fn a_wrong_result_fails_that_gpu_only() {
    let (code, _, json, _) = run_fake_scenario("mi300x-8", "hipModuleLaunchKernel@gpu3=wrong", &[]);
    assert_eq!(code, 1);
    let r = result_with_status(&json, "gpu3.hip.vector_add", "fail");
    assert_eq!(r["finding"]["code"], "hip-kernel-wrong", "{r}");
    assert!(text(&r["message"]).contains("1 of 1048576 sums are wrong"));
    assert_gpus_pass(&json, [0, 1, 2, 4, 5, 6, 7], RUNTIME_LAYERS);
    // HSA dispatch on the same GPU is unaffected: the fault is HIP's launch.
    result_with_status(&json, "gpu3.hsa.dispatch", "pass");
}

#[test]
fn a_hang_becomes_a_timeout_and_blocks_that_gpu() {
    // The queue check gets 2 s instead of 30 (plus 1 s kill grace); every
    // other check keeps its own timeout.
    let (json, junit) = FakeRun::scenario("mi300x-8")
        .faults("hsa_queue_create@gpu5=hang")
        .timeout("hsa::queue", 2)
        .exits(1);
    // Far sooner than its own 30 s.
    result_timed_out(&json, "gpu5.hsa.queue", 2);
    for later in ["gpu5.hsa.dispatch", "gpu5.hsa.copy", "gpu5.hip.vector_add"] {
        let b = result_with_status(&json, later, "blocked");
        assert!(
            text(&b["message"]).contains("GPU unresponsive after gpu5.hsa.queue"),
            "{b}"
        );
    }
    assert_gpus_pass(&json, [0, 1, 2, 3, 4, 6, 7], RUNTIME_LAYERS);
    assert!(
        junit.contains(r#"<testsuite name="mi300x-8.gpu5""#),
        "{junit}"
    );
    assert!(junit.contains(r#"<property name="first_failing_layer" value="hsa"/>"#));
}

#[test]
fn a_crashing_library_costs_one_result() {
    let (code, _, json, _) = run_fake_scenario("mi300x-8", "hipMemcpy@gpu2=crash", &[]);
    assert_eq!(code, 1);
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
    let (_, _, json, _) = run_fake(&n.root, "", &[]);
    result_with_status(&json, "node.hsa.init", "blocked");
    let (_, _, json, _) = run_fake(&n.root, "", &["--no-gate"]);
    let init = result_with_finding(&json, "node.hsa.init", "hsa-init-failed");
    assert!(init["message"].as_str().unwrap().contains("0x1008"));
    result_with_finding(&json, "node.hip.device_count", "hip-no-device");
    // Without gating, the lowest failure is still below the runtime.
    let first = json["first_failing_layer"].as_str().unwrap();
    assert!(["firmware", "amdgpu"].contains(&first), "{first}");
}

#[test]
fn gpus_without_a_code_object_skip_dispatch_with_the_reason() {
    let (code, _, json, _) = run_fake_scenario("mi25-old-kernel", "", &[]);
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
fn a_gpu_that_hangs_after_init_keeps_its_own_timeout_and_is_not_blamed_for_init() {
    // gpu1 stalls hsa_init in every process that sees it; gpu6 initialises
    // (its agent check passes) and only its queue creation hangs. Only gpu1
    // stalled init, and gpu6's timeout stays its own.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults("hsa_init@gpu1=hang;hsa_queue_create@gpu6=hang")
        .timeout("hsa::init", 4)
        .timeout("hsa::agent", 8)
        .timeout("hsa::queue", 3)
        .exits(1);
    let init = result_with_finding(&json, "node.hsa.init", "gpu-wedged");
    let m = text(&init["finding"]["message"]);
    assert!(m.contains("gpu1 (0000:"), "{m}");
    assert!(
        !m.contains("gpu6"),
        "gpu6 initialised, so it did not stall init: {m}"
    );
    assert!(
        text(&init["finding"]["next_step"]).contains("amd-smi reset -g 1"),
        "{init}"
    );
    result_with_finding(&json, "gpu1.hsa.agent", "gpu-wedged");
    result_with_status(&json, "gpu6.hsa.agent", "pass");
    let q = result_with_finding(&json, "gpu6.hsa.queue", "check-timeout");
    let next = text(&q["finding"]["next_step"]);
    assert!(!next.contains("amd-smi reset -g 1"), "{q}");
    assert!(
        !text(&q["finding"]["message"]).contains("hangs on its own"),
        "{q}"
    );
}
