//! The extended tier's GPU checks through the binary and the fake HIP:
//! peer-to-peer copies between every pair (a slow link named by its pair,
//! the matrix in the terminal, the JUnit and the JSON) and the device-memory
//! test (a stuck bit named by its address, on its GPU only); and the
//! search that follows a failed all-reduce, which names its GPU without
//! changing what the fault was; and GEMM throughput read on the GPU's clock,
//! which a loaded host does not move.

use crate::util;
use crate::util::{
    FakeRun, assert_has, assert_lacks, extended, result_with_finding, result_with_status,
};
use serde_json::{Value, json};

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
    assert_has(
        message,
        "of 12 GPU pairs copy below their link's floor: gpu2>gpu5 ",
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
        assert_has(text, "p2p_gbps (GB/s), from row to column");
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
    let r = util::result(&json, "node.hip.p2p_bandwidth");
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
fn memtest_run(gpus: &str, share: &str, faults: &str) -> util::RunOutput {
    let builtin = include_str!("../../suites/thresholds.toml");
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
        message.contains("over 19.66 MiB (0.01% of 192 GiB VRAM) in 34 passes, at 1 address: 0x")
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
fn a_share_too_small_to_test_is_refused_and_a_small_one_covers_a_mebibyte() {
    // 1e-10 of 192 GiB is 20 bytes, 1e-300 nothing: the thresholds file is
    // refused before anything runs, naming the share in a few characters.
    let n = util::node("mi300x-8");
    let builtin = include_str!("../../suites/thresholds.toml");
    for (share, shown) in [
        ("1e-10", "not 1e-10"),
        ("1e-300", "not 1e-300"),
        ("0.0000000001", "not 1e-10"),
    ] {
        let path = n.root.with_extension("thresholds.toml");
        let changed = builtin.replace("vram_share = 0.1\n", &format!("vram_share = {share}\n"));
        std::fs::write(&path, changed).unwrap();
        let stderr = util::refused(&mut util::on_sysroot(
            &["run", "--thresholds", path.to_str().unwrap()],
            &n.root,
        ));
        assert!(
            stderr.contains("vram_share must be a fraction from 1e-6 to 0.9")
                && stderr.contains(shown),
            "{share}: {stderr}"
        );
        // The file's own line is quoted as written; rocgate's words are short.
        let said = stderr
            .lines()
            .find(|l| l.contains("vram_share must"))
            .unwrap();
        assert!(said.len() < 100, "{said}");
    }
    // 2e-6 (412 KB) is raised to the 1 MiB the test covers at least, and
    // said so in MiB.
    let (_, stdout, json, _) = memtest_run("0", "0.000002", "");
    let r = result_with_status(&json, "gpu0.hip.memtest", "pass");
    let message = r["message"].as_str().unwrap();
    assert!(
        message.starts_with("1 MiB (under 0.01% of 192 GiB VRAM, raised to the 1 MiB the test covers at least) in 34 passes"),
        "{stdout}\n{message}"
    );
}

#[test]
fn a_corrupt_or_failing_allreduce_narrowed_to_its_gpu_keeps_its_nature() {
    // Wrong sums whenever gpu6 takes part: the search names gpu6, and the
    // finding stays a corruption with the numbers that showed it.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults("ncclAllReduce@gpu6=wrong")
        .args(&["--tier", "standard"])
        .exits(1);
    let r = result_with_finding(&json, "node.rccl.allreduce", "rccl-allreduce-wrong");
    let f = &r["finding"];
    let message = f["message"].as_str().unwrap();
    assert_has(message, "is wrong at element");
    assert_has(message, ", expected ");
    assert!(
        message.contains("narrowing isolated gpu6 (0000:"),
        "{message}"
    );
    assert_eq!(f["blames"], "gpu6", "{f}");
    let next = f["next_step"].as_str().unwrap();
    assert!(!next.contains("hangs"), "a corruption's next step: {next}");
    assert_has(next, "--gpus 6");
    let output = r["output"].as_str().unwrap();
    assert!(
        output.contains("all-reduce on gpu4,gpu5,gpu6,gpu7: failed (fail: "),
        "{output}"
    );
    // An error whenever gpu2 takes part stays that error.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults("ncclAllReduce@gpu2=error:3")
        .args(&["--tier", "standard"])
        .exits(1);
    let r = result_with_finding(&json, "node.rccl.allreduce", "rccl-allreduce-failed");
    let message = r["finding"]["message"].as_str().unwrap();
    assert!(
        message.contains("narrowing isolated gpu2 (0000:"),
        "{message}"
    );
    assert_eq!(r["finding"]["blames"], "gpu2", "{r}");
}

#[test]
fn the_memory_test_at_the_default_share_writes_and_finds_a_stuck_bit() {
    // The built-in share (10% of a simulated MI300X's 192 GiB, in 1 GiB
    // chunks): the fake runs the kernels over every chunk, so a stuck bit
    // there is found, not passed over.
    let (code, stdout, json, _) = extended("mi300x-8", "0,1", "xgmi=4000")
        .faults("memtest_write@gpu1=wrong")
        .run();
    // (The default share, as built in.)
    assert_eq!(code, 1, "{stdout}");
    let bad = result_with_finding(&json, "gpu1.hip.memtest", "vram-test-failed");
    let message = bad["message"].as_str().unwrap();
    // The fake's stuck bit sits in every 1 GiB chunk the test writes.
    assert_has(
        message,
        "over 19.20 GiB (10% of 192 GiB VRAM) in 34 passes, at 20 addresses: 0x",
    );
    assert_has(message, " (bit 5)");
    result_with_status(&json, "gpu0.hip.memtest", "pass");
}

/// The metric `name` of result `r`, asserted present.
#[track_caller]
fn metric<'a>(r: &'a Value, name: &str) -> &'a Value {
    util::entry(&r["metrics"], "name", name)
}

