//! The RDMA cards beside the GPUs, through the binary: each fixture's
//! verdict in the terminal, the JSON and the JUnit; a rail down drains, a
//! far or slow one warns; the network layer neither blocks the GPU layers
//! nor is blocked by them; a port's rate is a metric `compare` follows.

use crate::util::{
    assert_has, finish, node, on_sysroot, result, result_with_finding, result_with_status, run,
    text,
};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// The network layer's results of a run.
fn network(json: &Value) -> Vec<&Value> {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["layer"] == "network")
        .collect()
}

#[test]
fn eight_rails_beside_eight_gpus_are_green_with_their_firmware_in_the_versions() {
    for (scenario, model, judged) in [
        ("mi300x-8-ib", "ConnectX-7 (MT_0000000838) 28.39.1002", 6),
        ("mi300x-8-roce", "BCM57608 (BCM957608-P2200G) 230.2.52.0", 8),
    ] {
        let n = node(scenario);
        let (code, stdout, json, junit) = run(&n.root, &["--tier", "passive"]);
        assert_eq!(code, 0, "{stdout}");
        let results = network(&json);
        assert_eq!(results.len(), 8, "{scenario}");
        let passed = results.iter().filter(|r| r["status"] == "pass").count();
        assert_eq!(passed, judged, "{scenario}: {results:#?}");
        assert_eq!(json["versions"]["node"]["nic_firmware"], model);
        let rate = result(&json, "node.network.rdma_rate");
        let metrics = rate["metrics"].as_array().unwrap();
        assert_eq!(metrics.len(), 8);
        assert_eq!(metrics[0]["value"], 400.0);
        assert_eq!(metrics[0]["kind"], "throughput");
        assert_has(&junit, format!(r#"classname="{scenario}.node.network""#));
        assert_has(&stdout, "network");
    }
    // InfiniBand has no RoCE to judge, and says so.
    let n = node("mi300x-8-ib");
    let (_, _, json, _) = run(&n.root, &["--tier", "passive"]);
    let r = result_with_status(&json, "node.network.roce_gids", "skipped");
    assert_eq!(r["skip_reason"], "not-applicable");
    assert_has(text(&r["message"]), "no RoCE port is up");
}

#[test]
fn a_node_without_rdma_cards_runs_the_network_checks_as_not_applicable() {
    let n = node("mi300x-8");
    let (code, _, json, _) = run(&n.root, &["--tier", "passive"]);
    assert_eq!(code, 0);
    for r in network(&json) {
        assert_eq!(r["skip_reason"], "not-applicable", "{r}");
        assert_has(text(&r["message"]), "no RDMA network card");
    }
    // Not applicable is no unverified check: --strict still passes.
    let (code, _, _, _) = run(&n.root, &["--tier", "passive", "--strict"]);
    assert_eq!(code, 0);
}

#[test]
fn a_rail_down_fails_the_run_and_drains_the_node_naming_its_port() {
    let n = node("rdma-port-down");
    let (code, stdout, json, junit) = run(&n.root, &["--tier", "passive"]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(json["first_failing_layer"], "network");
    let r = result_with_finding(&json, "node.network.rdma_ports", "rdma-port-down");
    assert_eq!(r["status"], "fail");
    assert_has(
        text(&r["message"]),
        "mlx5_5 port 1 (ConnectX-7 at 0000:ac:00.0, InfiniBand) is DOWN, Polling: no link partner",
    );
    assert_has(text(&r["finding"]["next_step"]), "`ibstat mlx5_5 1`");
    // The port table is the check's output, for the JUnit's system-out.
    assert_has(
        text(&r["output"]),
        "mlx5_0 port 1 (ConnectX-7 at 0000:0c:00.0, InfiniBand): ACTIVE, LinkUp, up, 400 Gb/sec (4X NDR), fw 28.39.1002 ibp12s0 mtu 4092",
    );
    assert_has(&junit, r#"failures="1""#);
    assert_has(&junit, "rdma-port-down");
    let health = finish(&mut on_sysroot(&["health"], &n.root));
    assert_eq!(health.code, 1, "{}", health.stdout);
    assert_has(&health.stdout, "rdma-port-down mlx5_5 port 1");
}

#[test]
fn the_network_layer_and_the_gpu_layers_never_block_each_other() {
    // amdgpu not loaded on a node whose cards are fine, and a rail down on
    // a node whose GPUs are fine.
    let n = node("rdma-port-down");
    fs::write(n.root.join("sys/module/amdgpu/initstate"), "coming\n").unwrap();
    let (code, _, json, _) = run(&n.root, &["--tier", "passive"]);
    assert_eq!(code, 1);
    // The GPU stack's fault comes first; the network still ran.
    assert_eq!(json["first_failing_layer"], "amdgpu");
    assert_eq!(result(&json, "node.network.rdma_ports")["status"], "fail");
    for r in network(&json) {
        assert_ne!(r["status"], "blocked", "{r}");
    }
    let n = node("rdma-port-down");
    let (_, _, json, _) = run(&n.root, &["--tier", "passive"]);
    let blocked: Vec<&Value> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "blocked")
        .collect();
    assert!(blocked.is_empty(), "{blocked:#?}");
}

#[test]
fn a_far_card_and_a_slow_port_warn_and_keep_the_node_in_service() {
    let n = node("nic-numa-remote");
    let (code, stdout, json, _) = run(&n.root, &["--tier", "passive"]);
    assert_eq!(code, 0, "{stdout}");
    let r = result_with_finding(&json, "node.network.gpu_nic_affinity", "gpu-nic-far");
    assert_eq!(r["status"], "warn");
    assert_has(
        text(&r["message"]),
        "gpu3 (0000:65:00.0, NUMA node 0) has no card",
    );
    assert_has(
        text(&r["output"]),
        "gpu0 (0000:05:00.0, NUMA node 0) <-> mlx5_0 (0000:0c:00.0, NUMA node 0): on one root complex",
    );
    let (code, _, _, _) = run(&n.root, &["--tier", "passive", "--fail-on", "warn"]);
    assert_eq!(code, 1);

    let n = node("rdma-port-slow");
    let (code, _, json, _) = run(&n.root, &["--tier", "passive"]);
    assert_eq!(code, 0);
    let r = result_with_finding(&json, "node.network.rdma_rate", "rdma-port-slow");
    assert_has(
        text(&r["message"]),
        "bnxt_re2 port 1 (BCM57608 at 0000:4c:00.0, Ethernet, enp76s0np0) runs at 200 Gb/sec (4X HDR)",
    );
    assert_has(text(&r["finding"]["next_step"]), "`ethtool enp76s0np0`");
}

/// `rate` of `device`'s port 1.
fn set_rate(root: &Path, device: &str, rate: &str) {
    fs::write(
        root.join(format!("sys/class/infiniband/{device}/ports/1/rate")),
        format!("{rate}\n"),
    )
    .unwrap();
}

#[test]
fn compare_names_a_port_whose_rate_dropped_between_two_runs() {
    let n = node("mi300x-8-ib");
    let before = n.root.with_extension("before.json");
    let after = n.root.with_extension("after.json");
    let run_to = |json: &Path| {
        finish(
            crate::util::rocgate()
                .args(["run", "--tier", "passive", "--quiet", "--json"])
                .arg(json)
                .arg("--sysroot")
                .arg(&n.root),
        )
    };
    assert_eq!(run_to(&before).code, 0);
    set_rate(&n.root, "mlx5_6", "200 Gb/sec (2X NDR)");
    assert_eq!(run_to(&after).code, 0);
    let cmp = finish(
        crate::util::rocgate()
            .args(["compare"])
            .arg(&before)
            .arg(&after),
    );
    assert_has(&cmp.stdout, "rdma_rate.mlx5_6.port1");
    assert_has(&cmp.stdout, "400");
    assert_has(&cmp.stdout, "200");
}
