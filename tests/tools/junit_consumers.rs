//! rocgate's JUnit read by real consumers: quick-junit's reader, an XML
//! reader that sees every element (no nested suites), `xmllint --schema`
//! against the schema Jenkins' xunit plugin enforces (named by
//! `ROCGATE_JUNIT_XSD`; no package carries it, so without it the trial is
//! ignored with that reason), and Python's junitparser (which CI installs:
//! missing, the trial fails on CI and is ignored elsewhere).

use crate::util;
use crate::util::{node, run};
use libtest_mimic::{Completion, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "quick_junit_reads_back_flat_suites_with_unique_cases",
            || {
                quick_junit_reads_back_flat_suites_with_unique_cases();
                Ok(())
            },
        ),
        Trial::test(
            "no_suite_is_nested_in_another",
            no_suite_is_nested_in_another,
        ),
        Trial::ignorable_test(
            "jenkins_schema_accepts_the_reports",
            jenkins_schema_accepts_the_reports,
        ),
        Trial::ignorable_test(
            "python_junitparser_reads_the_reports",
            python_junitparser_reads_the_reports,
        ),
        Trial::ignorable_test(
            "junitparser_merges_two_nodes_without_duplicates",
            junitparser_merges_two_nodes_without_duplicates,
        ),
    ]
}

/// The reports, written once for every trial.
fn files() -> &'static [PathBuf] {
    static REPORTS: OnceLock<(Vec<util::Node>, Vec<PathBuf>)> = OnceLock::new();
    &REPORTS.get_or_init(reports).1
}

/// JUnit files from healthy, broken, partitioned and garbage nodes.
fn reports() -> (Vec<util::Node>, Vec<PathBuf>) {
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
        .join("sys/bus/pci/devices/0000:05:00.0/fw_version/mec_fw_version");
    std::fs::write(&fw, b"\x1b[31m<b>0x\x07zz</b>&\x1b[0m\x01\n").unwrap();
    let (code, _, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 1);
    let r = util::result(&json, "gpu0.firmware.versions");
    assert_eq!(r["status"], "fail");
    assert!(!junit.contains('\u{1b}') && !junit.contains('\u{7}') && !junit.contains('\u{1}'));
    assert!(junit.contains("&lt;b&gt;0xzz&lt;/b&gt;&amp;"), "{junit}");
    files.push(n.root.with_extension("junit.xml"));
    nodes.push(n);
    (nodes, files)
}

fn quick_junit_reads_back_flat_suites_with_unique_cases() {
    for f in files() {
        let text = std::fs::read_to_string(f).unwrap();
        let report = quick_junit::Report::deserialize_from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let mut seen = std::collections::HashSet::new();
        for suite in &report.test_suites {
            // `<node name>.<scope>`: reports of many nodes merge apart.
            let (host, scope) = suite.name.as_str().rsplit_once('.').unwrap();
            assert!(scope == "node" || scope.starts_with("gpu"), "{scope}");
            let attribute = suite.extra.get("hostname").map(|h| h.as_str());
            assert_eq!(
                attribute.map(|h| h.replace('.', "_")).as_deref(),
                Some(host)
            );
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
    }
}

/// Some reporters drop nested `<testsuite>` elements: every suite sits
/// directly under `<testsuites>`.
fn no_suite_is_nested_in_another() -> Result<(), Failed> {
    use quick_xml::events::Event;
    for f in files() {
        let text = std::fs::read_to_string(f).unwrap();
        let mut reader = quick_xml::Reader::from_str(&text);
        let (mut open, mut suites) = (Vec::new(), 0);
        loop {
            match reader.read_event().unwrap() {
                Event::Start(e) => {
                    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                    if name == "testsuite" {
                        suites += 1;
                        if open.iter().any(|o| o == "testsuite") || open.len() != 1 {
                            return Err(
                                format!("{}: a testsuite inside {open:?}", f.display()).into()
                            );
                        }
                    }
                    open.push(name);
                }
                Event::End(_) => {
                    open.pop();
                }
                Event::Eof => break,
                _ => {}
            }
        }
        if suites == 0 {
            return Err(format!("{}: no testsuite at all", f.display()).into());
        }
    }
    Ok(())
}

fn jenkins_schema_accepts_the_reports() -> Result<Completion, Failed> {
    let Some(xsd) = std::env::var_os("ROCGATE_JUNIT_XSD") else {
        return Ok(Completion::ignored_with(
            "no schema: set ROCGATE_JUNIT_XSD to Jenkins' junit-10.xsd (.ci/run does when it has it)",
        ));
    };
    assert!(
        Path::new(&xsd).is_file(),
        "ROCGATE_JUNIT_XSD={} is not a file",
        xsd.to_string_lossy()
    );
    let Ok(out) = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .args(files())
        .output()
    else {
        return util::missing("xmllint (libxml2-utils) is not installed");
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(Completion::Completed)
}

fn python_junitparser_reads_the_reports() -> Result<Completion, Failed> {
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
    junitparser(script, files())
}

/// Runs `script` with Python and `args`, asserting it succeeds; without
/// Python's junitparser, ignored (a failure under `CI=true`).
fn junitparser(script: &str, args: &[PathBuf]) -> Result<Completion, Failed> {
    let present = Command::new("python3")
        .args(["-c", "import junitparser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        return util::missing("Python's junitparser is not installed");
    }
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(Completion::Completed)
}

/// The JUnit of two nodes (one fixture, named apart with `--node-name` and
/// `ROCGATE_NODE_NAME`) merged as a Jenkins or GitLab job merges a fleet's
/// files: junitparser's `+` keeps every suite, and no (classname, name)
/// pair appears twice.
fn junitparser_merges_two_nodes_without_duplicates() -> Result<Completion, Failed> {
    let n = node("mi300x-8");
    let a = n.root.with_extension("a.xml");
    let b = n.root.with_extension("b.xml");
    let out = util::rocgate()
        .args([
            "run",
            "--quiet",
            "--node-name",
            "gpu-a01.example.com",
            "--junit",
        ])
        .arg(&a)
        .arg("--sysroot")
        .arg(&n.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = util::rocgate()
        .env("ROCGATE_NODE_NAME", "gpu-a02")
        .args(["run", "--quiet", "--junit"])
        .arg(&b)
        .arg("--sysroot")
        .arg(&n.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let script = r#"
import sys
from junitparser import JUnitXml
a, b = (JUnitXml.fromfile(p) for p in sys.argv[1:3])
merged = a + b
keys = [(c.classname, c.name) for s in merged for c in s]
assert len(keys) == len(set(keys)), "duplicate cases"
assert len(keys) == sum(1 for s in a for c in s) * 2, len(keys)
names = {s.name for s in merged}
assert "gpu-a01_example_com.gpu3" in names and "gpu-a02.gpu3" in names, sorted(names)[:4]
hosts = {s._elem.get("hostname") for s in merged}
assert hosts == {"gpu-a01.example.com", "gpu-a02"}, hosts
assert any(c.classname == "gpu-a02.gpu3.kfd" and c.name == "topology_node" for s in b for c in s)
print("ok", len(keys))
"#;
    junitparser(script, &[a, b])
}
