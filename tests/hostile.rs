//! Hostile inputs through the real binary: files that do not answer or
//! cannot be read, signals and kills, bad flags and configuration files,
//! libraries the loader refuses. Each test is the regression test of one
//! way a run hung, lied or blamed the wrong thing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{
    HANG_GUARD, TOPO, assert_exit, doctor, fake_process, fake_rocm, node, on_sysroot, result, run,
    run_with, send_signal, text,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Replaces a file with a FIFO nobody writes to: a file that does not answer.
fn wedge(path: &Path) {
    std::fs::remove_file(path).unwrap();
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// The real file behind a sysroot path (PCI device entries are symlinks).
fn real(root: &Path, rel: &str) -> PathBuf {
    std::fs::canonicalize(root.join(rel)).unwrap()
}

/// Runs `rocgate ARGS --sysroot ROOT`; returns the exit code and stdout.
fn rocgate_on(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = on_sysroot(args, root).timeout(HANG_GUARD).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
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
    assert!(
        out.contains("capture record") && out.contains("rocgate-capture.toml"),
        "{out}"
    );
}

/// Runs `cmd` as the unprivileged user `nobody` when this test runs as
/// root (root reads any file), else as it is.
fn as_unprivileged(cmd: &mut Command) -> Command {
    if nix_is_root() {
        let mut wrapped = Command::new("setpriv");
        wrapped.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        wrapped.arg(cmd.get_program());
        wrapped.args(cmd.get_args());
        wrapped
    } else {
        let mut same = Command::new(cmd.get_program());
        same.args(cmd.get_args());
        same
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        .unwrap()
}

/// Makes every directory from `dir` up to the temporary root traversable
/// by another user (the node's own files keep their modes).
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for d in dir
        .ancestors()
        .take_while(|d| d.starts_with(std::env::temp_dir()) && *d != std::env::temp_dir())
    {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn binary_for_others() -> (tempfile::TempDir, PathBuf) {
    // The build tree may not be readable by another user: copy the binary.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("rocgate");
    std::fs::copy(env!("CARGO_BIN_EXE_rocgate"), &bin).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, bin)
}

#[test]
fn unreadable_input_names_the_file_and_the_error() {
    use std::os::unix::fs::PermissionsExt;
    let (_bin_dir, bin) = binary_for_others();
    let doctor_as_other = |root: &Path| {
        let mut cmd = Command::new(&bin);
        cmd.args(["doctor", "--json", "--sysroot"]).arg(root);
        let out = as_unprivileged(&mut cmd).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // EACCES on a PCI vendor file: the GPU cannot be identified, it is not
    // "missing from the bus"; rocgate could not see the node, so there is
    // no verdict on it (exit 2), never a fault of the node.
    let n = node("mi300x-8");
    open_up(&n.root);
    let vendor = real(&n.root, "sys/bus/pci/devices/0000:05:00.0/vendor");
    std::fs::set_permissions(&vendor, std::fs::Permissions::from_mode(0o000)).unwrap();
    let (code, stdout, stderr) = doctor_as_other(&n.root);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["likely_cause"]["code"], "pci-sysfs-unreadable", "{doc}");
    let message = doc["likely_cause"]["message"].as_str().unwrap();
    assert!(
        message.contains("0000:05:00.0/vendor") && message.contains("permission denied"),
        "{message}"
    );

    // A sysroot another user cannot read is refused saying so, not
    // diagnosed as a node without a capture record.
    let n = node("mi300x-8");
    open_up(n.root.parent().unwrap());
    std::fs::set_permissions(&n.root, std::fs::Permissions::from_mode(0o700)).unwrap();
    if nix_is_root() {
        let (code, stdout, stderr) = doctor_as_other(&n.root);
        assert_eq!(code, Some(2), "{stdout}{stderr}");
        assert!(stderr.contains("ermission denied"), "{stderr}");
    } else {
        std::fs::set_permissions(&n.root, std::fs::Permissions::from_mode(0o000)).unwrap();
        let (code, out) = rocgate_on(&n.root, &["doctor"]);
        std::fs::set_permissions(&n.root, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains("ermission denied"), "{out}");
    }

    // A sysroot that is a symlink loop says so.
    let dir = tempfile::tempdir().unwrap();
    let looped = dir.path().join("node");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let (code, out) = rocgate_on(&looped, &["doctor"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("symbolic links"), "{out}");

    // A KFD properties file of NUL bytes is a damaged topology naming it,
    // not a GPU missing from KFD.
    let n = node("mi300x-8");
    std::fs::write(n.root.join(format!("{TOPO}/3/properties")), [0u8; 4096]).unwrap();
    let (_, doc) = doctor(&n.root, &[]);
    assert_eq!(
        doc["likely_cause"]["code"], "kfd-topology-unreadable",
        "{doc}"
    );
    assert!(
        text(&doc["likely_cause"]["message"]).contains("nodes/3/properties"),
        "{doc}"
    );
}

/// Starts `rocgate ARGS` on the fake 8x MI300X with `faults`, stdout to a
/// file; returns the child.
fn spawn_fake(
    root: &Path,
    rocm: &Path,
    faults: &str,
    args: &[&str],
    out: &Path,
) -> std::process::Child {
    fake_process(args, root, root, rocm, faults)
        .stdout(std::fs::File::create(out).unwrap())
        .spawn()
        .unwrap()
}

/// rocgate started with `args` on a fake 8x MI300X where every GPU's queue
/// creation hangs, its stdout going to the node's `out_ext` file. A caller
/// binds `_files` to keep the node and libraries while the child runs.
struct HungRun {
    /// The node and the fake ROCm, kept while the child uses them.
    _files: (common::Node, tempfile::TempDir),
    out: PathBuf,
    child: std::process::Child,
}

fn start_hung(args: &[&str], out_ext: &str) -> HungRun {
    let node = node("mi300x-8");
    let rocm = fake_rocm();
    let out = node.root.with_extension(out_ext);
    let child = spawn_fake(
        &node.root,
        rocm.path(),
        "hsa_queue_create@gpu*=hang",
        args,
        &out,
    );
    HungRun {
        _files: (node, rocm),
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

#[test]
fn an_interrupted_doctor_is_never_healthy() {
    let HungRun {
        _files,
        out,
        mut child,
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

#[test]
fn workers_die_with_a_killed_run() {
    let HungRun {
        _files, mut child, ..
    } = start_hung(&["run"], "out");
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
}

#[test]
fn bad_flags_are_usage_errors_not_panics_or_passes() {
    let n = node("mi300x-8");
    for scale in ["1e17", "1e308", "nan", "inf", "0", "-1", "0.001", "1001"] {
        let flag = format!("--timeout-scale={scale}");
        let (code, out) = rocgate_on(&n.root, &["run", &flag]);
        assert_eq!(code, Some(2), "--timeout-scale {scale}: {out}");
        assert!(out.contains("--timeout-scale"), "{out}");
        assert!(!out.contains("panicked"), "{out}");
    }
    let (code, out) = rocgate_on(&n.root, &["run", "--timeout-scale", "1000", "--quiet"]);
    assert_eq!(code, Some(0), "the largest scale runs: {out}");
    for gpus in ["", ",", " , "] {
        let (code, out) = rocgate_on(&n.root, &["run", "--gpus", gpus]);
        assert_eq!(code, Some(2), "--gpus {gpus:?}: {out}");
        assert!(out.contains("selects no GPU"), "{out}");
    }
}

/// The time budget a run announces, in seconds.
fn announced_budget(text: &str) -> f64 {
    text.split("time budget ")
        .nth(1)
        .and_then(|t| t.split(" s").next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no budget in {text}"))
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
    assert!(text.contains("8 timed out"), "{text}");
    // Ten more seconds for the queue check of each GPU: the GPUs run side
    // by side, so the budget grows by ten seconds, not eighty.
    let longer = announced_budget(&run_to_end("", 11, "healthy.out"));
    assert!(
        (9.0..=11.0).contains(&(longer - budget)),
        "budget {budget} s with the queue check at 1 s, {longer} s at 11 s"
    );
}

fn thresholds_with(replace: (&str, &str)) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/thresholds.toml"),
    )
    .unwrap();
    assert!(text.contains(replace.0));
    text.replacen(replace.0, replace.1, 1)
}

#[test]
fn configuration_files_are_validated_naming_the_line() {
    let n = node("mi300x-8");
    for (from, to, says) in [
        ("fp64 = 1e-12", "fp64 = nan", "tolerance"),
        ("fp32 = 1e-5", "fp32 = -1", "tolerance"),
        ("margin = 0.05", "margin = 7", "margin"),
    ] {
        let t = n.root.with_extension("t.toml");
        std::fs::write(&t, thresholds_with((from, to))).unwrap();
        let (code, out) = rocgate_on(&n.root, &["run", "--thresholds", t.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{to}: {out}");
        assert!(
            out.contains("t.toml") && out.contains("line ") && out.contains(says),
            "{out}"
        );
    }

    let matrix =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/compat.toml"))
            .unwrap();
    let first = matrix.find("[[release]]").unwrap();
    let end = matrix[first + 1..]
        .find("[[")
        .map_or(matrix.len(), |e| first + 1 + e);
    let twice = format!("{}{}", matrix, &matrix[first..end]);
    let m = n.root.with_extension("m.toml");
    std::fs::write(&m, twice).unwrap();
    let (code, out) = rocgate_on(
        &n.root,
        &["matrix", "check", "--matrix", m.to_str().unwrap()],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("listed twice") && out.contains("line "),
        "{out}"
    );
    std::fs::write(&m, matrix.replacen("rocm = \"", "rocm = \"\" # ", 1)).unwrap();
    let (code, out) = rocgate_on(
        &n.root,
        &["matrix", "check", "--matrix", m.to_str().unwrap()],
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("not a version"), "{out}");
}

#[test]
fn matrix_check_names_what_it_could_not_check() {
    let n = node("mi300x-8");
    std::fs::remove_file(n.root.join("etc/os-release")).unwrap();
    let (code, out) = rocgate_on(&n.root, &["matrix", "check", "--json"]);
    assert_eq!(code, Some(0), "{out}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["supported"], Value::Null, "{doc}");
    assert_eq!(
        doc["not_checked"],
        serde_json::json!(["os", "kernel"]),
        "{doc}"
    );
    let (_, text) = rocgate_on(&n.root, &["matrix", "check"]);
    assert!(text.contains("not everything could be checked"), "{text}");
    assert!(!text.contains("\nsupported"), "{text}");
}

#[test]
fn workers_get_the_configuration_the_run_read_from_a_pipe() {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let json = n.root.with_extension("results.json");
    let script = format!(
        "exec \"$0\" run --sysroot {} --rocm-path {} --json {} --thresholds <(cat {}) --matrix <(cat {})",
        n.root.display(),
        rocm.path().display(),
        json.display(),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites/thresholds.toml")
            .display(),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites/compat.toml")
            .display(),
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_rocgate"))
        .env("ROCGATE_FAKE_NODE", &n.root)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(result(&doc, "node.hsa.runtime")["status"], "pass");
    assert_eq!(result(&doc, "gpu3.hip.vector_add")["status"], "pass");
}

#[test]
fn a_library_the_loader_refuses_is_named_with_the_loaders_words() {
    let n = node("mi300x-8");
    // A HIP runtime that needs a library nobody installed.
    let build = tempfile::tempdir().unwrap();
    std::fs::write(
        build.path().join("dep.c"),
        "int dep_fn(void) { return 1; }\n",
    )
    .unwrap();
    std::fs::write(
        build.path().join("hip.c"),
        "int dep_fn(void);\nint hipInit(unsigned f) { return dep_fn() + (int)f; }\n",
    )
    .unwrap();
    let cc = |args: &[&str]| {
        let ok = Command::new("cc")
            .current_dir(build.path())
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cc {args:?}");
    };
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        "librocgate-absent-dep.so",
        "dep.c",
    ]);
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        "libhip-stub.so",
        "hip.c",
        "-L.",
        "-lrocgate-absent-dep",
    ]);
    let rocm = fake_rocm();
    for soname in ["libamdhip64.so", "libamdhip64.so.6"] {
        let target = rocm.path().join("lib").join(soname);
        std::fs::remove_file(&target).unwrap();
        std::fs::copy(build.path().join("libhip-stub.so"), &target).unwrap();
    }
    let (_, _, json, _) = run_with(
        &n.root,
        &["--rocm-path", rocm.path().to_str().unwrap()],
        &[("ROCGATE_FAKE_NODE", n.root.to_str().unwrap())],
    );
    let r = result(&json, "node.hip.runtime");
    assert_eq!(r["finding"]["code"], "hip-library-missing", "{r}");
    let message = r["finding"]["message"].as_str().unwrap();
    assert!(
        message.contains("librocgate-absent-dep.so: cannot open shared object file"),
        "the loader's words: {message}"
    );
    let next = r["finding"]["next_step"].as_str().unwrap();
    assert!(
        next.contains("needs librocgate-absent-dep.so")
            && !next.contains("install the ROCm runtime"),
        "{next}"
    );
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

// Issue 20, item 3: a FIFO, a device or a socket in a capture did not
// answer; it is never opened, whatever link leads to it.
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

fn mknod_ptmx(path: &Path) {
    nix::sys::stat::mknod(
        path,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(5, 2),
    )
    .unwrap();
}

// Issue 20, item 3: every command ends on SIGTERM and SIGINT with 130 and
// removes what it unpacked, even one blocked in a system call: here a
// snapshot written to a pipe that nobody reads.
#[test]
fn a_command_blocked_in_a_write_ends_on_a_signal_with_130_and_cleans_up() {
    let n = node("mi300x-8");
    let archive = n.root.with_extension("tar.zst");
    let made = common::rocgate()
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
