//! Benchmark: the standard tier (rocblas, miopen, rccl on top of the quick
//! tier) on the fake 8x MI300X node, the time of each check, and what the
//! CPU references cost.
//!
//! `cargo bench --bench math_layers`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rocgate_suites::reference::{self, ConvShape};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("mi300x-8");
    rocgate_fixtures::scenario("mi300x-8")
        .unwrap()
        .spec
        .write(&node)
        .unwrap();
    let rocm = dir.path().join("rocm");
    let profile = Path::new(env!("CARGO_BIN_EXE_rocgate")).parent().unwrap();
    rocgate_fixtures::fake_rocm::lay_out(profile, &rocm).unwrap();
    let json = dir.path().join("r.json");
    let rounds = 3;
    let mut walls = Vec::new();
    let mut per_check: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let ok = Command::new(env!("CARGO_BIN_EXE_rocgate"))
            .args(["run", "--quiet", "--tier", "standard", "--sysroot"])
            .arg(&node)
            .arg("--rocm-path")
            .arg(&rocm)
            .arg("--json")
            .arg(&json)
            .env("ROCGATE_FAKE_NODE", &node)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "standard tier failed on the fake node");
        walls.push(t.elapsed().as_secs_f64() * 1e3);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        for r in doc["results"].as_array().unwrap() {
            let layer = r["layer"].as_str().unwrap();
            if ["rocblas", "miopen", "rccl"].contains(&layer) {
                per_check
                    .entry(r["check"].as_str().unwrap().to_string())
                    .or_default()
                    .push(r["duration_ms"].as_f64().unwrap());
            }
        }
    }
    walls.sort_by(f64::total_cmp);
    println!(
        "standard tier on the fake 8x MI300X: {:.0} ms (median of {rounds})",
        walls[rounds / 2]
    );
    println!("slowest instance of each math check (ms, over all GPUs and runs):");
    for (check, v) in &per_check {
        println!(
            "  {check:<28} {:>8.1}",
            v.iter().copied().fold(0.0, f64::max)
        );
    }
    let t = Instant::now();
    let _ = reference::gemm(256, 256, 256);
    let gemm_ref = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let _ = reference::gemm(256, 256, 256);
    let gemm_cached = t.elapsed().as_secs_f64() * 1e3;
    let shape = ConvShape {
        n: 2,
        c: 8,
        h: 16,
        w: 16,
        k: 16,
        r: 3,
        pad: 1,
        stride: 1,
    };
    let t = Instant::now();
    let _ = reference::conv2d(shape);
    let conv_ref = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "CPU reference, 256^3 GEMM (rayon): {gemm_ref:.1} ms once per worker, {gemm_cached:.3} ms when cached; shared by fp64/fp32/fp16/bf16"
    );
    println!(
        "CPU reference, 2x8x16x16 * 16x8x3x3 convolution: {conv_ref:.2} ms once per worker, shared by fp32/fp16"
    );
}
