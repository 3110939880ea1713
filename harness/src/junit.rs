//! JUnit XML that CI systems accept: one flat `<testsuite>` per scope,
//! identity as suite properties, blocked and skipped as `<skipped>`.
//!
//! The node's name is part of every suite's name and every case's
//! classname (`node17.gpu3.hip`), and the suites' `hostname` attribute, so
//! the reports of many nodes merge without two cases sharing a classname
//! and name (GitHub and GitLab reporters key cases by the pair). Results
//! map to JUnit as the exit code judges them: a failure, timeout or crash
//! is a `<failure>` (a crash an `<error>`), a warning passes (its finding
//! in `<system-out>`) unless the run fails on warnings, and a waived
//! result is `<skipped type="waived">` with the site's reason.

use crate::document::IdentityKeys;
use crate::model::Scope;
use crate::output::xml_safe;
use crate::result::{CheckResult, RunReport};
use crate::verdict::Status;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, Writer};

/// Renders a run as JUnit XML.
///
/// `node_properties` are added to the `node` suite (versions, sysroot, tier);
/// its `hostname` (the node's name), when present, to every suite, as a
/// property and the `hostname` attribute, and it prefixes suite names and
/// classnames.
/// Every string that enters the document (names, messages, properties,
/// output) goes through [`xml_safe`]: a VBIOS string or a sysroot path may
/// hold characters XML 1.0 cannot carry, and one of them makes the whole
/// report unreadable to CI. The JSON report keeps the exact text.
pub fn render(
    report: &RunReport,
    node_properties: &[(String, String)],
    keys: &IdentityKeys,
) -> Result<String, String> {
    // No timestamp on <testsuites>: Jenkins' JUnit schema does not allow it
    // there (each <testsuite> carries one).
    let mut junit = Report::new("rocgate");
    junit.set_time(report.duration);
    let node = node_properties
        .iter()
        .find(|(k, _)| k == keys.host)
        .map(|(_, v)| xml_safe(v))
        .filter(|v| !v.trim().is_empty());
    // Dots separate packages in a classname (Jenkins groups by them): a
    // node called `a.example.com` is one package, `a_example_com`.
    let prefix = node
        .as_ref()
        .map_or_else(String::new, |n| format!("{}.", n.trim().replace('.', "_")));
    for scope in report.scope_list() {
        let mut suite = TestSuite::new(format!("{prefix}{}", xml_safe(&scope.label())));
        suite.set_timestamp(report.started_at.fixed_offset());
        if let Some(n) = &node {
            // JUnit's own `hostname` attribute, whatever the suites call it.
            suite.extra.insert("hostname".into(), n.clone().into());
        }
        let results: Vec<&CheckResult> =
            report.results.iter().filter(|r| r.scope == scope).collect();
        suite.set_time(results.iter().map(|r| r.duration).sum());
        if scope == Scope::Node {
            for (k, v) in node_properties {
                suite.add_property(Property::new(xml_safe(k), xml_safe(v)));
            }
        } else if let Some((k, v)) = node_properties.iter().find(|(k, _)| k == keys.host) {
            // Every suite names its node, so reports merged from a fleet
            // still say where each GPU was.
            suite.add_property(Property::new(xml_safe(k), xml_safe(v)));
        }
        for (k, v) in &report.scope_info(scope).properties {
            suite.add_property(Property::new(xml_safe(k), xml_safe(v)));
        }
        let first = report
            .first_failing_layer(Some(scope))
            .map_or("none", |l| l.as_str());
        suite.add_property(Property::new("first_failing_layer", first));
        if let Some(why) = &report.interrupted {
            suite.add_property(Property::new("interrupted", xml_safe(why)));
        }
        suite.add_test_cases(
            results
                .into_iter()
                .map(|r| test_case(r, &prefix, report.fail_on_warn)),
        );
        junit.add_test_suite(suite);
    }
    let xml = junit
        .to_string()
        .map_err(|e| format!("failed to serialise the JUnit report: {e}"))?;
    drop_root_skipped_attribute(&xml)
}

