use super::*;
use crate::test_support::TERMS;
use crate::verdict::Spread;
use serde_json::Value;
use serde_json::json;

/// The report a test's JSON reads as, as `compare` reads a saved one:
/// the tests write only what they compare, so what every report has
/// (`passed`) is filled in.
fn read(doc: &Value) -> Report {
    let mut doc = doc.clone();
    if let Some(o) = doc.as_object_mut() {
        o.entry("passed").or_insert(json!(false));
    }
    serde_json::from_value(doc).unwrap()
}

/// Compares two reports given as JSON.
fn compare(before: &Value, after: &Value, tolerances: &Tolerances, terms: &Terms) -> Comparison {
    super::compare(&read(before), &read(after), tolerances, terms)
}

fn flat(t: f64) -> Tolerances {
    Tolerances::flat(t)
}

fn doc(status: &str, tflops: f64, amdgpu: &str) -> Value {
    json!({
        "schema_version": 1,
        "versions": {"node": {"amdgpu": amdgpu}, "gpu0": {"fw_mec": "0x9a"}},
        "results": [
            {"id": "gpu0.rocblas.gemm_throughput", "status": status, "message": "m", "metrics": [
                {"name": "gemm_tflops.fp32", "value": tflops, "unit": "TFLOP/s", "kind": "throughput"},
                {"name": "t", "value": 10.0, "unit": "ms", "kind": "duration"}]},
            {"id": "node.pci.amd_gpu_present", "status": "pass", "message": "ok"}
        ]
    })
}

fn measured(value: f64, samples: &[f64]) -> Measured {
    Measured {
        value,
        spread: Spread::of(samples),
    }
}

#[test]
fn finds_version_status_and_metric_changes() {
    let c = compare(
        &doc("pass", 100.0, "6.8.5"),
        &doc("fail", 90.0, "6.10.5"),
        &flat(0.05),
        &TERMS,
    );
    assert_eq!(c.versions.len(), 1);
    assert_eq!(c.versions[0].key, "amdgpu");
    assert_eq!(c.regressions.len(), 1);
    assert_eq!(c.slower.len(), 1);
    assert!((c.slower[0].change + 0.1).abs() < 1e-9);
    assert_eq!((c.judged, c.not_judged), (1, 1));
    assert!(c.regressed());
    let md = render_markdown(&c);
    assert!(md.contains("| node | amdgpu | 6.8.5 | 6.10.5 |"), "{md}");
    assert!(
        md.contains("tolerance 5%, spread none before, none after"),
        "{md}"
    );
    let text = render_text(&c);
    assert!(text.contains("REGRESSED"), "{text}");
    assert!(text.contains("not judged: 1 (durations"), "{text}");
}

#[test]
fn a_drop_regresses_only_beyond_the_tolerance_and_both_runs_spreads() {
    let before = measured(100.0, &[99.0, 100.0, 101.0]);
    // 10% down, far outside either run's spread: a regression.
    assert!(throughput_regressed(
        &before,
        &measured(90.0, &[89.5, 90.0, 90.5]),
        0.05
    ));
    // Within the tolerance: not one, however tight the spreads.
    assert!(!throughput_regressed(
        &before,
        &measured(96.0, &[96.0, 96.0]),
        0.05
    ));
    // Beyond the tolerance but inside the after run's own spread: noise.
    assert!(!throughput_regressed(
        &before,
        &measured(80.0, &[60.0, 80.0, 100.0]),
        0.05
    ));
    // Or inside the before run's.
    let wide = measured(100.0, &[70.0, 100.0, 101.0]);
    assert!(!throughput_regressed(&wide, &measured(75.0, &[75.0]), 0.05));
    // The medians are compared, not the best samples.
    let b = measured(200.0, &[100.0, 101.0, 200.0]);
    let a = measured(102.0, &[100.0, 101.0, 102.0]);
    assert!(!throughput_regressed(&b, &a, 0.05));
    // Higher is never worse; nothing is judged against zero or NaN.
    assert!(!throughput_regressed(&before, &measured(150.0, &[]), 0.05));
    assert!(!throughput_regressed(
        &measured(0.0, &[]),
        &measured(-1.0, &[]),
        0.05
    ));
    assert!(!throughput_regressed(
        &measured(f64::NAN, &[]),
        &measured(1.0, &[]),
        0.05
    ));
}

