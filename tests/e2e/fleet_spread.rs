//! The fleet as a whole through the binary: one extended-tier run on the
//! fake 8x MI300X, copied to many nodes as a fleet job leaves them, then
//! changed the way real fleets differ: one node on other SMU firmware (drift),
//! one GPU 20% slower than its siblings though above its floor (an outlier),
//! a node that newly fails (the diff against the previous fleet run). And
//! `fleet baseline`: floors from the healthy fleet that a later run obeys.

use crate::util::{FakeRun, assert_has, assert_lacks, finish, rocgate};
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;

/// One extended-tier report of two GPUs of the fake MI300X node, shared by
/// the tests (the run takes seconds; the copies are what each test varies).
fn extended_report() -> &'static Value {
    static REPORT: OnceLock<Value> = OnceLock::new();
    REPORT.get_or_init(|| {
        let (json, _) = FakeRun::scenario("mi300x-8")
            .args(&["--tier", "extended", "--gpus", "0,1"])
            .exits(0);
        json
    })
}

/// Writes `count` copies of the extended report into `dir` as nodes
/// `n00`, `n01`, ..., each changed by `change(name, doc)`.
fn write_fleet(dir: &Path, count: usize, change: impl Fn(&str, &mut Value)) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..count {
        let name = format!("n{i:02}");
        let mut doc = extended_report().clone();
        doc["node"]["hostname"] = name.clone().into();
        change(&name, &mut doc);
        std::fs::write(dir.join(format!("{name}.json")), doc.to_string()).unwrap();
    }
}

/// The metric `name` of result `id` in a report, to change.
fn metric_mut<'a>(doc: &'a mut Value, id: &str, name: &str) -> &'a mut Value {
    doc["results"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result {id}"))["metrics"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name} in {id}"))
}

/// Scales every value of `metric` in the report by `by`.
fn scale_everywhere(doc: &mut Value, metric: &str, by: f64) {
    for r in doc["results"].as_array_mut().unwrap() {
        if let Some(ms) = r["metrics"].as_array_mut() {
            for m in ms.iter_mut().filter(|m| m["name"] == metric) {
                m["value"] = (m["value"].as_f64().unwrap() * by).into();
            }
        }
    }
}

/// The usual fleet: GPUs doing fp16 GEMM at 1.25x what the fake does, but
/// n05's gpu1 at the fake's own rate (20% below its siblings, well above its
/// floor), and n03 running other SMU firmware on gpu1.
fn drift_and_slow(name: &str, doc: &mut Value) {
    let slow = metric_mut(doc, "gpu1.rocblas.gemm_throughput", "gemm_tflops.fp16").clone();
    scale_everywhere(doc, "gemm_tflops.fp16", 1.25);
    match name {
        "n03" => doc["versions"]["gpu1"]["fw_smc"] = "0x00553f00".into(),
        "n05" => {
            assert!(
                slow["value"].as_f64().unwrap() > slow["floor"].as_f64().unwrap(),
                "the slow GPU must still pass its floor: {slow}"
            );
            *metric_mut(doc, "gpu1.rocblas.gemm_throughput", "gemm_tflops.fp16") = slow;
        }
        _ => {}
    }
}

/// `rocgate fleet report ARGS`: exit code, stdout, stderr.
fn fleet_report(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let f = finish(rocgate().args(["fleet", "report"]).args(args));
    (f.code, f.stdout, f.stderr)
}

