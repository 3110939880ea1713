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
pub fn render(report: &RunReport, node_properties: &[(String, String)]) -> Result<String, String> {
    // No timestamp on <testsuites>: Jenkins' JUnit schema does not allow it
    // there (each <testsuite> carries one).
    let mut junit = Report::new("rocgate");
    junit.set_time(report.duration);
    let node = node_properties
        .iter()
        .find(|(k, _)| k == "hostname")
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
            suite.extra.insert("hostname".into(), n.clone().into());
        }
        let results: Vec<&CheckResult> =
            report.results.iter().filter(|r| r.scope == scope).collect();
        suite.set_time(results.iter().map(|r| r.duration).sum());
        if scope == Scope::Node {
            for (k, v) in node_properties {
                suite.add_property(Property::new(xml_safe(k), xml_safe(v)));
            }
        } else if let Some((k, v)) = node_properties.iter().find(|(k, _)| k == "hostname") {
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
fn system_out(r: &CheckResult) -> String {
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
    for m in crate::matrix::matrices(&r.metrics) {
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
    use crate::verdict::{Finding, Severity};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn result(id: &str, scope: Scope, layer: Layer, status: Status, message: &str) -> CheckResult {
        let name = id.rsplit('.').next().unwrap_or(id);
        CheckResult {
            id: id.into(),
            check: format!("{layer}::{name}"),
            layer,
            scope,
            status,
            message: message.into(),
            finding: (status == Status::Fail)
                .then(|| Finding::new("b-not-loaded", Severity::Fail, message, "load b")),
            skip_reason: (status == Status::Skipped).then_some(crate::SkipReason::NotApplicable),
            waiver: None,
            blocked_by: None,
            duration: Duration::from_millis(3),
            output: "line <1> & \"two\"".into(),
            metrics: vec![],
            facts: Default::default(),
        }
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
        let xml = render(&report, &[("tier".into(), "quick".into())]).unwrap();
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

    /// Whether XML 1.0 allows `c` anywhere in a document.
    fn is_xml_char(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
    }

    /// Reads `xml` to the end as a strict consumer would: only XML 1.0
    /// characters (quick-xml does not check them), balanced elements,
    /// attributes and references that resolve.
    fn well_formed(xml: &str) -> Result<(), String> {
        if let Some((at, c)) = xml.char_indices().find(|&(_, c)| !is_xml_char(c)) {
            return Err(format!(
                "U+{:04X} at byte {at} is not an XML 1.0 character",
                c as u32
            ));
        }
        let mut reader = Reader::from_str(xml);
        let mut depth = 0usize;
        loop {
            let event = reader.read_event().map_err(|e| e.to_string())?;
            let attributes = |e: &BytesStart<'_>| -> Result<(), String> {
                for a in e.attributes() {
                    a.map_err(|e| e.to_string())?
                        .normalized_value(quick_xml::XmlVersion::Explicit1_0)
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            };
            match event {
                Event::Eof => break,
                Event::Start(e) => {
                    depth += 1;
                    attributes(&e)?;
                }
                Event::Empty(e) => attributes(&e)?,
                Event::End(_) => depth = depth.checked_sub(1).ok_or("unbalanced end tag")?,
                Event::Text(t) => {
                    t.decode().map_err(|e| e.to_string())?;
                }
                Event::GeneralRef(r) => {
                    let known = r.is_char_ref()
                        && r.resolve_char_ref().map_err(|e| e.to_string())?.is_some()
                        || quick_xml::escape::resolve_predefined_entity(
                            &r.decode().map_err(|e| e.to_string())?,
                        )
                        .is_some();
                    if !known {
                        return Err(format!("unknown reference {r:?}"));
                    }
                }
                _ => {}
            }
        }
        if depth == 0 {
            Ok(())
        } else {
            Err(format!("{depth} elements left open"))
        }
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
        let xml = render(&report, &[(nasty.into(), nasty.into())]).unwrap();
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

    /// Text a report may be handed: anything a Rust string holds, with the
    /// characters and sequences that break XML or JSON made likely.
    fn text() -> BoxedStrategy<String> {
        joined(prop_oneof![
            any::<char>().prop_map(String::from),
            (0u32..0x20).prop_filter_map("control", |b| char::from_u32(b).map(String::from)),
            (0x7fu32..0xa0).prop_filter_map("C1", |b| char::from_u32(b).map(String::from)),
            Just("\u{FFFE}".to_string()),
            Just("\u{FFFF}".to_string()),
            Just("]]>".to_string()),
            Just("\"'".to_string()),
            Just("<&>;&amp;".to_string()),
            Just("\u{1b}[1;31m".to_string()),
            Just("\r\n\t ".to_string()),
            Just("::".to_string()),
        ])
    }

    /// Up to 12 of `parts`, one after the other.
    fn joined(parts: impl Strategy<Value = String> + 'static) -> BoxedStrategy<String> {
        proptest::collection::vec(parts, 0..12)
            .prop_map(|parts| parts.concat())
            .boxed()
    }

    /// Text with no character that cleaning drops or XML normalises: no
    /// control character (so no tab, newline or escape sequence either) and
    /// no U+FFFE/U+FFFF, but markup, quotes and any other plane.
    fn ordinary_text() -> BoxedStrategy<String> {
        joined(prop_oneof![
            any::<char>()
                .prop_filter("ordinary", |c| !c.is_control()
                    && !matches!(c, '\u{FFFE}' | '\u{FFFF}'))
                .prop_map(String::from),
            Just("]]>".to_string()),
            Just("\"'".to_string()),
            Just("<&>;&amp;&#1;".to_string()),
            Just("::".to_string()),
            Just(" ".to_string()),
        ])
    }

    fn any_result(text: BoxedStrategy<String>) -> impl Strategy<Value = CheckResult> {
        (
            (
                text.clone(),
                text.clone(),
                text.clone(),
                text.clone(),
                text.clone(),
                text.clone(),
            ),
            (
                0usize..7,
                any::<bool>(),
                0u32..3,
                (-1_000_000i32..1_000_000).prop_map(f64::from),
            ),
            proptest::collection::vec((text.clone(), text), 0..3),
        )
            .prop_map(
                |(
                    (id, check, message, code, next, output),
                    (status, waived, gpu, value),
                    facts,
                )| {
                    let status = Status::ALL[status];
                    CheckResult {
                        id,
                        check,
                        layer: test_stack::ALL[gpu as usize % test_stack::ALL.len()],
                        scope: if gpu == 0 {
                            Scope::Node
                        } else {
                            Scope::Gpu(gpu - 1)
                        },
                        status,
                        message: message.clone(),
                        finding: status.has_finding().then(|| {
                            Finding::new(
                                code.as_str(),
                                Severity::Fail,
                                message.as_str(),
                                next.as_str(),
                            )
                        }),
                        skip_reason: (status == Status::Skipped)
                            .then_some(crate::SkipReason::Unverifiable),
                        waiver: waived.then(|| crate::policy::WaiverNote {
                            reason: message.clone(),
                            expires: None,
                            expired: false,
                            source: next.clone(),
                        }),
                        blocked_by: (status == Status::Blocked).then(|| next.clone()),
                        duration: Duration::ZERO,
                        output: output.clone(),
                        metrics: vec![crate::verdict::Metric {
                            name: code,
                            value,
                            unit: next,
                            kind: None,
                            spread: None,
                            floor: Some(value),
                            between: None,
                        }],
                        facts: facts.into_iter().collect(),
                    }
                },
            )
    }

    /// A run over `results` with `props` as GPU 0's identity.
    fn any_report(text: BoxedStrategy<String>) -> impl Strategy<Value = RunReport> {
        (
            proptest::collection::vec(any_result(text.clone()), 1..4),
            proptest::collection::vec((text.clone(), text.clone()), 0..4),
            proptest::option::of(text),
        )
            .prop_map(|(results, props, interrupted)| RunReport {
                tier: Tier::Standard,
                started_at: chrono::Local::now(),
                duration: Duration::from_millis(1),
                results,
                scopes: vec![(Scope::Gpu(0), ScopeInfo { properties: props })],
                interrupted,
                strict: false,
                fail_on_warn: false,
            })
    }

    /// One element of a JUnit document as a reader sees it: the element's
    /// name, the attributes a test compares and its text.
    type Seen = (String, Vec<(String, String)>, String);

    /// XML 1.0 end-of-line handling, which every reader applies to text.
    fn eol(s: &str) -> String {
        s.replace("\r\n", "\n").replace('\r', "\n")
    }

    /// XML 1.0 attribute-value normalisation: tabs and line ends become
    /// spaces in whatever reads the document.
    fn attr(s: &str) -> String {
        eol(s).replace(['\t', '\n'], " ")
    }

    /// What a conforming reader takes from `xml`: each `testsuite`,
    /// `property`, `testcase`, `failure`, `error`, `skipped` and `system-out`
    /// in document order, with the attributes that carry report text
    /// (normalised) and the text (line ends normalised, references resolved).
    fn read_back(xml: &str) -> Result<Vec<Seen>, String> {
        // Element, attributes compared, whether its text is (the others
        // hold only elements and the indentation between them).
        const KEEP: [(&str, &[&str], bool); 7] = [
            ("testsuite", &["name"], false),
            ("property", &["name", "value"], false),
            ("testcase", &["name", "classname"], false),
            ("failure", &["message", "type"], true),
            ("error", &["message", "type"], true),
            ("skipped", &["message", "type"], true),
            ("system-out", &[], true),
        ];
        let mut reader = Reader::from_str(xml);
        let mut seen: Vec<Seen> = Vec::new();
        // Index in `seen` of each open element whose text is kept; None for
        // the others.
        let mut open: Vec<Option<usize>> = Vec::new();
        let e = |e: &dyn std::fmt::Display| e.to_string();
        loop {
            let event = reader.read_event().map_err(|x| e(&x))?;
            let text = match &event {
                Event::Eof => break,
                Event::Start(start) | Event::Empty(start) => {
                    let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
                    let mut kept = None;
                    if let Some((_, wanted, has_text)) = KEEP.iter().find(|(n, ..)| *n == name) {
                        let mut attrs = Vec::new();
                        for a in start.attributes() {
                            let a = a.map_err(|x| e(&x))?;
                            let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
                            if wanted.contains(&key.as_str()) {
                                let value = a
                                    .normalized_value(quick_xml::XmlVersion::Explicit1_0)
                                    .map_err(|x| e(&x))?;
                                attrs.push((key, value.into_owned()));
                            }
                        }
                        attrs.sort();
                        seen.push((name, attrs, String::new()));
                        kept = has_text.then_some(seen.len() - 1);
                    }
                    if matches!(event, Event::Start(_)) {
                        open.push(kept);
                    }
                    continue;
                }
                Event::End(_) => {
                    open.pop();
                    continue;
                }
                Event::Text(t) => t
                    .xml_content(quick_xml::XmlVersion::Explicit1_0)
                    .map_err(|x| e(&x))?
                    .into_owned(),
                Event::CData(t) => eol(&t.decode().map_err(|x| e(&x))?),
                Event::GeneralRef(r) => match r.resolve_char_ref().map_err(|x| e(&x))? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(
                        &r.decode().map_err(|x| e(&x))?,
                    )
                    .ok_or_else(|| format!("unknown reference {r:?}"))?
                    .to_string(),
                },
                _ => continue,
            };
            if let Some(Some(i)) = open.last() {
                seen[*i].2.push_str(&text);
            }
        }
        Ok(seen)
    }

    /// What `read_back` must find in the rendering of `report`, each string
    /// passed through `clean` (how render cleans it) and then normalised as
    /// XML readers do.
    fn expected(
        report: &RunReport,
        node: &[(String, String)],
        clean: fn(&str) -> String,
    ) -> Vec<Seen> {
        let kv = |pairs: &[(&str, String)]| {
            let mut v: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), attr(&clean(v))))
                .collect();
            v.sort();
            v
        };
        let el = |name: &str, attrs: Vec<(String, String)>, text: &str| {
            (name.to_string(), attrs, eol(&clean(text)))
        };
        let mut want = Vec::new();
        // The node's name, when given, prefixes suites and classnames, its
        // dots made underscores.
        let hostname = node.iter().find(|(k, _)| k == "hostname");
        let prefix = hostname
            .map(|(_, v)| xml_safe(v))
            .filter(|v| !v.trim().is_empty())
            .map_or_else(String::new, |n| format!("{}.", n.trim().replace('.', "_")));
        for scope in report.scope_list() {
            want.push(el(
                "testsuite",
                kv(&[("name", format!("{prefix}{}", scope.label()))]),
                "",
            ));
            let mut props: Vec<(String, String)> = Vec::new();
            if scope == Scope::Node {
                props.extend(node.iter().cloned());
            } else if let Some(h) = hostname {
                props.push(h.clone());
            }
            props.extend(report.scope_info(scope).properties);
            props.push((
                "first_failing_layer".into(),
                report
                    .first_failing_layer(Some(scope))
                    .map_or("none", |l| l.as_str())
                    .into(),
            ));
            if let Some(why) = &report.interrupted {
                props.push(("interrupted".into(), why.clone()));
            }
            for (k, v) in props {
                want.push(el("property", kv(&[("name", k), ("value", v)]), ""));
            }
            for r in report.results.iter().filter(|r| r.scope == scope) {
                let classname = format!("{prefix}{}.{}", r.scope.label(), r.layer);
                want.push(el(
                    "testcase",
                    kv(&[("name", r.name().to_string()), ("classname", classname)]),
                    "",
                ));
                let first = r
                    .message
                    .split_once('\n')
                    .map_or(r.message.as_str(), |(f, _)| f);
                match r.status {
                    _ if r.waived() => {
                        let w = r.waiver.as_ref().unwrap();
                        let until = w
                            .expires
                            .as_ref()
                            .map_or_else(String::new, |d| format!("; until {d}"));
                        let seen = match &r.finding {
                            Some(f) => format!("{}: {first}", f.code),
                            None => first.to_string(),
                        };
                        let message = format!("waived ({}{until}; {}): {seen}", w.reason, w.source);
                        want.push(el(
                            "skipped",
                            kv(&[("message", message), ("type", "waived".into())]),
                            "",
                        ));
                    }
                    Status::Pass => {}
                    Status::Warn if !report.fail_on_warn => {}
                    Status::Fail | Status::Warn | Status::Timeout | Status::Crash => {
                        // The reporters' contract, spelled out: the code and
                        // the first line in the message, the next step on
                        // the body's second line.
                        let (first, rest) = r.message.split_once('\n').unwrap_or((&r.message, ""));
                        let (kind, message, text) = match &r.finding {
                            Some(f) => (
                                f.code.clone(),
                                format!("{}: {first}", f.code),
                                format!(
                                    "{first}\nnext step: {}{}\ncode: {}",
                                    f.next_step,
                                    if rest.is_empty() {
                                        String::new()
                                    } else {
                                        format!("\n{rest}")
                                    },
                                    f.code
                                ),
                            ),
                            None => (
                                r.status.as_str().to_string(),
                                first.to_string(),
                                r.message.clone(),
                            ),
                        };
                        let name = if r.status == Status::Crash {
                            "error"
                        } else {
                            "failure"
                        };
                        want.push(el(name, kv(&[("message", message), ("type", kind)]), &text));
                    }
                    Status::Blocked | Status::Skipped => {
                        let (message, kind) = match r.skip_reason {
                            Some(reason) => (format!("{reason}: {}", r.message), reason.as_str()),
                            None => (r.message.clone(), r.status.as_str()),
                        };
                        want.push(el(
                            "skipped",
                            kv(&[("message", message), ("type", kind.to_string())]),
                            "",
                        ));
                    }
                }
                // The composition is `system_out`'s; what is tested here is
                // that the text survives XML and the consumers' parsers.
                let out = system_out(r);
                if !clean(&out).is_empty() {
                    want.push(el("system-out", Vec::new(), &out));
                }
            }
        }
        want
    }

    /// How render cleans text: [`xml_safe`], then quick-junit's own
    /// escape-sequence stripper, which also takes tabs and carriage returns
    /// (XML would carry both; a reader turns the returns into line feeds).
    fn junit_clean(s: &str) -> String {
        xml_safe(s).replace(['\t', '\r'], "")
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
            let xml = render(&report, &node).unwrap();
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
            let xml = render(&report, &node).unwrap();
            let seen = read_back(&xml).map_err(|e| TestCaseError::fail(format!("{e}:\n{xml}")))?;
            prop_assert_eq!(seen, expected(&report, &node, str::to_string), "{}", xml);
        }
    }
}