#[test]
fn without_a_spread_the_value_and_the_tolerance_decide() {
    let plain = |v| measured(v, &[]);
    assert!(throughput_regressed(&plain(100.0), &plain(94.0), 0.05));
    assert!(!throughput_regressed(&plain(100.0), &plain(96.0), 0.05));
    // One run with a spread still guards against its own noise.
    assert!(!throughput_regressed(
        &plain(100.0),
        &measured(90.0, &[80.0, 90.0, 95.0]),
        0.05
    ));
}

#[test]
fn tolerances_are_per_family_with_a_default() {
    let mut t = flat(0.05);
    t.families.insert("p2p_gbps".into(), 0.2);
    assert_eq!(t.of("p2p_gbps.gpu0>gpu1"), 0.2);
    assert_eq!(t.of("gemm_tflops.fp16"), 0.05);
    let run = |gbps: f64| {
        json!({"results": [{"id": "node.hip.p2p_bandwidth", "status": "pass", "message": "",
            "metrics": [{"name": "p2p_gbps.gpu0>gpu1", "value": gbps, "unit": "GB/s", "kind": "throughput", "between": ["gpu0", "gpu1"]},
                        {"name": "h2d_gbps", "value": gbps, "unit": "GB/s", "kind": "throughput"}]}]})
    };
    let c = compare(&run(50.0), &run(42.0), &t, &TERMS);
    assert_eq!(c.slower.len(), 1, "{c:?}");
    assert_eq!(c.slower[0].metric, "h2d_gbps");
    assert!(render_text(&c).contains("tolerance 5%"));
}

#[test]
fn error_counters_regress_on_any_rise_and_readings_never_do() {
    let run = |ce: f64, temp: f64| {
        json!({"results": [{
            "id": "gpu0.amdgpu.ras_errors", "status": "pass", "message": "",
            "metrics": [
                {"name": "ras_ce.umc", "value": ce, "unit": "errors", "kind": "counter"},
                {"name": "temp_junction", "value": temp, "unit": "°C", "kind": "reading"}
            ]
        }]})
    };
    let c = compare(&run(0.0, 40.0), &run(3.0, 90.0), &flat(0.05), &TERMS);
    assert_eq!(c.grew.len(), 1, "{c:?}");
    assert_eq!(
        (c.grew[0].before, c.grew[0].after, c.grew[0].change),
        (0.0, 3.0, 3.0)
    );
    assert!(c.slower.is_empty() && c.regressed());
    assert!(render_text(&c).contains("ras_ce.umc: 0 -> 3 errors (+3)"));
    let steady = compare(&run(3.0, 90.0), &run(3.0, 40.0), &flat(0.05), &TERMS);
    assert!(!steady.regressed(), "{steady:?}");
}

#[test]
fn durations_readings_and_counts_are_never_compared() {
    let run = |v: f64| {
        json!({"results": [{"id": "gpu0.hip.vector_add", "status": "pass", "message": "",
            "metrics": [
                {"name": "vector_add_ms", "value": v, "unit": "ms", "kind": "duration"},
                {"name": "gemm_fp32_tflops_256", "value": 1.0 / v, "unit": "TFLOP/s", "kind": "reading"},
                {"name": "compute_units", "value": 1.0 / v, "unit": "count", "kind": "count"}]}]})
    };
    let c = compare(&run(1.0), &run(1000.0), &flat(0.05), &TERMS);
    assert!(!c.regressed(), "{c:?}");
    assert_eq!((c.judged, c.not_judged), (0, 3));
}

#[test]
fn reports_without_kinds_fall_back_to_the_unit_but_never_compare_durations() {
    // A report written before metrics said their kind.
    let run = |ms: f64, gbps: f64, ce: f64| {
        json!({"results": [{"id": "gpu0.hip.memcpy", "status": "pass", "message": "",
            "metrics": [
                {"name": "copy_ms", "value": ms, "unit": "ms"},
                {"name": "h2d_bandwidth", "value": gbps, "unit": "GB/s"},
                {"name": "ras_ce.umc", "value": ce, "unit": "errors"},
                {"name": "pci_gpus", "value": 8.0 - ce, "unit": "count"}]}]})
    };
    let c = compare(
        &run(1.0, 50.0, 0.0),
        &run(100.0, 40.0, 1.0),
        &flat(0.05),
        &TERMS,
    );
    assert_eq!(c.slower.len(), 1, "{c:?}");
    assert_eq!(c.slower[0].metric, "h2d_bandwidth");
    assert_eq!(c.grew.len(), 1, "{c:?}");
    assert_eq!((c.judged, c.not_judged), (2, 2));
    // A new report's kind wins over an old one's unit.
    let mut new = run(1.0, 40.0, 0.0);
    new["results"][0]["metrics"][1]["kind"] = json!("reading");
    let c = compare(&run(1.0, 50.0, 0.0), &new, &flat(0.05), &TERMS);
    assert!(c.slower.is_empty(), "{c:?}");
}