#[test]
fn the_node_on_other_firmware_and_the_slow_gpu_that_passes_its_floor_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("runs");
    write_fleet(&reports, 8, drift_and_slow);

    let (code, md, err) = fleet_report(&[reports.as_os_str()]);
    // Every node passed (each with the fake node's stock ACS warning): a
    // drifting or outlying node is a warning, no failure to a scheduler.
    assert_eq!(code, 0, "{md}{err}");
    assert!(
        md.starts_with("## rocgate fleet: 0 of 8 nodes failed; 8 passed with warnings"),
        "{md}"
    );
    assert_has(&md, "### Drift from the fleet's majority (1 of ");
    let drift_row = md
        .lines()
        .find(|l| l.starts_with("| AMD Instinct MI300X fw_smc |"))
        .unwrap_or_else(|| panic!("no fw_smc drift row: {md}"));
    assert_has(drift_row, "0x00553e00");
    assert_has(drift_row, "n03");
    assert_has(drift_row, "0x00553f00");
    assert_has(&md, "### Outliers (1:");
    let outlier_row = md
        .lines()
        .find(|l| l.contains("| n05 | gpu1 |"))
        .unwrap_or_else(|| panic!("no outlier row for n05 gpu1: {md}"));
    assert_has(outlier_row, "gemm_tflops.fp16");
    assert_has(outlier_row, "-20.0%");

    let (_, json, _) = fleet_report(&["--format".as_ref(), "json".as_ref(), reports.as_os_str()]);
    let doc: Value = serde_json::from_str(&json).unwrap();
    let differing = doc["drift"]["differing"].as_array().unwrap();
    assert_eq!(differing.len(), 1, "{differing:?}");
    let smc = &differing[0];
    assert_eq!(smc["component"], "AMD Instinct MI300X fw_smc");
    assert_eq!(smc["majority"], "0x00553e00");
    assert_eq!(smc["majority_nodes"], 7);
    assert_eq!(smc["expected"], false);
    assert_eq!(smc["differ"][0]["node"], "n03");
    let outliers: Vec<&Value> = doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            m["outliers"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |o| (m, o))
        })
        .map(|(m, o)| {
            assert_eq!(m["metric"], "gemm_tflops.fp16", "{m}");
            assert_eq!(m["model"], "AMD Instinct MI300X");
            assert_eq!(m["healthy"]["nodes"], 8);
            o
        })
        .collect();
    assert_eq!(outliers.len(), 1, "{outliers:?}");
    assert_eq!(outliers[0]["node"], "n05");
    assert_eq!(outliers[0]["subject"], "gpu1");
    assert!((outliers[0]["off_median"].as_f64().unwrap() + 0.2).abs() < 0.01);
    let node = |name: &str| {
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(node("n03")["drift"][0], "AMD Instinct MI300X fw_smc");
    assert_eq!(node("n05")["outliers"][0], "gemm_tflops.fp16 gpu1");
    assert!(node("n00").get("drift").is_none(), "{json}");

    // During a rolling firmware upgrade the site says so: n03 is listed,
    // no longer warned of. A pattern that is no glob is an error naming it.
    let (code, md, _) =
        fleet_report(&["--mixed".as_ref(), "* fw_smc".as_ref(), reports.as_os_str()]);
    assert_eq!(code, 0, "{md}");
    assert_has(
        &md,
        "| AMD Instinct MI300X fw_smc (expected mixed) | 0x00553e00 (7 of 8 nodes) | n03: ",
    );
    let policy = dir.path().join("rocgate.toml");
    std::fs::write(&policy, "[fleet]\nmixed = [\"* fw_smc\"]\n").unwrap();
    for mixed in [
        vec!["--mixed".as_ref(), "* fw_smc".as_ref()],
        vec!["--config".as_ref(), policy.as_os_str()],
    ] {
        let mut args = vec!["--format".as_ref(), "json".as_ref()];
        args.extend(mixed);
        args.push(reports.as_os_str());
        let (code, json, err) = fleet_report(&args);
        assert_eq!(code, 0, "{err}");
        let doc: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(doc["drift"]["differing"][0]["expected"], true);
        let n03 = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == "n03");
        assert!(n03.unwrap().get("drift").is_none(), "{json}");
    }
    let (code, _, err) = fleet_report(&["--mixed".as_ref(), "[fw".as_ref(), reports.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert_has(&err, "the mixed component \"[fw\" is not a glob");

    // A looser rule (25% off the median) lets the slow GPU through.
    let (_, md, _) = fleet_report(&[
        "--outlier-shortfall".as_ref(),
        "0.25".as_ref(),
        reports.as_os_str(),
    ]);
    assert_lacks(&md, "### Outliers");
}

#[test]
fn node_lists_and_the_diff_against_the_previous_fleet_run() {
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before");
    let now = dir.path().join("now");
    // Before: n00..n07 healthy and alike, and n08, since retired.
    write_fleet(&before, 9, |_, _| {});
    std::fs::remove_file(before.join("n07.json")).unwrap();
    // Now: n02 fails (a RAS error its report counts), n03 drifts, n05 is
    // slow, n07 is new, n08 is gone.
    write_fleet(&now, 8, |name, doc| {
        drift_and_slow(name, doc);
        if name == "n02" {
            let ras = doc["results"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|r| r["id"] == "gpu0.amdgpu.ras_errors")
                .unwrap();
            ras["status"] = "fail".into();
            doc["passed"] = false.into();
        }
    });
    let passing = dir.path().join("passing.txt");
    let failing = dir.path().join("failing.txt");
    let (code, md, err) = fleet_report(&[
        "--previous".as_ref(),
        before.as_os_str(),
        "--passing".as_ref(),
        passing.as_os_str(),
        "--failing".as_ref(),
        failing.as_os_str(),
        now.as_os_str(),
    ]);
    assert_eq!(code, 1, "{md}{err}");
    assert_has(&md, "### Since the previous fleet run");
    assert_has(&md, "| n02 | warn | pass | pass | **fail** |");
    assert_has(&md, "| amdgpu |  | gpu0 (0000:05:00.0) |");
    for said in [
        "- newly failing (1): n02 (failed; was passed)\n",
        "- newly drifting (1): n03 (AMD Instinct MI300X fw_smc; was as the fleet)\n",
        "- new outliers (1): n05 (gemm_tflops.fp16 gpu1; was within the fleet)\n",
        "- gone (1): n08\n",
        "- new (1): n07\n",
    ] {
        assert_has(&md, said);
    }
    // One name a line, as `srun --exclude` and `sbatch --nodelist` take them
    // (through `$(paste -sd, FILE)`).
    assert_eq!(std::fs::read_to_string(&failing).unwrap(), "n02\n", "{md}");
    assert_eq!(
        std::fs::read_to_string(&passing).unwrap(),
        "n00\nn01\nn03\nn04\nn05\nn06\nn07\n"
    );

    let (_, json, _) = fleet_report(&[
        "--format".as_ref(),
        "json".as_ref(),
        "--previous".as_ref(),
        now.as_os_str(),
        before.as_os_str(),
    ]);
    let doc: Value = serde_json::from_str(&json).unwrap();
    // Back again: n02 recovered, n08 is new, n07 gone.
    assert_eq!(doc["since"]["recovered"][0]["node"], "n02", "{json}");
    assert_eq!(doc["since"]["recovered"].as_array().unwrap().len(), 1);
    assert_eq!(doc["since"]["new"], serde_json::json!(["n08"]));
    assert_eq!(doc["since"]["gone"], serde_json::json!(["n07"]));
    assert_eq!(doc["since"]["previous_nodes"], 8);
    assert_eq!(doc["failing"], serde_json::json!([]));

    // A previous run that cannot be read is an error that names it.
    let (code, _, err) = fleet_report(&[
        "--previous".as_ref(),
        dir.path().join("nowhere").as_os_str(),
        now.as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert_has(&err, "nowhere");
    assert_has(&err, "has no report rocgate could read");
}

#[test]
fn a_baseline_from_the_healthy_fleet_is_the_floor_a_later_run_obeys() {
    let dir = tempfile::tempdir().unwrap();
    // A fleet whose GPUs all do fp16 GEMM 30% faster than this node does,
    // but one node that failed (its numbers are not the baseline's).
    let runs = dir.path().join("runs");
    write_fleet(&runs, 6, |name, doc| {
        scale_everywhere(doc, "gemm_tflops.fp16", 1.3);
        if name == "n04" {
            scale_everywhere(doc, "gemm_tflops.fp16", 0.1);
            let r = doc["results"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|r| r["id"] == "gpu0.rocblas.gemm_throughput")
                .unwrap();
            r["status"] = "fail".into();
            doc["passed"] = false.into();
        }
    });
    let file = dir.path().join("thresholds.toml");
    let f = finish(
        rocgate()
            .args(["fleet", "baseline", "--out"])
            .arg(&file)
            .arg(&runs),
    );
    assert_eq!(f.code, 0, "{}{}", f.stdout, f.stderr);
    assert_has(&f.stderr, "from 5 healthy nodes (of 6 read)");
    let toml_text = std::fs::read_to_string(&file).unwrap();
    let thresholds: toml::Value = toml::from_str(&toml_text).unwrap();
    let floors = thresholds["floor"].as_array().unwrap();
    let fp16 = floors
        .iter()
        .find(|f| {
            f["metric"].as_str() == Some("gemm_tflops.fp16")
                && f["source"]
                    .as_str()
                    .is_some_and(|s| s.contains("fleet baseline"))
        })
        .unwrap_or_else(|| panic!("no fleet fp16 floor in {toml_text}"));
    assert_eq!(fp16["gpu"].as_str(), Some("AMD Instinct MI300X"));
    let median = fp16["value"].as_float().unwrap();
    let node_value = extended_report()["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "gpu0.rocblas.gemm_throughput")
        .and_then(|r| r["metrics"].as_array())
        .and_then(|ms| ms.iter().find(|m| m["name"] == "gemm_tflops.fp16"))
        .and_then(|m| m["value"].as_f64())
        .unwrap();
    assert!(
        (median / node_value - 1.3).abs() < 0.01,
        "{median} {node_value}"
    );
    // Its provenance: how many nodes, the spread and the margin.
    let source = fp16["source"].as_str().unwrap();
    assert_has(source, "on 5 healthy nodes");
    assert_has(source, "MAD");
    assert_eq!(fp16["margin"].as_float(), Some(0.05));
    // Built-in rows follow for what the fleet did not measure.
    assert!(
        floors
            .iter()
            .any(|f| f["metric"].as_str() == Some("hbm_gbps.copy")
                && f["gpu"].as_str() == Some("AMD Instinct MI300X")),
        "{toml_text}"
    );

    // This node is 30% slower than the fleet it is judged by: below its
    // fleet floor, where the built-in floor passes it.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "extended", "--gpus", "0"])
        .args(&["--thresholds", file.to_str().unwrap()])
        .exits(1);
    let gemm = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "gpu0.rocblas.gemm_throughput")
        .unwrap();
    assert_eq!(gemm["status"], "fail", "{gemm}");
    assert_has(gemm.to_string(), "perf-below-floor");
    assert_has(gemm.to_string(), "rocgate fleet baseline");
}
