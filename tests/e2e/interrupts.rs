//! Signals through the binary: SIGINT, SIGTERM and SIGKILL during a run,
//! a doctor, a prolog, a snapshot, a narrowing search or a blocked write.
//! rocgate stops with its documented code, never calls an interrupted run
//! healthy, writes the reports it can, ends its workers and leaves no
//! partial file or unpacked directory behind.

use crate::util;
use crate::util::{
    FakeScontrol, HANG_GUARD, Tmp, assert_exit, assert_has, assert_lacks, catches_sigint,
    fake_process, fake_rocm, names_in, node, result, result_with_status, rocgate_in, send_signal,
    snapshotted, text,
};
use serde_json::Value;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

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

/// rocgate started with `args` on a fake 8x MI300X where every GPU's queue
/// creation hangs, its stdout going to the node's `out_ext` file and its
/// TMPDIR its own. A caller binds `_files` to keep the node and libraries
/// while the child runs.
struct HungRun {
    /// The node and the fake ROCm, kept while the child uses them.
    _files: (util::Node, tempfile::TempDir),
    /// The child's TMPDIR.
    tmp: Tmp,
    out: PathBuf,
    child: std::process::Child,
}

fn start_hung(args: &[&str], out_ext: &str) -> HungRun {
    let node = node("mi300x-8");
    let rocm = fake_rocm();
    let tmp = Tmp::new();
    let out = node.root.with_extension(out_ext);
    let child = fake_process(
        args,
        &node.root,
        &node.root,
        rocm.path(),
        "hsa_queue_create@gpu*=hang",
    )
    .env("TMPDIR", tmp.path())
    .stdout(std::fs::File::create(&out).unwrap())
    .spawn()
    .unwrap();
    HungRun {
        _files: (node, rocm),
        tmp,
        out,
        child,
    }
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                // The parent is the 2nd field after the command in parentheses.
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// Waits until `f` holds, up to `limit`.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    f()
}

/// Whether process `pid` has a handler for signal `sig` (its bit in SigCgt).
fn catches(pid: u32, sig: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

/// The `rocgate-snapshot-*` directories in `dir`.
fn unpacked_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rocgate-snapshot-"))
        .collect()
}

/// What [`signalled_once_unpacked`] left.
struct Signalled {
    /// The node the archive is a snapshot of: the archive lies in its
    /// directory, removed when it is dropped.
    _node: util::Node,
    /// The snapshot the run unpacked.
    archive: PathBuf,
    /// The run's TMPDIR, where it unpacked the archive.
    tmp: Tmp,
    /// How the run ended.
    status: std::process::ExitStatus,
    /// The run's pid.
    pid: u32,
}

/// `rocgate run` of a snapshot of an MI300X node with its own TMPDIR, sent
/// `signal` (`-INT`, `-KILL`) once it has unpacked the archive and catches
/// SIGINT, and waited for. Every GPU's queue creation hangs in the vendor
/// library, so the run is still going when the signal comes.
fn signalled_once_unpacked(signal: &str) -> Signalled {
    let (node, archive) = snapshotted("mi300x-8");
    let tmp = Tmp::new();
    let rocm = util::fake_rocm();
    let mut child = fake_process(
        &["run"],
        &archive,
        &node.root,
        rocm.path(),
        "hsa_queue_create@gpu*=hang",
    )
    .env("TMPDIR", tmp.path())
    .spawn()
    .unwrap();
    // Waits on events, not on time (the guard only turns a hang into a
    // failure).
    let start = std::time::Instant::now();
    while !catches_sigint(child.id()) || tmp.unpacked_left().is_empty() {
        assert!(start.elapsed() < HANG_GUARD, "rocgate never unpacked");
        assert!(child.try_wait().unwrap().is_none(), "rocgate ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    assert!(send_signal(pid, signal));
    let status = child.wait().unwrap();
    Signalled {
        _node: node,
        archive,
        tmp,
        status,
        pid,
    }
}

#[test]
fn the_unpacked_directory_is_removed_on_sigint() {
    let Signalled { tmp, status, .. } = signalled_once_unpacked("-INT");
    assert_eq!(status.code(), Some(130));
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
}

#[test]
fn an_interrupted_snapshot_leaves_no_partial_archive() {
    let n = node("mi300x-8-cpx");
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("node.tar.zst");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("rocgate"))
        .args(["snapshot", "--sysroot"])
        .arg(&n.root)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let start = std::time::Instant::now();
    while !catches_sigint(pid) && child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < HANG_GUARD);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The snapshot may have ended already: whether the signal found it is
    // no matter.
    let _ = send_signal(pid, "-INT");
    let status = child.wait().unwrap();
    // Wherever the signal landed: the archive is whole or absent, and no
    // temporary file is left.
    let names = names_in(work.path());
    assert!(names.iter().all(|n| n == "node.tar.zst"), "{names:?}");
    if out.exists() {
        let tmp = Tmp::new();
        let (code, _, err) = rocgate_in(&tmp, &["doctor"], &out);
        assert_eq!(code, Some(0), "{err}");
    } else {
        assert_eq!(status.code(), Some(130));
    }
}

