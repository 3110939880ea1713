//! The extended tier's GPU checks through the binary and the fake HIP:
//! peer-to-peer copies between every pair (a slow link named by its pair,
//! the matrix in the terminal, the JUnit and the JSON) and the device-memory
//! test (a stuck bit named by its address, on its GPU only).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{FakeRun, result_with_finding, result_with_status};
use serde_json::{Value, json};

/// The extended tier on `gpus` of `scenario`, with GEMMs as fast as can be
/// (the tier's time goes to what a test looks at) and peer copies at
/// `p2p` (`ROCGATE_FAKE_P2P_GBPS`).
fn extended<'a>(scenario: &str, gpus: &str, p2p: &'a str) -> FakeRun<'a> {
    FakeRun::scenario(scenario)
        .args(&["--tier", "extended", "--gpus", gpus])
        .env("ROCGATE_FAKE_GEMM_TFLOPS", "100000")
        .env("ROCGATE_FAKE_P2P_GBPS", p2p)
}

/// The metric of the copy `pair` (`gpu2>gpu5`) among a result's metrics.
fn pair<'a>(r: &'a Value, pair: &str) -> &'a Value {
    let name = format!("p2p_gbps.{pair}");
    r["metrics"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["name"] == name.as_str()))
        .unwrap_or_else(|| panic!("no {name} in {r}"))
}

#[test]
fn a_slow_link_is_named_by_its_pair_and_every_report_shows_the_matrix() {
    let (code, stdout, json, junit) =
        extended("mi300x-8", "0,2,5,7", "xgmi=4000;gpu2>gpu5=10").run();
    assert_eq!(code, 1, "{stdout}");
    let r = result_with_finding(&json, "node.hip.p2p_bandwidth", "perf-below-floor");
    let message = r["message"].as_str().unwrap();
    assert!(
        message.contains("of 12 GPU pairs copy below their link's floor: gpu2>gpu5 "),
        "{message}"
    );
    // One metric per ordered pair, each saying which pair, judged against
    // MI300's XGMI floor; the other direction of the slow pair is not slow
    // (the fake's other links are a hundred times faster than its floor, so
    // only a stalled machine could bring them near it).
    assert_eq!(r["metrics"].as_array().unwrap().len(), 12);
    let slow = pair(r, "gpu2>gpu5");
    assert_eq!(slow["between"], json!(["gpu2", "gpu5"]));
    assert_eq!(slow["floor"], 42.0);
    assert!(slow["value"].as_f64().unwrap() < 10.5, "{slow}");
    assert!(pair(r, "gpu5>gpu2")["value"].as_f64().unwrap() > 10.5);
    // The same matrix in the terminal and the JUnit: gpu2's row copies to
    // gpu0, itself, gpu5 (below its floor) and gpu7.
    for text in [&stdout, &junit] {
        assert!(
            text.contains("p2p_gbps (GB/s), from row to column"),
            "{text}"
        );
        let row: Vec<&str> = text
            .lines()
            .map(str::split_whitespace)
            .map(Iterator::collect)
            .find(|cells: &Vec<&str>| cells.first() == Some(&"gpu2") && cells.len() == 5)
            .unwrap_or_else(|| panic!("no gpu2 row in {text}"));
        assert_eq!(row[2], "-", "{text}");
        assert!(row[3].ends_with('!'), "{text}");
    }
}

#[test]
fn partitions_of_one_device_stand_as_that_device() {
    // Two CPX partitions of the first MI300X and one of the second: one
    // pair of devices, so two copies, between the first partitions.
    let (code, stdout, json, _) = extended("mi300x-8-cpx", "0,1,8", "xgmi=4000").run();
    let r = common::result(&json, "node.hip.p2p_bandwidth");
    let names: Vec<&str> = r["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["p2p_gbps.gpu0>gpu8", "p2p_gbps.gpu8>gpu0"],
        "{code}: {stdout}"
    );
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("2 GPU pairs copy intact"),
        "{r}"
    );
}

/// The extended tier on `gpus` with the built-in thresholds but the memory
/// test over `share` of VRAM, and `faults` injected.
fn memtest_run(gpus: &str, share: &str, faults: &str) -> common::RunOutput {
    let builtin = include_str!("../suites/thresholds.toml");
    assert!(builtin.contains("vram_share = 0.1\n"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("thresholds.toml");
    let changed = builtin.replace("vram_share = 0.1\n", &format!("vram_share = {share}\n"));
    std::fs::write(&path, changed).unwrap();
    extended("mi300x-8", gpus, "xgmi=4000")
        .args(&["--thresholds", path.to_str().unwrap()])
        .faults(faults)
        .run()
}

#[test]
fn a_stuck_vram_bit_is_named_by_its_address_and_stops_only_its_gpu() {
    // 0.01% of a simulated MI300X's 192 GiB: 20 MiB the fake really writes
    // and reads back, with bit 5 of one word on gpu1 stuck at 1.
    let (code, stdout, json, _) = memtest_run("0,1", "0.0001", "memtest_write@gpu1=wrong");
    assert_eq!(code, 1, "{stdout}");
    let bad = result_with_finding(&json, "gpu1.hip.memtest", "vram-test-failed");
    let message = bad["message"].as_str().unwrap();
    assert!(
        message.contains("over 0.02 GiB (0.01% of 192 GiB VRAM) in 34 passes, at 1 address: 0x")
            && message.ends_with("(bit 5)"),
        "{message}"
    );
    let good = result_with_status(&json, "gpu0.hip.memtest", "pass");
    let gib = &good["metrics"][0];
    assert_eq!(gib["name"], "memtest_gib");
    assert!(
        (gib["value"].as_f64().unwrap() - 0.0192).abs() < 0.001,
        "{gib}"
    );
    // Faulty memory stops what would compute on it, on that GPU only.
    result_with_status(&json, "gpu1.rocblas.sgemm", "blocked");
    result_with_status(&json, "gpu0.rocblas.sgemm", "pass");
}

#[test]
fn a_memory_test_with_nothing_to_write_cannot_verify() {
    // A share so small that not one word of VRAM is tested: a skip the
    // run lists as unverified, never a pass.
    let (_, stdout, json, _) = memtest_run("0", "0.000000000001", "");
    let r = result_with_status(&json, "gpu0.hip.memtest", "skipped");
    assert_eq!(r["skip_reason"], "unverifiable", "{stdout}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("no VRAM to test"),
        "{r}"
    );
}
