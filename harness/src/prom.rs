//! A run as a Prometheus textfile for node_exporter's textfile collector.
//!
//! The collector reads `*.prom` from a directory on every scrape, so the
//! file is written whole (temporary file and rename, by the caller) and
//! carries no timestamps: a sample with one makes the collector skip the
//! file. As for any batch job, the run exports when it last ran and last
//! succeeded, and series that a failure would make appear (the per-code
//! counts) are always present, at 0 when nothing failed.

use crate::document::IdentityKeys;
use crate::model::{Layer, Scope};
use crate::result::RunReport;
use crate::verdict::{Severity, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the textfile says beyond the run's results.
pub struct PromContext<'a> {
    /// Labels every series carries, first: which command (and tier) wrote
    /// the file, so two of rocgate's textfiles in one collector directory
    /// never export one series twice, which node_exporter refuses.
    pub labels: &'a [(&'a str, String)],
    /// Labels of `rocgate_info` (`version`, `hostname`, `rocm`, ...), in order.
    pub info: &'a [(&'a str, String)],
    /// Every finding code the suites can report, with its severity, so
    /// each has a series (in `rocgate_check_failures` or
    /// `rocgate_check_warnings`).
    pub codes: &'a [(&'a str, Severity)],
    /// `rocgate_last_success_timestamp_seconds` of the file this one
    /// replaces, kept when this run did not succeed.
    pub previous_success: Option<f64>,
    /// The properties that say who a GPU is: its address labels its series.
    pub identity: &'a IdentityKeys,
}

