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

/// The rocgate binary.
pub fn rocgate() -> Command {
    let mut c = Command::cargo_bin("rocgate").unwrap();
    c.env("NO_COLOR", "1");
    c
}

/// Runs `rocgate run` on `root` with JUnit and JSON written next to it;
/// returns (exit code, stdout, JSON, JUnit text).
pub fn run(root: &Path, extra: &[&str]) -> (i32, String, serde_json::Value, String) {
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

/// The result with test id `id` from a JSON results document.
pub fn result<'a>(json: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result {id}"))
}

/// Every result of a JSON results document.
pub fn results(json: &serde_json::Value) -> &Vec<serde_json::Value> {
    json["results"].as_array().unwrap()
}
