//! Helpers shared by the end-to-end tests: synthetic nodes on disk and the
//! real `rocgate` binary.

#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A scenario written to a temporary directory.
pub struct Node {
    _dir: tempfile::TempDir,
    /// The sysroot.
    pub root: PathBuf,
    /// The scenario.
    pub scenario: rocgate_fixtures::Scenario,
}

/// Writes scenario `name`.
pub fn node(name: &str) -> Node {
    let scenario = rocgate_fixtures::scenario(name).unwrap_or_else(|| panic!("no scenario {name}"));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(name);
    scenario.spec.write(&root).unwrap();
    Node {
        _dir: dir,
        root,
        scenario,
    }
}

/// A bound only a hang exceeds: every command a test runs is killed after
/// it, so a hang fails the test instead of stalling CI. A guard, not a speed
/// test.
pub const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(300);

/// The rocgate binary.
pub fn rocgate() -> Command {
    let mut c = Command::cargo_bin("rocgate").unwrap();
    c.env("NO_COLOR", "1");
    // Tests run inside GitHub Actions too; only the GitHub tests ask for it.
    c.env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY");
    // No site policy (a machine's /etc/rocgate/rocgate.toml) and no node
    // name unless a test gives them.
    c.env("ROCGATE_CONFIG", "").env_remove("ROCGATE_NODE_NAME");
    // Nor the machine's own history (/var/lib/rocgate): a test that keeps
    // one names its directory.
    c.env("ROCGATE_HISTORY_DIR", "off");
    c
}

/// `rocgate ARGS --sysroot ROOT`, for the caller to add to and run.
pub fn on_sysroot(args: &[&str], root: &Path) -> Command {
    let mut c = rocgate();
    c.args(args).arg("--sysroot").arg(root);
    c
}

/// The fake ROCm libraries (built by `cargo test` as dev-dependencies) laid
/// out under their sonames in a temporary `DIR/lib`.
pub fn fake_rocm() -> tempfile::TempDir {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rocgate"));
    let dir = tempfile::tempdir().unwrap();
    rocgate_fixtures::fake_rocm::lay_out(bin.parent().unwrap(), dir.path()).unwrap();
    dir
}

/// What a `rocgate run` left: its exit code, stdout, JSON results and JUnit
/// text.
pub type RunOutput = (i32, String, Value, String);

/// A `rocgate run` with the fake ROCm libraries simulating a node, put
/// together from only what a test changes: the faults, arguments and
/// environment it leaves unset stay as a plain fake run has them, so a test
/// reads as what it injects rather than as placeholders for what it does not.
pub struct FakeRun<'a> {
    root: PathBuf,
    // A scenario written for this run alone, kept on disk while it runs.
    written: Option<Node>,
    faults: &'a str,
    args: Vec<String>,
    env: Vec<(&'a str, &'a str)>,
    // Libraries of the fake ROCm replaced by a file that is not a library.
    damaged: Vec<&'a str>,
}

impl<'a> FakeRun<'a> {
    /// A run on scenario `name`, written for it alone (removed when the run
    /// is dropped): for tests that need nothing of the node but its results.
    pub fn scenario(name: &str) -> Self {
        let node = node(name);
        let mut run = Self::on(&node.root);
        run.written = Some(node);
        run
    }

    /// A run on a node the test wrote itself (to change it, or to run on it
    /// more than once).
    pub fn on(root: &Path) -> Self {
        FakeRun {
            root: root.to_path_buf(),
            written: None,
            faults: "",
            args: Vec::new(),
            env: Vec::new(),
            damaged: Vec::new(),
        }
    }

    /// Injects `faults` (`symbol@gpuN=kind`, `;`-separated) into the fakes.
    pub fn faults(mut self, faults: &'a str) -> Self {
        self.faults = faults;
        self
    }

    /// Adds `args` to the command line.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Cuts `check`'s timeout (`hsa::queue`) to `secs` seconds, for a check a
    /// fault hangs; every other check keeps its own, so a loaded machine
    /// cannot time them out.
    pub fn timeout(self, check: &str, secs: u32) -> Self {
        self.args(&["--timeout", &format!("{check}={secs}")])
    }

