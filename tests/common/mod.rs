//! Helpers shared by the end-to-end tests: synthetic nodes on disk and the
//! real `rocgate` binary.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

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
pub type RunOutput = (i32, String, serde_json::Value, String);

/// Runs `rocgate run` on `root` with the fake ROCm libraries simulating it,
/// and `faults` injected.
pub fn run_fake(root: &Path, faults: &str, extra: &[&str]) -> RunOutput {
    run_fake_env(root, faults, extra, &[])
}

/// [`run_fake`] with extra environment variables; a `("DAMAGE", file)`
/// entry replaces that library of the fake ROCm with a file that is not a
/// library (removing it would let the system loader find a host's own).
pub fn run_fake_env(root: &Path, faults: &str, extra: &[&str], env: &[(&str, &str)]) -> RunOutput {
    let rocm = fake_rocm();
    for (k, v) in env {
        if *k == "DAMAGE" {
            let lib = rocm.path().join("lib").join(v);
            std::fs::remove_file(&lib).unwrap();
            std::fs::write(&lib, "not a library").unwrap();
        }
    }
    let mut args = vec!["--rocm-path", rocm.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut vars = vec![
        ("ROCGATE_FAKE_NODE", root.to_str().unwrap()),
        ("ROCGATE_FAKE_FAULTS", faults),
    ];
    vars.extend(env.iter().filter(|(k, _)| *k != "DAMAGE").copied());
    run_with(root, &args, &vars)
}

/// Writes scenario `name` and runs [`run_fake`] on it; for tests that need
/// nothing of the node but its results (it is removed on return).
pub fn run_fake_scenario(name: &str, faults: &str, extra: &[&str]) -> RunOutput {
    run_fake(&node(name).root, faults, extra)
}

/// [`run_fake_scenario`] with extra environment variables, as
/// [`run_fake_env`] takes them.
pub fn run_fake_scenario_env(
    name: &str,
    faults: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> RunOutput {
    run_fake_env(&node(name).root, faults, extra, env)
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
    let junit = root.with_extension("junit.xml");
    let json = root.with_extension("results.json");
    let out = rocgate()
        .arg("run")
        .arg("--sysroot")
        .arg(root)
        .arg("--junit")
        .arg(&junit)
        .arg("--json")
        .arg(&json)
        .args(extra)
        .envs(env.iter().copied())
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let junit = std::fs::read_to_string(&junit).unwrap();
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        json,
        junit,
    )
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
pub fn doctor(root: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
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
pub fn finding_codes(doc: &serde_json::Value) -> Vec<&str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

/// The result with test id `id` from a JSON results document.
pub fn result<'a>(json: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result {id}"))
}

/// The result with test id `id`, asserted to have ended with `status`.
#[track_caller]
pub fn result_with_status<'a>(
    json: &'a serde_json::Value,
    id: &str,
    status: &str,
) -> &'a serde_json::Value {
    let r = result(json, id);
    assert_eq!(r["status"], status, "{r}");
    r
}

/// A JSON string (a message, a fact, a next step); a value of another kind
/// fails the test naming it.
#[track_caller]
pub fn text(value: &serde_json::Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

/// The member of the JSON array `list` whose `key` is `value` (a scope of a
/// results document, a component of a matrix check, a metric of a result).
#[track_caller]
pub fn entry<'a>(list: &'a serde_json::Value, key: &str, value: &str) -> &'a serde_json::Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .find(|e| e[key] == value)
        .unwrap_or_else(|| panic!("no {key} {value} in {list}"))
}

/// The statuses of the results of `layer` in `scope` (`node`, `gpu3`), in
/// the document's order.
pub fn layer_statuses(json: &serde_json::Value, scope: &str, layer: &str) -> Vec<String> {
    results(json)
        .iter()
        .filter(|r| r["scope"] == scope && r["layer"] == layer)
        .map(|r| text(&r["status"]).to_string())
        .collect()
}

/// Every result of a JSON results document.
pub fn results(json: &serde_json::Value) -> &Vec<serde_json::Value> {
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
