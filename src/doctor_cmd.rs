//! `rocgate doctor`: walk the layers bottom-up and name the first broken one.

use crate::cli::DoctorArgs;
use crate::error::{Error, Result};
use crate::output::Output;
use crate::ui::style::Style;
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_harness::doctor::{DiagnosedFault, Diagnosis, diagnose};
use rocgate_harness::{ExecOptions, Layer, RunReport, Status};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct DoctorJson<'a> {
    schema_version: u32,
    sysroot: String,
    /// The signal that stopped the diagnosis: never healthy then.
    interrupted: Option<&'a str>,
    healthy: bool,
    first_failing_layer: Option<Layer>,
    layers: BTreeMap<&'static str, &'static str>,
    likely_cause: Option<&'a DiagnosedFault>,
    findings: &'a [DiagnosedFault],
    waived: &'a [DiagnosedFault],
    decision: &'a rocgate::decision::Decision,
    /// What changed since the last run that passed, from the node's
    /// history, when this one found a fault and the history has one.
    since_last_healthy: Option<&'a SinceHealthy>,
}

/// What changed between the node's last healthy run and this one.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct SinceHealthy {
    /// The saved report of the last healthy run.
    report: String,
    /// When that run started (RFC 3339).
    started_at: String,
    /// The changes, as `rocgate compare` words them (versions, checks
    /// that stopped passing, counters that grew, GPUs gone).
    changed: Vec<String>,
}

/// What changed since the last healthy run `history` holds, compared as
/// `rocgate compare` would compare its report with this run's.
fn since_last_healthy(
    history: &crate::history::History,
    session: &Session,
    report: &RunReport,
) -> Option<SinceHealthy> {
    let last = history.last_healthy()?;
    let shown = crate::reports::Presented::of(session, report);
    let now: serde_json::Value =
        serde_json::from_str(&crate::reports::json_text(&shown).ok()?).ok()?;
    let now: rocgate_harness::compare::Report =
        rocgate_harness::saved_report::parse(now, "this run").ok()?;
    let tolerances =
        crate::compare_cmd::of(rocgate_suites::thresholds::Thresholds::builtin().ok()?);
    let c = rocgate_harness::compare::compare(
        &last.report,
        &now,
        &tolerances,
        &rocgate_suites::stack::TERMS,
    );
    // The comparison's own verdict and tallies say nothing an operator
    // acts on here: the changes are the point.
    let changed = rocgate_harness::compare::render_text(&c)
        .lines()
        .filter(|l| {
            !(l.ends_with(": 0")
                || l.starts_with("Metrics judged")
                || *l == "REGRESSED"
                || l.starts_with("NO REGRESSION"))
        })
        .map(str::to_string)
        .collect();
    Some(SinceHealthy {
        report: last.path.display().to_string(),
        started_at: last.report.started_at,
        changed,
    })
}

/// What a layer looks like from the doctor's chair.
fn layer_state(report: &RunReport, layer: Layer) -> &'static str {
    let mine: Vec<_> = report.results.iter().filter(|r| r.layer == layer).collect();
    let rs: Vec<Status> = mine.iter().map(|r| r.status).collect();
    let passed = rs.contains(&Status::Pass);
    let blocked = rs.contains(&Status::Blocked);
    if mine.iter().any(|r| r.is_fault()) {
        "broken"
    } else if mine.iter().any(|r| r.is_warning()) {
        "degraded"
    } else if mine
        .iter()
        .any(|r| r.skip_reason == Some(rocgate_harness::SkipReason::Interrupted))
    {
        "interrupted"
    } else if mine
        .iter()
        .any(|r| r.skip_reason == Some(rocgate_harness::SkipReason::Unverifiable))
    {
        // Could not look: not "ok", whatever else passed.
        if passed {
            "partly verified"
        } else {
            "unverified"
        }
    } else if passed && blocked {
        "partly reached"
    } else if mine.iter().any(|r| r.waived()) {
        "waived"
    } else if passed {
        "ok"
    } else if blocked {
        "not reached"
    } else {
        "skipped"
    }
}

