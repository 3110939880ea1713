//! The runtime layers (hsa, hip) end to end on synthetic nodes, with the fake
//! ROCm libraries simulating the GPUs and injecting faults: each fault lands
//! as the right outcome on the right GPU and layer, everything above it is
//! blocked, and the other GPUs stay green.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{layer_statuses, node, result, result_with_status, run_fake, run_fake_scenario, text};

fn all_pass(json: &serde_json::Value, gpu: u32) {
    for layer in ["hsa", "hip"] {
        let s = layer_statuses(json, &format!("gpu{gpu}"), layer);
        assert!(
            !s.is_empty() && s.iter().all(|x| x == "pass"),
            "gpu{gpu} {layer}: {s:?}"
        );
    }
}

#[test]
fn the_quick_tier_passes_on_a_fake_8x_mi300x() {
    let (code, stdout, json, junit) = run_fake_scenario("mi300x-8", "", &[]);
    assert_eq!(code, 0, "{stdout}");
    for gpu in 0..8 {
        all_pass(&json, gpu);
    }
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
    assert_eq!(r["finding"]["code"], "hip-kernel-wrong");
    assert!(text(&r["message"]).contains("1 of 1048576 sums are wrong"));
    for gpu in [0, 1, 2, 4, 5, 6, 7] {
        all_pass(&json, gpu);
    }
    // HSA dispatch on the same GPU is unaffected: the fault is HIP's launch.
    assert_eq!(result(&json, "gpu3.hsa.dispatch")["status"], "pass");
}

#[test]
fn a_hang_becomes_a_timeout_and_blocks_that_gpu() {
    // The queue check gets 2 s instead of 30 (plus 1 s kill grace); every
    // other check keeps its own timeout.
    let (code, _, json, junit) = run_fake_scenario(
        "mi300x-8",
        "hsa_queue_create@gpu5=hang",
        &["--timeout", "hsa::queue=2"],
    );
    assert_eq!(code, 1);
    let r = result_with_status(&json, "gpu5.hsa.queue", "timeout");
    // Far sooner than its own 30 s (slack for a busy machine).
    assert!(
        r["duration_ms"].as_f64().unwrap() < 2000.0 + 1000.0 + 10_000.0,
        "{r}"
    );
    for later in ["gpu5.hsa.dispatch", "gpu5.hsa.copy", "gpu5.hip.vector_add"] {
        let b = result_with_status(&json, later, "blocked");
        assert!(
            text(&b["message"]).contains("GPU unresponsive after gpu5.hsa.queue"),
            "{b}"
        );
    }
    for gpu in [0, 1, 2, 3, 4, 6, 7] {
        all_pass(&json, gpu);
    }
    assert!(junit.contains(r#"<testsuite name="gpu5""#));
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
    assert_eq!(result(&json, "gpu2.hip.vector_add")["status"], "blocked");
    // A fresh worker serves the GPU's next check.
    assert_eq!(result(&json, "gpu2.hip.module_load")["status"], "pass");
    for gpu in [0, 1, 3, 4, 5, 6, 7] {
        all_pass(&json, gpu);
    }
}

#[test]
fn error_codes_are_named_with_a_next_step() {
    let (_, _, json, _) = run_fake_scenario(
        "mi300x-8",
        "hsa_queue_create@gpu1=error:0x1002;hipModuleLoadData@gpu6=error:209",
        &[],
    );
    let q = result(&json, "gpu1.hsa.queue");
    assert_eq!(q["finding"]["code"], "hsa-queue-failed");
    assert!(
        text(&q["message"]).contains("HSA_STATUS_ERROR_INVALID_QUEUE_CREATION (0x1002)"),
        "{q}"
    );
    assert_eq!(result(&json, "gpu1.hsa.dispatch")["status"], "blocked");
    let m = result(&json, "gpu6.hip.module_load");
    assert_eq!(m["finding"]["code"], "hip-module-load-failed");
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
    assert_eq!(result(&json, "node.hsa.init")["status"], "blocked");
    let (_, _, json, _) = run_fake(&n.root, "", &["--no-gate"]);
    let init = result(&json, "node.hsa.init");
    assert_eq!(init["finding"]["code"], "hsa-init-failed");
    assert!(init["message"].as_str().unwrap().contains("0x1008"));
    let count = result(&json, "node.hip.device_count");
    assert_eq!(count["finding"]["code"], "hip-no-device");
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
    assert_eq!(result(&json, "gpu0.hip.memcpy")["status"], "pass");
}
