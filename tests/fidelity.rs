//! Verdicts that hold on real ROCm: the fake libraries behave as given ROCm
//! releases do (`ROCGATE_FAKE_ROCM_VERSION`), read the fixture node with
//! their own reader, honour ROCR_VISIBLE_DEVICES, and fail the way ROCr
//! fails (negative completion signals, queue error callbacks, memory faults
//! that abort, an init that hangs wherever a wedged GPU is visible). Each
//! test pins a behaviour of real ROCm that once gave a wrong verdict.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{
    node, result, result_with_status, results, run_fake_env, run_fake_scenario,
    run_fake_scenario_env, text,
};

fn status<'a>(json: &'a serde_json::Value, id: &str) -> &'a str {
    result(json, id)["status"].as_str().unwrap()
}

fn message<'a>(json: &'a serde_json::Value, id: &str) -> &'a str {
    result(json, id)["message"].as_str().unwrap()
}

fn code_of<'a>(json: &'a serde_json::Value, id: &str) -> &'a str {
    result(json, id)["finding"]["code"].as_str().unwrap_or("")
}

/// Every hsa and hip result of `gpu` passed.
fn runtime_passes(json: &serde_json::Value, gpu: u32) {
    let scope = format!("gpu{gpu}");
    let mine: Vec<&serde_json::Value> = results(json)
        .iter()
        .filter(|r| r["scope"] == scope.as_str() && (r["layer"] == "hsa" || r["layer"] == "hip"))
        .collect();
    assert!(!mine.is_empty(), "no runtime results for {scope}");
    for r in mine {
        assert_eq!(r["status"], "pass", "{r}");
    }
}

#[test]
fn cpx_partitions_are_found_whether_hip_prints_their_function_or_not() {
    let n = node("mi300x-8-cpx");
    for (release, hip_version) in [("6.1", "6.1.40093"), ("6.2", "6.2.41134")] {
        let (code, stdout, json, junit) =
            run_fake_env(&n.root, "", &[], &[("ROCGATE_FAKE_ROCM_VERSION", release)]);
        assert_eq!(code, 0, "ROCm {release}: {stdout}");
        for gpu in 0..64 {
            runtime_passes(&json, gpu);
        }
        // Partition 3 of the first MI300X is 0000:05:00.3 in KFD; HIP before
        // 6.2 calls it 0000:05:00.0 like its seven siblings.
        let found = message(&json, "gpu3.hip.device");
        assert_eq!(
            found.contains("found by its place among its device's partitions"),
            release == "6.1",
            "ROCm {release}: {found}"
        );
        assert!(
            junit.contains(&format!(
                r#"<property name="hip_runtime_version" value="{hip_version}"/>"#
            )),
            "ROCm {release}"
        );
    }
}