    /// Sets an environment variable for the run (after the fakes' own, so
    /// it can override `ROCGATE_FAKE_NODE`).
    pub fn env(mut self, key: &'a str, value: &'a str) -> Self {
        self.env.push((key, value));
        self
    }

    /// Replaces the fake ROCm's library `soname` with a file that is not a
    /// library (removing it would let the system loader find a host's own).
    pub fn damage(mut self, soname: &'a str) -> Self {
        self.damaged.push(soname);
        self
    }

    /// Runs it, whatever its exit code: `rocgate run` with JUnit and JSON
    /// written next to the node.
    pub fn run(&self) -> RunOutput {
        let (finished, json, junit) = self.run_finished();
        (finished.code, finished.stdout, json, junit)
    }

    /// Runs it as [`FakeRun::run`] does; what it printed on both streams,
    /// its JSON results and JUnit text.
    pub fn run_finished(&self) -> (Finished, Value, String) {
        let rocm = fake_rocm();
        for soname in &self.damaged {
            let lib = rocm.path().join("lib").join(soname);
            std::fs::remove_file(&lib).unwrap();
            std::fs::write(&lib, "not a library").unwrap();
        }
        let mut args = vec!["--rocm-path", rocm.path().to_str().unwrap()];
        args.extend(self.args.iter().map(String::as_str));
        let mut vars = vec![
            ("ROCGATE_FAKE_NODE", self.root.to_str().unwrap()),
            ("ROCGATE_FAKE_FAULTS", self.faults),
        ];
        vars.extend(self.env.iter().copied());
        run_finished(&self.root, &args, &vars)
    }

    /// Runs it and asserts it exited with `code`, showing what it printed
    /// when it did not; its JSON results and JUnit text.
    #[track_caller]
    pub fn exits(&self, code: i32) -> (Value, String) {
        let (got, stdout, json, junit) = self.run();
        assert_eq!(got, code, "{stdout}");
        (json, junit)
    }
}

/// `rocgate ARGS --sysroot SYSROOT --rocm-path ROCM` as a process for the
/// caller to start in the background (to signal it while it runs), with the
/// fake ROCm libraries simulating the node at `node` and `faults` injected;
/// its stderr is discarded, its stdout too unless the caller says otherwise.
pub fn fake_process(
    args: &[&str],
    sysroot: &Path,
    node: &Path,
    rocm: &Path,
    faults: &str,
) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rocgate"));
    c.env("ROCGATE_CONFIG", "").env_remove("ROCGATE_NODE_NAME");
    c.args(args)
        .arg("--sysroot")
        .arg(sysroot)
        .arg("--rocm-path")
        .arg(rocm)
        .env("ROCGATE_FAKE_NODE", node)
        .env("ROCGATE_FAKE_FAULTS", faults)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

