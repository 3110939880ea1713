//! `rocgate health` as schedulers run it, through the binary: a visibility
//! filter is the job's view and never a fault, Slurm's GPU numbers name the
//! GPUs Slurm means, a short budget is rocgate's limit and not the GPU's,
//! the drain fits in the budget and never passes a name scontrol would take
//! for an option, rocgate's own trouble never drains a node, and the one
//! line counts devices and fits 80 bytes.

use crate::util::{FakeScontrol, assert_has, health, node, prolog_line, repo, rocgate_bin};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

#[test]
fn a_visibility_filter_the_scheduler_set_is_the_jobs_view_not_a_fault() {
    let n = node("mi300x-8");
    // Slurm's prolog environment: the job's GPUs, and the filters slurmd
    // sets beside them.
    let filters = [
        ("ROCR_VISIBLE_DEVICES", "2,3"),
        ("HIP_VISIBLE_DEVICES", "0,1"),
        ("CUDA_VISIBLE_DEVICES", "0,1"),
        ("GPU_DEVICE_ORDINAL", "0,1"),
    ];
    let mut env = vec![("SLURM_JOB_GPUS", "2,3")];
    env.extend(filters);
    let h = health(&n.root, &["--slurm-prolog"], &env, Some(""));
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert!(
        prolog_line(&h).starts_with("rocgate: ok 2 GPUs"),
        "{}",
        h.stderr
    );
    // A filter that hides GPUs from a whole-node check hides nothing from
    // rocgate's workers: every GPU is checked, and passes.
    let h = health(
        &n.root,
        &[],
        &[("ROCR_VISIBLE_DEVICES", "5"), ("HIP_VISIBLE_DEVICES", "0")],
        Some(""),
    );
    assert_eq!(h.code, 0, "{} {}", h.stdout, h.stderr);
    assert!(h.stdout.starts_with("rocgate: ok 8 GPUs"), "{}", h.stdout);
}

#[test]
fn slurm_gpu_numbers_follow_the_pci_bus_and_a_gpu_slurm_gave_that_is_gone_fails() {
    // 0000:65:00.0's firmware did not load: KFD lacks it, so rocgate lists
    // it last (gpu7), but Slurm, numbering by bus id, calls it GPU 3.
    let n = node("firmware-load-failed");
    let h = health(
        &n.root,
        &["--slurm-prolog"],
        &[("SLURM_JOB_GPUS", "3")],
        None,
    );
    assert_eq!(h.code, 1, "{}", h.stderr);
    assert!(prolog_line(&h).contains("0000:65:00.0"), "{}", h.stderr);
    // Slurm's 7 is the last GPU on the bus, healthy.
    let h = health(
        &n.root,
        &["--slurm-epilog"],
        &[("SLURM_JOB_GPUS", "7")],
        None,
    );
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert!(
        prolog_line(&h).starts_with("rocgate: ok 1 GPU"),
        "{}",
        h.stderr
    );
    // A GPU Slurm gave the job that the node does not have: the job would
    // start without it, so the prolog fails, naming it.
    let lost = node("gpu-count-mismatch");
    let h = health(
        &lost.root,
        &["--slurm-prolog"],
        &[("SLURM_JOB_GPUS", "6,7")],
        None,
    );
    assert_eq!(h.code, 1, "{}", h.stderr);
    let line = prolog_line(&h);
    assert!(
        line.starts_with(
            "rocgate: gpu-count-mismatch SLURM_JOB_GPUS=6,7: GPU 7 is not on this node"
        ),
        "{line}"
    );
}

