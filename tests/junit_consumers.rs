//! rocgate's JUnit read by real consumers: quick-junit's reader always,
//! `xmllint --schema` against the schema Jenkins' xunit plugin enforces when
//! `ROCGATE_JUNIT_XSD` names it, and Python's junitparser when
//! `ROCGATE_JUNITPARSER=1`. CI sets both.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{node, run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// JUnit files from healthy, broken, partitioned and garbage nodes.
fn reports() -> (Vec<common::Node>, Vec<PathBuf>) {
    let mut nodes = Vec::new();
    let mut files = Vec::new();
    for name in [
        "mi300x-8",
        "mi300x-8-cpx",
        "amdgpu-not-loaded",
        "firmware-load-failed",
        "kfd-permission",
        "no-amd-gpu",
    ] {
        let n = node(name);
        run(&n.root, &[]);
        files.push(n.root.with_extension("junit.xml"));
        nodes.push(n);
    }
    // Escape sequences, control characters and markup in what checks report.
    let n = node("mi300x-8");
    let fw = n
        .root
        .join("sys/devices/pci0000:00/0000:05:00.0/fw_version/mec_fw_version");
    std::fs::write(&fw, b"\x1b[31m<b>0x\x07zz</b>&\x1b[0m\x01\n").unwrap();
    let (code, _, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 1);
    let r = common::result(&json, "gpu0.firmware.versions");
    assert_eq!(r["status"], "fail");
    assert!(!junit.contains('\u{1b}') && !junit.contains('\u{7}') && !junit.contains('\u{1}'));
    assert!(junit.contains("&lt;b&gt;0xzz&lt;/b&gt;&amp;"), "{junit}");
    files.push(n.root.with_extension("junit.xml"));
    nodes.push(n);
    (nodes, files)
}

#[test]
fn quick_junit_reads_back_flat_suites_with_unique_cases() {
    let (_nodes, files) = reports();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let report = quick_junit::Report::deserialize_from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let mut seen = std::collections::HashSet::new();
        for suite in &report.test_suites {
            assert!(suite.name.as_str() == "node" || suite.name.as_str().starts_with("gpu"));
            assert!(
                suite
                    .properties
                    .iter()
                    .any(|p| p.name.as_str() == "first_failing_layer")
            );
            for case in &suite.test_cases {
                let class = case.classname.as_ref().unwrap().as_str().to_string();
                assert!(
                    class.starts_with(suite.name.as_str()),
                    "{class} in {}",
                    suite.name.as_str()
                );
                assert!(
                    seen.insert((class, case.name.as_str().to_string())),
                    "duplicate case in {}",
                    f.display()
                );
            }
        }
        assert!(
            !text.contains("<testsuite ") || !text.contains("</testcase>\n        <testsuite"),
            "nested suites"
        );
    }
}

#[test]
fn jenkins_schema_accepts_the_reports() {
    let Some(xsd) = std::env::var_os("ROCGATE_JUNIT_XSD") else {
        eprintln!(
            "not validated against the Jenkins JUnit schema: set ROCGATE_JUNIT_XSD to junit-10.xsd (CI does)"
        );
        return;
    };
    assert!(
        Path::new(&xsd).is_file(),
        "ROCGATE_JUNIT_XSD={} is not a file",
        xsd.to_string_lossy()
    );
    let (_nodes, files) = reports();
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .args(&files)
        .output()
        .expect("xmllint must be installed when ROCGATE_JUNIT_XSD is set (apt-get install libxml2-utils)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn python_junitparser_reads_the_reports() {
    if std::env::var("ROCGATE_JUNITPARSER").as_deref() != Ok("1") {
        eprintln!(
            "not read by junitparser: set ROCGATE_JUNITPARSER=1 with `pip install junitparser` (CI does)"
        );
        return;
    }
    let (_nodes, files) = reports();
    let script = r#"
import sys
from junitparser import JUnitXml, Failure, Skipped, Error
for path in sys.argv[1:]:
    xml = JUnitXml.fromfile(path)
    keys = set()
    total = 0
    for suite in xml:
        cases = list(suite)
        assert int(suite.tests) == len(cases), (path, suite.name)
        for case in cases:
            key = (case.classname, case.name)
            assert key not in keys, (path, key)
            keys.add(key)
            total += 1
            for r in case.result:
                assert isinstance(r, (Failure, Skipped, Error)), r
                assert r.message, (path, key)
    assert total > 0, path
print("ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&files)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
