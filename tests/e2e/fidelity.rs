//! Verdicts that hold on real ROCm: the fake libraries behave as given ROCm
//! releases do (`ROCGATE_FAKE_ROCM_VERSION`), read the fixture node with
//! their own reader, honour ROCR_VISIBLE_DEVICES, and fail the way ROCr
//! fails (negative completion signals, queue error callbacks, memory faults
//! that abort, an init that hangs wherever a wedged GPU is visible). Each
//! test pins a behaviour of real ROCm that once gave a wrong verdict.

use crate::util::{
    FakeRun, RUNTIME_LAYERS, assert_gpus_pass, assert_has, node, result, result_with_finding,
    result_with_status, text,
};
use serde_json::Value;

/// The message of result `id`, which these tests read for what the fakes
/// reported.
fn message<'a>(json: &'a Value, id: &str) -> &'a str {
    result(json, id)["message"].as_str().unwrap()
}

/// Runs the fake 8x MI300X with `faults` injected and `extra` arguments,
/// asserts that it failed, that each `(id, code)` of `findings` names what
/// went wrong, and that gpu0, which no fault touches, still passes its
/// runtime layers; the results, for the checks particular to each fault.
#[track_caller]
fn faults_land(faults: &str, extra: &[&str], findings: &[(&str, &str)]) -> Value {
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults(faults)
        .args(extra)
        .exits(1);
    for (id, code) in findings {
        result_with_finding(&json, id, code);
    }
    assert_gpus_pass(&json, [0], RUNTIME_LAYERS);
    json
}

#[test]
fn cpx_partitions_are_found_whether_hip_prints_their_function_or_not() {
    let n = node("mi300x-8-cpx");
    for (release, hip_version) in [("6.1", "6.1.40093"), ("6.2", "6.2.41134")] {
        let (code, stdout, json, junit) = FakeRun::on(&n.root)
            .env("ROCGATE_FAKE_ROCM_VERSION", release)
            .run();
        assert_eq!(code, 0, "ROCm {release}: {stdout}");
        assert_gpus_pass(&json, 0..64, RUNTIME_LAYERS);
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
    let (json, _) = FakeRun::scenario("mi300x-8-cpx")
        .args(&["--tier", "standard", "--gpus", "0000:26:00.0"])
        .env("ROCGATE_FAKE_ROCM_VERSION", "6.1")
        .exits(0);
    let r = result_with_status(&json, "node.rccl.allreduce", "pass");
    assert!(text(&r["message"]).contains("across 8 GPUs"), "{r}");
}

#[test]
fn an_rx_7900_xtx_reports_work_group_processors_in_wgp_mode() {
    let n = node("rx7900xtx-1");
    let (json, _) = FakeRun::on(&n.root).exits(0);
    let m = message(&json, "gpu0.hip.device");
    assert_has(m, "48 multiprocessors");
    assert_has(m, "WGP mode: 96 CUs / 2");
    assert!(message(&json, "gpu0.hsa.agent").contains("96 CUs"));
    let (json, _) = FakeRun::on(&n.root)
        .env("GPU_ENABLE_WGP_MODE", "0")
        .exits(0);
    assert!(message(&json, "gpu0.hip.device").contains("96 multiprocessors"));
}

#[test]
fn a_gpu_that_came_up_with_fewer_cus_is_named_by_hsa_and_hip() {
    let json = faults_land(
        "hsa_agent_get_info@gpu2=wrong;hipDeviceGetAttribute@gpu6=wrong",
        &["--no-gate"],
        &[
            ("gpu2.hsa.agent", "hsa-agent-mismatch"),
            ("gpu6.hip.device", "hip-device-mismatch"),
        ],
    );
    assert!(message(&json, "gpu2.hsa.agent").contains("300 CUs, KFD says 304"));
    result_with_status(&json, "gpu6.hsa.agent", "pass");
}

#[test]
fn a_negative_completion_signal_is_a_failed_operation_not_corrupt_data() {
    let json = faults_land(
        "hsa_amd_memory_async_copy@gpu2=negative-signal;hsa_signal_store_screlease@gpu4=negative-signal",
        &[],
        &[
            ("gpu2.hsa.copy", "hsa-copy-failed"),
            ("gpu4.hsa.dispatch", "hsa-dispatch-failed"),
        ],
    );
    let m = message(&json, "gpu2.hsa.copy");
    assert_has(m, "completion signal ended at -1");
}

#[test]
fn a_queue_error_is_reported_with_its_status_at_once() {
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults(
            "hsa_signal_store_screlease@gpu1=error:0x1016;hsa_signal_store_screlease@gpu5=error:43",
        )
        .exits(1);
    // ROCr hands the status to the queue's error callback and the dispatch
    // never completes: rocgate reports it without waiting out its 20 s.
    let r = result_with_finding(&json, "gpu1.hsa.dispatch", "hsa-dispatch-failed");
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
fn rocm_7_lists_a_ryzen_ai_npu_as_an_aie_agent_not_a_cpu() {
    let (json, _) = FakeRun::scenario("ryzen-ai-rx7900xtx")
        .env("ROCGATE_FAKE_ROCM_VERSION", "7.0")
        .exits(0);
    let m = message(&json, "node.hsa.agents");
    assert_has(m, "1 CPU, 1 GPU, 1 AIE");
    assert_gpus_pass(&json, [0], RUNTIME_LAYERS);
}

#[test]
fn rocgates_code_objects_load_on_rocm_5_2() {
    // v5 objects load on ROCr 5.2 to 7.x; v6 would be refused before 6.3.
    let (json, junit) = FakeRun::scenario("mi300x-8")
        .args(&["--gpus", "0"])
        .env("ROCGATE_FAKE_ROCM_VERSION", "5.2.3")
        .exits(0);
    result_with_status(&json, "gpu0.hsa.code_object", "pass");
    result_with_status(&json, "gpu0.hip.module_load", "pass");
    assert!(junit.contains(r#"<property name="hip_runtime_version" value="5.2.21153"/>"#));
}