#[test]
fn the_prolog_wrapper_never_drains_for_rocgates_own_errors() {
    let n = node("kfd-missing");
    let wrapper = repo().join("deploy/slurm/rocgate-prolog");
    let run = |budget: &str, args: String| {
        let out = std::process::Command::new("sh")
            .arg(&wrapper)
            .env("ROCGATE", rocgate_bin())
            .env("ROCGATE_DEFAULTS", "/nonexistent/defaults")
            .env("ROCGATE_PROLOG_BUDGET", budget)
            .env("ROCGATE_ARGS", args)
            .env("ROCGATE_CONFIG", "")
            .env("SLURM_JOB_GPUS", "0")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let root = format!("--sysroot {}", n.root.display());
    // A fault of the node fails the prolog.
    let (code, stderr) = run("20", root.clone());
    assert_eq!(code, Some(1), "{stderr}");
    // A bad budget or argument is rocgate's (exit 2): logged, and the job runs.
    for (budget, args) in [("soon", root.clone()), ("20", format!("{root} --bogus"))] {
        let (code, stderr) = run(budget, args);
        assert_eq!(code, Some(0), "{stderr}");
        assert_has(&stderr, "rocgate-prolog: rocgate exited 2");
    }
}

#[test]
fn a_short_budget_is_rocgates_limit_and_never_drains() {
    let n = node("mi300x-8");
    let fake = FakeScontrol::showing("IDLE", None);
    let path = fake.path();
    let env = [("PATH", path.as_str()), ("SLURMD_NODENAME", "gpu17")];
    // The checks slowed, as on a loaded node: at 2 s of budget a check gets
    // a third of a second, too little to call a hang.
    let h = health(
        &n.root,
        &["--slurm", "--tier", "quick", "--budget", "2"],
        &env,
        Some("hipMemcpy@gpu*=slow:1500"),
    );
    assert_ne!(h.code, 1, "{} {}", h.stdout, h.stderr);
    assert!(!h.stdout.contains("check-timeout"), "{}", h.stdout);
    assert!(
        !fake.calls().iter().any(|c| c.starts_with("update")),
        "{:?}",
        fake.calls()
    );
}

#[test]
fn the_drain_fits_in_the_budget_and_a_hung_scontrol_dies_with_its_children() {
    let n = node("kfd-missing");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("scontrol");
    let pids = dir.path().join("pids");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! >> {}\nwait\n",
            pids.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let h = health(
        &n.root,
        &["--slurm", "--budget", "10"],
        &[("PATH", path.as_str()), ("SLURMD_NODENAME", "gpu17")],
        None,
    );
    let took = started.elapsed();
    assert_eq!(h.code, 1, "{}", h.stderr);
    // Two scontrol calls of 10 s each on top of the budget took 20 s or
    // more; inside it, the budget and a margin for a loaded machine.
    assert!(took < Duration::from_secs(19), "{took:?} {}", h.stderr);
    assert!(h.stderr.contains("did not answer"), "{}", h.stderr);
    for pid in std::fs::read_to_string(&pids).unwrap().lines() {
        let state = || {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let alive = status
                .lines()
                .find_map(|l| l.strip_prefix("State:"))
                .is_some_and(|s| !s.trim_start().starts_with('Z'));
            (alive, status)
        };
        // A SIGKILL takes effect when the process is next scheduled: on a
        // loaded machine that is a moment after the kill returns. A guard
        // against a child left running, not a speed test.
        let until = Instant::now() + Duration::from_secs(10);
        let mut seen = state();
        while seen.0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
            seen = state();
        }
        assert!(!seen.0, "scontrol's child {pid} lives on: {}", seen.1);
    }
}

#[test]
fn node_names_and_reasons_that_are_not_rocgates_are_left_alone() {
    let broken = node("kfd-missing");
    let ok = node("mi300x-8");
    // A name scontrol would take for an option or a hostlist is refused.
    for name in ["-h", "adv[1-1]", "a,b"] {
        let fake = FakeScontrol::showing("IDLE", None);
        let path = fake.path();
        let h = health(
            &broken.root,
            &["--slurm"],
            &[("PATH", path.as_str()), ("SLURMD_NODENAME", name)],
            None,
        );
        assert_eq!(h.code, 1, "{}", h.stderr);
        assert!(fake.calls().is_empty(), "{name}: {:?}", fake.calls());
        assert!(h.stderr.contains("not a Slurm node name"), "{}", h.stderr);
    }
    // An administrator's reason that starts with a space is theirs: not
    // resumed when healthy, not overwritten when broken.
    for root in [&ok.root, &broken.root] {
        let fake = FakeScontrol::showing("IDLE+DRAIN", Some(" rocgate: kfd-missing, ticket 4711"));
        let path = fake.path();
        let h = health(
            root,
            &["--slurm"],
            &[("PATH", path.as_str()), ("SLURMD_NODENAME", "gpu17")],
            None,
        );
        assert!(
            !fake.calls().iter().any(|c| c.starts_with("update")),
            "{:?} {}",
            fake.calls(),
            h.stderr
        );
        assert!(h.stderr.contains("not rocgate's"), "{}", h.stderr);
    }
}

