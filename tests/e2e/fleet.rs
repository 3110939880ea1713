//! Fleet health through the binary: `rocgate health` (its line, exit codes
//! and budget), Slurm draining and resuming through a recording
//! `scontrol`, prolog/epilog on a job's GPUs, the Prometheus textfile, the
//! node's name in reports and `rocgate fleet report`.

use crate::util;
use crate::util::{
    FakeScontrol, HANG_GUARD, assert_has, assert_lacks, health, health_on_fake, node, one_line,
    rocgate, unhealthy_in_time,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn health_says_one_line_and_exits_healthy_unhealthy_or_unknown() {
    let ok = node("mi300x-8");
    let h = health(&ok.root, &[], &[], None);
    assert_eq!(h.code, 0, "{}", h.stderr);
    // Healthy as far as it looked: the runtime layers do not run on a
    // capture without --rocm-path, and the line says so.
    let line = one_line(&h);
    assert!(
        line.starts_with("rocgate: ok 8 GPUs; ") && line.ends_with(" not run"),
        "{line}"
    );

    // A check that could not look is counted, and --strict fails on it; a
    // broken layer is unhealthy; a slow link is advisory: the node stays in
    // service and the line says it.
    for (scenario, args, code, starts) in [
        (
            "mi210-8-two-hives",
            &[][..],
            0,
            "rocgate: ok 8 GPUs; 1 unverified",
        ),
        (
            "mi210-8-two-hives",
            &["--strict"][..],
            1,
            "rocgate: unverified node.compat.combination: ",
        ),
        (
            "firmware-load-failed",
            &[][..],
            1,
            "rocgate: firmware-load-failed 0000:65:00.0 ",
        ),
        (
            "pcie-link-degraded",
            &[][..],
            0,
            "rocgate: ok 8 GPUs; warn pcie-link-degraded 0000:26:00.0",
        ),
    ] {
        let n = node(scenario);
        let h = health(&n.root, args, &[], None);
        assert_eq!(h.code, code, "{scenario} {args:?}: {}", h.stderr);
        assert!(
            one_line(&h).starts_with(starts),
            "{scenario} {args:?}: {}",
            h.stdout
        );
    }

    // rocgate could not read the node: unknown, never unhealthy.
    let h = health(Path::new("/nonexistent/node"), &[], &[], None);
    assert_eq!(h.code, 2);
    assert!(one_line(&h).starts_with("rocgate: unknown failed to open sysroot"));
}

#[test]
fn a_budget_spent_before_the_stack_was_checked_is_unknown() {
    // Every check may outlast the budget here: a hang ends the run.
    let (h, took) = health_on_fake(
        "hsa_init@gpu*=hang",
        &["--budget", "6", "--check-timeout", "600"],
    );
    assert_eq!(h.code, 2, "{} {}", h.stdout, h.stderr);
    assert_eq!(
        one_line(&h),
        "rocgate: unknown the time budget ran out before every layer was checked"
    );
    // Within the budget, with slack for a busy machine; the hung init's own
    // timeout is far longer.
    assert!(took < Duration::from_secs(6 + 20), "{took:?}");
}

#[test]
fn a_hung_all_reduce_is_narrowed_to_its_gpu_while_the_budget_lasts() {
    // The all-reduce hangs whenever gpu3 takes part; 4 s a try, so the
    // search fits a 60 s budget and the line names the GPU, not the node.
    let args = [
        "--tier",
        "standard",
        "--budget",
        "60",
        "--check-timeout",
        "4",
    ];
    let (h, took) = health_on_fake("ncclAllReduce@gpu3=hang", &args);
    let line = "rocgate: rccl-hang-isolated 0000:65:00.0 the all-reduce";
    unhealthy_in_time(&h, took, 60, line);
    // With too little budget left the search stops on what it has: the
    // node's hang, never a guess at a GPU.
    let args = [
        "--tier",
        "standard",
        "--budget",
        "14",
        "--check-timeout",
        "4",
    ];
    let (h, _) = health_on_fake("ncclAllReduce@gpu3=hang", &args);
    assert!(one_line(&h).starts_with("rocgate: "), "{}", h.stdout);
    assert!(!h.stdout.contains("rccl-hang-isolated"), "{}", h.stdout);
}

#[test]
fn slurm_drains_with_its_reason_resumes_only_its_own_and_leaves_others_alone() {
    let fake = FakeScontrol::new();
    let path = fake.path();
    let env = [("PATH", path.as_str()), ("SLURMD_NODENAME", "gpu17")];
    let broken = node("kfd-missing");
    let ok = node("mi300x-8");

    // rocgate reads the node's state twice: before the checks (an idle
    // node gets the quick tier) and again before it acts, so a reason
    // set meanwhile is not overwritten.
    let reason = "rocgate: kfd-missing /dev/kfd does not exist";
    fake.node_is("IDLE", None);
    let h = health(&broken.root, &["--slurm"], &env, None);
    assert_eq!(h.code, 1);
    assert_eq!(
        fake.calls(),
        [
            "show node gpu17".to_string(),
            "show node gpu17".to_string(),
            format!("update NodeName=gpu17 State=DRAIN Reason={reason}")
        ]
    );
    assert!(h.stderr.contains("drained gpu17"), "{}", h.stderr);

    // Still broken, already drained by rocgate: nothing more to say.
    fake.node_is("IDLE+DRAIN", Some(reason));
    health(&broken.root, &["--slurm"], &env, None);
    assert_eq!(fake.calls(), ["show node gpu17", "show node gpu17"]);

    // Healthy again: rocgate resumes the node it drained.
    fake.node_is("IDLE+DRAIN", Some(reason));
    let h = health(&ok.root, &["--slurm"], &env, None);
    assert_eq!(h.code, 0);
    assert_eq!(
        fake.calls(),
        [
            "show node gpu17",
            "show node gpu17",
            "update NodeName=gpu17 State=RESUME"
        ]
    );

    // Drained by someone else: neither a new reason nor a resume.
    for root in [&broken.root, &ok.root] {
        fake.node_is("IDLE+DRAIN", Some("bad DIMM, ticket 4711"));
        let h = health(root, &["--slurm"], &env, None);
        assert_eq!(
            fake.calls(),
            ["show node gpu17", "show node gpu17"],
            "{}",
            h.stderr
        );
        assert!(h.stderr.contains("not rocgate's"), "{}", h.stderr);
    }

    // Unknown never drains: Slurm is not even asked.
    fake.node_is("IDLE", None);
    let h = health(Path::new("/nonexistent/node"), &["--slurm"], &env, None);
    assert_eq!(h.code, 2);
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[test]
fn a_prolog_checks_only_the_jobs_gpus_and_calls_no_slurm_command() {
    let fake = FakeScontrol::new();
    fake.node_is("IDLE", None);
    let path = fake.path();
    // 0000:65:00.0, whose firmware did not load, is Slurm's GPU 3 (Slurm
    // numbers GPUs by PCI bus id), though KFD's absence makes it gpu7.
    let n = node("firmware-load-failed");
    for (flag, gpus, code) in [
        ("--slurm-prolog", "0,1", 0),
        ("--slurm-prolog", "2,3", 1),
        ("--slurm-epilog", "3", 1),
    ] {
        let h = health(
            &n.root,
            &[flag],
            &[("PATH", path.as_str()), ("SLURM_JOB_GPUS", gpus)],
            None,
        );
        assert_eq!(h.code, code, "{flag} {gpus}: {}", h.stderr);
        assert!(h.stdout.is_empty(), "{}", h.stdout);
        let line = h.stderr.lines().next().unwrap_or_default();
        if code == 0 {
            assert!(line.starts_with("rocgate: ok 2 GPUs"), "{line}");
        } else {
            assert!(
                line.starts_with("rocgate: firmware-load-failed 0000:65:00.0"),
                "{line}"
            );
        }
    }
    // Without the job's GPUs a prolog cannot decide, and does not fail the job.
    let h = health(
        &n.root,
        &["--slurm-prolog"],
        &[("PATH", path.as_str())],
        None,
    );
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert!(h.stderr.starts_with("rocgate: unknown"), "{}", h.stderr);
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

/// The samples of a textfile: `name{labels}` -> value.
/// The samples of a `run` textfile, each series named without the labels
/// that say which command and tier wrote it (every series carries them).
fn samples(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let series = series
                .replace(r#"{source="run",tier="quick"}"#, "")
                .replace(r#"{source="run",tier="quick","#, "{");
            assert!(!series.contains("source="), "{l}");
            (series, value.parse().unwrap())
        })
        .collect()
}

fn sample(text: &str, series: &str) -> f64 {
    samples(text)
        .into_iter()
        .find(|(s, _)| s == series)
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .1
}

#[test]
fn the_textfile_shows_each_layer_every_code_and_the_last_success() {
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("rocgate.prom");
    let broken = node("kfd-missing");
    let ok = node("mi300x-8");
    let write = |root: &Path| {
        rocgate()
            .args(["run", "--quiet", "--sysroot"])
            .arg(root)
            .arg("--prom")
            .arg(&prom)
            .timeout(HANG_GUARD)
            .output()
            .unwrap();
        std::fs::read_to_string(&prom).unwrap()
    };
    let text = write(&broken.root);
    assert_eq!(
        sample(
            &text,
            r#"rocgate_layer_up{scope="node",pci_address="",layer="kfd"}"#
        ),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            r#"rocgate_layer_up{scope="node",pci_address="",layer="amdgpu"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(&text, r#"rocgate_check_failures{code="kfd-missing"}"#),
        1.0
    );
    // Every code has its series, at 0 when it did not fire: failures
    // and warnings each in their family.
    for (code, severity) in &rocgate_suites_codes() {
        let family = match severity.as_str() {
            "fail" => "rocgate_check_failures",
            _ => "rocgate_check_warnings",
        };
        sample(&text, &format!("{family}{{code=\"{code}\"}}"));
    }
    assert_eq!(sample(&text, "rocgate_run_passed"), 0.0);
    assert_eq!(sample(&text, "rocgate_last_success_timestamp_seconds"), 0.0);
    assert!(sample(&text, "rocgate_last_run_timestamp_seconds") > 1.7e9);
    assert_has(&text, r#"hostname="kfd-missing""#);

    let text = write(&ok.root);
    let success = sample(&text, "rocgate_last_success_timestamp_seconds");
    assert!(success > 1.7e9, "{text}");
    // A failing run keeps the last success it replaces.
    let text = write(&broken.root);
    assert_eq!(
        sample(&text, "rocgate_last_success_timestamp_seconds"),
        success
    );
    // Only the file: the temporary one was renamed over it.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
    // A last success after this run ended (a damaged file, a clock set
    // back, 1e308) is not kept: no success is known, and no 309-digit
    // number is written.
    for planted in ["1e308", "4102444800", "inf"] {
        std::fs::write(
            &prom,
            format!("rocgate_last_success_timestamp_seconds {planted}\n"),
        )
        .unwrap();
        let text = write(&broken.root);
        let line = text
            .lines()
            .find(|l| l.starts_with("rocgate_last_success_timestamp_seconds"))
            .unwrap();
        assert!(line.len() < 80, "{line}");
        assert_eq!(
            sample(&text, "rocgate_last_success_timestamp_seconds"),
            0.0,
            "{planted}: {text}"
        );
    }
}

/// The catalogue's codes with their severities, as `rocgate codes --format
/// json` lists them.
fn rocgate_suites_codes() -> Vec<(String, String)> {
    let out = rocgate()
        .args(["codes", "--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["code"].as_str().unwrap().to_string(),
                c["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `rocgate run --json` of `scenario` into `dir`, as a fleet job leaves it.
fn run_report(dir: &Path, scenario: &str) -> PathBuf {
    let n = node(scenario);
    let out = dir.join(format!("{scenario}.json"));
    let junit = dir.join(format!("{scenario}.xml"));
    rocgate()
        .args(["run", "--quiet", "--sysroot"])
        .arg(&n.root)
        .arg("--json")
        .arg(&out)
        .arg("--junit")
        .arg(&junit)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    out
}

#[test]
fn reports_name_their_node_in_json_and_every_junit_suite() {
    let dir = tempfile::tempdir().unwrap();
    let json = run_report(dir.path(), "firmware-load-failed");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(doc["node"]["hostname"], "firmware-load-failed");
    let xml = std::fs::read_to_string(dir.path().join("firmware-load-failed.xml")).unwrap();
    let suites = xml.matches("<testsuite ").count();
    let named = xml
        .matches(r#"<property name="hostname" value="firmware-load-failed"/>"#)
        .count();
    assert!(suites > 1);
    assert_eq!(named, suites, "{xml}");
}

#[test]
fn the_fleet_report_reads_a_directory_of_runs() {
    let dir = tempfile::tempdir().unwrap();
    for s in ["mi300x-8", "kfd-missing", "firmware-load-failed"] {
        run_report(dir.path(), s);
    }
    let out = rocgate()
        .args(["fleet", "report"])
        .arg(dir.path())
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(
        md.starts_with("## rocgate fleet: 2 of 3 nodes failed"),
        "{md}"
    );
    assert_has(
        &md,
        "| firmware-load-failed | pass | pass | **fail** | blocked |",
    );
    assert_has(&md, "- kfd-missing: `kfd-missing` on node");
    assert_has(&md, "| `firmware-load-failed` | 1 |");

    let out = rocgate()
        .args(["fleet", "report", "--format", "json"])
        .arg(dir.path().join("mi300x-8.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["nodes"][0]["node"], "mi300x-8");
    assert_eq!(doc["nodes"][0]["passed"], true);
    assert_eq!(doc["drain"], serde_json::json!([]));

    // No report at all is not a healthy fleet.
    let empty = tempfile::tempdir().unwrap();
    let out = rocgate()
        .args(["fleet", "report"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `rocgate fleet report ARGS`: its exit code, stdout and stderr.
fn fleet(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let f = util::finish(rocgate().args(["fleet", "report"]).args(args));
    (f.code, f.stdout, f.stderr)
}

/// The JSON report at `path`, changed by `edit` and written back.
fn edit(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(path, doc.to_string()).unwrap();
}

/// The result `id` of a report, to change.
fn result_mut<'a>(doc: &'a mut Value, id: &str) -> &'a mut Value {
    doc["results"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result {id}"))
}

#[test]
fn a_report_that_says_passed_over_a_failing_check_fails_the_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let ok = run_report(dir.path(), "mi300x-8");
    let lying = run_report(dir.path(), "firmware-load-failed");
    // Its `passed` and its decision say it passed; its results do not.
    edit(&lying, |doc| {
        doc["passed"] = true.into();
        doc["decision"]["exit_code"] = 0.into();
        doc["decision"]["drain"] = false.into();
    });
    let (code, md, _) = fleet(&[dir.path().as_os_str()]);
    assert_eq!(code, 1, "{md}");
    assert!(
        md.starts_with("## rocgate fleet: 1 of 2 nodes failed"),
        "{md}"
    );
    assert_has(&md, "| `firmware-load-failed` | 1 |");
    assert_has(
        &md,
        "- firmware-load-failed: `firmware-load-failed` on gpu7 (0000:65:00.0)",
    );
    assert!(
        md.contains(
            "### Reports that contradict their results (counted failed)\n\n- firmware-load-failed ("
        ),
        "{md}"
    );
    assert_has(&md, "it says passed: true, but gpu7.firmware.");
    let (code, json, _) = fleet(&["--format".as_ref(), "json".as_ref(), lying.as_os_str()]);
    assert_eq!(code, 1, "{json}");
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["nodes"][0]["passed"], false);
    assert!(
        doc["nodes"][0]["disagrees"]
            .as_str()
            .unwrap()
            .contains("its decision says exit 0")
    );
    // The honest report alone passes.
    let (code, _, _) = fleet(&[ok.as_os_str()]);
    assert_eq!(code, 0);
}

#[test]
fn a_node_wide_fault_that_blames_a_gpu_shows_that_gpu_and_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_report(dir.path(), "mi300x-8");
    // An all-reduce narrowed to gpu5, as the narrowing search leaves it.
    edit(&report, |doc| {
        doc["passed"] = false.into();
        let r = result_mut(doc, "node.pci.amd_gpu_present");
        r["status"] = "fail".into();
        r["finding"] = serde_json::json!({"code": "rccl-hang-isolated", "severity": "fail",
            "message": "m", "next_step": "n", "blames": "gpu5"});
    });
    let (code, md, _) = fleet(&[report.as_os_str()]);
    assert_eq!(code, 1, "{md}");
    assert_has(&md, "| `rccl-hang-isolated` | gpu5 (0000:a6:00.0) |");
    let (_, html, _) = fleet(&["--format".as_ref(), "html".as_ref(), report.as_os_str()]);
    assert_has(&html, "gpu5 (0000:a6:00.0)");
}

#[test]
fn reports_that_cannot_be_read_are_named_and_the_rest_of_the_fleet_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let ok = run_report(dir.path(), "mi300x-8");
    let text = std::fs::read_to_string(&ok).unwrap();
    let variant = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        doc["node"]["hostname"] = name.into();
        edit(&mut doc);
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        path
    };
    // A metric with no value (older rocgate wrote NaN so) is still a
    // report: its node is judged.
    variant("null-reading", &|doc| {
        let r = doc["results"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|r| r["metrics"].as_array().is_some_and(|m| !m.is_empty()))
            .unwrap();
        r["metrics"][0]["value"] = Value::Null;
    });
    variant("v99", &|doc| doc["schema_version"] = 99.into());
    variant("v-string", &|doc| doc["schema_version"] = "1".into());
    variant("v-none", &|doc| {
        doc.as_object_mut().unwrap().remove("schema_version");
    });
    // Larger than any report (sparse: nothing is written, nothing read).
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let (code, md, err) = fleet(&[dir.path().as_os_str()]);
    assert_eq!(code, 3, "{md}{err}");
    assert!(
        md.starts_with(
            "## rocgate fleet: 0 of 2 nodes failed; 2 passed with warnings; 4 reports not read"
        ),
        "{md}"
    );
    assert_has(&md, "| null-reading | ");
    assert_has(&md, "| mi300x-8 | ");
    let not_read: Vec<&str> = md
        .split("### Reports not read (their nodes are not judged)\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{md}"))
        .lines()
        .collect();
    assert_eq!(not_read.len(), 4, "{md}");
    for (file, says) in [
        (
            "big.json",
            "is 68157440 bytes, more than the 64 MiB a run report may be",
        ),
        (
            "v-none.json",
            "it has no schema_version; this rocgate reads schema_version 1",
        ),
        (
            "v-string.json",
            // Quotes are entities in the markdown: they render as typed.
            "schema_version the string &quot;1&quot;, not the integer 1",
        ),
        ("v99.json", "schema_version 99 is not supported"),
    ] {
        assert!(
            not_read
                .iter()
                .any(|l| l.contains(file) && l.contains(says)),
            "{file}: {md}"
        );
        assert_has(&err, file);
    }
    // A failed node decides the exit, whatever could not be read.
    run_report(dir.path(), "kfd-missing");
    let (code, json, _) = fleet(&["--format".as_ref(), "json".as_ref(), dir.path().as_os_str()]);
    assert_eq!(code, 1, "{json}");
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["not_read"].as_array().unwrap().len(), 4, "{json}");
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 3, "{json}");
}

#[test]
fn node_text_in_the_fleet_markdown_and_page_is_never_markup() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_report(dir.path(), "firmware-load-failed");
    edit(&report, |doc| {
        doc["node"]["hostname"] = "n1 | x\n| <img src=https://e.x/a.png>".into();
        let faulty = doc["scopes"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|s| s["properties"]["pci_address"] == "0000:65:00.0")
            .unwrap();
        faulty["properties"]["pci_address"] = "<script>alert(1)</script>|`".into();
        for r in doc["results"].as_array_mut().unwrap() {
            if r["layer"] == "pci" {
                r["layer"] = "pci|<b>x</b>".into();
            }
            if r["finding"]["code"] == "firmware-load-failed" {
                r["finding"]["code"] = "fw`|<i>&".into();
            }
        }
    });
    let (code, md, _) = fleet(&[report.as_os_str()]);
    assert_eq!(code, 1, "{md}");
    for raw in ["<img", "<script", "<b>", "<i>"] {
        assert!(!md.contains(raw), "{raw}: {md}");
    }
    let lines: Vec<&str> = md.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("| node |"))
        .unwrap();
    let columns = util::unescaped_pipes(lines[header]);
    // The header, its rule, and one row for the one node, all as wide.
    assert_eq!(util::unescaped_pipes(lines[header + 2]), columns, "{md}");
    assert!(lines[header + 3].is_empty(), "{md}");
    assert_has(&md, "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\`");
    assert!(md.contains("fw\\`\\|&lt;i&gt;&amp;"), "{md}");
    let (_, html, _) = fleet(&["--format".as_ref(), "html".as_ref(), report.as_os_str()]);
    for raw in ["<img", "<script>alert", "<b>x", "<i>&"] {
        assert!(!html.contains(raw), "{raw}: {html}");
    }
    assert_has(&html, "&lt;script&gt;alert(1)&lt;/script&gt;");
}

#[test]
fn nodes_that_only_warn_pass_and_are_counted_apart_from_the_failed() {
    // One node with a warning only (ACS on, a stock default), one failed.
    let dir = tempfile::tempdir().unwrap();
    for (name, file) in [("pcie-acs-enabled", "a.json"), ("kfd-missing", "b.json")] {
        let n = node(name);
        let json = dir.path().join(file);
        let out = crate::util::finish(
            crate::util::rocgate()
                .args(["run", "--progress", "none", "--sysroot"])
                .arg(&n.root)
                .arg("--json")
                .arg(&json),
        );
        assert!(matches!(out.code, 0 | 1), "{}", out.stderr);
    }
    let (code, md, err) = fleet(&[dir.path().as_os_str()]);
    assert_eq!(code, 1, "{md}{err}");
    assert!(
        md.starts_with("## rocgate fleet: 1 of 2 nodes failed; 1 passed with warnings\n"),
        "{md}"
    );
    // The warned node names no failing layer; its code says it is a warning.
    let row = md
        .lines()
        .find(|l| l.starts_with("| pcie-acs-enabled |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        row.contains("|  | warn `pcie-acs-enabled` | node | 8 | quick | "),
        "{row}"
    );
    assert_lacks(&md, "- pcie-acs-enabled:");
}
