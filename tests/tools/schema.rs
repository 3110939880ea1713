//! Every JSON document rocgate writes, checked against the schema
//! `rocgate schema` prints for it by a validator rocgate does not contain
//! (Python's `jsonschema`, Draft 2020-12): run reports of healthy, warned,
//! failing, partitioned and GPU-less nodes and of a hung all-reduce
//! narrowed to its GPU, doctor's and the inventory's of the same nodes,
//! the fleet's of all of them, all three shapes of the matrix check, and
//! the code catalogue. A document that breaks its schema (a status no
//! schema allows) shows the validator is awake.
//!
//! Without Python's jsonschema the trial is ignored with the reason; under
//! CI=true it fails (ci/test installs it).

use crate::util::{FakeRun, check, missing, node, on_sysroot};
use libtest_mimic::{Completion, Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![
        with_validator(
            "every_json_document_rocgate_writes_meets_its_schema",
            documents_meet_their_schemas,
        ),
        with_validator(
            "the_validator_rejects_a_report_that_breaks_its_schema",
            validator_rejects,
        ),
    ]
}

fn with_validator(name: &str, test: fn() -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        let found = Command::new("python3")
            .args(["-c", "import jsonschema"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return missing("Python's jsonschema is not installed");
        }
        test().map(|()| Completion::Completed)
    })
}

/// The validator: each argument `SCHEMA=DOCUMENT`; prints every error with
/// its path and exits 1 when there is one.
const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
bad = 0
for pair in sys.argv[1:]:
    schema_file, doc_file = pair.split("=", 1)
    schema = json.load(open(schema_file))
    Draft202012Validator.check_schema(schema)
    doc = json.load(open(doc_file))
    for e in Draft202012Validator(schema).iter_errors(doc):
        bad += 1
        print(f"{doc_file}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}")
print(f"{len(sys.argv) - 1} documents checked, {bad} errors")
sys.exit(1 if bad else 0)
"#;

/// Validates each `(schema, document)`; the validator's words when one
/// fails.
fn validate(pairs: &[(PathBuf, PathBuf)]) -> Result<String, String> {
    let out = Command::new("python3")
        .args(["-c", VALIDATE])
        .args(
            pairs
                .iter()
                .map(|(s, d)| format!("{}={}", s.display(), d.display())),
        )
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(said)
    } else {
        Err(said)
    }
}

/// The schemas, written by `rocgate schema --out DIR`.
fn schemas(dir: &Path) -> Result<PathBuf, Failed> {
    let at = dir.join("schemas");
    let out = crate::util::rocgate()
        .args(["schema", "--out"])
        .arg(&at)
        .output()?;
    check(out.status.success(), format!("rocgate schema: {out:?}"))?;
    Ok(at)
}

/// Writes `args` + `--json FILE` (or the command's own output flag) and
/// returns the file, whatever the command's exit code.
fn written(mut cmd: assert_cmd::Command, file: PathBuf) -> Result<PathBuf, Failed> {
    let out = cmd.output()?;
    check(
        file.is_file(),
        format!("{} was not written: {out:?}", file.display()),
    )?;
    Ok(file)
}