/// The peak HBM3 bandwidth of an MI300X, in GB/s (AMD Instinct MI300X data
/// sheet: 5.3 TB/s).
const MI300X_PEAK_GBPS: f64 = 5300.0;

#[test]
fn the_healthy_node_passes_the_extended_tier_at_its_modelled_rates() {
    // Every GPU of the healthy 8x MI300X node, with the fakes' default
    // rates for everything the tier judges (host links, XGMI links, HBM,
    // GEMMs of each data type).
    let started = std::time::Instant::now();
    let (code, stdout, json, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "extended"])
        .run();
    eprintln!("the extended tier took {:?}", started.elapsed());
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        json["decision"]["health"], "healthy",
        "{}",
        json["decision"]
    );
    assert_eq!(json["summary"]["fail"], 0, "{stdout}");
    for gpu in 0..8 {
        // The host link copies at a PCIe Gen5 x16 rate, above its floor,
        // on the GPU's clock (so whatever this machine's load).
        let r = result_with_status(&json, &format!("gpu{gpu}.hip.bandwidth"), "pass");
        for m in ["h2d_gbps", "d2h_gbps"] {
            let v = metric(r, m)["value"].as_f64().unwrap();
            assert!((50.0..=64.0).contains(&v), "{m} {v}: {r}");
        }
        // The memory test moved its region's bytes at a rate an MI300X's
        // HBM3 can: not a host's memcpy, not above the peak.
        let r = result_with_status(&json, &format!("gpu{gpu}.hip.memtest"), "pass");
        let v = metric(r, "memtest_gbps")["value"].as_f64().unwrap();
        assert!(
            (MI300X_PEAK_GBPS / 5.0..=MI300X_PEAK_GBPS).contains(&v),
            "memtest_gbps {v}: {r}"
        );
        // GEMMs at the fake's MI300X-like defaults, on the GPU's clock:
        // above the floors, under the data sheet's peaks (dense fp16/bf16
        // 1307.4, fp32 163.4, fp64 matrix 163.4 TFLOP/s).
        let r = result_with_status(&json, &format!("gpu{gpu}.rocblas.gemm_throughput"), "pass");
        for (dt, default, peak) in [
            ("fp64", 114.38, 163.4),
            ("fp32", 114.38, 163.4),
            ("fp16", 719.07, 1307.4),
            ("bf16", 719.07, 1307.4),
        ] {
            let v = gemm_rate(r, dt);
            assert!(
                (v - default).abs() <= default * 0.01 && v < peak,
                "{dt} {v}: {r}"
            );
        }
    }
}

