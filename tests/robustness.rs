//! Hangs, interruptions and damaged files: rocgate finishes, reports, and
//! names what it could not read.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{
    fake_process, node, on_sysroot, result, result_with_status, rocgate, run, send_signal, text,
};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Replaces a file with a FIFO nobody writes to: the stand-in for a sysfs
/// file of a wedged GPU (a snapshot stores such a file this way). rocgate
/// never opens a FIFO; it treats it as a file that did not answer.
fn make_hang(path: &std::path::Path) {
    std::fs::remove_file(path).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn mec(root: &std::path::Path, bus: &str) -> std::path::PathBuf {
    root.join(format!(
        "sys/bus/pci/devices/0000:{bus}:00.0/fw_version/mec_fw_version"
    ))
}

#[test]
fn a_hung_check_times_out_and_the_other_gpus_finish() {
    let n = node("mi300x-8");
    make_hang(&mec(&n.root, "46"));
    // The file does not answer: the check that reads it times out at once
    // naming it, rather than after its 10 s.
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 1, "{stdout}");
    let hung = result_with_status(&json, "gpu2.firmware.versions", "timeout");
    assert!(hung["duration_ms"].as_f64().unwrap() < 5000.0, "{hung}");
    assert!(
        text(&hung["message"]).contains("0000:46:00.0/fw_version/mec_fw_version did not answer"),
        "names the file: {hung}"
    );
    let after = result_with_status(&json, "gpu2.kfd.topology_node", "blocked");
    assert!(text(&after["message"]).contains("GPU unresponsive after gpu2.firmware.versions"));
    for gpu in [0, 1, 3, 7] {
        assert_eq!(
            result(&json, &format!("gpu{gpu}.kfd.compute_units"))["status"],
            "pass"
        );
    }
    assert!(
        junit.contains(r#"<testsuite name="mi300x-8.gpu2""#),
        "{junit}"
    );
    assert!(junit.contains(r#"type="check-timeout""#));
    // Versions come from what the firmware check read: none for the hung GPU.
    assert!(json["versions"]["gpu2"].as_object().unwrap().is_empty());
    assert!(json["versions"]["gpu3"]["fw_mec"].is_string());
}

#[test]
fn inventory_names_a_gpu_whose_sysfs_hangs_and_still_prints() {
    let n = node("mi300x-8");
    make_hang(&mec(&n.root, "46"));
    let out = on_sysroot(&["inventory", "--json"], &n.root)
        .timeout(common::HANG_GUARD)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu2 = doc["versions"]["gpu2"]["versions"].as_str().unwrap();
    assert!(gpu2.contains("did not answer"), "{gpu2}");
    assert!(doc["versions"]["gpu5"]["fw_mec"].is_string());
}

#[test]
fn a_snapshot_of_a_hung_gpu_finishes_and_replays_the_hang() {
    let n = node("mi300x-8");
    make_hang(&mec(&n.root, "46"));
    let archive = n.root.with_extension("tar.zst");
    let out = rocgate()
        .args(["snapshot", "--out"])
        .arg(&archive)
        .arg("--sysroot")
        .arg(&n.root)
        .timeout(common::HANG_GUARD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("stored as hung"), "{stdout}");
    assert!(
        stdout.contains("0000:46:00.0/fw_version/mec_fw_version"),
        "{stdout}"
    );
    let (code, _, json, _) = run(&archive, &[]);
    assert_eq!(code, 1);
    assert_eq!(result(&json, "gpu2.firmware.versions")["status"], "timeout");
    assert_eq!(result(&json, "gpu3.firmware.versions")["status"], "pass");
}

#[test]
fn sigint_stops_the_run_and_still_writes_the_reports() {
    let n = node("mi300x-8");
    // Every GPU's queue creation hangs in the vendor library.
    let rocm = common::fake_rocm();
    let junit = n.root.with_extension("junit.xml");
    let json = n.root.with_extension("results.json");
    let mut child = fake_process(
        &["run"],
        &n.root,
        &n.root,
        rocm.path(),
        "hsa_queue_create@gpu*=hang",
    )
    .arg("--junit")
    .arg(&junit)
    .arg("--json")
    .arg(&json)
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let start = Instant::now();
    assert!(send_signal(child.id(), "-INT"));
    let status = child.wait().unwrap();
    // The hung queue checks' own timeout is 30 s: the run stops well before
    // it (workers get SIGTERM, SIGKILL after a 1 s grace).
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "took {:?} after SIGINT",
        start.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], "SIGINT");
    let r = result_with_status(&doc, "gpu0.hsa.queue", "skipped");
    assert_eq!(r["skip_reason"], "interrupted", "{r}");
    assert!(text(&r["message"]).contains("interrupted by SIGINT"), "{r}");
    assert_eq!(
        result(&doc, "gpu0.hip.vector_add")["skip_reason"],
        "interrupted"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"<property name="interrupted" value="SIGINT"/>"#));
    quick_junit::Report::deserialize_from_str(&xml).unwrap();
}

#[test]
fn damaged_files_are_named_not_fatal() {
    let n = node("mi300x-8");
    let topo = n.root.join("sys/class/kfd/kfd/topology/nodes");
    std::fs::write(
        topo.join("3/properties"),
        b"simd_count 1216\nsimd_per_cu \xff\xfe\n",
    )
    .unwrap();
    std::fs::write(
        topo.join("4/properties"),
        b"cpu_cores_count 0\nsimd_count 1216\nsimd_per",
    )
    .unwrap();
    // NUL padding is what real captures look like; it must still parse.
    std::fs::write(mec(&n.root, "05"), b"0x0000009a\n\0\0\0\0\0\0\0\0").unwrap();
    std::fs::write(
        n.root.join("sys/bus/pci/devices/0000:85:00.0/class"),
        b"display\n",
    )
    .unwrap();
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1, "{stdout}");
    let topo = result_with_status(&json, "node.kfd.topology", "fail");
    assert_eq!(topo["finding"]["code"], "kfd-topology-unreadable");
    let msg = topo["message"].as_str().unwrap();
    assert!(
        msg.contains("nodes/3/properties") && msg.contains("not UTF-8"),
        "{msg}"
    );
    assert!(text(&topo["output"]).contains("nodes/4/properties"));
    assert_eq!(result(&json, "gpu0.firmware.versions")["status"], "pass");
    let pci = result(&json, "node.pci.amd_gpu_present");
    assert!(text(&pci["output"]).contains("0000:85:00.0/class"), "{pci}");
    assert!(
        common::results(&json)
            .iter()
            .all(|r| r["status"] != "crash")
    );
}

#[test]
fn the_live_host_run_finishes_and_reports() {
    // Whatever this machine is, the run completes with a verdict and valid reports.
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("host.xml");
    let out = rocgate()
        .args(["run", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
    let out = rocgate().args(["doctor", "--json"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["healthy"].is_boolean());
}

#[test]
fn a_closed_stdout_ends_the_output_not_the_command() {
    let n = node("kfd-permission");
    let junit = n.root.with_extension("junit.xml");
    for args in [
        &["doctor", "--json"][..],
        &["inventory"][..],
        &["run", "--junit"][..],
    ] {
        // The reader is gone before rocgate writes a byte, as after `| head -1`.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("rocgate"));
        cmd.args(args);
        if args[0] == "run" {
            cmd.arg(&junit);
        }
        let out = cmd
            .arg("--sysroot")
            .arg(&n.root)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {out:?}"
        );
    }
    // The run still wrote its report.
    quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&junit).unwrap()).unwrap();
}

/// The pids of the processes whose parent is `pid` and whose command line
/// holds `arg`.
fn children_with_arg(pid: u32, arg: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let parent = std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(") ")
                        .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                });
            parent == Some(pid)
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
        })
        .collect()
}

