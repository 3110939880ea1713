//! Fleet health through the binary: `rocgate health` (its line, exit codes
//! and budget), Slurm draining and resuming through a recording
//! `scontrol`, prolog/epilog on a job's GPUs, the Prometheus textfile, the
//! node's name in reports and `rocgate fleet report`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{HANG_GUARD, fake_rocm, node, on_sysroot, rocgate};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `rocgate health` printed and how it ended.
struct Health {
    code: i32,
    stdout: String,
    stderr: String,
}

fn health(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Health {
    let mut cmd = on_sysroot(&["health"], root);
    cmd.args(extra).timeout(HANG_GUARD);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Health {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Asserts the scheduler's contract: exactly one line on stdout, at most 80
/// characters, starting `rocgate: `.
fn one_line(h: &Health) -> &str {
    let lines: Vec<&str> = h.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "stdout: {:?} stderr: {}",
        h.stdout,
        h.stderr
    );
    assert!(lines[0].starts_with("rocgate: "), "{}", lines[0]);
    assert!(lines[0].chars().count() <= 80, "{}", lines[0]);
    lines[0]
}

#[test]
fn health_says_one_line_and_exits_healthy_unhealthy_or_unknown() {
    let ok = node("mi300x-8");
    let h = health(&ok.root, &[], &[]);
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
        let h = health(&n.root, args, &[]);
        assert_eq!(h.code, code, "{scenario} {args:?}: {}", h.stderr);
        assert!(
            one_line(&h).starts_with(starts),
            "{scenario} {args:?}: {}",
            h.stdout
        );
    }

    // rocgate could not read the node: unknown, never unhealthy.
    let h = health(Path::new("/nonexistent/node"), &[], &[]);
    assert_eq!(h.code, 2);
    assert!(one_line(&h).starts_with("rocgate: unknown failed to open sysroot"));
}

/// `rocgate health` with `args` on an 8x MI300X whose fake ROCm has
/// `faults`, and how long it took.
fn health_on_fake(faults: &str, args: &[&str]) -> (Health, Duration) {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let mut all = args.to_vec();
    all.extend(["--rocm-path", rocm.path().to_str().unwrap()]);
    let start = Instant::now();
    let env = [
        ("ROCGATE_FAKE_NODE", n.root.to_str().unwrap()),
        ("ROCGATE_FAKE_FAULTS", faults),
    ];
    let h = health(&n.root, &all, &env);
    (h, start.elapsed())
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
fn a_gpu_that_hangs_times_out_inside_the_budget_and_is_named() {
    // gpu3 (0000:65:00.0) hangs ROCr's start in every process that sees it;
    // each check gets a third of the budget, so it times out in time.
    let (h, took) = health_on_fake("hsa_init@gpu3=hang", &["--budget", "30"]);
    unhealthy_in_time(
        &h,
        took,
        30,
        "rocgate: gpu-wedged 0000:65:00.0 hangs on its own",
    );
}

/// Asserts that health found the node unhealthy, its line starting `line`,
/// within `budget` seconds (with slack for a busy machine).
fn unhealthy_in_time(h: &Health, took: Duration, budget: u64, line: &str) {
    assert_eq!(h.code, 1, "{} {}", h.stdout, h.stderr);
    assert!(one_line(h).starts_with(line), "{}", h.stdout);
    assert!(took < Duration::from_secs(budget + 20), "{took:?}");
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

/// A `scontrol` that answers `show node` from `state` and records every
/// call, one per line, in `calls`.
struct FakeScontrol {
    dir: tempfile::TempDir,
}

impl FakeScontrol {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("scontrol");
        std::fs::write(
            &script,
            "#!/bin/sh\nd=$(dirname \"$0\")\nprintf '%s\\n' \"$*\" >> \"$d/calls\"\n\
             if [ \"$1\" = show ]; then cat \"$d/state\"; fi\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeScontrol { dir }
    }

    /// Sets what `scontrol show node` prints and forgets earlier calls.
    fn node_is(&self, state: &str, reason: Option<&str>) {
        let mut text = format!("NodeName=gpu17 Arch=x86_64\n   State={state} ThreadsPerCore=1\n");
        if let Some(r) = reason {
            text.push_str(&format!("   Reason={r} [root@2026-12-01T06:00:00]\n"));
        }
        std::fs::write(self.dir.path().join("state"), text).unwrap();
        let _ = std::fs::remove_file(self.dir.path().join("calls"));
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
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
    let h = health(&broken.root, &["--slurm"], &env);
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
    health(&broken.root, &["--slurm"], &env);
    assert_eq!(fake.calls(), ["show node gpu17", "show node gpu17"]);

    // Healthy again: rocgate resumes the node it drained.
    fake.node_is("IDLE+DRAIN", Some(reason));
    let h = health(&ok.root, &["--slurm"], &env);
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
        let h = health(root, &["--slurm"], &env);
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
    let h = health(Path::new("/nonexistent/node"), &["--slurm"], &env);
    assert_eq!(h.code, 2);
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[test]
fn a_prolog_checks_only_the_jobs_gpus_and_calls_no_slurm_command() {
    let fake = FakeScontrol::new();
    fake.node_is("IDLE", None);
    let path = fake.path();
    // gpu7 (0000:65:00.0) is the GPU whose firmware did not load.
    let n = node("firmware-load-failed");
    for (flag, gpus, code) in [
        ("--slurm-prolog", "0,1", 0),
        ("--slurm-prolog", "6,7", 1),
        ("--slurm-epilog", "7", 1),
    ] {
        let h = health(
            &n.root,
            &[flag],
            &[("PATH", path.as_str()), ("SLURM_JOB_GPUS", gpus)],
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
    let h = health(&n.root, &["--slurm-prolog"], &[("PATH", path.as_str())]);
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
    assert!(text.contains(r#"hostname="kfd-missing""#), "{text}");

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
    assert!(
        md.contains("| firmware-load-failed | pass | pass | **fail** | blocked |"),
        "{md}"
    );
    assert!(md.contains("- kfd-missing: `kfd-missing` on node"), "{md}");
    assert!(md.contains("| `firmware-load-failed` | 1 |"), "{md}");

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
