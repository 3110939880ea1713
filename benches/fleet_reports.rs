//! Benchmark: `rocgate fleet report` over a fleet's worth of run reports.
//!
//! `cargo bench --bench fleet_reports` writes 10,000 and 100,000 synthetic
//! standard-tier reports (each a real `rocgate run --json` of the fake 8x
//! MI300X node, as rocgate writes it, with its own host name and every
//! measured value jittered by up to 2%), then prints for each fleet the time
//! and peak memory (the child's maximum resident set) of `cat` reading every
//! file and of `rocgate fleet report --format json` (drift, outliers and
//! all): the fleet report streams, so its memory follows the number of
//! nodes, not the bytes of their reports. Times are medians of 3 runs (1 at
//! 100,000) with the files in the page cache. `ROCGATE_BENCH_FLEET_NODES`
//! (e.g. `1000,10000`) chooses the sizes; the 100,000 reports take about
//! 17 GB of disk under `TMPDIR`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use nix::sys::resource::{UsageWho, getrusage};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The flag that makes this binary measure one command: run it, wait, and
/// print its seconds and the peak resident set of its process tree.
const MEASURE: &str = "--measure-child";

/// A report's text cut where the host name and each measured value go.
struct Template {
    /// Text between the holes; one more than the holes.
    parts: Vec<String>,
    /// What fills each hole, in order.
    holes: Vec<Hole>,
}

/// A hole in the template.
enum Hole {
    /// The node's host name.
    Host,
    /// A measured value (its index among the values) and what it measured.
    Value(usize, f64),
}

const HOST_HOLE: &str = "\"@@HOST@@\"";
const VALUE_HOLE: &str = "\"@@VALUE@@\"";

impl Template {
    /// From a run report: its host name and every metric's value made holes.
    fn of(mut report: Value) -> Template {
        report["node"]["hostname"] = HOST_HOLE.trim_matches('"').into();
        let mut values = Vec::new();
        for r in report["results"].as_array_mut().expect("results") {
            for m in r["metrics"].as_array_mut().into_iter().flatten() {
                if let Some(v) = m["value"].as_f64() {
                    values.push(v);
                    m["value"] = VALUE_HOLE.trim_matches('"').into();
                }
            }
        }
        let text = serde_json::to_string_pretty(&report).unwrap();
        let mut values = values.into_iter().enumerate();
        let (mut parts, mut holes) = (Vec::new(), Vec::new());
        let mut rest = text.as_str();
        loop {
            let host = rest.find(HOST_HOLE).unwrap_or(usize::MAX);
            let value = rest.find(VALUE_HOLE).unwrap_or(usize::MAX);
            let (at, len) = if host < value {
                holes.push(Hole::Host);
                (host, HOST_HOLE.len())
            } else if value < usize::MAX {
                let (i, v) = values.next().expect("a value for each hole");
                holes.push(Hole::Value(i, v));
                (value, VALUE_HOLE.len())
            } else {
                break;
            };
            parts.push(rest[..at].to_string());
            rest = &rest[at + len..];
        }
        parts.push(rest.to_string());
        Template { parts, holes }
    }

    /// Node `n`'s report: the template with its name and jittered values.
    fn write(&self, n: usize, out: &mut impl Write) {
        out.write_all(self.parts[0].as_bytes()).unwrap();
        for (hole, part) in self.holes.iter().zip(&self.parts[1..]) {
            match hole {
                Hole::Host => write!(out, "\"{}\"", host(n)).unwrap(),
                Hole::Value(i, v) => write!(out, "{}", v * jitter(n, *i)).unwrap(),
            }
            out.write_all(part.as_bytes()).unwrap();
        }
    }
}

/// Node `n`'s host name.
fn host(n: usize) -> String {
    format!("fleet-node-{n:06}")
}

/// A factor within 2% of 1, the same for a node and value every time.
fn jitter(node: usize, value: usize) -> f64 {
    let mut x = (node as u64) << 32 ^ value as u64 ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    1.0 + ((x % 4001) as f64 - 2000.0) / 100_000.0
}

/// What one measured command took: seconds and peak resident MiB.
struct Measured {
    secs: f64,
    mib: f64,
}