/// A fault's `message` attribute and body, for the reporters that show only
/// those (GitHub's JUnit actions read neither properties nor system-out):
/// the message is the finding code and the first line of what was seen; the
/// body's first line is that line, its second the next step, then the rest
/// of the message and the code.
fn fault_text(r: &CheckResult) -> (String, String) {
    let (first, rest) = r.message.split_once('\n').unwrap_or((&r.message, ""));
    match &r.finding {
        Some(f) => {
            let mut body = format!("{first}\nnext step: {}", f.next_step);
            if !rest.is_empty() {
                body.push('\n');
                body.push_str(rest);
            }
            body.push_str(&format!("\ncode: {}", f.code));
            (format!("{}: {first}", f.code), body)
        }
        None => (first.to_string(), r.message.clone()),
    }
}

/// What a waiver says, in one line: `waived (reason; until 2027-01-01;
/// rocgate.toml:12)`.
fn waiver_text(w: &crate::policy::WaiverNote) -> String {
    let until = w
        .expires
        .as_deref()
        .map_or_else(String::new, |d| format!("; until {d}"));
    let state = if w.expired {
        "waiver expired"
    } else {
        "waived"
    };
    format!("{state} ({}{until}; {})", w.reason, w.source)
}

fn test_case(r: &CheckResult, prefix: &str, fail_on_warn: bool) -> TestCase {
    let status = match r.status {
        _ if r.waived() => {
            let mut s = TestCaseStatus::skipped();
            let (message, _) = fault_text(r);
            let note = r.waiver.as_ref().map(waiver_text).unwrap_or_default();
            s.set_message(xml_safe(&format!("{note}: {message}")));
            s.set_type("waived");
            s
        }
        Status::Pass => TestCaseStatus::success(),
        Status::Warn if !fail_on_warn => TestCaseStatus::success(),
        Status::Fail | Status::Warn | Status::Timeout | Status::Crash => {
            let kind = if r.status == Status::Crash {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut s = TestCaseStatus::non_success(kind);
            let (message, text) = fault_text(r);
            s.set_message(xml_safe(&message));
            s.set_type(xml_safe(
                r.finding
                    .as_ref()
                    .map_or(r.status.as_str(), |f| f.code.as_str()),
            ));
            s.set_description(xml_safe(&text));
            s
        }
        Status::Blocked | Status::Skipped => {
            let mut s = TestCaseStatus::skipped();
            // "unverifiable: kernel log unreadable": why it did not look
            // comes first, where reporters show it.
            match r.skip_reason {
                Some(reason) => s.set_message(xml_safe(&format!("{reason}: {}", r.message))),
                None => s.set_message(xml_safe(&r.message)),
            };
            s.set_type(
                r.skip_reason
                    .map_or(r.status.as_str(), |reason| reason.as_str()),
            );
            s
        }
    };
    let mut case = TestCase::new(xml_safe(r.name()), status);
    case.set_classname(xml_safe(&format!(
        "{prefix}{}.{}",
        r.scope.label(),
        r.layer
    )));
    case.set_time(r.duration);
    // Output of nothing but escape sequences leaves no element behind.
    let out = xml_safe(&system_out(r));
    if !out.is_empty() {
        case.set_system_out(out);
    }
    case
}

/// What a result's `system-out` says before cleaning: a pass's message,
/// its metrics (those between two scopes as matrices), then its captured
/// output.
pub(crate) fn system_out(r: &CheckResult) -> String {
    let mut out = String::new();
    if let Some(w) = &r.waiver {
        out.push_str(&waiver_text(w));
        out.push('\n');
    }
    match (&r.finding, r.status) {
        (Some(f), Status::Warn) => {
            out.push_str(&format!(
                "warn [{}]: {}\nnext step: {}\n",
                f.code, r.message, f.next_step
            ));
        }
        (_, Status::Pass) => {
            out.push_str(&r.message);
            out.push('\n');
        }
        _ => {}
    }
    for m in r.metrics.iter().filter(|m| m.between.is_none()) {
        out.push_str(&format!("metric {} = {} {}\n", m.name, m.value, m.unit));
    }
    for m in crate::pair_grid::pair_grids(&r.metrics) {
        out.push_str(&m.text());
    }
    out.push_str(&r.output);
    out
}

/// The JUnit schema Jenkins' xunit plugin validates against does not allow a
/// `skipped` attribute on `<testsuites>` (it does on `<testsuite>`), so drop it.
fn drop_root_skipped_attribute(xml: &str) -> Result<String, String> {
    let mut reader = Reader::from_str(xml);
    let mut writer = Writer::new(Vec::with_capacity(xml.len()));
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("failed to re-read the JUnit report: {e}"))?;
        let event = match event {
            Event::Eof => break,
            Event::Start(start) if start.name().as_ref() == b"testsuites" => {
                let mut root = BytesStart::new("testsuites");
                for attr in start.attributes().flatten() {
                    if attr.key.as_ref() != b"skipped" {
                        root.push_attribute(attr);
                    }
                }
                Event::Start(root)
            }
            other => other,
        };
        writer
            .write_event(event)
            .map_err(|e| format!("failed to write the JUnit report: {e}"))?;
    }
    String::from_utf8(writer.into_inner()).map_err(|e| format!("JUnit report is not UTF-8: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_stack::{self, B, C};
    use crate::model::{Layer, Tier};
    use crate::result::ScopeInfo;
    use crate::test_support::strategies::{any_report, ordinary_text, text};
    use crate::test_support::xml::{expected, junit_clean, read_back, well_formed};
    use crate::verdict::{Finding, Severity};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// A result as these tests want one: its message, a finding when it
    /// failed, a reason when skipped, and output that XML must escape.
    fn result(id: &str, scope: Scope, layer: Layer, status: Status, message: &str) -> CheckResult {
        let mut r = crate::test_support::result(id, layer, scope, status);
        r.message = message.into();
        r.finding = (status == Status::Fail)
            .then(|| Finding::new("b-not-loaded", Severity::Fail, message, "load b"));
        r.skip_reason = (status == Status::Skipped).then_some(crate::SkipReason::NotApplicable);
        r.duration = Duration::from_millis(3);
        r.output = "line <1> & \"two\"".into();
        r
    }

    #[test]
    fn one_flat_suite_per_scope_with_identity() {
        let mut info = ScopeInfo::default();
        info.push("pci_address", "0000:05:00.0");
        let report = RunReport {
            tier: Tier::Quick,
            started_at: chrono::Local::now(),
            duration: Duration::from_millis(10),
            results: vec![
                result(
                    "node.b.module_live",
                    Scope::Node,
                    B,
                    Status::Fail,
                    "not loaded",
                ),
                result(
                    "gpu0.c.topology_node",
                    Scope::Gpu(0),
                    C,
                    Status::Blocked,
                    "blocked by node.b.module_live: not loaded",
                ),
            ],
            scopes: vec![(Scope::Gpu(0), info)],
            interrupted: None,
            strict: false,
            fail_on_warn: false,
        };
        let xml = render(
            &report,
            &[("tier".into(), "quick".into())],
            &crate::test_support::KEYS,
        )
        .unwrap();
        assert!(xml.contains(r#"<testsuite name="node""#), "{xml}");
        assert!(xml.contains(r#"<testsuite name="gpu0""#));
        assert!(xml.contains(r#"classname="gpu0.c""#));
        assert!(xml.contains(r#"<property name="pci_address" value="0000:05:00.0"/>"#));
        assert!(xml.contains(r#"<property name="first_failing_layer" value="b"/>"#));
        assert!(xml.contains(r#"type="b-not-loaded""#));
        assert!(xml.contains(r#"<skipped message="blocked by node.b.module_live: not loaded""#));
        assert!(xml.contains("&lt;1&gt; &amp;"));
        let root = xml.lines().find(|l| l.contains("<testsuites")).unwrap();
        assert!(!root.contains("skipped="), "{root}");
        assert_eq!(xml.matches("<testsuite ").count(), 2);
    }

    #[test]
    fn characters_xml_cannot_carry_are_dropped_everywhere() {
        let nasty = "a\u{FFFE}b\u{FFFF}c\u{1}d\u{1b}[31me\u{1b}[0m]]>\"'<&";
        let mut r = result("node.b.module_live", Scope::Node, B, Status::Fail, nasty);
        r.check = format!("b::{nasty}");
        r.finding = Some(Finding::new(nasty, Severity::Fail, nasty, nasty));
        r.output = nasty.into();
        r.metrics = vec![crate::verdict::Metric {
            name: nasty.into(),
            value: 1.0,
            unit: nasty.into(),
            kind: None,
            spread: None,
            floor: None,
            between: None,
        }];
        r.facts.insert(nasty.into(), nasty.into());
        let mut info = ScopeInfo::default();
        info.push(nasty, nasty);
        let report = RunReport {
            tier: Tier::Quick,
            started_at: chrono::Local::now(),
            duration: Duration::from_millis(10),
            results: vec![r],
            scopes: vec![(Scope::Gpu(0), info)],
            interrupted: Some(nasty.into()),
            strict: false,
            fail_on_warn: false,
        };
        let xml = render(
            &report,
            &[(nasty.into(), nasty.into())],
            &crate::test_support::KEYS,
        )
        .unwrap();
        well_formed(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
        assert!(
            !xml.contains('\u{FFFE}') && !xml.contains('\u{1b}'),
            "{xml}"
        );
        assert!(
            xml.contains("value=\"abcde]]&gt;&quot;&apos;&lt;&amp;\""),
            "{xml}"
        );
        quick_junit::Report::deserialize_from_str(&xml).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any text in any field: the JUnit document is well-formed, reads
        /// back as the cleaned text, and survives the report writer; the
        /// JSON report keeps the exact text.
        #[test]
        fn reports_of_any_text_parse_and_json_keeps_it(
            report in any_report(text()),
            node in proptest::collection::vec((text(), text()), 0..4),
        ) {
            let xml = render(&report, &node, &crate::test_support::KEYS).unwrap();
            if let Err(e) = well_formed(&xml) {
                return Err(TestCaseError::fail(format!("{e}:\n{xml}")));
            }
            let parsed = quick_junit::Report::deserialize_from_str(&xml);
            prop_assert!(parsed.is_ok(), "{:?}:\n{}", parsed.err(), xml);
            let seen = read_back(&xml).map_err(|e| TestCaseError::fail(format!("{e}:\n{xml}")))?;
            prop_assert_eq!(seen, expected(&report, &node, junit_clean), "{}", xml);

            // The writer hands the document over byte for byte.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("junit.xml");
            crate::atomic::write(&path, xml.as_bytes()).unwrap();
            prop_assert_eq!(std::fs::read_to_string(&path).unwrap(), xml);

            let versions = BTreeMap::from([("node".to_string(), node.iter().cloned().collect())]);
            let json = crate::json::render(
                &report,
                &crate::json::JsonContext {
                    tool: "rocgate test",
                    node_properties: &node,
                    versions: &versions,
                    decision: None,
                },
            )
            .unwrap();
            let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
            let saved: Vec<crate::SavedResult> = serde_json::from_value(doc["results"].clone()).unwrap();
            let back: Vec<CheckResult> = saved.into_iter().map(|r| r.resolve(test_stack::ALL)).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(&back, &report.results);
            let node_back: BTreeMap<String, String> = serde_json::from_value(doc["node"].clone()).unwrap();
            prop_assert_eq!(node_back, node.iter().cloned().collect::<BTreeMap<_, _>>());
            let versions_back: BTreeMap<String, BTreeMap<String, String>> = serde_json::from_value(doc["versions"].clone()).unwrap();
            prop_assert_eq!(versions_back, versions);
            prop_assert_eq!(doc["interrupted"].as_str(), report.interrupted.as_deref());
            for (i, scope) in report.scope_list().into_iter().enumerate() {
                let props_back: BTreeMap<String, String> = serde_json::from_value(doc["scopes"][i]["properties"].clone()).unwrap();
                let want: BTreeMap<String, String> = report.scope_info(scope).properties.into_iter().collect();
                prop_assert_eq!(props_back, want);
            }
        }

        /// Ordinary text (markup and quotes included) comes back exactly:
        /// cleaning takes nothing from it.
        #[test]
        fn ordinary_text_reads_back_exactly(
            report in any_report(ordinary_text()),
            node in proptest::collection::vec((ordinary_text(), ordinary_text()), 0..4),
        ) {
            let xml = render(&report, &node, &crate::test_support::KEYS).unwrap();
            let seen = read_back(&xml).map_err(|e| TestCaseError::fail(format!("{e}:\n{xml}")))?;
            prop_assert_eq!(seen, expected(&report, &node, str::to_string), "{}", xml);
        }
    }
}
