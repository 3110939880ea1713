//! The GPUs' links and partitions as the kernel describes them, judged
//! through the binary: XGMI pairs by KFD's weight and bandwidth, PCIe peers
//! by `p2p_links`, partitions by PCI device whatever their unique_ids.

use crate::util;
use crate::util::{
    FakeRun, TOPO, assert_has, assert_lacks, node, result, result_with_finding, result_with_status,
    run, text,
};
use std::fs;
use std::path::Path;

const INTERCONNECT: &str = "node.rccl.interconnect";

/// Rewrites `key` in every XGMI io_link between KFD nodes `a` and `b`, both
/// directions.
fn set_xgmi(root: &Path, a: u32, b: u32, key: &str, value: &str) {
    for (from, to) in [(a, b), (b, a)] {
        let links = root.join(format!("{TOPO}/{from}/io_links"));
        for l in fs::read_dir(links).unwrap() {
            let p = l.unwrap().path().join("properties");
            let t = fs::read_to_string(&p).unwrap();
            if t.contains("type 11\n") && t.contains(&format!("node_to {to}\n")) {
                let out: String = t
                    .lines()
                    .map(|l| match l.split_once(' ') {
                        Some((k, _)) if k == key => format!("{key} {value}\n"),
                        _ => format!("{l}\n"),
                    })
                    .collect();
                fs::write(&p, out).unwrap();
            }
        }
    }
}

/// A link's `properties`, as a map.
fn link_props(root: &Path, node: u32, dir: &str, link: u32) -> Vec<(String, u64)> {
    let t =
        fs::read_to_string(root.join(format!("{TOPO}/{node}/{dir}/{link}/properties"))).unwrap();
    t.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn prop(props: &[(String, u64)], key: &str) -> u64 {
    props
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in {props:?}"))
        .1
}

#[test]
fn the_healthy_mi300x_hive_has_direct_xgmi_links_as_kfd_prints_them() {
    let n = node("mi300x-8");
    // KFD node 2's first XGMI link, as kfd_fill_gpu_xgmi_link_to_gpu fills
    // it on MI300X: one hop (15), one link of 32 GT/s x16 = 64000 MB/s.
    let l = link_props(&n.root, 2, "io_links", 1);
    assert_eq!(prop(&l, "type"), 11);
    assert_eq!(prop(&l, "weight"), 15);
    assert_eq!(prop(&l, "min_bandwidth"), 64_000);
    assert_eq!(prop(&l, "max_bandwidth"), 64_000);
    assert_eq!(prop(&l, "flags"), 1);
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, INTERCONNECT, "pass");
    let m = text(&r["message"]);
    assert!(
        m.contains("28 of 28 pairs linked by XGMI (28 direct"),
        "{m}"
    );
}

#[test]
fn a_dead_xgmi_link_fails_naming_both_gpus_and_what_kfd_says() {
    for (scenario, pair, seen) in [
        (
            "xgmi-link-multi-hop",
            "0000:26:00.0 <-> 0000:85:00.0",
            "weight 30 (2 hops",
        ),
        (
            "xgmi-link-no-bandwidth",
            "0000:46:00.0 <-> 0000:c6:00.0",
            "max_bandwidth 0 MB/s",
        ),
    ] {
        let n = node(scenario);
        let (code, _, json, _) = run(&n.root, &[]);
        assert_eq!(code, 1, "{scenario}: a dead link fails the run");
        let r = result_with_finding(&json, INTERCONNECT, "xgmi-link-down");
        assert_eq!(r["status"], "fail");
        let m = text(&r["finding"]["message"]);
        assert!(
            m.starts_with("1 GPU pair of a fully connected XGMI hive has no working direct link"),
            "{scenario}: {m}"
        );
        assert!(m.contains(pair) && m.contains(seen), "{scenario}: {m}");
        let next = text(&r["finding"]["next_step"]);
        assert_has(next, "rocm-smi --showtopo");
        assert_has(next, "RMA");
    }
}

#[test]
fn one_direction_of_a_link_three_hops_long_is_enough_to_fail() {
    let n = node("mi300x-8");
    // KFD nodes 4 and 7 (0000:46:00.0 and 0000:a6:00.0): only the link
    // from 7 says 45.
    set_xgmi(&n.root, 4, 7, "weight", "15");
    let p = n.root.join(format!("{TOPO}/7/io_links"));
    for l in fs::read_dir(p).unwrap() {
        let f = l.unwrap().path().join("properties");
        let t = fs::read_to_string(&f).unwrap();
        if t.contains("node_to 4\n") {
            fs::write(&f, t.replace("weight 15", "weight 45")).unwrap();
        }
    }
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_finding(&json, INTERCONNECT, "xgmi-link-down");
    let m = text(&r["finding"]["message"]);
    assert!(
        m.contains("0000:46:00.0 <-> 0000:a6:00.0: weight 45 (3 hops"),
        "{m}"
    );
    assert!(text(&r["output"]).contains("weight 45"), "{r}");
}

#[test]
fn partition_mode_links_are_weight_41_without_bandwidth_by_design_and_pass() {
    let n = node("mi300x-8-cpx");
    // KFD node 2 is partition 0 of the first MI300X: its first XGMI link
    // goes to its own partition 1 (weight 13), then to another device.
    let own = link_props(&n.root, 2, "io_links", 1);
    assert_eq!((prop(&own, "node_to"), prop(&own, "weight")), (3, 13));
    let other = link_props(&n.root, 2, "io_links", 8);
    assert_eq!(
        (
            prop(&other, "node_to"),
            prop(&other, "weight"),
            prop(&other, "max_bandwidth")
        ),
        (10, 41, 0)
    );
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, INTERCONNECT, "pass");
    let m = text(&r["message"]);
    assert!(
        m.contains("28 of 28 pairs linked by XGMI (28 between partitioned GPUs"),
        "{m}"
    );
}

