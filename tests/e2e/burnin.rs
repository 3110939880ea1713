//! The burn-in tier through the binary and the fake HIP, whose burn-in
//! kernel heats the fixture's GPUs as a real load would
//! (`ROCGATE_FAKE_LOAD` makes one hot, throttled, erroring, lost or wrong):
//! each gate names its GPU with its evidence, a healthy node passes with its
//! telemetry in every report (its GEMMs and its all-reduce loop beside),
//! a GPU consistently wrong is found by its siblings, and an interrupted
//! burn-in reports what it measured.

use crate::util;
use crate::util::{FakeRun, assert_has, result, result_with_finding};
use serde_json::Value;
use std::time::Duration;

/// The burn-in tier alone on `gpus` of an 8x MI300X node for `duration`.
fn burnin<'a>(gpus: &'a str, duration: &'a str) -> FakeRun<'a> {
    FakeRun::scenario("mi300x-8").args(&[
        "--tier",
        "burnin",
        "--duration",
        duration,
        "--gpus",
        gpus,
        "--only",
        "hip::burnin",
    ])
}

/// The series `name` of a result.
fn series<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["series"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no series {name} in {r}"))
}

#[test]
fn each_gate_names_its_gpu_and_its_evidence() {
    let (code, stdout, json, junit) = burnin("0,1,2,3,4,5,6,7", "20s")
        .args(&["--only", "rccl::burnin"])
        .env(
            "ROCGATE_FAKE_LOAD",
            "gpu0=hot;gpu1=warm;gpu2=throttle;gpu3=lowpower;gpu4=ue:3;gpu5=ce:3;gpu6=drop:6;gpu7=flip:4",
        )
        .run();
    assert_eq!(code, 1, "{stdout}");
    let found = |gpu: u32, code: &str| {
        result_with_finding(&json, &format!("gpu{gpu}.hip.burnin"), code)["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_has(
        found(0, "gpu-over-thermal-limit"),
        "at or past its critical limit of 100 °C",
    );
    assert_has(
        found(1, "gpu-near-thermal-limit"),
        "within 5 °C of its critical limit of 100 °C",
    );
    let throttled = found(2, "gpu-clocks-collapsed");
    assert_has(&throttled, "below 50% of its 2100 MHz for");
    // The power beside it tells a power limit from heat, and the SMU's own
    // throttle residency (gpu_metrics) names heat.
    assert_has(&throttled, "median power 300 W of a 750 W cap");
    assert_has(
        &throttled,
        "also gpu-thermal-throttled (thermal throttlers held the GPU back",
    );
    assert_has(
        found(3, "gpu-power-out-of-band"),
        "below the band of 50-105% of its 750 W cap: it never reached full load",
    );
    assert_has(
        found(4, "gpu-errors-under-load"),
        "1 uncorrectable RAS error",
    );
    assert_has(
        found(5, "gpu-corrected-under-load"),
        "1 correctable RAS error",
    );
    let lost = found(6, "gpu-lost-under-load");
    assert_has(&lost, "fell off the PCI bus");
    assert_has(&lost, "into the burn-in (of 20 s)");
    // The all-reduce loop across the GPUs breaks with it, saying when.
    let ring = result_with_finding(&json, "node.rccl.burnin", "rccl-allreduce-failed");
    assert_has(
        ring["message"].as_str().unwrap(),
        "into the burn-in of 20 s)",
    );
    let flipped = found(7, "gpu-result-mismatch");
    assert_has(
        &flipped,
        "computed a different result for the same integer hash: checksum 0x",
    );
    assert_has(&flipped, "where the other iterations gave 0x");
    // Every GPU's telemetry is in the JSON, its limits beside it.
    for gpu in 0..8 {
        let r = result(&json, &format!("gpu{gpu}.hip.burnin"));
        let junction = series(r, "temp_junction");
        assert_eq!(junction["unit"], "C");
        assert_eq!(junction["limit"], 100.0);
        assert!(!junction["points"].as_array().unwrap().is_empty(), "{r}");
        assert_eq!(series(r, "power")["limit"], 750.0);
    }
    // The hot GPU's junction climbs past its limit in the series too.
    let hottest = series(result(&json, "gpu0.hip.burnin"), "temp_junction")["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_f64().unwrap())
        .fold(f64::MIN, f64::max);
    assert!(hottest >= 100.0, "{hottest}");
    assert_has(&junit, "gpu-clocks-collapsed");
}

#[test]
fn a_healthy_node_passes_a_minute_of_burn_in_with_its_telemetry_in_every_report() {
    let html = util::Tmp::new();
    let page = html.path().join("burnin.html");
    let (code, stdout, json, junit) = burnin("0,1,2,3,4,5,6,7", "1m")
        .args(&["--only", "rccl::burnin", "--html", page.to_str().unwrap()])
        .run();
    assert_eq!(code, 0, "{stdout}");
    // The all-reduce looped beside the GPUs' own load, its sums checked
    // and its bandwidth kept iteration by iteration.
    let ring = result(&json, "node.rccl.burnin");
    assert_eq!(ring["status"], "pass", "{ring}");
    assert_has(
        ring["message"].as_str().unwrap(),
        "all-reduces of 64 MiB across 8 GPUs in",
    );
    assert!(
        series(ring, "allreduce_busbw")["points"]
            .as_array()
            .unwrap()
            .len()
            > 10
    );
    for gpu in 0..8 {
        let r = result(&json, &format!("gpu{gpu}.hip.burnin"));
        assert_eq!(r["status"], "pass", "{r}");
        let message = r["message"].as_str().unwrap();
        assert_has(message, "every iteration gave the same result");
        // Where rocBLAS loads, its GEMMs are part of the load and compared.
        assert_has(
            r["output"].as_str().unwrap(),
            "fp16 GEMMs (8192x4096x4096, rocblas_gemm_ex, fp32 compute; atomics not allowed)",
        );
        assert_has(message, "junction ");
        assert_has(message, "°C, median");
        assert_has(
            message,
            "throttled by heat 0%, by the power cap 0% of the loaded time (the SMU's throttle residency counters in gpu_metrics)",
        );
        // About a sample a second for the minute.
        let points = series(r, "temp_junction")["points"]
            .as_array()
            .unwrap()
            .len();
        assert!((40..=70).contains(&points), "{points}");
        assert!(
            r["facts"]["burnin_checksum"]
                .as_str()
                .unwrap()
                .starts_with("0x")
        );
        let seconds = r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "burnin_seconds")
            .unwrap()["value"]
            .as_f64()
            .unwrap();
        assert!(seconds >= 60.0, "{seconds}");
    }
    // Every GPU computed the same bits, of the hash and of the GEMM.
    for fact in [
        "burnin_checksum",
        "burnin_triad_checksum",
        "burnin_gemm_checksum",
    ] {
        let sums: std::collections::BTreeSet<&str> = (0..8)
            .map(|g| {
                result(&json, &format!("gpu{g}.hip.burnin"))["facts"][fact]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(sums.len(), 1, "{fact}: {sums:?}");
    }
    assert_has(&junit, "gpu3.hip");
    let page = std::fs::read_to_string(&page).unwrap();
    assert_has(&page, "<svg");
    assert_has(&page, "temp_junction");
    assert_has(&page, "allreduce_busbw (GB/s)");
}

#[test]
fn a_wrong_gemm_and_a_wrong_all_reduce_under_load_name_their_gpu_and_iteration_and_progress_shows_the_load()
 {
    let (run, json, _) = burnin("0,1,2", "8s")
        .args(&[
            "--only",
            "rccl::burnin",
            "--progress",
            "lines",
            "--heartbeat",
            "2",
        ])
        .faults("rocblas_gemm_ex@gpu2=wrong;triad@gpu0=wrong;ncclAllReduce@gpu1=wrong")
        .run_finished();
    assert_eq!(run.code, 1, "{}", run.stdout);
    // While it runs, the heartbeat shows each loaded GPU's telemetry.
    assert_has(&run.stderr, "gpu0.hip.burnin (");
    assert_has(&run.stderr, "timeout) [junction ");
    // The GEMM's centre element, wrong in every iteration, against the CPU.
    let gemm = result_with_finding(&json, "gpu2.hip.burnin", "gpu-result-mismatch");
    assert_has(
        gemm["message"].as_str().unwrap(),
        "of the fp16 GEMM, C[4096,2048] is fp16 0x",
    );
    // The triad's first word, against b + 0.5c.
    let triad = result_with_finding(&json, "gpu0.hip.burnin", "gpu-result-mismatch");
    assert_has(
        triad["message"].as_str().unwrap(),
        "of the HBM triad, word 0 of a is 5.5058823 (0x40b03030) where b + 0.5c is 4.5058823",
    );
    assert_eq!(result(&json, "gpu1.hip.burnin")["status"], "pass");
    let ring = result_with_finding(&json, "node.rccl.burnin", "rccl-allreduce-wrong");
    assert_has(
        ring["message"].as_str().unwrap(),
        "on GPU 1 (rank 1) is wrong at element 0 in iteration 1 (0 s into the burn-in of 8 s)",
    );
}

#[test]
fn a_gpu_wrong_in_every_iteration_alike_is_found_by_its_siblings() {
    let (code, stdout, json, _) = burnin("0,1,2", "10s").faults("burn_hash@gpu1=wrong").run();
    assert_eq!(code, 1, "{stdout}");
    let r = result_with_finding(&json, "gpu1.hip.burnin", "gpu-result-mismatch");
    let message = r["message"].as_str().unwrap();
    assert_has(
        message,
        "(its iterations' common result), where 2 of the node's other GPUs (gpu0, gpu2) computed 0x",
    );
    for gpu in [0, 2] {
        assert_eq!(
            result(&json, &format!("gpu{gpu}.hip.burnin"))["status"],
            "pass"
        );
    }
}

#[test]
fn an_interrupted_burn_in_reports_what_it_measured() {
    let n = util::node("mi300x-8");
    let rocm = util::fake_rocm();
    let out = util::Tmp::new();
    let report = out.path().join("burnin.json");
    let mut child = util::fake_process(
        &[
            "run",
            "--tier",
            "burnin",
            "--duration",
            "10m",
            "--gpus",
            "0",
            "--only",
            "hip::burnin",
            "--json",
            report.to_str().unwrap(),
        ],
        &n.root,
        &n.root,
        rocm.path(),
        "",
    )
    .spawn()
    .unwrap();
    // The fake writes the GPU's temperature once its load runs: the signal
    // comes while the burn-in loads it.
    let junction = n
        .root
        .join("sys/bus/pci/devices/0000:05:00.0/hwmon/hwmon2/temp2_input");
    let idle = std::fs::read_to_string(&junction).unwrap();
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&junction).unwrap_or_default() == idle {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the load never ran"
        );
        assert!(child.try_wait().unwrap().is_none(), "rocgate ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(util::send_signal(child.id(), "-INT"));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let r = result(&json, "gpu0.hip.burnin");
    assert_eq!(r["status"], "skipped", "{r}");
    assert_eq!(r["skip_reason"], "interrupted");
    assert_has(
        r["message"].as_str().unwrap(),
        "into the burn-in (of 10.0 min)",
    );
    assert!(
        !series(r, "temp_junction")["points"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_duration_belongs_to_the_burn_in_and_list_says_what_each_tier_takes() {
    let n = util::node("mi300x-8");
    let out = util::on_sysroot(&["run", "--duration", "10m"], &n.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_has(
        String::from_utf8_lossy(&out.stderr),
        "the quick tier has none (add --tier burnin)",
    );
    let out = util::on_sysroot(&["health", "--tier", "burnin"], &n.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = util::rocgate().args(["list", "--tiers"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let burnin = text
        .lines()
        .find(|l| l.starts_with("burnin"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_has(burnin, "~31 min");
    assert_has(burnin, "--duration (default 30 min)");
}

/// The files of a tar.zst archive, by name.
fn archive_files(path: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let file = std::fs::File::open(path).unwrap();
    let mut tar = tar::Archive::new(zstd::Decoder::new(file).unwrap());
    tar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

/// `rocgate accept` on `gpus` of an 8x MI300X node with a 5 s burn-in,
/// its archive in a directory of its own: the exit code, what it printed,
/// and the archive's files.
fn accept(faults: &str) -> (i32, String, std::collections::BTreeMap<String, Vec<u8>>) {
    let n = util::node("mi300x-8");
    let rocm = util::fake_rocm();
    let out = util::Tmp::new();
    let run = util::fake_process(
        &[
            "accept",
            "--duration",
            "5s",
            "--gpus",
            "0,1",
            "--out",
            out.path().to_str().unwrap(),
        ],
        &n.root,
        &n.root,
        rocm.path(),
        faults,
    )
    .env("ROCGATE_HISTORY_DIR", "off")
    .stdout(std::process::Stdio::piped())
    .output()
    .unwrap();
    let archives = util::names_in(out.path());
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert!(
        archives[0].starts_with("rocgate-accept-mi300x-8-") && archives[0].ends_with("Z.tar.zst"),
        "{archives:?}"
    );
    (
        run.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        archive_files(&out.path().join(&archives[0])),
    )
}

#[test]
fn an_accepted_node_keeps_every_tier_s_reports_and_its_snapshot_in_one_archive() {
    let (code, stdout, files) = accept("");
    assert_eq!(code, 0, "{stdout}");
    assert_has(&stdout, "ACCEPTED: every tier passed on mi300x-8");
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    for tier in ["quick", "standard", "extended", "burnin"] {
        for ext in ["json", "xml", "html"] {
            let name = format!("{tier}.{ext}");
            assert!(names.contains(&name.as_str()), "{names:?}");
        }
    }
    assert!(names.contains(&"snapshot.tar.zst"), "{names:?}");
    let record: Value = serde_json::from_slice(&files["accept.json"]).unwrap();
    assert_eq!(record["accepted"], true);
    assert_eq!(record["node"], "mi300x-8");
    assert_eq!(record["tiers"].as_array().unwrap().len(), 4);
    assert_eq!(record["tiers"][3]["tier"], "burnin");
    assert_eq!(record["tiers"][3]["health"], "healthy");
    let burnin: Value = serde_json::from_slice(&files["burnin.json"]).unwrap();
    assert_eq!(result(&burnin, "gpu1.hip.burnin")["status"], "pass");
}

#[test]
fn acceptance_stops_at_the_first_tier_that_fails_and_says_which() {
    let (code, stdout, files) = accept("rocblas_sgemm@gpu1=wrong");
    assert_eq!(code, 1, "{stdout}");
    assert_has(
        &stdout,
        "NOT ACCEPTED: the standard tier found a fault on mi300x-8",
    );
    let record: Value = serde_json::from_slice(&files["accept.json"]).unwrap();
    assert_eq!(record["accepted"], false);
    assert_eq!(record["stopped_at"], "standard");
    assert!(files.contains_key("standard.json"));
    assert!(!files.contains_key("extended.json") && !files.contains_key("burnin.json"));
    // The evidence of what failed is kept with the snapshot.
    assert!(files.contains_key("snapshot.tar.zst"));
}
