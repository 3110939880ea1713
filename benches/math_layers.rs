//! Benchmark: the standard tier (rocblas, miopen, rccl on top of the quick
//! tier) on the fake 8x MI300X node, the time of each check, and what the
//! CPU references cost.
//!
//! `cargo bench --bench math_layers` prints the README's rows; the reference
//! sizes are the ones the checks use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use rocgate_suites::layers::{miopen, rocblas};
use rocgate_suites::reference;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let node = common::scenario(dir.path(), "mi300x-8");
    let rocm = common::fake_rocm(dir.path());
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
    let slowest = |check: &str| {
        per_check
            .get(check)
            .map_or(0.0, |v| v.iter().copied().fold(0.0, f64::max))
    };
    let range = |checks: &[&str]| {
        let v: Vec<f64> = checks.iter().map(|c| slowest(c)).collect();
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        )
    };
    let gemms = range(&[
        "rocblas::sgemm",
        "rocblas::dgemm",
        "rocblas::hgemm",
        "rocblas::bf16gemm",
    ]);
    let convs = range(&["miopen::conv_fp32", "miopen::conv_fp16"]);

    let n = rocblas::CHECK_SIZE;
    let t = Instant::now();
    let _ = reference::gemm(n, n, n);
    let gemm_ref = t.elapsed().as_secs_f64() * 1e3;
    let s = miopen::SHAPE;
    let t = Instant::now();
    let _ = reference::conv2d(s);
    let conv_ref = t.elapsed().as_secs_f64() * 1e3;

    println!("README rows (standard tier on the fake 8x MI300X, median of {rounds} runs):");
    println!("| what | time |");
    println!("|---|---|");
    println!(
        "| standard tier, all layers, 8 GPUs | {:.0} ms |",
        walls[rounds / 2]
    );
    println!(
        "| slowest GEMM check instance ({n}³, the fake's CPU GEMM) | {:.0}-{:.0} ms |",
        gemms.0, gemms.1
    );
    println!(
        "| slowest convolution check instance | {:.0}-{:.0} ms |",
        convs.0, convs.1
    );
    println!(
        "| slowest all-reduce check instance | {:.0} ms |",
        slowest("rccl::allreduce")
    );
    println!(
        "| CPU reference, {n}³ GEMM (rayon, once per worker, shared by fp64/fp32/fp16/bf16) | {gemm_ref:.1} ms |"
    );
    println!(
        "| CPU reference, {}x{}x{}x{} * {}x{}x{}x{} convolution (once per worker, shared by fp32/fp16) | {conv_ref:.2} ms |",
        s.n, s.c, s.h, s.w, s.k, s.c, s.r, s.r
    );
    println!();
    println!("every math check, slowest instance over all GPUs and runs (ms):");
    for (check, v) in &per_check {
        println!(
            "  {check:<28} {:>8.1}",
            v.iter().copied().fold(0.0, f64::max)
        );
    }
}