fn documents_meet_their_schemas() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let schemas = schemas(dir.path())?;
    let schema = |name: &str| schemas.join(format!("{name}.schema.json"));
    let mut pairs: Vec<(PathBuf, PathBuf)> = Vec::new();
    let reports = dir.path().join("reports");
    std::fs::create_dir(&reports)?;
    // Run reports: with the fake ROCm (measurements, a warning, a hung
    // all-reduce narrowed to its GPU, partitions), and on bare fixtures
    // (failures, blocked layers, unverifiable checks).
    let fake_runs: [(&str, &[&str], &str); 4] = [
        ("mi300x-8", &["--tier", "extended", "--gpus", "0,1"], ""),
        ("mi300x-8-cpx", &[], ""),
        ("ras-bad-pages", &["--tier", "standard"], ""),
        (
            "mi300x-8",
            &["--tier", "standard", "--timeout", "rccl::allreduce=4"],
            "ncclAllReduce@gpu5=hang",
        ),
    ];
    for (i, (scenario, args, faults)) in fake_runs.into_iter().enumerate() {
        let report = reports.join(format!("fake-{i}-{scenario}.json"));
        let (_, _, mut json, _) = FakeRun::scenario(scenario).args(args).faults(faults).run();
        std::fs::write(&report, serde_json::to_string(&json)?)?;
        pairs.push((schema("run"), report));
        if i == 0 {
            // Its siblings, so the fleet document shows drift and an
            // outlier too: one on other VBIOS, one with a slow GEMM.
            for sibling in 0..6 {
                json["node"]["hostname"] = format!("sibling-{sibling}").into();
                if sibling == 1 {
                    json["versions"]["gpu1"]["vbios"] = "113-M3000100-103".into();
                }
                if sibling == 2 {
                    slow_gemm(&mut json);
                }
                std::fs::write(
                    reports.join(format!("sibling-{sibling}.json")),
                    serde_json::to_string(&json)?,
                )?;
            }
        }
    }
    for scenario in [
        "firmware-load-failed",
        "kfd-missing",
        "no-amd-gpu",
        "compat-driver-mismatch",
    ] {
        let n = node(scenario);
        // The run's report goes with the others the fleet reads.
        let to = |document: &str| match document {
            "run" => reports.join(format!("{scenario}.json")),
            _ => dir.path().join(format!("{document}-{scenario}.json")),
        };
        for document in ["run", "doctor", "inventory"] {
            let file = to(document);
            let cmd = on_sysroot(&[document, "--json", file.to_str().unwrap()], &n.root);
            pairs.push((schema(document), written(cmd, file.clone())?));
        }
    }
    // The matrix check's three shapes: checked, a release it does not
    // list, and no ROCm at all.
    for scenario in [
        "compat-driver-mismatch",
        "compat-unknown-release",
        "no-amd-gpu",
    ] {
        let n = node(scenario);
        if scenario == "no-amd-gpu" {
            // A node with no ROCm installed at all.
            std::fs::remove_dir_all(n.root.join("opt/rocm"))?;
        }
        let file = dir.path().join(format!("matrix-{scenario}.json"));
        pairs.push((
            schema("matrix"),
            written(
                on_sysroot(
                    &["matrix", "check", "--json", file.to_str().unwrap()],
                    &n.root,
                ),
                file.clone(),
            )?,
        ));
    }
    let shapes: Vec<String> = pairs
        .iter()
        .filter(|(s, _)| s.ends_with("matrix.schema.json"))
        .map(|(_, d)| std::fs::read_to_string(d).unwrap_or_default())
        .collect();
    check(
        shapes.iter().any(|d| d.contains("\"components\""))
            && shapes.iter().any(|d| d.contains("\"covers\""))
            && shapes.iter().any(|d| d.contains("\"reason\"")),
        format!("the matrix documents do not show all three shapes: {shapes:?}"),
    )?;
    let fleet = dir.path().join("fleet.json");
    written(
        {
            let mut c = crate::util::rocgate();
            c.args(["fleet", "report", "--format", "json", "--out"])
                .arg(&fleet)
                .arg("--previous")
                .arg(&reports)
                .arg(&reports);
            c
        },
        fleet.clone(),
    )?;
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&fleet)?)?;
    let outliers = doc["metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["outliers"].as_array().is_some_and(|o| !o.is_empty()));
    check(
        outliers
            && doc["drift"]["differing"][0]["differ"][0].is_object()
            && doc["since"].is_object(),
        format!("the fleet document shows no outlier, drift or diff: {doc}"),
    )?;
    pairs.push((schema("fleet"), fleet));
    let codes = dir.path().join("codes.json");
    let out = crate::util::rocgate()
        .args(["codes", "--format", "json"])
        .output()?;
    std::fs::write(&codes, &out.stdout)?;
    pairs.push((schema("codes"), codes));
    let said = validate(&pairs)?;
    check(
        said.contains(&format!("{} documents checked, 0 errors", pairs.len())),
        said,
    )
}

/// Makes gpu0's fp16 GEMM of a report 30% slower.
fn slow_gemm(doc: &mut Value) {
    let metrics = doc["results"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter(|r| r["id"] == "gpu0.rocblas.gemm_throughput")
        .filter_map(|r| r["metrics"].as_array_mut())
        .flatten();
    for m in metrics.filter(|m| m["name"] == "gemm_tflops.fp16") {
        let v = m["value"].as_f64().unwrap_or_default();
        m["value"] = (v * 0.7).into();
    }
}

fn validator_rejects() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let schemas = schemas(dir.path())?;
    let n = node("kfd-missing");
    let report = dir.path().join("run.json");
    written(
        on_sysroot(&["run", "--json", report.to_str().unwrap()], &n.root),
        report.clone(),
    )?;
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&report)?)?;
    doc["results"][0]["status"] = "purple".into();
    doc["schema_version"] = 2.into();
    std::fs::write(&report, serde_json::to_string(&doc)?)?;
    match validate(&[(schemas.join("run.schema.json"), report)]) {
        Ok(said) => Err(format!("a status of purple and schema_version 2 passed: {said}").into()),
        Err(said) => check(
            said.contains("results/0/status") && said.contains("schema_version"),
            format!("the validator did not name both faults: {said}"),
        ),
    }
}
