//! `rocgate doctor` names the right code and layer on every synthetic node.

use crate::util::{assert_has, doctor, finding_codes, node, on_sysroot, rocgate, run};

#[test]
fn every_scenario_gets_its_diagnosis() {
    for scenario in rocgate_fixtures::catalogue() {
        let n = node(scenario.name);
        let expect = scenario.expect_gpus.map(|e| e.to_string());
        let extra: Vec<&str> = match &expect {
            Some(e) => vec!["--expect-gpus", e],
            None => Vec::new(),
        };
        let (code_of_exit, doc) = doctor(&n.root, &extra);
        match scenario.diagnosis {
            None => {
                assert_eq!(code_of_exit, Some(0), "{}: {doc:#}", scenario.name);
                assert_eq!(doc["healthy"], true, "{}", scenario.name);
                // A healthy node may carry a stock kernel's warnings (ACS
                // redirect, which Linux turns on at boot on EPYC), no fault.
                assert!(
                    doc["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|f| f["severity"] == "warn"),
                    "{}: {doc:#}",
                    scenario.name
                );
                if doc["findings"].as_array().unwrap().is_empty() {
                    assert_eq!(doc["first_failing_layer"], serde_json::Value::Null);
                }
            }
            Some((code, layer)) => {
                // A failure exits 1; a node whose worst finding is a
                // warning works, and exits 0.
                let severity = rocgate_suites::findings::lookup(code).unwrap().severity;
                let (exit, healthy) = match severity {
                    rocgate_suites::findings::Severity::Fail => (1, false),
                    rocgate_suites::findings::Severity::Warn => (0, true),
                };
                assert_eq!(code_of_exit, Some(exit), "{}", scenario.name);
                assert_eq!(doc["healthy"], healthy, "{}", scenario.name);
                assert_eq!(
                    doc["first_failing_layer"], layer,
                    "{}: {doc:#}",
                    scenario.name
                );
                assert_eq!(
                    doc["likely_cause"]["code"], code,
                    "{}: {doc:#}",
                    scenario.name
                );
                assert_eq!(doc["likely_cause"]["layer"], layer, "{}", scenario.name);
                for f in doc["findings"].as_array().unwrap() {
                    for key in ["code", "layer", "scope", "message", "next_step"] {
                        assert!(
                            f[key].as_str().is_some_and(|s| !s.is_empty()),
                            "{}: finding without {key}: {f}",
                            scenario.name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn permission_finding_names_the_group_and_the_user() {
    let n = node("kfd-permission");
    let out = on_sysroot(&["doctor"], &n.root).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_has(&text, "group render");
    assert_has(&text, "usermod -aG render ci");
}

#[test]
fn firmware_checks_are_blocked_not_failed_without_the_driver() {
    let n = node("amdgpu-not-loaded");
    let (_, doc) = doctor(&n.root, &[]);
    assert_eq!(doc["layers"]["firmware"], "not reached", "{doc:#}");
    assert_eq!(finding_codes(&doc), ["amdgpu-not-loaded"]);
}

#[test]
fn doctor_names_what_stops_the_stack_before_an_advisory() {
    let n = node("pcie-link-degraded");
    std::fs::remove_file(n.root.join("dev/kfd")).unwrap();
    let (code, doc) = doctor(&n.root, &[]);
    assert_eq!(code, Some(1));
    assert_eq!(doc["first_failing_layer"], "kfd", "{doc}");
    assert_eq!(doc["likely_cause"]["code"], "kfd-missing", "{doc}");
    assert_eq!(doc["layers"]["pci"], "degraded");
    assert_eq!(doc["layers"]["kfd"], "broken");
    assert_eq!(finding_codes(&doc), ["kfd-missing", "pcie-link-degraded"]);

    // `run` agrees on the first failing layer.
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    assert_eq!(json["first_failing_layer"], "kfd");
    assert_has(&stdout, "Failures (first failing layer: kfd)");

    // With only the advisory, it is the likely cause.
    let n = node("pcie-link-degraded");
    let (_, doc) = doctor(&n.root, &[]);
    assert_eq!(doc["likely_cause"]["code"], "pcie-link-degraded", "{doc}");
}

#[test]
fn doctor_json_to_a_file_writes_what_it_would_print() {
    let n = node("kfd-permission");
    let (printed_code, printed) = doctor(&n.root, &[]);
    // `doctor --json FILE --sysroot ROOT`.
    let doctor_to = |file: &std::path::Path| {
        rocgate()
            .args(["doctor", "--json"])
            .arg(file)
            .arg("--sysroot")
            .arg(&n.root)
            .output()
            .unwrap()
    };
    let file = n.root.join("doctor.json");
    let out = doctor_to(&file);
    assert_eq!(out.status.code(), printed_code);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\"likely_cause\""),
        "the diagnosis goes to the file, not stdout"
    );
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["likely_cause"], printed["likely_cause"]);
    assert_eq!(written["likely_cause"]["code"], "kfd-permission");
    // A file that cannot be written is input or output failing (3), named.
    let nowhere = n.root.join("no/such/dir/doctor.json");
    let out = doctor_to(&nowhere);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&nowhere.display().to_string()));
}

/// Runs `rocgate ARGS --sysroot ROOT --history-dir HISTORY`.
fn with_history(
    args: &[&str],
    root: &std::path::Path,
    history: &std::path::Path,
) -> std::process::Output {
    on_sysroot(args, root)
        .arg("--history-dir")
        .arg(history)
        .output()
        .unwrap()
}

#[test]
fn doctor_says_what_changed_since_the_node_last_worked() {
    // Yesterday's healthy run, kept in the node's history.
    let n = node("mi300x-8");
    let history = n.root.with_extension("history");
    let out = with_history(&["run", "--quiet"], &n.root, &history);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_dir(&history).unwrap().count(), 1);

    // Overnight: the kernel went from 6.8.0-79 to 6.8.0-85 without a DKMS
    // rebuild, gpu3's firmware changed, and gpu6 fell off the bus.
    std::fs::write(
        n.root.join("proc/sys/kernel/osrelease"),
        "6.8.0-85-generic\n",
    )
    .unwrap();
    let mec = "sys/bus/pci/devices/0000:65:00.0/fw_version/mec_fw_version";
    std::fs::write(n.root.join(mec), "0x000000a2\n").unwrap();
    std::fs::remove_file(n.root.join("sys/bus/pci/devices/0000:c6:00.0")).unwrap();

    let out = with_history(&["doctor"], &n.root, &history);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_has(&text, "Since the last healthy run (started ");
    assert_has(
        &text,
        "kernel                   6.8.0-79-generic -> 6.8.0-85-generic",
    );
    assert_has(
        &text,
        "DKMS amdgpu is built for 6.8.0-79-generic, but not for the running kernel 6.8.0-85-generic",
    );
    assert_has(&text, "gpu6.pci.identity pass -> fail");
    assert_has(&text, "fw_mec");

    let json = n.root.with_extension("doctor.json");
    let out = with_history(
        &["doctor", "--json", json.to_str().unwrap()],
        &n.root,
        &history,
    );
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let since = &doc["since_last_healthy"];
    assert!(
        since["report"].as_str().unwrap().ends_with("-pass.json"),
        "{since}"
    );
    let changed: Vec<&str> = since["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(
        changed.iter().any(|l| l.contains("6.8.0-85-generic")),
        "{changed:?}"
    );

    // A doctor without a history says nothing of one.
    let (_, plain) = doctor(&n.root, &[]);
    assert!(plain["since_last_healthy"].is_null(), "{plain}");
}

#[test]
fn health_judges_what_is_new_since_its_last_run() {
    // A day of faults in the log; health's first run has no history and
    // judges the whole boot.
    let n = node("gpu-faults-logged");
    let history = n.root.with_extension("history");
    let out = with_history(&["health"], &n.root, &history);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // The next run judges only what came after the first: the same events
    // are history now, and are not raised again.
    let out = with_history(&["health"], &n.root, &history);
    let line = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{line}");
    assert!(line.contains("gpu-event-history"), "{line}");
    assert_eq!(std::fs::read_dir(&history).unwrap().count(), 2);
}