#[test]
fn the_memory_tests_rate_is_its_hbms_and_an_impossible_one_is_not_reported() {
    // gpu0's HBM at the fakes' default, gpu1's at half of it, gpu2's at
    // 50 TB/s, which no MI300X reaches (its peak is 5.3 TB/s): the default
    // share (19 GiB, far larger than its 256 MB Infinity Cache) is timed on
    // the GPU's clock, so the rates are the modelled ones exactly.
    // (hip::hbm_bandwidth judges the same rates against floors: another
    // test's.)
    let (code, stdout, json, _) = extended("mi300x-8", "0,1,2", "xgmi=4000")
        .env("ROCGATE_FAKE_HBM_GBPS", "gpu1=2000;gpu2=50000")
        .args(&["--skip", "hip::hbm_bandwidth"])
        .run();
    assert_eq!(code, 0, "{stdout}");
    let rate = |gpu: u32| {
        let r = result_with_status(&json, &format!("gpu{gpu}.hip.memtest"), "pass");
        metric(r, "memtest_gbps")["value"].as_f64().unwrap()
    };
    let (default, half) = (rate(0), rate(1));
    assert!((4200.0..=4400.0).contains(&default), "{default}");
    assert!((1950.0..=2050.0).contains(&half), "{half}");
    // The memory was tested and passed; only the rate is refused, with why.
    let r = result_with_status(&json, "gpu2.hip.memtest", "pass");
    let names: Vec<&str> = r["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names, ["memtest_gib"], "{r}");
    let message = r["message"].as_str().unwrap();
    assert_has(message, "read back intact");
    assert_has(message, "rate not reported: ");
    assert_has(message, "5300 GB/s");
}

#[test]
fn a_host_link_below_its_floor_fails_that_direction_of_that_gpu_only() {
    // gpu1's host-to-device copies at 30 GB/s, under MI300's 45 GB/s
    // floor; its device-to-host copies and gpu0's at the default rate.
    let (code, stdout, json, _) = extended("mi300x-8", "0,1", "xgmi=4000")
        .env("ROCGATE_FAKE_H2D_GBPS", "gpu1=30")
        .run();
    assert_eq!(code, 1, "{stdout}");
    let r = result_with_finding(&json, "gpu1.hip.bandwidth", "perf-below-floor");
    let message = r["message"].as_str().unwrap();
    assert_has(
        message,
        "h2d_gbps is 30.0 GB/s, below the floor of 45.0 GB/s",
    );
    let h2d = metric(r, "h2d_gbps");
    assert_eq!(h2d["floor"], 45.0, "{h2d}");
    assert!(h2d["value"].as_f64().unwrap() < 30.5, "{h2d}");
    assert!(
        metric(r, "d2h_gbps")["value"].as_f64().unwrap() > 50.0,
        "{r}"
    );
    let r = result_with_status(&json, "gpu0.hip.bandwidth", "pass");
    assert!(
        metric(r, "h2d_gbps")["value"].as_f64().unwrap() > 50.0,
        "{r}"
    );
}

/// Keeps this machine's CPUs busy (a thread per CPU and one more, spinning)
/// until dropped: a CI host loaded by other jobs.
struct CpuLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    fn start() -> CpuLoad {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..=cpus)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        CpuLoad { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The GEMM rate of `dt` (`fp16`) in a `rocblas.gemm_throughput` result.
#[track_caller]
fn gemm_rate(r: &Value, dt: &str) -> f64 {
    metric(r, &format!("gemm_tflops.{dt}"))["value"]
        .as_f64()
        .unwrap()
}

#[test]
fn gemm_rates_are_read_on_the_gpus_clock_even_on_a_loaded_host() {
    // gpu0's GEMMs at 800 TFLOP/s, gpu1's at 500: under MI300X's fp16
    // (639 - 5%) and bf16 (581 - 5%) floors, above its fp32 and fp64 ones.
    // The host is kept busy meanwhile: its late wake-ups are not the GPU's,
    // so each rate is the modelled one to 1%.
    let load = CpuLoad::start();
    let (code, stdout, json, _) = FakeRun::scenario("mi300x-8")
        .args(&[
            "--tier",
            "extended",
            "--gpus",
            "0,1",
            "--only",
            "rocblas::gemm_throughput",
        ])
        .env("ROCGATE_FAKE_GEMM_TFLOPS", "800;gpu1=500")
        .run();
    drop(load);
    assert_eq!(code, 1, "{stdout}");
    let within = |got: f64, want: f64| (got - want).abs() <= want * 0.01;
    let r = result_with_status(&json, "gpu0.rocblas.gemm_throughput", "pass");
    for dt in ["fp64", "fp32", "fp16", "bf16"] {
        let v = gemm_rate(r, dt);
        assert!(within(v, 800.0), "{dt} {v}: {r}");
    }
    let message = r["message"].as_str().unwrap();
    assert_has(message, "timed on the GPU's clock");
    // gpu1 fails for its fp16 and bf16 rates alone.
    let r = result_with_finding(&json, "gpu1.rocblas.gemm_throughput", "perf-below-floor");
    for (dt, below) in [
        ("fp64", false),
        ("fp32", false),
        ("fp16", true),
        ("bf16", true),
    ] {
        let v = gemm_rate(r, dt);
        assert!(within(v, 500.0), "{dt} {v}: {r}");
        let floor = metric(r, &format!("gemm_tflops.{dt}"))["floor"]
            .as_f64()
            .unwrap();
        assert_eq!(v < floor, below, "{dt} {v} against {floor}: {r}");
    }
    let message = r["message"].as_str().unwrap();
    assert_has(
        message,
        "gemm_tflops.fp16 is 500.0 TFLOP/s, below the floor",
    );
    assert_has(message, "timed on the GPU's clock");
}

/// The built-in thresholds with every GEMM floor at 0.001 TFLOP/s.
fn gemm_floors_lowered() -> String {
    let builtin = include_str!("../../suites/thresholds.toml");
    let blocks: Vec<String> = builtin
        .split("[[floor]]")
        .map(|block| {
            if !block.contains("metric = \"gemm_tflops.") {
                return block.to_string();
            }
            block
                .lines()
                .map(|l| {
                    if l.starts_with("value = ") {
                        "value = 0.001"
                    } else {
                        l
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        })
        .collect();
    let lowered = blocks.join("[[floor]]");
    assert!(lowered.contains("value = 0.001") && !lowered.contains("value = 639.0"));
    lowered
}

#[test]
fn gemm_rates_fall_back_to_the_hosts_clock_and_say_so_when_events_fail() {
    // HIP's events fail on gpu1 alone: its GEMMs are still measured, on
    // the host's clock, and the message says which clock and why; gpu0's
    // are on the GPU's.
    // The host's clock adds the host's delays, which on a busy machine are
    // larger than the model's time: the GEMM floors are lowered so that
    // what is judged is the clock named, not this machine's speed.
    let dir = tempfile::tempdir().unwrap();
    let thresholds = dir.path().join("thresholds.toml");
    std::fs::write(&thresholds, gemm_floors_lowered()).unwrap();
    let (code, stdout, json, _) = FakeRun::scenario("mi300x-8")
        .args(&[
            "--tier",
            "extended",
            "--gpus",
            "0,1",
            "--only",
            "rocblas::gemm_throughput",
            "--thresholds",
            thresholds.to_str().unwrap(),
        ])
        .faults("hipEventRecord@gpu1=error:400")
        .env("ROCGATE_FAKE_GEMM_TFLOPS", "4000")
        .run();
    assert_eq!(code, 0, "{stdout}");
    let r = result_with_status(&json, "gpu1.rocblas.gemm_throughput", "pass");
    let message = r["message"].as_str().unwrap();
    assert!(
        message.contains(
            "timed on the host's clock, since HIP's events could not time them (hipEventRecord"
        ) && !message.contains("GPU's clock"),
        "{message}"
    );
    // A host clock only adds the host's delays: never faster than the model.
    for dt in ["fp64", "fp32", "fp16", "bf16"] {
        let v = gemm_rate(r, dt);
        assert!(v > 0.0 && v <= 4000.0 * 1.001, "{dt} {v}: {r}");
    }
    let r = result_with_status(&json, "gpu0.rocblas.gemm_throughput", "pass");
    let message = r["message"].as_str().unwrap();
    assert_has(message, "timed on the GPU's clock");
    assert_lacks(message, "host's clock");
}

#[test]
fn slow_hbm_is_judged_against_its_skus_floor_and_a_partition_without_one_is_not() {
    // gpu1's HBM at 3 TB/s, under MI300X's BabelStream copy floor.
    let (code, stdout, json, _) = extended("mi300x-8", "0,1", "xgmi=4000")
        .env("ROCGATE_FAKE_HBM_GBPS", "gpu1=3000")
        .args(&["--only", "hip::hbm_bandwidth"])
        .run();
    assert_eq!(code, 1, "{stdout}");
    let r = result_with_finding(&json, "gpu1.hip.hbm_bandwidth", "perf-below-floor");
    let message = r["message"].as_str().unwrap();
    assert_has(
        message,
        "hbm_gbps.copy is 3000.0 GB/s, below the floor of 4177.3 GB/s",
    );
    assert_has(message, "ROCm/system-acceptance-docs");
    let fine = result_with_status(&json, "gpu0.hip.hbm_bandwidth", "pass");
    assert_eq!(metric(fine, "hbm_gbps.copy")["floor"], 4177.285);
    assert!(metric(fine, "hbm_gbps.triad")["value"].as_f64().unwrap() > 4000.0);
    // A CPX partition has no public floor: measured, not judged.
    let (code, stdout, json, _) = extended("mi300x-8-cpx", "0", "xgmi=4000")
        .args(&["--only", "hip::hbm_bandwidth"])
        .run();
    assert_eq!(code, 0, "{stdout}");
    let r = result_with_status(&json, "gpu0.hip.hbm_bandwidth", "skipped");
    assert_eq!(r["skip_reason"], "not-configured");
    assert_has(
        r["message"].as_str().unwrap(),
        "has no hbm_gbps.copy floor for a CPX partition of AMD Instinct MI300X",
    );
    assert!(metric(r, "hbm_gbps.copy")["value"].as_f64().unwrap() > 0.0);
}