/// Sends `signal` (`-INT`, `-KILL`) to process `pid` with kill(1); whether
/// it was sent.
pub fn send_signal(pid: u32, signal: &str) -> bool {
    std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `rocgate run` on `root` with JUnit and JSON written next to it.
pub fn run(root: &Path, extra: &[&str]) -> RunOutput {
    run_with(root, extra, &[])
}

/// [`run`] with extra environment variables.
pub fn run_with(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> RunOutput {
    let (finished, json, junit) = run_finished(root, extra, env);
    (finished.code, finished.stdout, json, junit)
}

/// [`run_with`], keeping stderr too: what the run printed, its JSON
/// results and its JUnit text.
pub fn run_finished(
    root: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Finished, Value, String) {
    let junit = root.with_extension("junit.xml");
    let json = root.with_extension("results.json");
    let finished = finish(
        rocgate()
            .arg("run")
            .arg("--sysroot")
            .arg(root)
            .arg("--junit")
            .arg(&junit)
            .arg("--json")
            .arg(&json)
            .args(extra)
            .envs(env.iter().copied()),
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let junit = std::fs::read_to_string(&junit).unwrap();
    (finished, json, junit)
}

/// What a finished rocgate left: its exit code (-1 when a signal ended
/// it), stdout and stderr.
pub struct Finished {
    /// The exit code, -1 when a signal ended it.
    pub code: i32,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `cmd` (a [`rocgate`] command) to its end, killed after
/// [`HANG_GUARD`]: the one way the tests collect what a command left.
pub fn finish(cmd: &mut Command) -> Finished {
    let out = cmd.timeout(HANG_GUARD).output().unwrap();
    Finished {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `rocgate health EXTRA --sysroot ROOT` with `env`; with the fake ROCm
/// simulating the node when `fakes` is given (`faults` injected).
pub fn health(root: &Path, extra: &[&str], env: &[(&str, &str)], fakes: Option<&str>) -> Finished {
    // Laid out only for a run that uses it, and kept until the run ends.
    let rocm = fakes.map(|_| fake_rocm());
    let mut cmd = on_sysroot(&["health"], root);
    cmd.args(extra);
    if let (Some(faults), Some(rocm)) = (fakes, &rocm) {
        cmd.arg("--rocm-path")
            .arg(rocm.path())
            .env("ROCGATE_FAKE_NODE", root)
            .env("ROCGATE_FAKE_FAULTS", faults);
    }
    cmd.envs(env.iter().copied());
    finish(&mut cmd)
}

/// Asserts that a finished rocgate exited with `code`, showing what it
/// printed when it did not.
#[track_caller]
pub fn assert_exit(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `rocgate doctor --json` on `root` with `extra` arguments; returns
/// its exit code and diagnosis.
pub fn doctor(root: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let out = rocgate()
        .args(["doctor", "--json", "--sysroot"])
        .arg(root)
        .args(extra)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: doctor printed no JSON ({e}): {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), doc)
}

/// The finding codes of a diagnosis, in its order.
pub fn finding_codes(doc: &Value) -> Vec<&str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

/// The result with test id `id` from a JSON results document.
pub fn result<'a>(json: &'a Value, id: &str) -> &'a Value {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result {id}"))
}

/// The result with test id `id`, asserted to have ended with `status`.
#[track_caller]
pub fn result_with_status<'a>(json: &'a Value, id: &str, status: &str) -> &'a Value {
    result_holding(json, id, &["status"], status)
}

/// The result with test id `id`, asserted to carry finding `code`.
#[track_caller]
pub fn result_with_finding<'a>(json: &'a Value, id: &str, code: &str) -> &'a Value {
    result_holding(json, id, &["finding", "code"], code)
}

/// The result with test id `id`, asserted to hold `want` at the key path
/// `field`; a mismatch shows the whole result, which says why.
#[track_caller]
fn result_holding<'a>(json: &'a Value, id: &str, field: &[&str], want: &str) -> &'a Value {
    let r = result(json, id);
    let got = field.iter().fold(r, |v, key| &v[*key]);
    assert_eq!(got, want, "{id} {}: {r}", field.join("."));
    r
}

/// A JSON string (a message, a fact, a next step); a value of another kind
/// fails the test naming it.
#[track_caller]
pub fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

/// The member of the JSON array `list` whose `key` is `value` (a scope of a
/// results document, a component of a matrix check, a metric of a result).
#[track_caller]
pub fn entry<'a>(list: &'a Value, key: &str, value: &str) -> &'a Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .find(|e| e[key] == value)
        .unwrap_or_else(|| panic!("no {key} {value} in {list}"))
}

/// The runtime layers, which every GPU a fault leaves alone must pass.
pub const RUNTIME_LAYERS: &[&str] = &["hsa", "hip"];

/// Asserts that each of `gpus` has results in each of `layers` and that
/// every one of them passed: a layer with no results at all fails too, since
/// it would otherwise pass by having nothing to check.
#[track_caller]
pub fn assert_gpus_pass(json: &Value, gpus: impl IntoIterator<Item = u32>, layers: &[&str]) {
    for gpu in gpus {
        let scope = format!("gpu{gpu}");
        for layer in layers {
            let mine: Vec<&Value> = results(json)
                .iter()
                .filter(|r| r["scope"] == scope.as_str() && r["layer"] == *layer)
                .collect();
            assert!(!mine.is_empty(), "no {layer} results for {scope}");
            for r in mine {
                assert_eq!(r["status"], "pass", "{scope} {layer}: {r}");
            }
        }
    }
}