#[test]
fn small_moves_and_faster_times_are_not_regressions() {
    let mut after = doc("pass", 97.0, "6.8.5");
    after["results"][0]["metrics"][1]["value"] = json!(9.0);
    let c = compare(&doc("pass", 100.0, "6.8.5"), &after, &flat(0.05), &TERMS);
    assert!(!c.regressed(), "{c:?}");
    assert!(
        crate::saved_report::parse::<Compared, Value>(json!({"x": 1}), "a.json")
            .unwrap_err()
            .0
            .contains("a.json")
    );
}

/// A node of `n` GPUs on the given buses, each with a passing
/// bandwidth check at `gbps`, and peer copies from the first GPU.
fn node(buses: &[u32], gbps: f64) -> Value {
    let scopes: Vec<Value> = std::iter::once(json!({"scope": "node", "properties": {}}))
        .chain(buses.iter().enumerate().map(|(i, b)| {
            json!({"scope": format!("gpu{i}"), "properties": {"pci_address": format!("0000:{b:02x}:00.0")}})
        }))
        .collect();
    let mut results: Vec<Value> = buses
        .iter()
        .enumerate()
        .map(|(i, _)| {
            json!({"id": format!("gpu{i}.hip.bandwidth"), "check": "hip::bandwidth", "scope": format!("gpu{i}"),
                   "status": "pass", "message": "ok",
                   "metrics": [{"name": "h2d_gbps", "value": gbps, "unit": "GB/s", "kind": "throughput"}]})
        })
        .collect();
    let pairs: Vec<Value> = (1..buses.len())
        .map(|i| {
            json!({"name": format!("p2p_gbps.gpu0>gpu{i}"), "value": gbps, "unit": "GB/s",
                   "kind": "throughput", "between": ["gpu0", format!("gpu{i}")]})
        })
        .collect();
    results.push(
        json!({"id": "node.hip.p2p_bandwidth", "check": "hip::p2p_bandwidth", "scope": "node",
                        "status": "pass", "message": "ok", "metrics": pairs}),
    );
    json!({"schema_version": 1, "scopes": scopes, "results": results})
}

#[test]
fn gpus_are_matched_by_pci_address_not_index() {
    // 0x26 fell off the bus: gpu1 is now 0x46. By index, gpu1 would be
    // compared with another GPU; by identity, 0x26 is gone.
    let c = compare(
        &node(&[0x05, 0x26, 0x46], 50.0),
        &node(&[0x05, 0x46], 50.0),
        &flat(0.5),
        &TERMS,
    );
    assert!(c.regressed());
    assert_eq!(c.gpu_count, Some((3, 2)));
    assert_eq!(c.gone.len(), 1, "{c:?}");
    assert!(
        c.gone[0].what.contains("0000:26:00.0"),
        "{}",
        c.gone[0].what
    );
    assert!(c.regressions.is_empty() && c.slower.is_empty(), "{c:?}");
    assert!(render_text(&c).contains("GPU count changed: 3 -> 2"));
    // 0x46 (gpu2 before, gpu1 after) got slower: it is compared with
    // itself and named with both indices and its address.
    let mut after = node(&[0x05, 0x46], 50.0);
    after["results"][1]["metrics"][0]["value"] = json!(10.0);
    let c = compare(&node(&[0x05, 0x26, 0x46], 50.0), &after, &flat(0.5), &TERMS);
    assert_eq!(c.slower.len(), 1, "{c:?}");
    assert_eq!(c.slower[0].id, "gpu1.hip.bandwidth (was gpu2)");
    assert_eq!(c.slower[0].on.as_deref(), Some("0000:46:00.0"));
    // So is the link to it: gpu0>gpu1 after is gpu0>gpu2 before.
    after["results"][2]["metrics"][0]["value"] = json!(10.0);
    let c = compare(&node(&[0x05, 0x26, 0x46], 50.0), &after, &flat(0.5), &TERMS);
    let pair = c
        .slower
        .iter()
        .find(|m| m.metric == "p2p_gbps.gpu0>gpu1")
        .unwrap_or_else(|| panic!("{c:?}"));
    assert_eq!(pair.on.as_deref(), Some("0000:05:00.0 > 0000:46:00.0"));
}