#[test]
fn sigint_during_narrowing_is_an_interruption_and_the_cut_try_is_no_evidence() {
    let n = node("mi300x-8");
    let rocm = common::fake_rocm();
    let json = n.root.with_extension("results.json");
    // The all-reduce hangs whenever gpu1 takes part; each try of the search
    // gets 15 s (its cap), so the first (gpu0..gpu3) is still running when
    // the signal comes.
    let mut child = fake_process(
        &["run", "--tier", "standard"],
        &n.root,
        &n.root,
        rocm.path(),
        "ncclAllReduce@gpu1=hang",
    )
    .args(["--timeout", "rccl::allreduce=20", "--json"])
    .arg(&json)
    .spawn()
    .unwrap();
    // The search's workers are the ones told which GPUs to see.
    let start = Instant::now();
    while children_with_arg(child.id(), "--gpus").is_empty() {
        assert!(
            start.elapsed() < common::HANG_GUARD,
            "the search never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(send_signal(child.id(), "-INT"));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], "SIGINT", "{}", doc["interrupted"]);
    let r = result(&doc, "node.rccl.allreduce");
    let output = text(&r["output"]);
    assert!(
        output.contains("search stopped: interrupted by SIGINT"),
        "{output}"
    );
    // The try the signal cut short is not reported as a try that failed.
    assert!(!output.contains("did not complete"), "{output}");
    assert!(!output.contains(": failed"), "{output}");
    assert_ne!(r["finding"]["code"], "rccl-hang-isolated", "{r}");
}

#[test]
fn a_matrix_with_a_key_rocgate_does_not_know_is_refused_naming_it_and_its_line() {
    let n = node("mi300x-8");
    let builtin = include_str!("../suites/compat.toml");
    let path = n.root.with_extension("matrix.toml");
    for (changed, key, line) in [
        // A misspelt table of rows, at the top level.
        (
            builtin.replacen(
                "schema_version = 1\n",
                "schema_version = 1\nreleses = []\n",
                1,
            ),
            "releses",
            5,
        ),
        // A key a release row does not have.
        (
            builtin.replacen("[[release]]\n", "[[release]]\ngpu = [\"gfx942\"]\n", 1),
            "gpu",
            30,
        ),
    ] {
        assert_ne!(changed, builtin);
        std::fs::write(&path, &changed).unwrap();
        for args in [
            &["matrix", "check", "--matrix"][..],
            &["run", "--quiet", "--matrix"][..],
        ] {
            let out = rocgate()
                .args(args)
                .arg(&path)
                .arg("--sysroot")
                .arg(&n.root)
                .timeout(common::HANG_GUARD)
                .output()
                .unwrap();
            common::assert_exit(&out, 2);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("matrix.toml")
                    && stderr.contains(&format!("line {line}"))
                    && stderr.contains(&format!("unknown field `{key}`")),
                "{args:?}: {stderr}"
            );
        }
    }
}

#[test]
fn a_timeout_beyond_its_bound_says_the_bound() {
    let n = node("mi300x-8");
    for (time, says) in [
        ("1e30", "at most 604800 seconds (7 days)"),
        ("700000", "at most 604800 seconds (7 days)"),
        ("0", "more than 0 seconds"),
        ("soon", "not a number of seconds"),
    ] {
        let out = on_sysroot(
            &["run", "--timeout", &format!("hsa::queue={time}")],
            &n.root,
        )
        .timeout(common::HANG_GUARD)
        .output()
        .unwrap();
        common::assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{time}: {stderr}");
        assert!(!stderr.contains("positive number"), "{time}: {stderr}");
    }
}