#[test]
fn the_line_counts_devices_with_their_partitions_and_fits_eighty_bytes() {
    let n = node("mi300x-8-cpx");
    let h = health(&n.root, &["--expect-gpus", "8"], &[], None);
    assert_eq!(h.code, 0, "{} {}", h.stdout, h.stderr);
    assert!(
        h.stdout.starts_with("rocgate: ok 8 GPUs (64 partitions)"),
        "{}",
        h.stdout
    );
    // A line of multi-byte characters is cut by bytes, on a character.
    let dir = tempfile::tempdir().unwrap();
    let far = dir.path().join("é".repeat(60));
    let h = health(&far, &[], &[], None);
    assert_eq!(h.code, 2, "{}", h.stdout);
    let line = h.stdout.trim_end();
    assert!(
        line.len() <= 80 && line.ends_with("..."),
        "{} bytes: {line}",
        line.len()
    );
}

#[test]
fn an_unwritten_textfile_is_exit_2_and_an_empty_strict_is_unset() {
    let n = node("mi300x-8");
    let h = health(
        &n.root,
        &["--prom", "/nonexistent/dir/rocgate.prom"],
        &[],
        None,
    );
    assert_eq!(h.code, 2, "{} {}", h.stdout, h.stderr);
    assert!(h.stdout.starts_with("rocgate: ok"), "{}", h.stdout);
    assert!(h.stderr.contains("/nonexistent/dir"), "{}", h.stderr);
    // Exported empty by a shell file of settings: unset, not an error.
    let h = health(&n.root, &[], &[("ROCGATE_STRICT", "")], None);
    assert_eq!(h.code, 0, "{} {}", h.stdout, h.stderr);
    let h = health(&n.root, &[], &[("ROCGATE_STRICT", "maybe")], None);
    assert_eq!(h.code, 2, "{}", h.stderr);
}

#[test]
fn corrupted_peer_copies_name_the_gpu_they_share_and_drain() {
    let n = node("mi300x-8");
    let fake = FakeScontrol::showing("IDLE", None);
    let path = fake.path();
    // gpu2 (0000:46:00.0) corrupts every copy it sends.
    let h = health(
        &n.root,
        &["--slurm", "--tier", "extended", "--budget", "120"],
        &[("PATH", path.as_str()), ("SLURMD_NODENAME", "gpu17")],
        Some("hipMemcpyPeer@gpu2=wrong"),
    );
    assert_eq!(h.code, 1, "{} {}", h.stdout, h.stderr);
    assert!(
        h.stdout
            .starts_with("rocgate: p2p-copy-corrupt 0000:46:00.0"),
        "{}",
        h.stdout
    );
    assert!(
        fake.calls()
            .iter()
            .any(|c| c.starts_with("update") && c.contains("p2p-copy-corrupt 0000:46:00.0")),
        "{:?}",
        fake.calls()
    );
}

#[test]
fn a_leftover_process_on_the_jobs_gpu_fails_the_prolog_and_only_warns_a_health_check() {
    // A previous job's python3 holds 151 GiB and 4 queues on 0000:46:00.0,
    // Slurm's GPU 2.
    let n = node("gpu-in-use");
    let h = health(
        &n.root,
        &["--slurm-prolog"],
        &[("SLURM_JOB_GPUS", "2")],
        None,
    );
    assert_eq!(h.code, 1, "{}", h.stderr);
    let line = prolog_line(&h);
    assert!(
        line.starts_with("rocgate: gpu-held-at-job-start 0000:46:00.0 pid 48213 (python3)"),
        "{line}"
    );
    // A job given other GPUs gets them.
    let h = health(
        &n.root,
        &["--slurm-prolog"],
        &[("SLURM_JOB_GPUS", "0,1")],
        None,
    );
    assert_eq!(h.code, 0, "{}", h.stderr);
    // Outside a job it is worth a warning, not a drain.
    let h = health(&n.root, &[], &[], None);
    assert_eq!(h.code, 0, "{}", h.stderr);
    assert!(
        h.stdout.contains("warn gpu-in-use 0000:46:00.0"),
        "{}",
        h.stdout
    );
}