#[test]
fn a_check_that_disappears_is_a_regression_whatever_the_tolerance() {
    let before = node(&[0x05], 50.0);
    let mut after = before.clone();
    after["results"] = json!([]);
    let c = compare(&before, &after, &flat(0.99), &TERMS);
    assert!(c.regressed());
    let gone = c.gone.iter().find(|g| g.what.starts_with("gpu0"));
    assert_eq!(
        gone.map(|g| (g.what.as_str(), g.before.as_str())),
        Some(("gpu0.hip.bandwidth on gpu0 (0000:05:00.0)", "pass")),
        "{c:?}"
    );
}

#[test]
fn a_measurement_gone_while_its_check_passes_is_a_regression() {
    let before = node(&[0x05, 0x26], 50.0);
    let mut after = before.clone();
    after["results"][0]["metrics"][0]["value"] = json!(null);
    after["results"][2]["metrics"] = json!([]);
    let c = compare(&before, &after, &flat(0.99), &TERMS);
    assert!(c.regressed(), "{c:?}");
    let what: Vec<(String, bool)> = c.missing.iter().map(|m| (m.what(), m.null)).collect();
    assert_eq!(
        what,
        [
            (
                "p2p_gbps.gpu0>gpu1 (0000:05:00.0 > 0000:26:00.0)".to_string(),
                false
            ),
            ("h2d_gbps (0000:05:00.0)".to_string(), true)
        ]
    );
    let text = render_text(&c);
    assert!(
        text.contains(
            "gpu0.hip.bandwidth h2d_gbps (0000:05:00.0): 50 GB/s -> missing (written with no value)"
        ),
        "{text}"
    );
    // A check that stopped passing is reported as such, not as each of
    // its measurements.
    after["results"][0]["status"] = json!("fail");
    let c = compare(&before, &after, &flat(0.99), &TERMS);
    assert_eq!(c.missing.len(), 1, "{c:?}");
    assert_eq!(c.regressions.len(), 1, "{c:?}");
}

#[test]
fn gpus_a_report_does_not_identify_are_matched_by_index_and_it_says_so() {
    let before = node(&[0x05, 0x26], 50.0);
    let mut after = before.clone();
    after["scopes"][2]["properties"] = json!({});
    let c = compare(&before, &after, &flat(0.05), &TERMS);
    assert!(!c.regressed(), "{c:?}");
    let why = c.by_index.as_deref().unwrap_or_default();
    assert!(
        why.starts_with("gpu1 of the second run have no pci_address or unique_id"),
        "{why}"
    );
    assert!(render_text(&c).starts_with("Note: gpu1 of the second run"));
    // Pairs in reports older than `between` are matched by the GPUs
    // their names hold.
    let mut old = node(&[0x26, 0x05], 50.0);
    old["results"][2]["metrics"][0]
        .as_object_mut()
        .unwrap()
        .remove("between");
    old["results"][2]["metrics"][0]["value"] = json!(10.0);
    let mut reversed = node(&[0x05, 0x26], 50.0);
    reversed["results"][2]["metrics"][0]["name"] = json!("p2p_gbps.gpu1>gpu0");
    reversed["results"][2]["metrics"][0]["between"] = json!(["gpu1", "gpu0"]);
    reversed["results"][2]["metrics"][0]["value"] = json!(10.0);
    let c = compare(&old, &reversed, &flat(0.05), &TERMS);
    assert!(c.slower.is_empty() && c.missing.is_empty(), "{c:?}");
}

/// A node whose module check `module` and, above it, `n` GPU checks
/// reading firmware versions; `loaded` says whether the module loaded.
fn stack(n: usize, loaded: bool) -> Value {
    let mut results = vec![
        json!({"id": "node.amdgpu.module_live", "status": if loaded { "pass" } else { "fail" },
                                  "message": if loaded { "live" } else { "not loaded" }}),
    ];
    let mut versions = serde_json::Map::new();
    versions.insert("node".into(), json!({"rocm": "7.1.1"}));
    for i in 0..n {
        let mut r = json!({"id": format!("gpu{i}.firmware.versions"), "status": "pass", "message": "ok",
                           "facts": {"fw_mec": "0x9a", "vbios": "113"}});
        if loaded {
            versions.insert(format!("gpu{i}"), json!({"fw_mec": "0x9a", "vbios": "113"}));
        } else {
            r["status"] = json!("blocked");
            r["blocked_by"] = json!("node.amdgpu.module_live");
            r["facts"] = json!({});
        }
        results.push(r);
    }
    json!({"schema_version": 1, "versions": versions, "results": results})
}