#[test]
fn gpus_without_xgmi_are_pcie_peers_by_p2p_links() {
    let n = node("mi210-4-pcie");
    // KFD node 2 (0000:03:00.0): its indirect link to CPU node 1, then one
    // PCIe peer link to each other GPU (kfd_add_peer_prop).
    let cpu = link_props(&n.root, 2, "p2p_links", 0);
    assert_eq!((prop(&cpu, "node_to"), prop(&cpu, "type")), (1, 2));
    let peer = link_props(&n.root, 2, "p2p_links", 1);
    assert_eq!(
        (
            prop(&peer, "node_to"),
            prop(&peer, "weight"),
            prop(&peer, "flags")
        ),
        (3, 40, 3)
    );
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, INTERCONNECT, "pass");
    let m = text(&r["message"]);
    assert!(
        m.ends_with("peer-to-peer DMA enabled (6 pairs over PCIe, per KFD's p2p_links)"),
        "{m}"
    );
    let table = text(&r["output"]);
    assert!(table.contains("PCIe") && !table.contains("host"), "{table}");
}

#[test]
fn a_gpu_pair_the_kernel_lists_no_peer_link_for_is_a_warning_naming_the_direction() {
    // The whole node without peers, and one direction gone on a healthy one.
    let n = node("mi210-4-no-peer-dma");
    let (code, _, json, _) = run(&n.root, &[]);
    let r = result_with_finding(&json, INTERCONNECT, "p2p-disabled");
    assert_eq!(r["status"], "warn");
    assert_eq!(code, 0, "a slow path warns; the node works");
    assert!(
        text(&r["finding"]["message"]).contains("for 12 directions"),
        "{r}"
    );
    assert!(text(&r["output"]).contains("host"), "{r}");

    let n = node("mi210-4-pcie");
    // KFD node 3 (0000:23:00.0) loses its link to node 4 (0000:43:00.0).
    let dir = n.root.join(format!("{TOPO}/3/p2p_links"));
    for l in fs::read_dir(dir).unwrap() {
        let l = l.unwrap().path();
        if fs::read_to_string(l.join("properties"))
            .unwrap()
            .contains("node_to 4\n")
        {
            fs::remove_dir_all(l).unwrap();
        }
    }
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_finding(&json, INTERCONNECT, "p2p-disabled");
    let m = text(&r["finding"]["message"]);
    assert_has(m, "for 1 directions");
    assert_has(m, "0000:23:00.0 -> 0000:43:00.0");
}

#[test]
fn a_kernel_without_p2p_links_does_not_pass_for_peer_dma() {
    let n = node("mi210-4-pcie");
    for k in 0..6 {
        let _ = fs::remove_dir_all(n.root.join(format!("{TOPO}/{k}/p2p_links")));
    }
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, INTERCONNECT, "pass");
    let m = text(&r["message"]);
    assert_has(m, "peer-to-peer DMA over PCIe not reported for 6 pairs");
    assert_lacks(m, "enabled");
}

#[test]
fn the_fake_hip_denies_peer_access_the_kernel_does_not_list() {
    // The fakes read p2p_links themselves: without a peer link HIP stages
    // copies through the host; the peer matrix shows it.
    let n = node("mi210-4-no-peer-dma");
    let (_, _, json, _) = FakeRun::on(&n.root)
        .args(&["--tier", "extended", "--only", "hip::p2p_bandwidth"])
        .run();
    let r = result(&json, "node.hip.p2p_bandwidth");
    assert!(
        r.to_string().contains("cannot access its peer's memory"),
        "{r}"
    );
}

#[test]
fn partitions_are_grouped_by_device_whatever_their_unique_ids() {
    // Each partition its own unique_id: the healthy CPX node passes every
    // check, its per-GPU workers matching each partition by its identity.
    let n = node("mi300x-8-cpx-own-ids");
    let ids: std::collections::BTreeSet<String> = (2..66)
        .map(|k| {
            fs::read_to_string(n.root.join(format!("{TOPO}/{k}/properties")))
                .unwrap()
                .lines()
                .find(|l| l.starts_with("unique_id "))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), 64, "one unique_id per partition");
    let (code, out, json, _) = FakeRun::on(&n.root).run();
    assert_eq!(code, 0, "{out}");
    let r = result_with_status(&json, "node.kfd.partitions", "pass");
    assert!(
        text(&r["message"]).starts_with("8 GPUs partitioned (8 with 8 partitions (CPX mode)"),
        "{r}"
    );

    // A device short of a partition is still caught.
    let n = node("cpx-partition-missing-own-ids");
    let (_, _, json, _) = run(&n.root, &["--no-gate"]);
    let r = result_with_finding(&json, "node.kfd.partitions", "partition-count-mismatch");
    assert!(
        text(&r["finding"]["message"]).contains("0000:a6:00.0"),
        "{r}"
    );

    // So is a partition whose gfx target is not its device's.
    let n = node("mi300x-8-cpx-own-ids");
    util::set_prop(&n.root, 12, "gfx_target_version", "90401");
    let (_, _, json, _) = run(&n.root, &["--no-gate"]);
    let r = result_with_finding(&json, "node.kfd.partitions", "partition-mismatch");
    assert!(
        text(&r["finding"]["message"]).contains("partitions of 0000:26:00.0 have gfx targets"),
        "{r}"
    );
}