/// Runs `program args` in a child of a fresh copy of this binary, so the
/// peak resident set it reports is that command's alone.
fn measure(program: &str, args: &[&str]) -> Measured {
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(MEASURE)
        .arg(program)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "{program} {args:?} failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut words = text.split_whitespace();
    let secs: f64 = words.next().unwrap().parse().unwrap();
    let kib: f64 = words.next().unwrap().parse().unwrap();
    Measured {
        secs,
        mib: kib / 1024.0,
    }
}

/// The measuring child: runs the command with its output discarded; prints
/// its wall time and the largest resident set among its processes (KiB).
fn measure_child(command: &[String]) -> ! {
    let t = Instant::now();
    let status = Command::new(&command[0])
        .args(&command[1..])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    println!("{secs} {}", usage.max_rss());
    std::process::exit(if status.success() { 0 } else { 1 });
}

/// The median of `rounds` measurements (by time), with the largest memory.
fn median_of(rounds: usize, program: &str, args: &[&str]) -> Measured {
    let mut all: Vec<Measured> = (0..rounds).map(|_| measure(program, args)).collect();
    all.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    let mib = all.iter().map(|m| m.mib).fold(0.0, f64::max);
    let secs = all[all.len() / 2].secs;
    Measured { secs, mib }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(MEASURE) {
        measure_child(&args[2..]);
    }
    let sizes: Vec<usize> = std::env::var("ROCGATE_BENCH_FLEET_NODES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("ROCGATE_BENCH_FLEET_NODES: counts, e.g. 10000,100000")
        })
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let node = common::scenario(dir.path(), "mi300x-8");
    let rocm = common::fake_rocm(dir.path());
    let report = dir.path().join("template.json");
    let status = Command::new(env!("CARGO_BIN_EXE_rocgate"))
        .args(["run", "--quiet", "--tier", "standard", "--sysroot"])
        .arg(&node)
        .arg("--rocm-path")
        .arg(&rocm)
        .arg("--json")
        .arg(&report)
        .env("ROCGATE_FAKE_NODE", &node)
        .env("ROCGATE_CONFIG", "")
        .env("ROCGATE_HISTORY_DIR", "off")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.code().is_some_and(|c| c <= 1), "rocgate run failed");
    let template = Template::of(serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap());

    println!(
        "| reports | bytes | `cat` | `fleet report` | time vs `cat` | `cat` peak memory | `fleet report` peak memory |"
    );
    println!("|---|---|---|---|---|---|---|");
    for nodes in sizes {
        let fleet = dir.path().join(format!("fleet-{nodes}"));
        write_fleet(&template, &fleet, nodes);
        let bytes: u64 = std::fs::read_dir(&fleet)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        let fleet_arg = fleet.to_str().unwrap();
        let cat_args = [fleet_arg, "-name", "*.json", "-exec", "cat", "{}", "+"];
        // The fleet just written is flushed to disk first: the kernel's
        // writeback would otherwise take CPU from whichever runs next.
        assert!(
            Command::new("sync").status().unwrap().success(),
            "sync failed"
        );
        let rounds = if nodes > 20_000 { 1 } else { 3 };
        // Once to bring the files into the page cache.
        measure("find", &cat_args);
        let cat = median_of(rounds, "find", &cat_args);
        let rocgate = median_of(
            rounds,
            env!("CARGO_BIN_EXE_rocgate"),
            &[
                "fleet", "report", "--format", "json", "--out", "-", fleet_arg,
            ],
        );
        println!(
            "| {nodes} | {:.0} MB | {:.2} s | {:.2} s | {:.2}x | {:.1} MiB | {:.1} MiB |",
            bytes as f64 / 1e6,
            cat.secs,
            rocgate.secs,
            rocgate.secs / cat.secs,
            cat.mib,
            rocgate.mib
        );
        std::fs::remove_dir_all(&fleet).unwrap();
    }
}

/// Writes `nodes` reports from `template` into `dir`, on every core.
fn write_fleet(template: &Template, dir: &Path, nodes: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for n in (t..nodes).step_by(threads) {
                    let file =
                        std::fs::File::create(dir.join(format!("{}.json", host(n)))).unwrap();
                    let mut out = std::io::BufWriter::with_capacity(1 << 18, file);
                    template.write(n, &mut out);
                    out.flush().unwrap();
                }
            });
        }
    });
}
