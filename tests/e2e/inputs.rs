//! What a user gives rocgate, through the binary: flags, the site policy
//! and thresholds files, `--matrix` and `--timeout`. A bad one is a usage
//! error (exit 2) naming the flag, file and line, never a panic or a pass,
//! and workers get the configuration the run read.

use crate::util;
use crate::util::{
    assert_exit, assert_has, assert_lacks, fake_rocm, node, on_sysroot, result, rocgate, rocgate_on,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn thresholds_with(replace: (&str, &str)) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/thresholds.toml"),
    )
    .unwrap();
    assert!(text.contains(replace.0));
    text.replacen(replace.0, replace.1, 1)
}

#[test]
fn bad_flags_are_usage_errors_not_panics_or_passes() {
    let n = node("mi300x-8");
    for scale in ["1e17", "1e308", "nan", "inf", "0", "-1", "0.001", "1001"] {
        let flag = format!("--timeout-scale={scale}");
        let (code, out) = rocgate_on(&n.root, &["run", &flag]);
        assert_eq!(code, Some(2), "--timeout-scale {scale}: {out}");
        assert_has(&out, "--timeout-scale");
        assert_lacks(&out, "panicked");
    }
    let (code, out) = rocgate_on(&n.root, &["run", "--timeout-scale", "1000", "--quiet"]);
    assert_eq!(code, Some(0), "the largest scale runs: {out}");
    for gpus in ["", ",", " , "] {
        let (code, out) = rocgate_on(&n.root, &["run", "--gpus", gpus]);
        assert_eq!(code, Some(2), "--gpus {gpus:?}: {out}");
        assert_has(&out, "selects no GPU");
    }
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
        assert_has(&out, "t.toml");
        assert_has(&out, "line ");
        assert_has(&out, says);
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
    assert_has(&out, "listed twice");
    assert_has(&out, "line ");
    std::fs::write(&m, matrix.replacen("rocm = \"", "rocm = \"\" # ", 1)).unwrap();
    let (code, out) = rocgate_on(
        &n.root,
        &["matrix", "check", "--matrix", m.to_str().unwrap()],
    );
    assert_eq!(code, Some(2), "{out}");
    assert_has(&out, "not a version");
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
    assert_has(&text, "not everything could be checked");
    assert_lacks(&text, "\nsupported");
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
fn a_matrix_with_a_key_rocgate_does_not_know_is_refused_naming_it_and_its_line() {
    let n = node("mi300x-8");
    let builtin = include_str!("../../suites/compat.toml");
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
            let stderr = util::refused(
                rocgate()
                    .args(args)
                    .arg(&path)
                    .arg("--sysroot")
                    .arg(&n.root),
            );
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
        .timeout(util::HANG_GUARD)
        .output()
        .unwrap();
        util::assert_exit(&out, 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{time}: {stderr}");
        assert!(!stderr.contains("positive number"), "{time}: {stderr}");
    }
}
