//! JUnit XML that CI systems accept: one flat `<testsuite>` per scope,
//! identity as suite properties, blocked and skipped as `<skipped>`.

use crate::model::Scope;
use crate::result::{CheckResult, RunReport};
use crate::verdict::Status;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, Writer};

/// Renders a run as JUnit XML.
///
/// `node_properties` are added to the `node` suite (versions, sysroot, tier).
pub fn render(report: &RunReport, node_properties: &[(String, String)]) -> Result<String, String> {
    // No timestamp on <testsuites>: Jenkins' JUnit schema does not allow it
    // there (each <testsuite> carries one).
    let mut junit = Report::new("rocgate");
    junit.set_time(report.duration);
    for scope in report.scope_list() {
        let mut suite = TestSuite::new(scope.label());
        suite.set_timestamp(report.started_at.fixed_offset());
        let results: Vec<&CheckResult> =
            report.results.iter().filter(|r| r.scope == scope).collect();
        suite.set_time(results.iter().map(|r| r.duration).sum());
        if scope == Scope::Node {
            for (k, v) in node_properties {
                suite.add_property(Property::new(k.as_str(), v.as_str()));
            }
        }
        for (k, v) in &report.scope_info(scope).properties {
            suite.add_property(Property::new(k.as_str(), v.as_str()));
        }
        let first = report
            .first_failing_layer(Some(scope))
            .map_or("none", |l| l.as_str());
        suite.add_property(Property::new("first_failing_layer", first));
        if let Some(why) = &report.interrupted {
            suite.add_property(Property::new("interrupted", why.as_str()));
        }
        suite.add_test_cases(results.into_iter().map(test_case));
        junit.add_test_suite(suite);
    }
    let xml = junit
        .to_string()
        .map_err(|e| format!("failed to serialise the JUnit report: {e}"))?;
    drop_root_skipped_attribute(&xml)
}

fn test_case(r: &CheckResult) -> TestCase {
    let status = match r.status {
        Status::Pass => TestCaseStatus::success(),
        Status::Fail | Status::Timeout | Status::Crash => {
            let kind = if r.status == Status::Crash {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut s = TestCaseStatus::non_success(kind);
            s.set_message(r.message.as_str());
            let mut text = r.message.clone();
            match &r.finding {
                Some(f) => {
                    s.set_type(f.code.as_str());
                    text.push_str(&format!("\ncode: {}\nnext step: {}", f.code, f.next_step));
                }
                None => {
                    s.set_type(r.status.as_str());
                }
            }
            s.set_description(text);
            s
        }
        Status::Blocked | Status::Skipped => {
            let mut s = TestCaseStatus::skipped();
            // "unverifiable: kernel log unreadable": why it did not look
            // comes first, where reporters show it.
            match r.skip_reason {
                Some(reason) => s.set_message(format!("{reason}: {}", r.message)),
                None => s.set_message(r.message.as_str()),
            };
            s.set_type(
                r.skip_reason
                    .map_or(r.status.as_str(), |reason| reason.as_str()),
            );
            s
        }
    };
    let mut case = TestCase::new(r.name(), status);
    case.set_classname(format!("{}.{}", r.scope.label(), r.layer));
    case.set_time(r.duration);
    let mut out = String::new();
    if r.status == Status::Pass {
        out.push_str(&r.message);
        out.push('\n');
    }
    for m in &r.metrics {
        out.push_str(&format!("metric {} = {} {}\n", m.name, m.value, m.unit));
    }
    if !r.output.is_empty() {
        out.push_str(&r.output);
    }
    if !out.is_empty() {
        case.set_system_out(out);
    }
    case
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
    use crate::model::{Layer, Tier};
    use crate::result::ScopeInfo;
    use crate::verdict::Finding;
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
                .then(|| Finding::new("amdgpu-not-loaded", message, "modprobe amdgpu")),
            skip_reason: (status == Status::Skipped).then_some(crate::SkipReason::NotApplicable),
            advisory: false,
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
                    "node.amdgpu.module_live",
                    Scope::Node,
                    Layer::Amdgpu,
                    Status::Fail,
                    "not loaded",
                ),
                result(
                    "gpu0.kfd.topology_node",
                    Scope::Gpu(0),
                    Layer::Kfd,
                    Status::Blocked,
                    "blocked by node.amdgpu.module_live: not loaded",
                ),
            ],
            scopes: vec![(Scope::Gpu(0), info)],
            interrupted: None,
            strict: false,
        };
        let xml = render(&report, &[("tier".into(), "quick".into())]).unwrap();
        assert!(xml.contains(r#"<testsuite name="node""#), "{xml}");
        assert!(xml.contains(r#"<testsuite name="gpu0""#));
        assert!(xml.contains(r#"classname="gpu0.kfd""#));
        assert!(xml.contains(r#"<property name="pci_address" value="0000:05:00.0"/>"#));
        assert!(xml.contains(r#"<property name="first_failing_layer" value="amdgpu"/>"#));
        assert!(xml.contains(r#"type="amdgpu-not-loaded""#));
        assert!(
            xml.contains(r#"<skipped message="blocked by node.amdgpu.module_live: not loaded""#)
        );
        assert!(xml.contains("&lt;1&gt; &amp;"));
        let root = xml.lines().find(|l| l.contains("<testsuites")).unwrap();
        assert!(!root.contains("skipped="), "{root}");
        assert_eq!(xml.matches("<testsuite ").count(), 2);
    }
}
