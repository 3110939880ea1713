//! Benchmark: the node layers (pci, firmware, amdgpu, kfd) over the
//! 64-partition 8x MI300X CPX node, against `cat` reading the same files.
//!
//! `cargo bench --bench node_layers` prints, as the README's rows, medians of:
//! - `rocgate run --quiet` as a process (what CI pays),
//! - discovery + plan + execute in-process,
//! - one `cat` process reading every file rocgate read.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use rocgate::session::Session;
use rocgate_harness::{ExecOptions, Tier};
use rocgate_node::Sysroot;
use rocgate_suites::RunOptions;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 40;

fn in_process(root: &Path) -> (usize, Vec<String>) {
    let session = Session::open(Sysroot::recording(root), RunOptions::default()).expect("open");
    let gpus = session.select_gpus(None).expect("gpus");
    let plan = session.plan(&gpus, Tier::Quick).expect("plan");
    // As many threads as `rocgate run` uses: one per GPU chain, plus the node.
    let opts = ExecOptions {
        workers: gpus.len() + 1,
        ..ExecOptions::default()
    };
    let report = session.run(&plan, &opts, |_| {});
    assert!(report.all_passed(), "the benchmark node must be healthy");
    (report.results.len(), session.facts().sysroot.recorded())
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = common::scenario(dir.path(), "mi300x-8-cpx");
    let bin = env!("CARGO_BIN_EXE_rocgate");

    let (checks, recorded) = in_process(&root);
    let files: Vec<String> = recorded
        .iter()
        .map(|h| root.join(h.trim_start_matches('/')))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .collect();

    let time = |f: &mut dyn FnMut()| {
        f();
        common::median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed()
                })
                .collect(),
        )
    };
    let engine = time(&mut || {
        in_process(&root);
    });
    let binary = time(&mut || {
        let ok = Command::new(bin)
            .args(["run", "--quiet", "--sysroot"])
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("rocgate")
            .success();
        assert!(ok);
    });
    let cat = time(&mut || {
        let ok = Command::new("cat")
            .args(&files)
            .stdout(Stdio::null())
            .status()
            .expect("cat")
            .success();
        assert!(ok);
    });
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "README rows (node layers over the 64-partition 8x MI300X CPX fixture: {checks} check instances, {} sysfs files, {} paths touched; medians of {ROUNDS} runs):",
        files.len(),
        recorded.len()
    );
    println!("| what | time |");
    println!("|---|---|");
    println!(
        "| `rocgate run --quiet` (process, end to end) | {:.1} ms |",
        ms(binary)
    );
    println!(
        "| discovery, plan and checks in-process | {:.1} ms |",
        ms(engine)
    );
    println!(
        "| `cat` of the same {} files (one process) | {:.1} ms |",
        files.len(),
        ms(cat)
    );
    println!(
        "ratio rocgate/cat: {:.1}x",
        binary.as_secs_f64() / cat.as_secs_f64()
    );
}
