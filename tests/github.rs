//! GitHub Actions through the binary: the job summary appended to
//! $GITHUB_STEP_SUMMARY, at most 10 `::error` annotations, most important
//! first, each beginning with its finding code, and `--no-github`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{HANG_GUARD, fake_rocm, node, rocgate};
use std::path::Path;

/// `rocgate run` inside GitHub Actions: its stdout and the summary file,
/// which held `earlier step` before.
fn in_actions(root: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let mut cmd = rocgate();
    cmd.args(["run", "--quiet", "--sysroot"])
        .arg(root)
        .args(args)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .timeout(HANG_GUARD);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        std::fs::read_to_string(&summary).unwrap(),
    )
}

fn annotations<'a>(stdout: &'a str, kind: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter(|l| l.starts_with(&format!("::{kind} ")))
        .collect()
}

#[test]
fn the_summary_shows_the_ladder_and_the_cause_and_the_log_annotates_it() {
    let n = node("kfd-missing");
    let (stdout, summary) = in_actions(&n.root, &[], &[]);
    let errors = annotations(&stdout, "error");
    assert_eq!(errors.len(), 1, "{stdout}");
    assert!(
        errors[0].starts_with(
            "::error title=rocgate kfd-missing on node::kfd-missing node (node.kfd.dev_kfd): /dev/kfd does not exist%0Anext: "
        ),
        "{}",
        errors[0]
    );
    // Appended: what an earlier step wrote stays.
    assert!(summary.starts_with("earlier step\n## rocgate FAILED on kfd-missing (quick tier)"));
    for part in [
        "**Likely cause:** `kfd-missing` on node: /dev/kfd does not exist",
        "| node | pass | pass | pass | pass | **FAIL** `kfd-missing` | blocked |",
        "| gpu0 `0000:05:00.0` | - | pass | pass | pass | blocked |",
        "| node | kernel | 6.8.0-79-generic |",
    ] {
        assert!(summary.contains(part), "no {part:?} in\n{summary}");
    }
}

#[test]
fn ten_errors_are_annotated_and_the_summary_counts_the_rest() {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    // Every GPU's copies fail: 24 faults, lowest layer first.
    let (stdout, summary) = in_actions(
        &n.root,
        &["--no-gate", "--rocm-path", rocm.path().to_str().unwrap()],
        &[
            ("ROCGATE_FAKE_NODE", n.root.to_str().unwrap()),
            ("ROCGATE_FAKE_FAULTS", "hipMemcpy@gpu*=error:1"),
        ],
    );
    let errors = annotations(&stdout, "error");
    assert_eq!(errors.len(), 10, "{stdout}");
    // Most important first: bottom-up, the first GPU's before the next's;
    // each message begins with its code.
    let data: Vec<&str> = errors
        .iter()
        .map(|e| e.splitn(3, "::").nth(2).unwrap())
        .collect();
    assert!(data[0].starts_with("hip-memcpy-failed gpu0 "), "{stdout}");
    for d in &data {
        let code = d.split(' ').next().unwrap();
        assert!(
            ["hip-memcpy-failed", "hip-launch-failed", "hiprtc-failed"].contains(&code),
            "{d}"
        );
    }
    let more = "14 more errors and 0 more warnings";
    assert!(summary.contains(more), "{summary}");
}

#[test]
fn no_github_writes_neither_summary_nor_annotations() {
    let n = node("kfd-missing");
    let (stdout, summary) = in_actions(&n.root, &["--no-github"], &[]);
    assert!(!stdout.contains("::error"), "{stdout}");
    assert_eq!(summary, "earlier step\n");
}

#[test]
fn junit_faults_put_the_code_and_next_step_where_junit_reporters_look() {
    let n = node("kfd-missing");
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("r.xml");
    rocgate()
        .args(["run", "--quiet", "--sysroot"])
        .arg(&n.root)
        .arg("--junit")
        .arg(&junit)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let xml = std::fs::read_to_string(&junit).unwrap();
    // The message: the code and one line; the body: that line, then the
    // next step, as the reporters that show two lines of it do.
    let open = r#"<failure message="kfd-missing: /dev/kfd does not exist" type="kfd-missing">/dev/kfd does not exist
next step: "#;
    assert!(xml.contains(open), "{xml}");
}
