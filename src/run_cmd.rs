//! `rocgate run`: plan, execute, report.

use crate::cli::RunArgs;
use crate::error::Result;
use crate::signals;
use crate::ui::progress::{Glance, Progress, ProgressMode};
use crate::ui::{ladder, style::Style};
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_harness::{ExecOptions, Plan, Scope, ScopeKind};
use rocgate_suites::NodeContext;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Parses `--timeout CHECK=SECONDS` entries (the policy file's
/// `[timeouts]` as such entries first) against the registry.
pub fn timeout_overrides(
    entries: &[String],
    session: &Session,
) -> Result<std::collections::HashMap<String, Duration>, String> {
    let mut out = std::collections::HashMap::new();
    for entry in entries {
        let Some((id, secs)) = entry.split_once('=') else {
            return Err(format!(
                "--timeout {entry:?}: expected CHECK=SECONDS, e.g. --timeout rccl::allreduce=600"
            ));
        };
        let Some(check) = session.registry.iter().find(|c| c.id == id.trim()) else {
            return Err(format!(
                "--timeout {entry:?}: no check is named {:?}; `rocgate list` shows the check ids",
                id.trim()
            ));
        };
        let time = timeout_seconds(secs).map_err(|why| format!("--timeout {entry:?}: {why}"))?;
        out.insert(check.id.to_string(), time);
    }
    Ok(out)
}

/// Prints `text` on stdout with no line the GitHub Actions runner would take
/// for a workflow command: the ladder quotes node text (messages, product
/// names, paths), and `::add-mask::` or `##[error]` read on a node must not
/// act on the job. rocgate's own annotations are printed apart from this.
fn say(text: &str) {
    let text = rocgate_harness::output::no_workflow_commands(text);
    match crate::ui::width::columns() {
        Some(width) => out!("{}", crate::ui::width::wrap(&text, width)),
        None => out!("{text}"),
    }
}

/// The longest `--timeout` a check may get: a week is longer than any check
/// can usefully run, and keeps deadlines far from `Instant`'s limits.
const MAX_TIMEOUT_SECS: f64 = 7.0 * 24.0 * 3600.0;

/// A `--timeout` time in seconds (`600`, `2.5`): above 0 and at most
/// [`MAX_TIMEOUT_SECS`]; the error says which bound it broke.
fn timeout_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| !s.is_nan())
        .ok_or_else(|| format!("{:?} is not a number of seconds", text.trim()))?;
    if secs <= 0.0 {
        return Err(format!(
            "the time must be more than 0 seconds, not {}",
            text.trim()
        ));
    }
    if secs > MAX_TIMEOUT_SECS {
        return Err(format!(
            "the time must be at most {MAX_TIMEOUT_SECS} seconds (7 days), not {}",
            text.trim()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// How long instance `i` usually takes in this run: nothing when the
/// selection leaves it out; a sustained check's typical time includes the
/// burn-in's duration.
fn typical(
    plan: &rocgate_harness::Plan<'_, rocgate_suites::NodeContext>,
    opts: &ExecOptions,
    i: &rocgate_harness::plan::Instance,
) -> Duration {
    match i.excluded {
        Some(_) => Duration::ZERO,
        None => opts.typical_of(plan.check(i)),
    }
}

/// Each GPU's latest telemetry, read from the node's sysfs as the burn-in
/// samples it, for the progress lines beside its sustained checks.
fn glance(session: &Session) -> Glance {
    let f = session.facts();
    let sysroot = f.sysroot.clone();
    let gpus: BTreeMap<u32, (String, Option<u64>)> = f
        .gpus
        .iter()
        .map(|g| {
            let id = g.kfd.as_ref().and_then(|k| k.gpu_id);
            (g.index, (g.pci_address.clone(), id))
        })
        .collect();
    Glance::new(move |scope| match scope {
        Scope::Gpu(i) => {
            let (address, id) = gpus.get(&i)?;
            rocgate_node::facts::telemetry::sample(&sysroot, address, *id).brief()
        }
        _ => None,
    })
}

/// Runs the checks and writes the reports.
///
/// The exit code ([`Exit`]), first match wins:
/// - 2 (as an `Err`): a usage error, found before any check runs; 3
///   when the node cannot be read, 70 for a defect of rocgate's own;
/// - 3 ([`Exit::NodeIo`]): a report could not be written (each one is named on stderr with the
///   error; every other report is still written), the GitHub job summary
///   included. A CI gate that reads the
///   reports must not take a run it cannot read for a verdict, so this
///   outranks what the checks found, an interruption included;
/// - 130: the run was interrupted;
/// - otherwise the run's decision ([`rocgate::decision`]): 2 when rocgate
///   could not see the node or failed itself, 1 for a fault (or, under
///   `--fail-on warn`, a warning; under `--strict`, a check that could not
///   verify), 0 when nothing fails the run (warnings and waived findings
///   included).
pub fn run(args: &RunArgs) -> Result<Exit> {
    crate::reports::distinct_paths(&args.reports)?;
    if crate::reports::claims_stdout(&args.reports) {
        crate::ui::print_human_on_stderr();
    }
    let config = args.node.config()?;
    let timeout_scale = args.timeout_scale.or(config.timeout_scale()).unwrap_or(1.0);
    // Owns an archive's unpacked directory: dropped (and removed) when this
    // command returns, after everything that reads the node.
    let tier = args.select.tier.or(config.tier()).unwrap_or_default();
    let sustain = args.select.sustain(tier)?;
    let node = args.node.open()?;
    let mut options = args.node.options(
        &config,
        args.select.expect_gpus,
        args.select.gpus.as_deref(),
    );
    options.burnin = args.select.duration;
    let session = Session::open(node.sysroot(), options)?;
    let gpus = session.select_gpus(None)?;
    let plan = args.select.checks.plan(&session, &config, &gpus, tier)?;
    let entries: Vec<String> = config
        .timeout_entries()
        .into_iter()
        .chain(args.timeouts.iter().cloned())
        .collect();
    let timeouts = timeout_overrides(&entries, &session)?;
    let waivers = session.waivers(&config)?;
    let (strict, fail_on_warn) = args.verdict.resolve(&config);
    let interrupt = signals::interrupt_flag()?;
    let style = crate::ui::human_style();
    let workers = crate::worker_cmd::isolator(&session, &interrupt)?;
    let opts = ExecOptions {
        gate: !args.no_gate,
        timeout_scale,
        timeouts,
        interrupt,
        workers: crate::worker_cmd::threads(plan.gpus.len()),
        isolator: workers,
        waivers: std::sync::Arc::new(waivers),
        sustain,
        ..ExecOptions::default()
    };
    if !args.quiet {
        say(&header(&session, &plan, &opts, style));
    }
    let mode = if args.quiet {
        ProgressMode::None
    } else {
        args.progress
    };
    let progress = RefCell::new(
        Progress::new(
            plan.instances.iter().map(|i| {
                let sustained = plan.check(i).sustained;
                (
                    i.test_id.clone(),
                    i.scope,
                    typical(&plan, &opts, i),
                    sustained,
                )
            }),
            mode,
            Duration::from_secs(args.heartbeat),
        )
        .with_glance(glance(&session)),
    );
    let mut report = session.run(&plan, &opts, |e| progress.borrow_mut().on_event(e));
    if opts.isolator.is_some() {
        if let Ok(program) = std::env::current_exe() {
            session.narrow_collectives(&mut report, &opts, &program, &|what| {
                progress.borrow_mut().phase(what)
            });
        }
    }
    let mut progress = progress.into_inner();
    report.strict = strict;
    report.fail_on_warn = fail_on_warn;
    progress.finish();

    // What every report shows beside the results, worked out once for all.
    let shown = crate::reports::Presented::of(&session, &report);
    let history = args.node.history(session.facts().sysroot.is_live());
    crate::reports::keep_in_history(history.as_ref(), &shown);
    let (written, mut not_written) =
        crate::reports::write(crate::reports::Source::Run, &args.reports, &shown);
    if !args.quiet {
        outln!();
        say(&ladder::ladder(&report, style, crate::ui::width::columns()));
        let matrices = ladder::matrices(&report, style);
        if !matrices.is_empty() {
            outln!();
            say(&matrices);
        }
    }
    let failures = ladder::failures(&report, style);
    if !failures.is_empty() {
        outln!();
        say(&failures);
    }
    let unverified = ladder::unverified(&report, style);
    if !unverified.is_empty() {
        outln!();
        say(&unverified);
    }
    outln!();
    say(&format!("{}\n", ladder::summary(&report, style)));
    written.iter().for_each(|l| say(&format!("{l}\n")));
    if crate::github::active(args.no_github) {
        let summary = crate::github::publication(&shown);
        // The job summary is a report like the others: unwritten, it
        // makes the run exit 2.
        if let Err(e) = crate::github::publish(&summary) {
            not_written.push(e);
        }
    }
    not_written.iter().for_each(|e| errln!("rocgate: {e}"));
    let decision = rocgate::decision::decide(&report);
    if decision.exit() == Exit::NoVerdict {
        errln!("rocgate: no verdict on this node: {}", decision.reason);
    }
    // A CI gate that reads the reports must not take a run it cannot read
    // for a verdict: an unwritten report outranks the rest.
    Ok(if !not_written.is_empty() {
        Exit::NodeIo
    } else if report.interrupted.is_some() {
        Exit::Interrupted
    } else {
        decision.exit()
    })
}

fn header(
    session: &Session,
    plan: &Plan<'_, NodeContext>,
    opts: &ExecOptions,
    style: Style,
) -> String {
    let f = session.facts();
    // Per model: its devices (physical functions) and the GPUs tested on
    // them, so a partitioned device counts once with its partitions.
    let mut models: BTreeMap<String, (BTreeSet<&str>, usize, Option<&str>)> = BTreeMap::new();
    for g in f.gpus.iter().filter(|g| plan.gpus.contains(&g.index)) {
        let name = format!(
            "{} ({})",
            g.product.as_deref().unwrap_or("unknown AMD GPU"),
            g.gfx_target.as_deref().unwrap_or("gfx?")
        );
        let entry = models.entry(name).or_default();
        entry.0.insert(g.physical_address());
        entry.1 += 1;
        entry.2 = entry.2.or(g.partition_mode());
    }
    let gpus = if models.is_empty() {
        "no GPU".to_string()
    } else {
        models
            .iter()
            .map(|(m, (devices, scopes, mode))| {
                if *scopes > devices.len() {
                    format!(
                        "{}x {m} as {scopes} {} partitions",
                        devices.len(),
                        mode.unwrap_or("compute")
                    )
                } else {
                    format!("{scopes}x {m}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let partitioned = models.values().any(|(d, n, _)| *n > d.len());
    let node_checks = plan
        .selected()
        .filter(|i| plan.check(i).scope == ScopeKind::Node)
        .count();
    let per_gpu = plan
        .selected()
        .filter(|i| plan.gpus.first().is_some_and(|&g| i.scope == Scope::Gpu(g)))
        .count();
    let left_out = plan.instances.len() - plan.selected().count();
    let left_out = if left_out > 0 {
        format!(", {left_out} left out by the selection")
    } else {
        String::new()
    };
    let budget = opts.time_budget(plan);
    let per_scope = match (plan.gpus.len(), partitioned) {
        (0, _) => format!("node-wide only: no GPU to test{left_out}"),
        (n, true) => {
            format!("{node_checks} node + {per_gpu} per partition x {n} partitions{left_out}")
        }
        (n, false) => format!("{node_checks} node + {per_gpu} per GPU x {n} GPUs{left_out}"),
    };
    format!(
        "{} {} · {} tier · node {}\n{}\nplan: {} checks ({per_scope}); time budget {:.0} s if every check ran into its timeout\n",
        style.bold("rocgate"),
        env!("CARGO_PKG_VERSION"),
        plan.tier,
        f.sysroot,
        style.dim(&format!(
            "kernel {} · {} · {gpus}",
            f.kernel_release.as_deref().unwrap_or("unknown"),
            match (
                &f.amdgpu.version,
                f.amdgpu.inbox_srcversion(),
                f.amdgpu.is_live()
            ) {
                (Some(v), _, true) => format!("amdgpu {v} (DKMS)"),
                (None, Some(_), true) => "inbox amdgpu".to_string(),
                (None, None, true) => "amdgpu (version unreadable)".to_string(),
                _ => "amdgpu not loaded".to_string(),
            }
        )),
        plan.selected().count(),
        budget.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_says_which_bound_it_broke() {
        assert_eq!(timeout_seconds(" 2.5 "), Ok(Duration::from_millis(2500)));
        assert_eq!(timeout_seconds("604800"), Ok(Duration::from_secs(604_800)));
        for (text, says) in [
            ("1e30", "at most 604800 seconds (7 days)"),
            ("inf", "at most 604800"),
            ("604800.5", "at most 604800"),
            ("0", "more than 0"),
            ("-1", "more than 0"),
            ("-inf", "more than 0"),
            ("nan", "not a number"),
            ("ten", "not a number"),
            ("", "not a number"),
        ] {
            let e = timeout_seconds(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_bounded_time_or_an_error(text in "\\PC{0,20}") {
            if let Ok(d) = timeout_seconds(&text) {
                proptest::prop_assert!(d > Duration::ZERO && d.as_secs_f64() <= MAX_TIMEOUT_SECS);
            }
        }
    }
}
