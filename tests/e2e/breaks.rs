//! Each check fails when the thing it checks is broken: a healthy synthetic
//! node, broken in one place (a file changed, or a fault injected into the
//! fake ROCm), gives that check's finding code on the right scope.

use crate::util::{
    FakeRun, TOPO, node, remove_io_links, result, result_with_status, run, set_prop, text,
};
use std::fs;

/// `id` found `code`, with the status the code's severity says.
fn expect(json: &serde_json::Value, id: &str, code: &str) {
    let r = result(json, id);
    let severity = rocgate_suites::findings::lookup(code)
        .unwrap_or_else(|| panic!("{code} is not catalogued"))
        .severity;
    assert_eq!(r["status"], severity.as_str(), "{id}: {r}");
    assert_eq!(r["finding"]["code"], code, "{id}: {r}");
}

#[test]
fn node_layer_checks_fail_on_their_breaks() {
    let n = node("mi300x-8");
    let root = &n.root;
    // gpu1 (KFD node 3): its XGMI links gone, in both directions.
    remove_io_links(root, 3);
    // gpu2: no compute units; gpu3: unknown target; gpu4: no render minor.
    set_prop(root, 4, "simd_per_cu", "0");
    set_prop(root, 5, "gfx_target_version", "91600");
    set_prop(root, 5, "device_id", "4660");
    fs::write(
        root.join("sys/bus/pci/devices/0000:65:00.0/device"),
        "0x1234\n",
    )
    .unwrap();
    set_prop(root, 6, "drm_render_minor", "0");
    // gpu5: render node file missing; gpu6: driver unbound; gpu7: MEC firmware 0.
    fs::remove_file(root.join("dev/dri/renderD133")).unwrap();
    fs::remove_file(root.join("sys/bus/pci/devices/0000:c6:00.0/driver")).unwrap();
    fs::write(
        root.join("sys/bus/pci/devices/0000:e5:00.0/fw_version/mec_fw_version"),
        "0x00000000\n",
    )
    .unwrap();
    let (code, _, json, _) = run(root, &["--no-gate"]);
    assert_eq!(code, 1);
    expect(&json, "node.rccl.interconnect", "xgmi-link-missing");
    expect(&json, "gpu2.kfd.compute_units", "no-compute-units");
    expect(&json, "gpu3.kfd.gfx_target", "gfx-target-unknown");
    expect(&json, "gpu4.kfd.render_minor", "render-minor-missing");
    expect(&json, "gpu5.amdgpu.render_node", "render-node-missing");
    expect(&json, "gpu6.amdgpu.bound", "amdgpu-probe-failed");
    expect(&json, "gpu7.firmware.versions", "firmware-load-failed");
    assert_eq!(result(&json, "gpu0.kfd.compute_units")["status"], "pass");
}

#[test]
fn links_without_peer_to_peer_dma_are_reported() {
    let n = node("mi210-8-two-hives");
    let link = n.root.join(format!("{TOPO}/2/io_links/1/properties"));
    let text = fs::read_to_string(&link)
        .unwrap()
        .replace("flags 1", "flags 17");
    fs::write(&link, text).unwrap();
    let (code, _, json, _) = run(&n.root, &[]);
    expect(&json, "node.rccl.interconnect", "p2p-disabled");
    // A slow path is a warning: the node works, the run passes.
    assert_eq!(result(&json, "node.rccl.interconnect")["status"], "warn");
    assert_eq!(code, 0, "{json}");
    let r = result(&json, "node.rccl.interconnect");
    assert!(
        r["output"].as_str().unwrap().contains("XGMI"),
        "the topology is listed: {r}"
    );
}

#[test]
fn partitions_of_one_gpu_must_agree() {
    let n = node("mi300x-8-cpx");
    // KFD node 5 (partition 3 of the first MI300X) claims another bus.
    set_prop(&n.root, 5, "location_id", &(0x27u32 << 8 | 3).to_string());
    let (_, _, json, _) = run(&n.root, &["--no-gate"]);
    expect(&json, "node.kfd.partitions", "partition-mismatch");
}

#[test]
fn runtime_checks_fail_on_injected_faults() {
    let n = node("mi300x-8");
    let faults = "hsa_signal_store_screlease@gpu4=wrong;hsa_amd_memory_async_copy@gpu1=wrong;hipMemcpy@gpu0=wrong;hsa_executable_load_agent_code_object@gpu6=error:0x100F";
    let (code, _, json, _) = FakeRun::on(&n.root).faults(faults).run();
    assert_eq!(code, 1);
    expect(&json, "gpu4.hsa.dispatch", "hsa-dispatch-wrong");
    expect(&json, "gpu1.hsa.copy", "hsa-copy-corrupt");
    expect(&json, "gpu0.hip.memcpy", "hip-memcpy-corrupt");
    expect(&json, "gpu6.hsa.code_object", "hsa-code-object-failed");
    assert!(
        text(&result(&json, "gpu6.hsa.code_object")["message"])
            .contains("HSA_STATUS_ERROR_INVALID_ISA")
    );
    assert_eq!(result(&json, "gpu7.hsa.dispatch")["status"], "pass");
}

#[test]
fn runtime_start_failures_fail_the_node_checks() {
    let n = node("mi300x-8");
    let faults = "hsa_init@gpu*=error:0x1008;hipGetDeviceCount@gpu*=error:100";
    let (_, _, json, _) = FakeRun::on(&n.root).faults(faults).run();
    expect(&json, "node.hsa.init", "hsa-init-failed");
    let r = result_with_status(&json, "gpu0.hsa.agent", "blocked");
    assert_eq!(r["blocked_by"], "node.hsa.init");
    // hip sits on hsa; ungated, its own start failure shows too.
    let (_, _, json, _) = FakeRun::on(&n.root)
        .faults(faults)
        .args(&["--no-gate"])
        .run();
    expect(&json, "node.hip.device_count", "hip-no-device");
}