/// The result with test id `id`, asserted to have timed out well before its
/// check's own timeout could have ended it: within the `secs` the test cut
/// that timeout to, the worker's 1 s kill grace and 10 s of slack for a busy
/// machine.
#[track_caller]
pub fn result_timed_out<'a>(json: &'a Value, id: &str, secs: u32) -> &'a Value {
    let r = result_with_status(json, id, "timeout");
    let bound = f64::from(secs) * 1000.0 + 1000.0 + 10_000.0;
    assert!(r["duration_ms"].as_f64().unwrap() < bound, "{r}");
    r
}

/// Every result of a JSON results document.
pub fn results(json: &Value) -> &Vec<Value> {
    json["results"].as_array().unwrap()
}

/// Where a sysroot keeps the KFD topology's nodes.
pub const TOPO: &str = "sys/class/kfd/kfd/topology/nodes";

/// Replaces `key`'s value in a KFD node's properties file.
pub fn set_prop(root: &Path, kfd_node: u32, key: &str, value: &str) {
    let p = root.join(format!("{TOPO}/{kfd_node}/properties"));
    let text = std::fs::read_to_string(&p).unwrap();
    let out: String = text
        .lines()
        .map(|l| match l.split_whitespace().next() {
            Some(k) if k == key => format!("{key} {value}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(p, out).unwrap();
}

/// Removes KFD node `kfd_node`'s IO links and every link to it, as far as
/// the fixtures number them (GPU nodes 2 to 9, links 1 to 7): its XGMI links
/// gone in both directions.
pub fn remove_io_links(root: &Path, kfd_node: u32) {
    for node in 2..10 {
        for link in 1..8 {
            let dir = root.join(format!("{TOPO}/{node}/io_links/{link}"));
            let Ok(text) = std::fs::read_to_string(dir.join("properties")) else {
                continue;
            };
            if node == kfd_node || text.contains(&format!("node_to {kfd_node}\n")) {
                std::fs::remove_dir_all(dir).unwrap();
            }
        }
    }
}

/// Replaces the file at `path` with a FIFO nobody writes to: the stand-in
/// for a sysfs file of a wedged GPU, a file that does not answer (a snapshot
/// stores such a file this way). rocgate never blocks on one: it treats it
/// as a file that did not answer.
pub fn wedge(path: &Path) {
    std::fs::remove_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}: {made}", path.display());
}

/// The real file behind a sysroot path (PCI device entries are symlinks).
pub fn real(root: &Path, rel: &str) -> PathBuf {
    std::fs::canonicalize(root.join(rel)).unwrap()
}

/// Runs `rocgate ARGS --sysroot ROOT`, killed after [`HANG_GUARD`];
/// returns the exit code and what it printed (stdout, then stderr).
pub fn rocgate_on(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = on_sysroot(args, root).timeout(HANG_GUARD).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Whether this process runs as root (its real uid, read from /proc).
pub fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        .unwrap()
}

/// GPU `bus`'s MEC firmware version file in the sysroot at `root`.
pub fn mec(root: &Path, bus: &str) -> PathBuf {
    root.join(format!(
        "sys/bus/pci/devices/0000:{bus}:00.0/fw_version/mec_fw_version"
    ))
}

/// Whether this is a CI run (`CI=true`, as CI systems and `ci/test` set).
pub fn on_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
}

/// The outcome for a trial whose prerequisite (a tool or library CI
/// installs) is missing: a failure on CI, where it must be there; an
/// ignored trial with the reason elsewhere, never a silent pass.
pub fn missing(what: &str) -> Result<libtest_mimic::Completion, libtest_mimic::Failed> {
    if on_ci() {
        Err(format!("CI=true but {what} (ci/test installs it)").into())
    } else {
        Ok(libtest_mimic::Completion::ignored_with(format!(
            "{what} (ci/test installs it)"
        )))
    }
}

/// The checkout's root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `rocgate` binary under test.
pub fn rocgate_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rocgate"))
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A trial's assertion: `Ok` when `cond` holds, else the failure `what`.
pub fn check(cond: bool, what: impl Into<String>) -> Result<(), libtest_mimic::Failed> {
    if cond {
        Ok(())
    } else {
        Err(what.into().into())
    }
}

/// A stand-in for Slurm's `scontrol` on PATH: it records every call and
/// answers `scontrol show node` with the node state it was given.
pub struct FakeScontrol {
    dir: tempfile::TempDir,
}

impl FakeScontrol {
    /// The script, with no node state yet.
    pub fn new() -> Self {
        use std::os::unix::fs::PermissionsExt as _;
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

    /// The script, showing the node in `state` with `reason`.
    pub fn showing(state: &str, reason: Option<&str>) -> Self {
        let fake = FakeScontrol::new();
        fake.node_is(state, reason);
        fake
    }

    /// Sets what `scontrol show node` prints and forgets earlier calls.
    pub fn node_is(&self, state: &str, reason: Option<&str>) {
        let mut text = format!("NodeName=gpu17 Arch=x86_64\n   State={state} ThreadsPerCore=1\n");
        if let Some(r) = reason {
            text.push_str(&format!("   Reason={r} [root@2026-12-01T06:00:00]\n"));
        }
        std::fs::write(self.dir.path().join("state"), text).unwrap();
        let _ = std::fs::remove_file(self.dir.path().join("calls"));
    }

    /// The calls made so far, one argument line each.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// PATH with the script first.
    pub fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

/// Why a fixture cannot be served over FUSE here (not root, no /dev/fuse,
/// no `fusermount3`), or `None` when it can.
pub fn fuse_unavailable() -> Option<String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Some("not root: mounting the sysfs fixture over FUSE needs root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing: the FUSE kernel module is not loaded".into());
    }
    if !have("fusermount3") {
        return Some("fusermount3 is missing (the apt package fuse3)".into());
    }
    None
}

/// A fixture node served over FUSE with sysfs semantics
/// (`rocgate_fixtures::sysfs_fs`) at a mount point of its own; unmounted
/// when dropped.
pub struct SysfsMount {
    /// Holds the mount point (and whatever a test writes beside it).
    pub dir: tempfile::TempDir,
    /// The mount point: a sysroot to point rocgate at.
    pub root: PathBuf,
    mounted: Option<rocgate_fixtures::sysfs_fs::Mounted>,
}

/// Serves the node directory `source` at a new mount point with `faults`,
/// and waits until the mount answers. Callers check [`fuse_unavailable`]
/// first.
pub fn mount_sysfs(source: &Path, faults: &rocgate_fixtures::sysfs_fs::Faults) -> SysfsMount {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    // Readers that are not root must reach the mount point.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("sysfs");
    std::fs::create_dir(&root).unwrap();
    let below = std::fs::metadata(dir.path()).unwrap().dev();
    let mounted = rocgate_fixtures::sysfs_fs::mount(source, &root, faults)
        .unwrap_or_else(|e| panic!("failed to mount {} over FUSE: {e}", source.display()));
    // The mount is there when the mount point's device is no longer its
    // parent's.
    let start = std::time::Instant::now();
    while std::fs::metadata(&root).map(|m| m.dev()).unwrap_or(below) == below {
        assert!(
            start.elapsed() < HANG_GUARD,
            "{} was never mounted",
            root.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    SysfsMount {
        dir,
        root,
        mounted: Some(mounted),
    }
}

impl Drop for SysfsMount {
    fn drop(&mut self) {
        let unmount = |args: &[&str]| {
            std::process::Command::new("fusermount3")
                .args(args)
                .arg(&self.root)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        // A reader still holding a file keeps a plain unmount busy: then
        // lazily, so the mount goes when it lets go.
        if !unmount(&["-u"]) {
            unmount(&["-u", "-z"]);
        }
        drop(self.mounted.take());
    }
}

/// `rocgate health` with `args` on an 8x MI300X whose fake ROCm has
/// `faults`, and how long it took.
pub fn health_on_fake(faults: &str, args: &[&str]) -> (Finished, Duration) {
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let mut all = args.to_vec();
    all.extend(["--rocm-path", rocm.path().to_str().unwrap()]);
    let start = Instant::now();
    let env = [
        ("ROCGATE_FAKE_NODE", n.root.to_str().unwrap()),
        ("ROCGATE_FAKE_FAULTS", faults),
    ];
    let h = health(&n.root, &all, &env, None);
    (h, start.elapsed())
}

/// Asserts that health found the node unhealthy, its line starting `line`,
/// within `budget` seconds (with slack for a busy machine).
pub fn unhealthy_in_time(h: &Finished, took: Duration, budget: u64, line: &str) {
    assert_eq!(h.code, 1, "{} {}", h.stdout, h.stderr);
    assert!(one_line(h).starts_with(line), "{}", h.stdout);
    assert!(took < Duration::from_secs(budget + 20), "{took:?}");
}

/// A prolog's line: the first line of its stderr.
pub fn prolog_line(h: &Finished) -> &str {
    h.stderr.lines().next().unwrap_or_default()
}

/// Starts `rocgate ARGS` on the fake 8x MI300X with `faults`, stdout to a
/// file; returns the child.
pub fn spawn_fake(
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

/// A directory the rocgate under test uses as TMPDIR, where it unpacks
/// archives; and what is left in it.
pub struct Tmp(tempfile::TempDir);

/// Runs rocgate with `args` and TMPDIR set; returns (exit code, stdout, stderr).
pub fn rocgate_in(tmp: &Tmp, args: &[&str], sysroot: &Path) -> (Option<i32>, String, String) {
    code_and_output(on_sysroot(args, sysroot).env("TMPDIR", tmp.path()))
}

/// Runs `cmd` (a [`rocgate`] command) to its end, killed after
/// [`HANG_GUARD`]: (exit code, none when a signal ended it; stdout; stderr).
pub fn code_and_output(cmd: &mut Command) -> (Option<i32>, String, String) {
    let out = cmd.timeout(HANG_GUARD).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rocgate inventory --json --sysroot ROOT`, run to its end: what it left,
/// bytes as printed.
pub fn inventory_json(root: &Path) -> std::process::Output {
    on_sysroot(&["inventory", "--json"], root)
        .timeout(HANG_GUARD)
        .output()
        .unwrap()
}

/// Runs `cmd` (a [`rocgate`] command), which must refuse its input (exit
/// 2); returns its stderr.
pub fn refused(cmd: &mut Command) -> String {
    let out = cmd.timeout(HANG_GUARD).output().unwrap();
    assert_exit(&out, 2);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The pipes of a markdown row that split cells: those no backslash escapes.
pub fn unescaped_pipes(row: &str) -> usize {
    let (mut backslashes, mut n) = (0, 0);
    for c in row.chars() {
        if c == '|' && backslashes % 2 == 0 {
            n += 1;
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
    }
    n
}

/// Writes scenario `name` and takes a snapshot of it beside it; returns the
/// node and the archive.
pub fn snapshotted(name: &str) -> (Node, PathBuf) {
    let n = node(name);
    let archive = n.root.with_extension("tar.zst");
    snapshot(&n.root, &archive);
    (n, archive)
}

/// The names in directory `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether process `pid` has a handler for SIGINT (bit 1 of SigCgt): from
/// then on a SIGINT goes through rocgate's own exit path.
pub fn catches_sigint(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & 0b10 != 0)
}

/// The extended tier on `gpus` of `scenario`, with GEMMs as fast as can be
/// (the tier's time goes to what a test looks at) and peer copies at
/// `p2p` (`ROCGATE_FAKE_P2P_GBPS`).
pub fn extended<'a>(scenario: &str, gpus: &str, p2p: &'a str) -> FakeRun<'a> {
    FakeRun::scenario(scenario)
        .args(&["--tier", "extended", "--gpus", gpus])
        .env("ROCGATE_FAKE_GEMM_TFLOPS", "100000")
        .env("ROCGATE_FAKE_P2P_GBPS", p2p)
}

impl Tmp {
    /// A new, empty directory.
    pub fn new() -> Tmp {
        Tmp(tempfile::tempdir().unwrap())
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// What is left in it, sorted.
    pub fn left(&self) -> Vec<String> {
        names_in(self.path())
    }

    /// The unpacked archives left in it.
    pub fn unpacked_left(&self) -> Vec<String> {
        self.left()
            .into_iter()
            .filter(|n| n.starts_with("rocgate-snapshot-"))
            .collect()
    }
}

/// Takes a snapshot of `root` into `out`.
pub fn snapshot(root: &Path, out: &Path) {
    snapshot_with(&["snapshot"], root, out);
}

/// `rocgate ARGS --sysroot ROOT --out OUT` (ARGS a `snapshot` command, such
/// as `snapshot --redact`), which must succeed.
pub fn snapshot_with(args: &[&str], root: &Path, out: &Path) {
    let o = on_sysroot(args, root)
        .arg("--out")
        .arg(out)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        root.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Asserts the scheduler's contract: exactly one line on stdout, at most 80
/// characters, starting `rocgate: `.
pub fn one_line(h: &Finished) -> &str {
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

/// Fails the test unless `haystack` (an output, a report, a message)
/// contains `needle`, printing both.
#[track_caller]
pub fn assert_has(haystack: impl AsRef<str>, needle: impl AsRef<str>) {
    let (haystack, needle) = (haystack.as_ref(), needle.as_ref());
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in:\n{haystack}"
    );
}

/// Fails the test if `haystack` contains `needle`, printing both.
#[track_caller]
pub fn assert_lacks(haystack: impl AsRef<str>, needle: impl AsRef<str>) {
    let (haystack, needle) = (haystack.as_ref(), needle.as_ref());
    assert!(
        !haystack.contains(needle),
        "did not expect {needle:?} in:\n{haystack}"
    );
}

/// How wide the pseudo-terminal of [`run_on_pty`] is.
pub const PTY_COLUMNS: u16 = 100;

/// What one run on a pseudo-terminal showed.
pub struct PtyRun {
    /// What the terminal received.
    pub terminal: String,
    /// The stream that was not on the terminal (when one was not).
    pub other: String,
}

/// Which of rocgate's streams go to the pseudo-terminal.
#[derive(Clone, Copy, PartialEq)]
pub enum OnPty {
    /// stdout and stderr.
    Both,
    /// stdout; stderr to a file.
    StdoutOnly,
    /// stderr; stdout to a file.
    StderrOnly,
}

/// Runs `rocgate run --sysroot ROOT EXTRA` with the streams `on_pty` names
/// on a pseudo-terminal [`PTY_COLUMNS`] wide, the other one into a file, and `env` set (NO_COLOR and
/// TERM cleared first).
pub fn run_on_pty(root: &Path, extra: &[&str], on_pty: OnPty, env: &[(&str, &str)]) -> PtyRun {
    // The size of a terminal a person runs rocgate in.
    let size = nix::pty::Winsize {
        ws_row: 30,
        ws_col: PTY_COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other_path = dir.path().join("other");
    let other = std::fs::File::create(&other_path).unwrap();
    let mut child = {
        let mut cmd = std::process::Command::new(rocgate_bin());
        cmd.arg("run")
            .arg("--sysroot")
            .arg(root)
            .args(extra)
            .env_remove("NO_COLOR")
            .env_remove("TERM")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null());
        let tty = || std::process::Stdio::from(pty.slave.try_clone().unwrap());
        match on_pty {
            OnPty::Both => cmd.stdout(tty()).stderr(tty()),
            OnPty::StdoutOnly => cmd.stdout(tty()).stderr(other),
            OnPty::StderrOnly => cmd.stdout(other).stderr(tty()),
        };
        cmd.spawn().unwrap()
        // The command and its copies of the terminal end here, so the
        // reader sees the end when rocgate exits.
    };
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        // Linux answers EIO once no process has the terminal open.
        let _ = std::io::Read::read_to_end(&mut master, &mut got);
        got
    });
    wait_guarded(&mut child);
    PtyRun {
        terminal: String::from_utf8_lossy(&reader.join().unwrap()).into_owned(),
        other: std::fs::read_to_string(other_path).unwrap(),
    }
}

/// Waits for `child`, killing it (and failing) past the hang guard.
pub fn wait_guarded(child: &mut std::process::Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > HANG_GUARD {
            child.kill().unwrap();
            panic!("rocgate did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
