//! GitHub Actions through the binary: the job summary appended to
//! $GITHUB_STEP_SUMMARY, at most 10 `::error` annotations, most important
//! first, each beginning with its finding code, and `--no-github`.

use crate::util::{
    HANG_GUARD, assert_has, assert_lacks, code_and_output, fake_rocm, node, on_sysroot, rocgate,
};
use rocgate_fixtures::hostile::{char_device, is_char_device};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
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
    assert_has(&summary, more);
}

#[test]
fn no_github_writes_neither_summary_nor_annotations() {
    let n = node("kfd-missing");
    let (stdout, summary) = in_actions(&n.root, &["--no-github"], &[]);
    assert_lacks(&stdout, "::error");
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
    assert_has(&xml, open);
}

/// `rocgate run --quiet` on `root` inside GitHub Actions with
/// $GITHUB_STEP_SUMMARY set to `summary`: (exit code, stdout, stderr).
fn with_summary(root: &Path, summary: &Path) -> (Option<i32>, String, String) {
    code_and_output(
        on_sysroot(&["run", "--quiet"], root)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", summary),
    )
}

#[test]
fn a_summary_that_cannot_be_written_makes_the_run_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let full = char_device(dir.path(), "full", 7);
    let missing = dir.path().join("no-such-dir/summary.md");
    // A passing node and a failing one: 3 (a report not written) over both verdicts.
    for name in ["mi300x-8", "kfd-missing"] {
        let n = node(name);
        for summary in [&full, &dir.path().to_path_buf(), &missing] {
            let (code, stdout, stderr) = with_summary(&n.root, summary);
            assert_eq!(
                code,
                Some(3),
                "{name} {}: {stdout}\n{stderr}",
                summary.display()
            );
            assert_has(
                &stderr,
                format!("GitHub job summary not written to {}", summary.display()),
            );
        }
    }
    assert!(is_char_device(&full));
    assert!(!missing.exists());
}

#[test]
fn a_summary_fifo_without_a_reader_fails_at_once_and_one_with_a_reader_gets_it() {
    let n = node("kfd-missing");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("summary");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = std::time::Instant::now();
    let (code, _, stderr) = with_summary(&n.root, &fifo);
    assert_eq!(code, Some(3), "{stderr}");
    assert_has(&stderr, "nothing is reading");
    // Not the hang guard: it did not wait for a reader.
    assert!(started.elapsed() < HANG_GUARD / 2);
    // With a reader (open before rocgate writes; the summary fits the pipe).
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let (code, _, stderr) = with_summary(&n.root, &fifo);
    assert_eq!(code, Some(1), "{stderr}");
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut reader, &mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("## rocgate FAILED on kfd-missing"), "{got}");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_summary_link_another_user_planted_in_a_sticky_directory_is_not_followed() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not root: cannot plant another user's link; skipped");
        return;
    }
    let n = node("kfd-missing");
    let dir = tempfile::tempdir().unwrap();
    let sticky = dir.path().join("tmp");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("bashrc");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = sticky.join("summary.md");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let (code, _, stderr) = with_summary(&n.root, &link);
    assert_eq!(code, Some(3), "{stderr}");
    assert_has(&stderr, link.display().to_string());
    assert_has(&stderr, "fs.protected_symlinks");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

#[test]
fn node_text_in_the_summary_is_text_and_on_stdout_no_command() {
    let n = node("mi300x-8");
    let evil = "</details></table><img src=\"https://evil.example/t.png\">[docs](https://evil.example)![x](https://evil.example/i.png)|`x`";
    let vbios = std::fs::read_dir(n.root.join("sys/bus/pci/devices"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("vbios_version"))
        .find(|p| p.exists())
        .unwrap();
    std::fs::write(&vbios, evil).unwrap();
    std::fs::write(
        n.root.join("proc/sys/kernel/osrelease"),
        "6.8.0-##[add-mask]generic",
    )
    .unwrap();
    let (stdout, summary) = in_actions(&n.root, &[], &[]);
    // The node's text is in the summary, escaped: no tag, link or image.
    assert_has(&summary, "&lt;/details&gt;&lt;/table&gt;&lt;img");
    assert_eq!(summary.matches("</details>").count(), 1, "{summary}");
    for made in ["<img", "</table>", "[docs](", "![x](", "|`x`"] {
        assert!(!summary.contains(made), "{made} in\n{summary}");
    }
    // Every row of the versions table has its three cells.
    for row in summary.lines().filter(|l| l.contains("| vbios |")) {
        assert_eq!(row.replace("\\|", "").matches('|').count(), 4, "{row}");
    }
    // stdout: rocgate's own annotations only.
    for line in stdout.split(['\n', '\r']) {
        let own = line.starts_with("::error title=rocgate ")
            || line.starts_with("::warning title=rocgate ");
        assert!(
            own || !(line.trim_start().starts_with("::") || line.contains("##[")),
            "{line}"
        );
    }
}

#[test]
fn the_summary_folds_what_the_gpus_share_and_gives_every_finding_its_next_step() {
    // Eight MI300X with identical firmware, ACS on (a warning) and gpu7's
    // init abandoned (a failure): firmware rows once for the eight GPUs,
    // each finding with what was seen and what to do.
    let n = node("firmware-load-failed");
    let (_, summary) = in_actions(&n.root, &[], &[]);
    assert_has(&summary, "### Findings");
    assert_has(
        &summary,
        "- **fail** `firmware-load-failed` on gpu7 (`gpu7.firmware.init_errors`): ",
    );
    assert_has(
        &summary,
        "  next: amdgpu/psp_13_0_6_toc.bin missing from /lib/firmware",
    );
    // gpu7 reports no firmware (its init failed), the other seven agree.
    assert_has(&summary, "| gpu0..gpu6 | fw_mec | ");
    assert_eq!(summary.matches("| fw_mec |").count(), 1, "{summary}");
    // A value one GPU does not share is marked.
    let n = node("mi300x-8");
    let mec = n
        .root
        .join("sys/bus/pci/devices/0000:65:00.0/fw_version/mec_fw_version");
    std::fs::write(&mec, "0x00000099\n").unwrap();
    let (_, summary) = in_actions(&n.root, &[], &[]);
    assert_has(&summary, "| **gpu3** | fw_mec | **0x00000099** (differs) |");
    assert_has(
        &summary,
        "| **gpu0..gpu2, gpu4..gpu7** | fw_mec | **0x0000009a** (differs) |",
    );
    let cpx = node("mi300x-8-cpx");
    let (_, summary) = in_actions(&cpx.root, &[], &[]);
    assert_has(&summary, "| gpu0..gpu63 (all 64) | fw_mec | ");
    // The ladder folds each device's partitions into one row.
    assert_has(
        &summary,
        "| gpu8..gpu15 (0000:26:00.0  AMD Instinct MI300X  gfx942  (8 partitions)) |",
    );
    assert!(
        summary.lines().filter(|l| l.starts_with("| gpu")).count() < 40,
        "{summary}"
    );
}
