//! Benchmark: the runtime layers on the fake 8x MI300X node.
//!
//! `cargo bench --bench runtime_layers` prints medians of:
//! - the quick tier, all layers, 8 GPUs (a `rocgate run` process);
//! - with `hiprtcCompileProgram@gpu*=slow:300` (one per-GPU check slowed),
//!   8 GPUs against 1 GPU: GPUs run in parallel, so 8 should cost about 1;
//! - the per-check overhead of running a check in a worker process: a round
//!   trip through the worker against calling the same check in-process, and
//!   the cost of starting a worker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use rocgate::session::Session;
use rocgate_harness::Scope;
use rocgate_harness::isolate::Isolator;
use rocgate_node::Sysroot;
use rocgate_suites::RunOptions;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

fn run(node: &Path, rocm: &Path, faults: &str, gpus: Option<&str>) -> Duration {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocgate"));
    cmd.args(["run", "--quiet", "--sysroot"])
        .arg(node)
        .arg("--rocm-path")
        .arg(rocm)
        .env("ROCGATE_FAKE_NODE", node)
        .env("ROCGATE_FAKE_FAULTS", faults)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(g) = gpus {
        cmd.args(["--gpus", g]);
    }
    let t = Instant::now();
    let status = cmd.status().unwrap();
    assert!(status.success(), "rocgate run failed");
    t.elapsed()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let node = common::scenario(dir.path(), "mi300x-8");
    let rocm = common::fake_rocm(dir.path());
    let rounds = 5;
    let times = |faults: &str, gpus: Option<&str>| {
        common::median(
            (0..rounds)
                .map(|_| run(&node, &rocm, faults, gpus))
                .collect(),
        )
    };

    let quick8 = times("", None);
    let quick1 = times("", Some("0"));
    let slow = "hiprtcCompileProgram@gpu*=slow:300";
    let slow8 = times(slow, None);
    let slow1 = times(slow, Some("0"));

    // Per-check overhead: the same check in-process and through a worker.
    let options = RunOptions {
        rocm_path: Some(rocm.clone()),
        ..RunOptions::default()
    };
    let session = Session::open(Sysroot::at(&node), options).unwrap();
    let check = session
        .registry
        .iter()
        .find(|c| c.id == "pci::amd_gpu_present")
        .unwrap();
    let direct = common::median(
        (0..200)
            .map(|_| {
                let t = Instant::now();
                let _ = (check.run)(&session.ctx, Scope::Node);
                t.elapsed()
            })
            .collect(),
    );
    let mut spawn = Vec::new();
    let mut round_trips = Vec::new();
    for _ in 0..rounds {
        let pool = session
            .worker_pool(
                Path::new(env!("CARGO_BIN_EXE_rocgate")),
                Arc::new(AtomicUsize::new(0)),
            )
            .expect("worker pool");
        let t = Instant::now();
        pool.run("pci::amd_gpu_present", Scope::Node, Duration::from_secs(30));
        spawn.push(t.elapsed());
        for _ in 0..100 {
            let t = Instant::now();
            pool.run("pci::amd_gpu_present", Scope::Node, Duration::from_secs(30));
            round_trips.push(t.elapsed());
        }
    }
    let (spawn, trip) = (common::median(spawn), common::median(round_trips));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "README rows (runtime layers on the fake 8x MI300X node, all layers, quick tier, medians of {rounds} runs):"
    );
    println!("| what | time |");
    println!("|---|---|");
    println!(
        "| quick tier, 8 GPUs / 1 GPU | {:.0} ms / {:.0} ms |",
        ms(quick8),
        ms(quick1)
    );
    // What the slowed check adds: run in parallel, 8 GPUs add what 1 adds.
    println!(
        "| time a 300 ms slowdown of one per-GPU check (`{slow}`) adds, 8 GPUs / 1 GPU | {:.0} ms / {:.0} ms |",
        ms(slow8.saturating_sub(quick8)),
        ms(slow1.saturating_sub(quick1))
    );
    println!(
        "| per-check overhead of the worker process (round trip vs in-process) | {:.2} ms |",
        ms(trip.saturating_sub(direct))
    );
    println!(
        "| starting a worker (first check of a GPU) | {:.1} ms |",
        ms(spawn)
    );
    println!(
        "raw: slowed 8 GPUs {:.0} ms, 1 GPU {:.0} ms; check in-process {:.3} ms, through a worker {:.3} ms",
        ms(slow8),
        ms(slow1),
        ms(direct),
        ms(trip)
    );
}