/// The textfile for `report`.
pub fn render(report: &RunReport, ctx: &PromContext<'_>) -> String {
    let mut out = String::new();
    let ended =
        report.started_at.timestamp_millis() as f64 / 1000.0 + report.duration.as_secs_f64();
    let passed = report.all_passed();

    family(
        &mut out,
        "rocgate_info",
        "gauge",
        "rocgate and the node's versions; always 1.",
    );
    let sample = |out: &mut String, name: &str, labels: &[(&str, String)], value: f64| {
        let all: Vec<(&str, String)> = ctx.labels.iter().chain(labels).cloned().collect();
        sample(out, name, &all, value);
    };
    sample(&mut out, "rocgate_info", ctx.info, 1.0);

    family(
        &mut out,
        "rocgate_layer_up",
        "gauge",
        "1 when the layer's checks in the scope passed (or did not apply), 0 when one failed, hung, crashed or was blocked by a layer below, or when none could look.",
    );
    for scope in report.scope_list() {
        let pci = report
            .scope_info(scope)
            .get(ctx.identity.address)
            .unwrap_or("")
            .to_string();
        for layer in layers_in(report, scope) {
            let labels = [
                ("scope", scope.label()),
                (ctx.identity.address, pci.clone()),
                ("layer", layer.to_string()),
            ];
            sample(
                &mut out,
                "rocgate_layer_up",
                &labels,
                bool_value(layer_up(report, scope, layer)),
            );
        }
    }

    for (name, severity, help) in [
        (
            "rocgate_check_failures",
            Severity::Fail,
            "Checks of the last run that failed with each finding code (waived ones not counted).",
        ),
        (
            "rocgate_check_warnings",
            Severity::Warn,
            "Checks of the last run that warned with each finding code (waived ones not counted).",
        ),
    ] {
        family(&mut out, name, "gauge", help);
        let mut counts: BTreeMap<&str, usize> = ctx
            .codes
            .iter()
            .filter(|(_, s)| *s == severity)
            .map(|(c, _)| (*c, 0))
            .collect();
        let found = report.results.iter().filter(|r| match severity {
            Severity::Fail => r.is_fault(),
            Severity::Warn => r.is_warning(),
        });
        for f in found.filter_map(|r| r.finding.as_ref()) {
            *counts.entry(f.code.as_str()).or_default() += 1;
        }
        for (code, n) in counts {
            sample(&mut out, name, &[("code", code.to_string())], n as f64);
        }
    }
    family(
        &mut out,
        "rocgate_waived_results",
        "gauge",
        "Results of the last run whose fault or warning a site waiver covers.",
    );
    sample(
        &mut out,
        "rocgate_waived_results",
        &[],
        report.waived().len() as f64,
    );

    family(
        &mut out,
        "rocgate_measured_between",
        "gauge",
        "Measurements of the last run taken between two scopes (peer-to-peer copy GB/s), by check, metric, unit, and from and to scope.",
    );
    for r in &report.results {
        for m in r.metrics.iter() {
            let Some((from, to)) = &m.between else {
                continue;
            };
            let labels = [
                ("check", r.check.clone()),
                ("metric", m.family().to_string()),
                ("unit", m.unit.clone()),
                ("from", from.clone()),
                ("to", to.clone()),
            ];
            sample(&mut out, "rocgate_measured_between", &labels, m.value);
        }
    }

    family(
        &mut out,
        "rocgate_errors_counted",
        "gauge",
        "Error counters the last run read on each scope (RAS, PCIe AER, PCIe replays), by check and metric: they only grow until a reset or reboot, so growth between scrapes is new errors.",
    );
    for r in &report.results {
        let pci = report
            .scope_info(r.scope)
            .get(ctx.identity.address)
            .unwrap_or("")
            .to_string();
        for m in r.metrics.iter() {
            if m.kind != Some(crate::verdict::MetricKind::Counter) || m.between.is_some() {
                continue;
            }
            let labels = [
                ("scope", r.scope.label()),
                (ctx.identity.address, pci.clone()),
                ("check", r.check.clone()),
                ("metric", m.name.clone()),
                ("unit", m.unit.clone()),
            ];
            sample(&mut out, "rocgate_errors_counted", &labels, m.value);
        }
    }

    family(
        &mut out,
        "rocgate_run_passed",
        "gauge",
        "1 when the last run passed.",
    );
    sample(&mut out, "rocgate_run_passed", &[], bool_value(passed));
    family(
        &mut out,
        "rocgate_last_run_timestamp_seconds",
        "gauge",
        "When the last run ended, in seconds since the epoch.",
    );
    sample(&mut out, "rocgate_last_run_timestamp_seconds", &[], ended);
    family(
        &mut out,
        "rocgate_last_success_timestamp_seconds",
        "gauge",
        "When the last run that passed ended, in seconds since the epoch (0: none yet).",
    );
    // A success after this run ended cannot be (a damaged file, a clock
    // set back): it is not carried on as a 309-digit 1e308.
    let success = if passed {
        ended
    } else {
        ctx.previous_success.filter(|&t| t <= ended).unwrap_or(0.0)
    };
    sample(
        &mut out,
        "rocgate_last_success_timestamp_seconds",
        &[],
        success,
    );
    family(
        &mut out,
        "rocgate_run_duration_seconds",
        "gauge",
        "How long the last run took.",
    );
    sample(
        &mut out,
        "rocgate_run_duration_seconds",
        &[],
        report.duration.as_secs_f64(),
    );
    out
}

/// `rocgate_last_success_timestamp_seconds` in a textfile written before,
/// if it holds a usable one, whatever labels it carries (a file written before the series had
/// `source` labels included).
pub fn previous_success(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("rocgate_last_success_timestamp_seconds"))
        .filter_map(|rest| match rest.strip_prefix('{') {
            // Label values are escaped, so the last `}` ends the labels.
            Some(labelled) => labelled.rsplit_once('}').map(|(_, v)| v),
            None => Some(rest),
        })
        .filter(|v| v.starts_with(' '))
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .find(|v| v.is_finite() && *v > 0.0)
}

/// The layers with a result in `scope`, bottom-up.
fn layers_in(report: &RunReport, scope: Scope) -> Vec<Layer> {
    let mut layers: Vec<Layer> = report
        .results
        .iter()
        .filter(|r| r.scope == scope)
        .map(|r| r.layer)
        .collect();
    layers.sort();
    layers.dedup();
    layers
}

