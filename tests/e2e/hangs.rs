//! What does not answer ends the way the run says, through the binary: a
//! node file that blocks (a FIFO stands for a wedged GPU's sysfs file,
//! [`util::wedge`]), a GPU or collective that never completes in the fake
//! ROCm, a run of hangs under a time budget. Each hang is named, times out
//! within its check's bound and the time budget, and leaves what did
//! answer judged.

use crate::util;
use crate::util::{
    FakeRun, HANG_GUARD, RUNTIME_LAYERS, TOPO, assert_gpus_pass, assert_has, assert_lacks, doctor,
    extended, fake_rocm, health, health_on_fake, mec, nix_is_root, node, on_sysroot, prolog_line,
    real, result, result_timed_out, result_with_finding, result_with_status, rocgate, rocgate_on,
    run, spawn_fake, text, unhealthy_in_time, wedge,
};
use std::path::Path;
use std::time::Instant;

/// The time budget a run announces, in seconds.
fn announced_budget(text: &str) -> f64 {
    text.split("time budget ")
        .nth(1)
        .and_then(|t| t.split(" s").next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no budget in {text}"))
}

fn mknod_ptmx(path: &Path) {
    nix::sys::stat::mknod(
        path,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(5, 2),
    )
    .unwrap();
}

#[test]
fn files_that_do_not_answer_hang_no_command_and_are_named() {
    // (file, a check whose verdict must name it, what that verdict is)
    let cases = [
        ("proc/cmdline", "node.amdgpu.blacklist", "skipped"),
        (
            "sys/module/amdgpu/version",
            "node.amdgpu.driver_version",
            "skipped",
        ),
        (
            "sys/module/amdgpu/initstate",
            "node.amdgpu.module_live",
            "fail",
        ),
        (
            // The slot link of gpu0, at its internal switch's upstream
            // port: read by the check itself, which times out naming it.
            "sys/bus/pci/devices/0000:03:00.0/current_link_width",
            "gpu0.pci.link_width",
            "timeout",
        ),
        (
            "sys/bus/pci/devices/0000:05:00.0/vendor",
            "gpu0.pci.identity",
            "fail",
        ),
        // Its GPU has no readable KFD node, so it is listed last.
        (
            "sys/class/kfd/kfd/topology/nodes/3/properties",
            "gpu7.kfd.topology_node",
            "fail",
        ),
        // A check that meets a file that did not answer times out naming it.
        ("etc/os-release", "node.compat.combination", "timeout"),
        ("proc/sys/kernel/osrelease", "node.amdgpu.dkms", "skipped"),
    ];
    for (rel, id, status) in cases {
        let n = node("mi300x-8");
        wedge(&real(&n.root, rel));
        let (_, stdout, json, _) = run(&n.root, &[]);
        let r = result(&json, id);
        assert_eq!(r["status"], status, "{rel}: {r}\n{stdout}");
        let file = Path::new(rel).file_name().unwrap().to_str().unwrap();
        assert!(
            r["message"].as_str().unwrap().contains(file),
            "{rel}: the verdict names the file: {r}"
        );
        if status == "skipped" {
            assert_eq!(r["skip_reason"], "unverifiable", "{rel}: {r}");
        }
        for cmd in [
            &["inventory"][..],
            &["matrix", "check"],
            &["list"],
            &["doctor"],
        ] {
            let (code, out) = rocgate_on(&n.root, cmd);
            assert!(
                matches!(code, Some(0..=1)),
                "{rel}: {cmd:?} did not finish cleanly: {code:?}\n{out}"
            );
        }
    }

    // rocgate's own capture record not answering is an error naming it.
    let n = node("mi300x-8");
    wedge(&n.root.join("rocgate-capture.toml"));
    let (code, out) = rocgate_on(&n.root, &["doctor"]);
    assert_eq!(code, Some(2), "{out}");
    assert_has(&out, "capture record");
    assert_has(&out, "rocgate-capture.toml");
}

#[test]
fn the_time_budget_bounds_a_run_of_hangs() {
    // How the budget is composed (kill grace, reaping, start-up waves) is
    // tested beside `ExecOptions::time_budget`; here the binary must keep
    // the promise and follow the timeouts it was given. Only the hung
    // check's timeout is shortened; every other check keeps its own.
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    // Runs rocgate to its end with `faults` and the queue check's timeout at
    // `queue_secs`, its stdout written to the node's `out_ext` file; returns
    // that stdout.
    let run_to_end = |faults: &str, queue_secs: u32, out_ext: &str| {
        let out = n.root.with_extension(out_ext);
        let timeout = format!("hsa::queue={queue_secs}");
        let args = ["run", "--timeout", timeout.as_str()];
        spawn_fake(&n.root, rocm.path(), faults, &args, &out)
            .wait()
            .unwrap();
        std::fs::read_to_string(&out).unwrap()
    };
    let start = Instant::now();
    let text = run_to_end("hsa_queue_create@gpu*=hang", 1, "out");
    let elapsed = start.elapsed();
    let budget = announced_budget(&text);
    assert!(
        elapsed.as_secs_f64() <= budget + 1.0,
        "announced {budget} s, took {elapsed:?}"
    );
    assert_has(&text, "8 timed out");
    // Ten more seconds for the queue check of each GPU: the GPUs run side
    // by side, so the budget grows by ten seconds, not eighty.
    let longer = announced_budget(&run_to_end("", 11, "healthy.out"));
    assert!(
        (9.0..=11.0).contains(&(longer - budget)),
        "budget {budget} s with the queue check at 1 s, {longer} s at 11 s"
    );
}

// A FIFO, a device or a socket in a capture did not answer; it is never
// opened, whatever link leads to it.
#[test]
fn special_files_in_a_capture_did_not_answer_and_hang_nothing() {
    let props = "sys/class/kfd/kfd/topology/nodes/3/properties";
    type Make = fn(&Path, &Path);
    let mut cases: Vec<(&str, Make, bool)> = vec![
        // The host's /dev/ptmx, whose read blocks for good: the link means
        // the captured node's /dev/ptmx, which the capture does not hold.
        (
            "a link to /dev/ptmx",
            |_, f| std::os::unix::fs::symlink("/dev/ptmx", f).unwrap(),
            false,
        ),
        (
            "a link climbing to /dev/ptmx",
            |_, f| std::os::unix::fs::symlink(format!("{}dev/ptmx", "../".repeat(20)), f).unwrap(),
            false,
        ),
        (
            "a socket",
            |_, f| drop(std::os::unix::net::UnixListener::bind(f).unwrap()),
            true,
        ),
    ];
    if nix_is_root() {
        // A pseudo-terminal master (5, 2) inside the capture, directly and
        // through an absolute link.
        cases.push(("a character device", |_, f| mknod_ptmx(f), true));
        cases.push((
            "a link to a character device in the capture",
            |root, f| {
                std::fs::create_dir_all(root.join("dev")).unwrap();
                mknod_ptmx(&root.join("dev/ptmx"));
                std::os::unix::fs::symlink("/dev/ptmx", f).unwrap();
            },
            true,
        ));
    } else {
        eprintln!("not root: the character-device cases are not run");
    }
    for (case, make, named) in cases {
        let n = node("mi300x-8");
        let file = real(&n.root, props);
        std::fs::remove_file(&file).unwrap();
        make(&n.root, &file);
        let (_, stdout, json, _) = run(&n.root, &[]);
        let r = result(&json, "gpu7.kfd.topology_node");
        assert!(
            r["status"] == "fail" || r["status"] == "blocked",
            "{case}: {r}\n{stdout}"
        );
        if named {
            let msg = r["message"].as_str().unwrap();
            assert!(
                msg.contains("did not answer") && msg.contains("properties"),
                "{case}: {r}"
            );
        }
        for cmd in [
            &["inventory"][..],
            &["doctor"],
            &["list"],
            &["matrix", "check"],
        ] {
            let (code, out) = rocgate_on(&n.root, cmd);
            assert!(
                matches!(code, Some(0..=1)),
                "{case}: {cmd:?}: {code:?}\n{out}"
            );
        }
    }
}

#[test]
fn a_hung_check_times_out_and_the_other_gpus_finish() {
    let n = node("mi300x-8");
    util::wedge(&mec(&n.root, "46"));
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
    util::wedge(&mec(&n.root, "46"));
    let out = on_sysroot(&["inventory", "--json"], &n.root)
        .timeout(util::HANG_GUARD)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu2 = doc["versions"]["gpu2"]["versions"].as_str().unwrap();
    assert_has(gpu2, "did not answer");
    assert!(doc["versions"]["gpu5"]["fw_mec"].is_string());
}

#[test]
fn a_snapshot_of_a_hung_gpu_finishes_and_replays_the_hang() {
    let n = node("mi300x-8");
    util::wedge(&mec(&n.root, "46"));
    let archive = n.root.with_extension("tar.zst");
    let out = rocgate()
        .args(["snapshot", "--out"])
        .arg(&archive)
        .arg("--sysroot")
        .arg(&n.root)
        .timeout(util::HANG_GUARD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_has(&stdout, "stored as hung");
    assert_has(&stdout, "0000:46:00.0/fw_version/mec_fw_version");
    let (code, _, json, _) = run(&archive, &[]);
    assert_eq!(code, 1);
    assert_eq!(result(&json, "gpu2.firmware.versions")["status"], "timeout");
    assert_eq!(result(&json, "gpu3.firmware.versions")["status"], "pass");
}

#[test]
fn doctor_answers_on_a_node_with_a_kfd_file_that_does_not_answer() {
    let n = node("mi300x-8");
    // KFD node 5 is gpu3 (nodes 0 and 1 are the CPUs).
    let props = n.root.join(format!("{TOPO}/5/properties"));
    wedge(&props);
    let (code, doc) = doctor(&n.root, &[]);
    assert_eq!(code, Some(1), "{doc}");
    let cause = &doc["likely_cause"];
    assert_eq!(cause["code"], "sysfs-read-timeout", "{doc}");
    assert!(
        text(&cause["message"]).contains("topology/nodes/5/properties"),
        "names the file: {cause}"
    );
    // The rest of the node is still reported.
    assert_eq!(doc["layers"]["pci"], "ok", "{doc}");

    for cmd in [&["inventory", "--json"][..], &["run"][..]] {
        let out = on_sysroot(cmd, &n.root)
            .timeout(HANG_GUARD)
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{cmd:?} did not finish: {out:?}"
        );
    }
}

#[test]
fn a_hang_becomes_a_timeout_and_blocks_that_gpu() {
    // The queue check gets 2 s instead of 30 (plus 1 s kill grace); every
    // other check keeps its own timeout.
    let (json, junit) = FakeRun::scenario("mi300x-8")
        .faults("hsa_queue_create@gpu5=hang")
        .timeout("hsa::queue", 2)
        .exits(1);
    // Far sooner than its own 30 s.
    result_timed_out(&json, "gpu5.hsa.queue", 2);
    for later in ["gpu5.hsa.dispatch", "gpu5.hsa.copy", "gpu5.hip.vector_add"] {
        let b = result_with_status(&json, later, "blocked");
        assert!(
            text(&b["message"]).contains("GPU unresponsive after gpu5.hsa.queue"),
            "{b}"
        );
    }
    assert_gpus_pass(&json, [0, 1, 2, 3, 4, 6, 7], RUNTIME_LAYERS);
    assert_has(&junit, r#"<testsuite name="mi300x-8.gpu5""#);
    assert!(junit.contains(r#"<property name="first_failing_layer" value="hsa"/>"#));
}

#[test]
fn a_gpu_that_hangs_after_init_keeps_its_own_timeout_and_is_not_blamed_for_init() {
    // gpu1 stalls hsa_init in every process that sees it; gpu6 initialises
    // (its agent check passes) and only its queue creation hangs. Only gpu1
    // stalled init, and gpu6's timeout stays its own.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults("hsa_init@gpu1=hang;hsa_queue_create@gpu6=hang")
        .timeout("hsa::init", 4)
        .timeout("hsa::agent", 8)
        .timeout("hsa::queue", 3)
        .exits(1);
    let init = result_with_finding(&json, "node.hsa.init", "gpu-wedged");
    let m = text(&init["finding"]["message"]);
    assert!(m.contains("gpu1 (0000:"), "{m}");
    assert!(
        !m.contains("gpu6"),
        "gpu6 initialised, so it did not stall init: {m}"
    );
    // The reset names gpu1 by its address: amd-smi's index need not be
    // rocgate's.
    assert_has(
        text(&init["finding"]["next_step"]),
        "`sudo amd-smi reset -G -g 0000:26:00.0`",
    );
    result_with_finding(&json, "gpu1.hsa.agent", "gpu-wedged");
    result_with_status(&json, "gpu6.hsa.agent", "pass");
    let q = result_with_finding(&json, "gpu6.hsa.queue", "check-timeout");
    let next = text(&q["finding"]["next_step"]);
    assert_lacks(next, "0000:26:00.0");
    assert!(
        !text(&q["finding"]["message"]).contains("hangs on its own"),
        "{q}"
    );
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

#[test]
fn an_allreduce_hang_times_out_and_the_run_finishes() {
    // Only the hung check's timeout is shortened (120 s to 4 s); every other
    // check keeps its own, so a loaded machine cannot time them out.
    let (json, junit) = FakeRun::scenario("mi300x-8")
        .faults("ncclAllReduce@gpu3=hang")
        .args(&["--tier", "standard"])
        .timeout("rccl::allreduce", 4)
        .exits(1);
    // Far sooner than the check's own 120 s.
    let r = result_timed_out(&json, "node.rccl.allreduce", 4);
    // Then the all-reduce ran on halves and pairs of the GPUs, each in its
    // own worker under the same 4 s: it completes wherever gpu3 is absent.
    assert_eq!(r["finding"]["code"], "rccl-hang-isolated", "{r}");
    let message = r["message"].as_str().unwrap();
    assert!(message.contains("gpu3 (0000:65:00.0)"), "{r}");
    let output = r["output"].as_str().unwrap();
    assert_has(output, "all-reduce on gpu4,gpu5,gpu6,gpu7: completed");
    assert_has(
        output,
        "all-reduce on gpu0,gpu1,gpu2,gpu3: did not complete",
    );
    // Then peer copies between gpu3 and a GPU that completed: they work, so
    // the fault is in the collective on gpu3, not the link.
    assert_has(
        output,
        "peer copies among gpu3,gpu4: pass: 2 GPU pairs copy intact",
    );
    result_with_status(&json, "gpu3.rocblas.sgemm", "pass");
    assert!(junit.contains(r#"type="rccl-hang-isolated""#));
    assert_eq!(json["first_failing_layer"], "rccl");
}

#[test]
fn a_wedged_gpu_hangs_its_own_worker_and_is_named() {
    // hsa_init hangs in every process that sees gpu3. Only the checks that
    // hang get short timeouts.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults("hsa_init@gpu3=hang")
        .timeout("hsa::init", 4)
        .timeout("hsa::agent", 8)
        .exits(1);
    let r = result_with_status(&json, "node.hsa.init", "timeout");
    assert_eq!(r["finding"]["code"], "gpu-wedged", "{r}");
    let m = r["finding"]["message"].as_str().unwrap();
    assert_has(
        m,
        "gpu3 (0000:65:00.0, AMD Instinct MI300X) hung while the other 7 GPUs passed",
    );
    result_with_status(&json, "gpu3.hsa.agent", "timeout");
    result_with_status(&json, "gpu3.hip.vector_add", "blocked");
    assert_gpus_pass(&json, [0, 1, 2, 4, 5, 6, 7], RUNTIME_LAYERS);
}

#[test]
fn a_wedged_sensor_fails_its_gpu_under_health_and_the_prolog() {
    let n = node("mi300x-8");
    let hwmon = n.root.join("sys/bus/pci/devices/0000:05:00.0/hwmon");
    let dir = std::fs::read_dir(&hwmon)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let sensor = std::fs::canonicalize(dir.join("temp2_input")).unwrap();
    util::wedge(&sensor);
    let h = health(&n.root, &[], &[], None);
    assert_eq!(h.code, 1, "{}", h.stdout);
    assert!(h.stdout.contains("0000:05:00.0"), "{}", h.stdout);
    let prolog_for_gpu0 =
        |root: &Path| health(root, &["--slurm-prolog"], &[("SLURM_JOB_GPUS", "0")], None);
    let h = prolog_for_gpu0(&n.root);
    assert_eq!(h.code, 1, "{}", h.stderr);
    // A partition short of its device fails the job's check too.
    let cpx = node("cpx-partition-missing");
    let h = prolog_for_gpu0(&cpx.root);
    assert_eq!(h.code, 1, "{}", h.stderr);
    assert!(
        prolog_line(&h).starts_with("rocgate: partition-count-mismatch"),
        "{}",
        h.stderr
    );
}

#[test]
fn when_every_gpu_hangs_health_says_so_rather_than_naming_one() {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let out = on_sysroot(&["health", "--budget", "20"], &n.root)
        .arg("--rocm-path")
        .arg(rocm.path())
        .env("ROCGATE_FAKE_NODE", &n.root)
        .env("ROCGATE_FAKE_FAULTS", "hsa_init@gpu*=hang")
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{line}");
    assert!(
        line.starts_with("rocgate: ") && line.contains(" all 8 GPUs: "),
        "{line}"
    );
}

#[test]
fn a_peer_copy_that_never_finishes_is_named_by_its_pair_before_the_check_times_out() {
    // gpu2's peer copies never return (a wedged link); the check has 40 s,
    // shared among its two pairs, so the hung one is named well before the
    // worker's watchdog would end the check without a word.
    for (faults, p2p, hung) in [
        ("hipMemcpyPeer@gpu2=hang", "xgmi=4000", "gpu2>gpu0"),
        // A link so slow its copies would take days.
        ("", "xgmi=4000;gpu0>gpu2=0.000001", "gpu0>gpu2"),
    ] {
        let (_, stdout, json, _) = extended("mi300x-8", "0,2", p2p)
            .faults(faults)
            .args(&["--timeout", "hip::p2p_bandwidth=40"])
            .run();
        let r = result_with_status(&json, "node.hip.p2p_bandwidth", "timeout");
        assert_eq!(r["finding"]["code"], "p2p-copy-failed", "{stdout}\n{r}");
        let message = r["message"].as_str().unwrap();
        assert_has(
            message,
            format!("the peer-to-peer copies {hung} (XGMI) did not finish within"),
        );
        assert_lacks(message, "worker killed");
        assert!(
            r["duration_ms"].as_f64().unwrap() < 40_000.0,
            "named before the check's own timeout: {r}"
        );
    }
}