// What a process killed outright (SIGKILL) left is found by its name and
// removed by the next unpack.
#[test]
fn an_unpacked_directory_left_by_sigkill_is_removed_by_the_next_command() {
    // `_node` is bound, not left to `..`, so the archive in its directory
    // outlives this statement.
    let Signalled {
        _node,
        archive,
        tmp,
        pid,
        ..
    } = signalled_once_unpacked("-KILL");
    let left = tmp.unpacked_left();
    assert_eq!(left.len(), 1, "{left:?}");
    // Named after the process that made it.
    assert!(
        left[0].starts_with(&format!("rocgate-snapshot-{pid}-")),
        "{left:?}"
    );
    // Its maker locks it right after making it: one a second old and
    // unlocked is taken for stale.
    std::thread::sleep(Duration::from_millis(1500));
    let (code, _, err) = rocgate_in(&tmp, &["list"], &archive);
    assert_eq!(code, Some(0), "{err}");
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
}

#[test]
fn an_interrupted_prolog_exits_with_a_documented_code() {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    for (flag, want) in [("--slurm-prolog", 0), ("--slurm", 2)] {
        let mut cmd = util::fake_process(
            &["health", flag, "--tier", "quick", "--budget", "120"],
            &n.root,
            &n.root,
            rocm.path(),
            "hsa_init@gpu*=hang",
        );
        cmd.env("SLURM_JOB_GPUS", "0,1")
            .env("SLURMD_NODENAME", "gpu17")
            .env("PATH", FakeScontrol::showing("IDLE", None).path());
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_secs(3));
        assert!(util::send_signal(child.id(), "-TERM"));
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(want), "{flag}");
    }
}

#[test]
fn an_interrupted_doctor_is_never_healthy() {
    let HungRun {
        _files,
        out,
        mut child,
        ..
    } = start_hung(&["doctor", "--json"], "doctor.json");
    // Interrupt once the hanging checks have started (their workers exist).
    assert!(eventually(HANG_GUARD, || children_of(child.id()).len() >= 8));
    assert!(send_signal(child.id(), "-INT"));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["healthy"], false, "{doc}");
    assert_eq!(doc["interrupted"], "SIGINT", "{doc}");
    assert_eq!(doc["layers"]["hsa"], "interrupted", "{doc}");
}

/// A run killed outright (a Slurm job past its KillWait, the OOM killer)
/// takes its workers with it and leaves nothing in TMPDIR, the workers'
/// configuration (sent when a thresholds file is given) included.
#[test]
fn workers_die_with_a_killed_run() {
    let thresholds = tempfile::tempdir().unwrap();
    let path = thresholds.path().join("thresholds.toml");
    std::fs::write(&path, include_str!("../../suites/thresholds.toml")).unwrap();
    let HungRun {
        _files,
        tmp,
        mut child,
        ..
    } = start_hung(&["run", "--thresholds", path.to_str().unwrap()], "out");
    assert!(eventually(HANG_GUARD, || children_of(child.id()).len() >= 8));
    let workers = children_of(child.id());
    assert!(send_signal(child.id(), "-KILL"));
    child.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(30), || workers
            .iter()
            .all(|&w| !alive(w))),
        "workers left behind: {:?}",
        workers.iter().filter(|&&w| alive(w)).collect::<Vec<_>>()
    );
    assert!(tmp.left().is_empty(), "left in TMPDIR: {:?}", tmp.left());
}

// Every command ends on SIGTERM and SIGINT with 130 and removes what it
// unpacked, even one blocked in a system call: here a snapshot written to a
// pipe that nobody reads.
#[test]
fn a_command_blocked_in_a_write_ends_on_a_signal_with_130_and_cleans_up() {
    let n = node("mi300x-8");
    let archive = n.root.with_extension("tar.zst");
    let made = util::rocgate()
        .args(["snapshot", "--sysroot"])
        .arg(&n.root)
        .arg("--out")
        .arg(&archive)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert_exit(&made, 0);
    for sig in ["-TERM", "-INT"] {
        let tmp = tempfile::tempdir().unwrap();
        let (reader, writer) = nix::unistd::pipe().unwrap();
        // One page: the archive does not fit, so the write blocks.
        nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rocgate"))
            .env("ROCGATE_CONFIG", "")
            .env("TMPDIR", tmp.path())
            .args(["snapshot", "--out", "/dev/stdout", "--sysroot"])
            .arg(&archive)
            .stdout(std::process::Stdio::from(writer))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Blocked writing to the full pipe (the kernel says where the main
        // thread waits), with the archive unpacked and the handler set.
        let blocked = || {
            std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                .is_ok_and(|w| w.contains("pipe_write"))
        };
        assert!(
            eventually(HANG_GUARD, || blocked() && catches(pid, 15)),
            "{sig}: never blocked"
        );
        assert_eq!(unpacked_in(tmp.path()).len(), 1, "{sig}");
        assert!(send_signal(pid, sig));
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{sig}: {status:?}");
        assert!(
            unpacked_in(tmp.path()).is_empty(),
            "{sig}: {:?}",
            unpacked_in(tmp.path())
        );
        drop(reader);
    }
}

#[test]
fn sigint_stops_the_run_and_still_writes_the_reports() {
    let n = node("mi300x-8");
    // Every GPU's queue creation hangs in the vendor library.
    let rocm = util::fake_rocm();
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
fn sigint_during_narrowing_is_an_interruption_and_the_cut_try_is_no_evidence() {
    let n = node("mi300x-8");
    let rocm = util::fake_rocm();
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
            start.elapsed() < util::HANG_GUARD,
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
    assert_has(output, "search stopped: interrupted by SIGINT");
    // The try the signal cut short is not reported as a try that failed.
    assert_lacks(output, "did not complete");
    assert_lacks(output, ": failed");
    assert_ne!(r["finding"]["code"], "rccl-hang-isolated", "{r}");
}