#[test]
fn the_partitions_of_one_device_all_reduce_under_the_old_bus_id_format() {
    // The node's worker sees all 64 partitions; eight share one bus id.
    let (code, stdout, json, _) = run_fake_scenario_env(
        "mi300x-8-cpx",
        "",
        &["--tier", "standard", "--gpus", "0000:26:00.0"],
        &[("ROCGATE_FAKE_ROCM_VERSION", "6.1")],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(status(&json, "node.rccl.allreduce"), "pass");
    assert!(message(&json, "node.rccl.allreduce").contains("across 8 GPUs"));
}

#[test]
fn an_rx_7900_xtx_reports_work_group_processors_in_wgp_mode() {
    let n = node("rx7900xtx-1");
    let (code, stdout, json, _) = run_fake_env(&n.root, "", &[], &[]);
    assert_eq!(code, 0, "{stdout}");
    let m = message(&json, "gpu0.hip.device");
    assert!(m.contains("48 multiprocessors"), "{m}");
    assert!(m.contains("WGP mode: 96 CUs / 2"), "{m}");
    assert!(message(&json, "gpu0.hsa.agent").contains("96 CUs"));
    let (code, stdout, json, _) = run_fake_env(&n.root, "", &[], &[("GPU_ENABLE_WGP_MODE", "0")]);
    assert_eq!(code, 0, "{stdout}");
    assert!(message(&json, "gpu0.hip.device").contains("96 multiprocessors"));
}

#[test]
fn a_gpu_that_came_up_with_fewer_cus_is_named_by_hsa_and_hip() {
    let (code, _, json, _) = run_fake_scenario(
        "mi300x-8",
        "hsa_agent_get_info@gpu2=wrong;hipDeviceGetAttribute@gpu6=wrong",
        &["--no-gate"],
    );
    assert_eq!(code, 1);
    assert_eq!(code_of(&json, "gpu2.hsa.agent"), "hsa-agent-mismatch");
    assert!(message(&json, "gpu2.hsa.agent").contains("300 CUs, KFD says 304"));
    assert_eq!(code_of(&json, "gpu6.hip.device"), "hip-device-mismatch");
    assert_eq!(status(&json, "gpu6.hsa.agent"), "pass");
    runtime_passes(&json, 0);
}

#[test]
fn a_negative_completion_signal_is_a_failed_operation_not_corrupt_data() {
    let (code, _, json, _) = run_fake_scenario(
        "mi300x-8",
        "hsa_amd_memory_async_copy@gpu2=negative-signal;hsa_signal_store_screlease@gpu4=negative-signal",
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(code_of(&json, "gpu2.hsa.copy"), "hsa-copy-failed");
    assert!(
        message(&json, "gpu2.hsa.copy").contains("completion signal ended at -1"),
        "{}",
        message(&json, "gpu2.hsa.copy")
    );
    assert_eq!(code_of(&json, "gpu4.hsa.dispatch"), "hsa-dispatch-failed");
    runtime_passes(&json, 0);
}

#[test]
fn a_queue_error_is_reported_with_its_status_at_once() {
    let (code, _, json, _) = run_fake_scenario(
        "mi300x-8",
        "hsa_signal_store_screlease@gpu1=error:0x1016;hsa_signal_store_screlease@gpu5=error:43",
        &[],
    );
    assert_eq!(code, 1);
    // ROCr hands the status to the queue's error callback and the dispatch
    // never completes: rocgate reports it without waiting out its 20 s.
    let r = result(&json, "gpu1.hsa.dispatch");
    assert_eq!(r["finding"]["code"], "hsa-dispatch-failed", "{r}");
    assert!(
        text(&r["message"])
            .contains("queue error during a kernel dispatch: HSA_STATUS_ERROR_EXCEPTION"),
        "{r}"
    );
    assert!(r["duration_ms"].as_f64().unwrap() < 10_000.0, "{r}");
    // A memory fault never reaches the callback: ROCr prints and aborts.
    let r = result_with_status(&json, "gpu5.hsa.dispatch", "crash");
    assert_eq!(r["finding"]["code"], "gpu-memory-fault", "{r}");
    assert!(
        text(&r["finding"]["message"]).contains("Memory access fault by GPU node-7"),
        "{r}"
    );
}

#[test]
fn a_wedged_gpu_hangs_its_own_worker_and_is_named() {
    // hsa_init hangs in every process that sees gpu3. Only the checks that
    // hang get short timeouts.
    let (code, stdout, json, _) = run_fake_scenario(
        "mi300x-8",
        "hsa_init@gpu3=hang",
        &["--timeout", "hsa::init=4", "--timeout", "hsa::agent=8"],
    );
    assert_eq!(code, 1, "{stdout}");
    let r = result_with_status(&json, "node.hsa.init", "timeout");
    assert_eq!(r["finding"]["code"], "gpu-wedged", "{r}");
    let m = r["finding"]["message"].as_str().unwrap();
    assert!(
        m.contains("gpu3 (0000:65:00.0, AMD Instinct MI300X) hung while the other 7 GPUs passed"),
        "{m}"
    );
    assert_eq!(status(&json, "gpu3.hsa.agent"), "timeout");
    assert_eq!(status(&json, "gpu3.hip.vector_add"), "blocked");
    for gpu in [0, 1, 2, 4, 5, 6, 7] {
        runtime_passes(&json, gpu);
    }
}

#[test]
fn rocm_7_lists_a_ryzen_ai_npu_as_an_aie_agent_not_a_cpu() {
    let n = node("ryzen-ai-rx7900xtx");
    let (code, stdout, json, _) =
        run_fake_env(&n.root, "", &[], &[("ROCGATE_FAKE_ROCM_VERSION", "7.0")]);
    assert_eq!(code, 0, "{stdout}");
    let m = message(&json, "node.hsa.agents");
    assert!(m.contains("1 CPU, 1 GPU, 1 AIE"), "{m}");
    runtime_passes(&json, 0);
}

#[test]
fn rocgates_code_objects_load_on_rocm_5_2() {
    // v5 objects load on ROCr 5.2 to 7.x; v6 would be refused before 6.3.
    let (code, stdout, json, junit) = run_fake_scenario_env(
        "mi300x-8",
        "",
        &["--gpus", "0"],
        &[("ROCGATE_FAKE_ROCM_VERSION", "5.2.3")],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(status(&json, "gpu0.hsa.code_object"), "pass");
    assert_eq!(status(&json, "gpu0.hip.module_load"), "pass");
    assert!(junit.contains(r#"<property name="hip_runtime_version" value="5.2.21153"/>"#));
}