/// Diagnoses the node; exits as `run` does ([`rocgate::decision`]): 0 when
/// nothing fails (warnings included), 1 for a fault, 2 when rocgate could
/// not see the node, 130 when interrupted (whatever was found: an
/// interrupted diagnosis is incomplete).
pub fn run(args: &DoctorArgs) -> Result<Exit> {
    let config = args.node.config()?;
    // Owns an archive's unpacked directory: dropped (and removed) when this
    // command returns, after everything that reads the node.
    let node = args.node.open()?;
    let session = Session::open(
        node.sysroot(),
        args.node.options(&config, args.expect_gpus, None),
    )?;
    let gpus = session.select_gpus(None)?;
    let tier = args.tier.or(config.tier()).unwrap_or_default();
    let plan = args.checks.plan(&session, &config, &gpus, tier)?;
    let interrupt = crate::signals::interrupt_flag()?;
    let opts = ExecOptions {
        workers: crate::worker_cmd::threads(plan.gpus.len()),
        isolator: crate::worker_cmd::isolator(&session, &interrupt)?,
        interrupt,
        waivers: std::sync::Arc::new(session.waivers(&config)?),
        ..ExecOptions::default()
    };
    let mut report = session.run(&plan, &opts, |_| {});
    (report.strict, report.fail_on_warn) = args.verdict.resolve(&config);
    let diagnosis = diagnose(&report);
    let decision = rocgate::decision::decide(&report);
    let layers = report.layers();
    let interrupted = report.interrupted.as_deref();
    let faulty = diagnosis
        .likely_cause
        .as_ref()
        .is_some_and(|c| !c.is_warning());
    let since = args
        .node
        .history(session.facts().sysroot.is_live())
        .filter(|_| faulty)
        .and_then(|h| since_last_healthy(&h, &session, &report));
    if let Some(json) = &args.json {
        let doc = DoctorJson {
            schema_version: diagnosis.schema_version,
            sysroot: session.facts().sysroot.to_string(),
            interrupted,
            healthy: decision.health == rocgate::decision::Health::Healthy && interrupted.is_none(),
            first_failing_layer: diagnosis.first_failing_layer,
            layers: layers
                .iter()
                .map(|l| (l.as_str(), layer_state(&report, *l)))
                .collect(),
            likely_cause: diagnosis.likely_cause.as_ref(),
            findings: &diagnosis.findings,
            waived: &diagnosis.waived,
            decision: &decision,
            since_last_healthy: since.as_ref(),
        };
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::internal(format!("failed to serialise the diagnosis: {e}")))?;
        json.json(&text)?;
    } else {
        let mut text = render(&session, &report, &diagnosis, &layers, Style::for_stdout());
        if let Some(s) = &since {
            text.push_str(&format!(
                "\nSince the last healthy run (started {}, {}):\n",
                s.started_at, s.report
            ));
            if s.changed.is_empty() {
                text.push_str("  nothing rocgate records changed: the fault is new on the same software and hardware\n");
            }
            for line in &s.changed {
                text.push_str(&format!("  {line}\n"));
            }
        }
        Output::Stdout.text(&text)?;
    }
    Ok(if interrupted.is_some() {
        Exit::Interrupted
    } else {
        decision.exit()
    })
}

fn render(
    session: &Session,
    report: &RunReport,
    d: &Diagnosis,
    layers: &[Layer],
    style: Style,
) -> String {
    let n = session.facts().gpus.len();
    let mut out = format!(
        "{} node {} ({n} GPU{})\n\n",
        style.bold("rocgate doctor:"),
        session.facts().sysroot,
        if n == 1 { "" } else { "s" }
    );
    for &l in layers {
        let state = layer_state(report, l);
        let codes: Vec<String> = {
            let mut by_code: BTreeMap<&str, usize> = BTreeMap::new();
            for f in d.findings.iter().filter(|f| f.layer == l) {
                *by_code.entry(f.code.as_str()).or_default() += 1;
            }
            by_code
                .iter()
                .map(|(c, n)| {
                    if *n > 1 {
                        format!("{c} x{n}")
                    } else {
                        (*c).to_string()
                    }
                })
                .collect()
        };
        let painted = match state {
            "broken" => style.red(&format!("{state:<15}")),
            "ok" => style.green(&format!("{state:<15}")),
            "waived" => style.cyan(&format!("{state:<15}")),
            _ => style.yellow(&format!("{state:<15}")),
        };
        out.push_str(format!("  {:<9} {painted}{}", l.as_str(), codes.join(", ")).trim_end());
        out.push('\n');
    }
    out.push('\n');
    if let Some(signal) = &report.interrupted {
        out.push_str(&format!(
            "{}\n",
            style.yellow(&format!(
                "Interrupted by {signal}: the diagnosis is incomplete; the layers marked interrupted or not reached were not checked."
            ))
        ));
    }
    match &d.likely_cause {
        None if report.interrupted.is_some() => {
            out.push_str("No fault found in the checks that ran.\n");
        }
        None => out.push_str(&format!(
            "{}\n",
            style.green("No fault found in any layer.")
        )),
        Some(c) if c.is_warning() => {
            out.push_str(&format!(
                "No fault stops the node; warnings only (they fail nothing unless --fail-on warn).\nFirst warning [{}] at {} (layer {}):\n  {}\nNext step:\n  {}\n",
                style.yellow(&c.code),
                c.test_id,
                c.layer.as_str(),
                c.message,
                c.next_step
            ));
        }
        Some(c) => {
            out.push_str(&format!(
                "First failing layer: {}\nLikely cause [{}] at {}:\n  {}\nNext step:\n  {}\n",
                style.bold(c.layer.as_str()),
                style.red(&c.code),
                c.test_id,
                c.message,
                c.next_step
            ));
        }
    }
    if let Some(c) = &d.likely_cause {
        {
            let others: Vec<&DiagnosedFault> = d.findings.iter().filter(|f| *f != c).collect();
            if !others.is_empty() {
                out.push_str(&format!("\nOther findings ({}):\n", others.len()));
                for f in others.iter().take(12) {
                    out.push_str(&format!(
                        "  {} [{}] {}: {}\n",
                        f.severity, f.code, f.test_id, f.message
                    ));
                }
                if others.len() > 12 {
                    out.push_str(&format!(
                        "  ... and {} more (`rocgate doctor --json` lists all)\n",
                        others.len() - 12
                    ));
                }
            }
        }
    }
    if !d.waived.is_empty() {
        out.push_str(&format!(
            "\nWaived ({}; the site accepts these):\n",
            d.waived.len()
        ));
        for f in &d.waived {
            let why = f.waiver.as_ref().map_or("", |w| w.reason.as_str());
            out.push_str(&format!("  [{}] {}: {why}\n", f.code, f.test_id));
        }
    }
    out
}