#[test]
fn blocked_checks_are_grouped_under_their_root_and_their_versions_not_read() {
    let c = compare(&stack(8, true), &stack(8, false), &flat(0.05), &TERMS);
    assert_eq!(c.regressions.len(), 9);
    let text = render_text(&c);
    assert!(
        text.contains(
            "Checks that stopped passing: 9\n  node.amdgpu.module_live pass -> fail: not loaded\n    8 checks above it blocked\n"
        ),
        "{text}"
    );
    assert!(!text.contains("gpu3.firmware.versions"), "{text}");
    // 16 versions, not read for one reason: one line.
    assert_eq!(c.versions.len(), 16);
    assert!(
        c.versions
            .iter()
            .all(|v| v.not_read.as_deref() == Some("blocked by node.amdgpu.module_live"))
    );
    assert!(
        text.contains("gpu0, gpu1, gpu2, gpu3 and 4 more: 16 versions (fw_mec, vbios) not read (blocked by node.amdgpu.module_live)"),
        "{text}"
    );
    assert!(!text.contains("(none)"), "{text}");
    let md = render_markdown(&c);
    assert!(md.contains("8 checks above it blocked"), "{md}");
    assert!(
        md.contains("not read (blocked by node.amdgpu.module_live)"),
        "{md}"
    );
    // Few versions not read are listed one by one.
    let c = compare(&stack(1, true), &stack(1, false), &flat(0.05), &TERMS);
    let text = render_text(&c);
    assert!(
        text.contains(
            "fw_mec                   0x9a -> not read (blocked by node.amdgpu.module_live)"
        ),
        "{text}"
    );
    assert!(text.contains("1 check above it blocked"), "{text}");
}

#[test]
fn checks_blocked_by_a_root_that_failed_before_too_are_one_line() {
    let mut before = stack(3, true);
    before["results"][0]["status"] = json!("warn");
    let c = compare(&before, &stack(3, false), &flat(0.05), &TERMS);
    let text = render_text(&c);
    assert!(
        text.contains(
            "node.amdgpu.module_live (did not pass before either)\n    3 checks above it blocked"
        ),
        "{text}"
    );
}

proptest::proptest! {
    #[test]
    fn any_documents_compare_and_render_without_panicking(
        before in crate::compare::tests::arbitrary_doc(),
        after in crate::compare::tests::arbitrary_doc(),
        tolerance in 0.0f64..1.0,
    ) {
        let c = compare(&before, &after, &flat(tolerance), &TERMS);
        let _ = render_text(&c);
        let _ = render_markdown(&c);
    }
}

/// Results documents of a few scopes, checks and metrics with values
/// of any kind, including ones of the wrong JSON type.
pub(super) fn arbitrary_doc() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let value = prop_oneof![
        Just(json!(null)),
        any::<f64>().prop_map(|v| json!(v)),
        "[a-z]{0,3}".prop_map(|s| json!(s)),
        Just(json!(["gpu0", "gpu9"])),
        Just(json!({"min": 1.0, "median": "x", "max": 2.0, "samples": 2})),
        Just(json!("throughput")),
        Just(json!("counter")),
    ];
    let metric = (value.clone(), value.clone(), value.clone(), value.clone()).prop_map(
        |(v, kind, spread, between)| {
            json!({"name": "p2p_gbps.gpu0>gpu1", "value": v, "unit": "GB/s", "kind": kind,
                   "spread": spread, "between": between})
        },
    );
    let result = (
        prop::sample::select(vec!["gpu0.a.b", "node.c.d", "gpu1.a.b", "x"]),
        prop::sample::select(vec!["pass", "fail", "blocked", "skipped"]),
        value.clone(),
        prop::collection::vec(metric, 0..3),
    )
        .prop_map(|(id, status, blocked_by, metrics)| {
            json!({"id": id, "status": status, "blocked_by": blocked_by, "message": "m",
                   "metrics": metrics, "facts": {"fw": "1"}})
        });
    (prop::collection::vec(result, 0..5), value).prop_map(|(results, v)| {
        json!({"schema_version": 1, "results": results,
               "versions": {"gpu0": {"fw": v}, "node": {"rocm": "1"}},
               "scopes": [{"scope": "gpu0", "properties": {"pci_address": v}}, {"scope": "node"}]})
    })
}