/// Whether `layer` is known to work in `scope`: no check of it stopped the
/// stack or was kept from running, and it was looked at (a check passed, or
/// none applies). A layer whose checks all skipped for want of a look (no
/// runtime, unverifiable, cut short) is not up: a skip is not a pass.
/// Warnings (a NUMA setting) and waived faults leave it up and show in
/// the per-code counts.
fn layer_up(report: &RunReport, scope: Scope, layer: Layer) -> bool {
    let mine = || {
        report
            .results
            .iter()
            .filter(move |r| r.scope == scope && r.layer == layer)
    };
    let broken = mine().any(|r| r.is_fault() || (r.status == Status::Blocked && !r.waived()));
    let looked = mine().any(|r| {
        r.status == Status::Pass
            || r.status.has_finding()
            || r.skip_reason == Some(crate::verdict::SkipReason::NotApplicable)
    });
    !broken && looked
}

fn bool_value(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, String)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        let body: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        let _ = write!(out, "{{{}}}", body.join(","));
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the text format wants it: backslash, double quote and
/// line feed escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// HELP text: backslash and line feed escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_stack::{A, B, C};
    use crate::test_support::{coded as result, run as report};

    fn ctx<'a>(info: &'a [(&'a str, String)], previous: Option<f64>) -> PromContext<'a> {
        PromContext {
            labels: &[],
            info,
            codes: &[
                ("broken", Severity::Fail),
                ("gone", Severity::Fail),
                ("slow", Severity::Warn),
            ],
            previous_success: previous,
            identity: &crate::test_support::KEYS,
        }
    }

    #[test]
    fn layers_go_down_where_they_failed_or_were_blocked_and_every_code_has_a_series() {
        let mut r = report(vec![
            result(Scope::Node, A, Status::Pass, None),
            result(Scope::Gpu(0), A, Status::Pass, None),
            result(Scope::Gpu(0), B, Status::Fail, Some("broken")),
            result(Scope::Gpu(0), C, Status::Blocked, None),
            result(Scope::Gpu(1), B, Status::Pass, None),
            result(Scope::Gpu(1), C, Status::Skipped, None),
            result(Scope::Gpu(1), A, Status::Warn, Some("slow")),
        ]);
        let mut info = crate::result::ScopeInfo::default();
        info.push("pci_address", "0000:05:00.0");
        r.scopes.push((Scope::Gpu(0), info));
        r.results[0].metrics = crate::verdict::Verdict::pass("")
            .with_metrics_between(
                crate::verdict::Verdict::pass("")
                    .with_throughput("p2p_gbps", 47.5, "GB/s")
                    .metrics,
                "gpu0",
                "gpu1",
            )
            .metrics;
        r.results[1].metrics = crate::verdict::Verdict::pass("")
            .with_counter("aer_nonfatal", 2.0, "errors")
            .with_throughput("gemm_tflops", 900.0, "TFLOP/s")
            .metrics;
        let info = [
            ("version", "0.1.0".to_string()),
            ("hostname", "n\"1".to_string()),
        ];
        let text = render(&r, &ctx(&info, Some(1000.0)));
        for line in [
            r#"rocgate_info{version="0.1.0",hostname="n\"1"} 1"#,
            r#"rocgate_layer_up{scope="node",pci_address="",layer="a"} 1"#,
            r#"rocgate_layer_up{scope="gpu0",pci_address="0000:05:00.0",layer="a"} 1"#,
            r#"rocgate_layer_up{scope="gpu0",pci_address="0000:05:00.0",layer="b"} 0"#,
            r#"rocgate_layer_up{scope="gpu0",pci_address="0000:05:00.0",layer="c"} 0"#,
            r#"rocgate_layer_up{scope="gpu1",pci_address="",layer="b"} 1"#,
            // A warning leaves its layer up.
            r#"rocgate_layer_up{scope="gpu1",pci_address="",layer="a"} 1"#,
            // Only skipped: never looked at, so not up.
            r#"rocgate_layer_up{scope="gpu1",pci_address="",layer="c"} 0"#,
            r#"rocgate_check_failures{code="broken"} 1"#,
            r#"rocgate_check_failures{code="gone"} 0"#,
            r#"rocgate_check_warnings{code="slow"} 1"#,
            "rocgate_waived_results 0",
            "rocgate_run_passed 0",
            r#"rocgate_measured_between{check="a::x",metric="p2p_gbps",unit="GB/s",from="gpu0",to="gpu1"} 47.5"#,
            "rocgate_last_success_timestamp_seconds 1000",
            r#"rocgate_errors_counted{scope="gpu0",pci_address="0000:05:00.0",check="a::x",metric="aer_nonfatal",unit="errors"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        // A throughput is no error count.
        assert!(!text.contains("gemm_tflops"), "{text}");
        // Every family is described, and no sample carries a timestamp.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, _) = l.split_once(['{', ' ']).unwrap();
            assert!(text.contains(&format!("# TYPE {name} gauge")), "{l}");
            let after_labels = match l.rsplit_once('}') {
                Some((_, after)) => after,
                None => l.split_once(' ').unwrap().1,
            };
            let fields: Vec<&str> = after_labels.split_whitespace().collect();
            assert_eq!(fields.len(), 1, "a value and no timestamp: {l}");
            assert!(fields[0].parse::<f64>().is_ok(), "{l}");
        }
    }

    #[test]
    fn a_passing_run_is_the_last_success_and_a_failing_one_keeps_the_previous() {
        let passing = report(vec![result(Scope::Node, A, Status::Pass, None)]);
        let text = render(&passing, &ctx(&[], Some(1000.0)));
        let success = previous_success(&text).unwrap();
        assert!(success > 1000.0, "{text}");
        assert!(text.contains("rocgate_run_passed 1\n"));
        let failing = report(vec![result(Scope::Node, A, Status::Crash, None)]);
        let again = render(&failing, &ctx(&[], previous_success(&text)));
        assert_eq!(previous_success(&again), Some(success));
        // Never a success yet: 0, not a missing series.
        let first = render(&failing, &ctx(&[], None));
        assert!(
            first.contains("rocgate_last_success_timestamp_seconds 0\n"),
            "{first}"
        );
        assert_eq!(previous_success(&first), None);
        // With the labels of its source, and from a file without them.
        let labels = [("source", "health".to_string())];
        let labelled = render(
            &passing,
            &PromContext {
                labels: &labels,
                ..ctx(&[], None)
            },
        );
        assert!(previous_success(&labelled).is_some(), "{labelled}");
        assert_eq!(
            previous_success("rocgate_last_success_timestamp_seconds 1234.5\n"),
            Some(1234.5)
        );
        assert_eq!(
            previous_success("rocgate_last_success_timestamp_secondsX 1\n"),
            None
        );
    }

    #[test]
    fn every_series_carries_the_labels_of_its_source() {
        let r = report(vec![result(Scope::Node, A, Status::Pass, None)]);
        let labels = [
            ("source", "run".to_string()),
            ("tier", "extended".to_string()),
        ];
        let info = [("version", "0.1.0".to_string())];
        let text = render(
            &r,
            &PromContext {
                labels: &labels,
                ..ctx(&info, None)
            },
        );
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(samples.len() > 5, "{text}");
        for l in &samples {
            assert!(
                l.contains(r#"{source="run",tier="extended""#),
                "{l} lacks the source labels"
            );
        }
        assert!(text.contains(r#"rocgate_info{source="run",tier="extended",version="0.1.0"} 1"#));
        assert!(text.contains(r#"rocgate_run_passed{source="run",tier="extended"} 1"#));
    }
}
