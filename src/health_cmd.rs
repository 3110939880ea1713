//! `rocgate health`: the checks inside a time budget, summed up in one line
//! and an exit code that schedulers and monitoring act on: 0 healthy, 1
//! unhealthy, 2 unknown (rocgate could not decide, so nothing may be
//! drained or tainted on its word).

use crate::cli::HealthArgs;
use crate::slurm;
use rocgate::session::Session;
use rocgate_harness::doctor::{self, DiagnosedFault};
use rocgate_harness::{ExecOptions, RunReport, Scope};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The longest line a health check prints: node-problem-detector keeps 80
/// characters of a plugin's output.
const MAX_LINE: usize = 80;

/// Kept back from the budget for the engine's grace to running checks and
/// for writing the reports.
const RESERVE: Duration = Duration::from_secs(3);

/// The code of a rocgate defect: a fault of rocgate's own, not the node's.
const INTERNAL_ERROR: &str = "internal-error";

/// What the node is, as far as rocgate could tell.
#[derive(Debug)]
enum Health {
    /// Every check that stops the stack passed.
    Healthy {
        gpus: usize,
        advisory: Option<DiagnosedFault>,
        /// Checks that could not look: the line says so, never hides it.
        unverified: usize,
        /// Checks not run here (the runtime layers on a capture without
        /// `--rocm-path`): counted, not passed.
        not_run: usize,
    },
    /// A fault stops the stack; the lowest one.
    Unhealthy(DiagnosedFault),
    /// rocgate could not decide, and why.
    Unknown(String),
}

impl Health {
    fn exit_code(&self) -> u8 {
        match self {
            Health::Healthy { .. } => 0,
            Health::Unhealthy(_) => 1,
            Health::Unknown(_) => 2,
        }
    }
}

/// Runs the health check.
pub fn run(args: &HealthArgs) -> Result<ExitCode, String> {
    let started = Instant::now();
    let job = args.slurm_prolog || args.slurm_epilog;
    let (health, gpus) = match check(args, started) {
        Ok(found) => found,
        Err(why) => (Health::Unknown(why), Vec::new()),
    };
    let line = one_line(&health, &gpus);
    if job {
        // The job's log gets the line; Slurm is not called from a prolog.
        errln!("{line}");
        return Ok(ExitCode::from(match health {
            Health::Unhealthy(_) => 1,
            _ => 0,
        }));
    }
    outln!("{line}");
    if args.slurm {
        let node = node_name();
        let reason = match &health {
            Health::Unhealthy(f) => Some(format!(
                "{} {} {}",
                slurm::REASON_PREFIX,
                f.code,
                gpus_place(f, &gpus)
            )),
            _ => None,
        };
        let verdict = match (&health, &reason) {
            (Health::Healthy { .. }, _) => slurm::Verdict::Healthy,
            (Health::Unhealthy(_), Some(r)) => slurm::Verdict::Unhealthy(r),
            _ => slurm::Verdict::Unknown,
        };
        match node.and_then(|n| slurm::act(&n, verdict)) {
            Ok(done) => errln!("rocgate: {done}"),
            Err(e) => errln!("rocgate: {e}"),
        }
    }
    Ok(ExitCode::from(health.exit_code()))
}

/// Runs the checks and judges them; an `Err` is a reason for unknown.
/// Returns the verdict and the checked GPUs' PCI addresses by index.
fn check(args: &HealthArgs, started: Instant) -> Result<(Health, Vec<(u32, String)>), String> {
    crate::reports::distinct_paths(&args.reports)?;
    let node = args.node.open()?;
    let selector = if args.slurm_prolog || args.slurm_epilog {
        Some(job_gpus()?)
    } else {
        args.select.gpus.clone()
    };
    let session = Session::open(
        node.sysroot(),
        args.node
            .options(args.select.expect_gpus, selector.as_deref()),
    )?;
    let gpus = session.select_gpus(None)?;
    let plan = session
        .plan(&gpus, args.select.tier)
        .map_err(|e| format!("internal error: {e}"))?;
    let interrupt = crate::signals::interrupt_flag()?;
    let for_checks = Duration::from_secs_f64(args.budget)
        .saturating_sub(RESERVE)
        .max(Duration::from_secs(1));
    let mut opts = ExecOptions {
        interrupt: std::sync::Arc::clone(&interrupt),
        workers: crate::worker_cmd::threads(plan.gpus.len()),
        isolator: crate::worker_cmd::isolator(&session, &interrupt)?,
        deadline: Some(started + for_checks),
        ..ExecOptions::default()
    };
    // A hung GPU must time out inside the budget: a timeout is a finding
    // (the node is drained), a run cut short by the budget decides nothing.
    let cap = args
        .check_timeout
        .map_or(for_checks / 3, Duration::from_secs_f64);
    for check in &session.registry {
        if opts.timeout_of(check) > cap {
            opts.timeouts.insert(check.id.to_string(), cap);
        }
    }
    let mut report = session.run(&plan, &opts, |_| {});
    // A failed all-reduce is narrowed down to its GPU while the budget lasts,
    // so a drain reason can name the GPU rather than the node.
    if opts.isolator.is_some() {
        if let Ok(program) = std::env::current_exe() {
            session.narrow_collectives(&mut report, &opts, &program);
        }
    }
    report.strict = args.strict;
    let (_, not_written) = crate::reports::write(&args.reports, &session, &report);
    not_written.iter().for_each(|e| errln!("rocgate: {e}"));
    let places = session
        .facts()
        .gpus
        .iter()
        .filter(|g| plan.gpus.contains(&g.index))
        .map(|g| (g.index, g.pci_address.clone()))
        .collect();
    Ok((judge(&report, plan.gpus.len(), args.strict), places))
}

/// The verdict on a run: the lowest fault that stops the stack makes the
/// node unhealthy, even in a run cut short; a run cut short without one,
/// or a fault of rocgate's own, decides nothing. Checks that could not look
/// are counted in the line; under `--strict` the first of them makes the
/// node unhealthy.
fn judge(report: &RunReport, gpus: usize, strict: bool) -> Health {
    let diagnosis = doctor::diagnose(report);
    if let Some(own) = diagnosis.findings.iter().find(|f| f.code == INTERNAL_ERROR) {
        return Health::Unknown(format!("rocgate failed ({}): {}", own.check, own.message));
    }
    if let Some(fault) = diagnosis.findings.iter().find(|f| !f.advisory) {
        // A node-wide finding that a GPU's own result shares (a wedged
        // GPU) is told by that GPU, so the line and a drain reason name it.
        let on_gpu = diagnosis.findings.iter().filter(|f| !f.advisory).find(|f| {
            fault.scope == Scope::Node
                && f.scope != Scope::Node
                && f.code == fault.code
                && f.layer == fault.layer
        });
        return Health::Unhealthy(on_gpu.unwrap_or(fault).clone());
    }
    if let Some(why) = &report.interrupted {
        return Health::Unknown(match why.as_str() {
            "time budget" => "the time budget ran out before every layer was checked".into(),
            signal => format!("interrupted by {signal} before every layer was checked"),
        });
    }
    let unverified = report.unverified();
    if let (true, Some(r)) = (strict, unverified.first()) {
        return Health::Unhealthy(DiagnosedFault {
            code: "unverified".into(),
            layer: r.layer,
            scope: r.scope,
            check: r.id.clone(),
            message: format!("{}: {}", r.id, r.message),
            next_step: String::new(),
            advisory: false,
        });
    }
    Health::Healthy {
        gpus,
        advisory: diagnosis.findings.first().cloned(),
        unverified: unverified.len(),
        not_run: report.count_skipped(rocgate_harness::SkipReason::NotConfigured),
    }
}

/// Where a fault is: its GPU's PCI address, else its scope (`node`).
fn gpus_place(f: &DiagnosedFault, gpus: &[(u32, String)]) -> String {
    match f.scope {
        Scope::Gpu(i) => gpus
            .iter()
            .find(|(index, _)| *index == i)
            .map_or_else(|| f.scope.label(), |(_, pci)| pci.clone()),
        Scope::Node => "node".to_string(),
    }
}

/// The one line: `rocgate: ok 8 GPUs`, `rocgate: <code> <where> <text>` or
/// `rocgate: unknown <why>`, at most [`MAX_LINE`] characters.
fn one_line(health: &Health, gpus: &[(u32, String)]) -> String {
    let line = match health {
        Health::Healthy {
            gpus: n,
            advisory,
            unverified,
            not_run,
        } => {
            let plural = if *n == 1 { "" } else { "s" };
            let mut line = format!("rocgate: ok {n} GPU{plural}");
            if let Some(f) = advisory {
                line.push_str(&format!("; advisory {} {}", f.code, gpus_place(f, gpus)));
            }
            for (count, what) in [(unverified, "unverified"), (not_run, "not run")] {
                if *count > 0 {
                    line.push_str(&format!("; {count} {what}"));
                }
            }
            line
        }
        Health::Unhealthy(f) => format!(
            "rocgate: {} {} {}",
            f.code,
            gpus_place(f, gpus),
            without_gpu_label(f.message.lines().next().unwrap_or(""), f.scope)
        ),
        Health::Unknown(why) => format!("rocgate: unknown {}", why.lines().next().unwrap_or("")),
    };
    shorten(&line, MAX_LINE)
}

/// `message` without the GPU's own label at its start (`gpu3 (0000:65:00.0,
/// AMD Instinct MI300X): `), which the line already gives as the address.
fn without_gpu_label(message: &str, scope: Scope) -> &str {
    let Scope::Gpu(i) = scope else {
        return message;
    };
    message
        .strip_prefix(&format!("gpu{i} ("))
        .and_then(|rest| rest.split_once(')'))
        .map_or(message, |(_, rest)| {
            rest.trim_start_matches(':').trim_start()
        })
}

/// `s` cut to `max` characters, ending in `...` when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let kept: String = s.chars().take(max.saturating_sub(3)).collect();
    format!("{}...", kept.trim_end())
}

/// The job's GPUs as `--gpus` takes them: SLURM_JOB_GPUS (Slurm's GPU
/// indices, which follow the node's GPU order), else ROCR_VISIBLE_DEVICES.
fn job_gpus() -> Result<String, String> {
    for var in ["SLURM_JOB_GPUS", "ROCR_VISIBLE_DEVICES"] {
        if let Ok(v) = std::env::var(var) {
            let v = v.trim().to_string();
            if v.is_empty() {
                continue;
            }
            if v.split(',').all(|i| i.trim().parse::<u32>().is_ok()) {
                return Ok(v);
            }
            return Err(format!(
                "{var}={v} is not a list of GPU indices; rocgate checks a job's GPUs by index"
            ));
        }
    }
    Err("neither SLURM_JOB_GPUS nor ROCR_VISIBLE_DEVICES names the job's GPUs".into())
}

/// The Slurm node this runs on: SLURMD_NODENAME, else the host name.
fn node_name() -> Result<String, String> {
    if let Ok(n) = std::env::var("SLURMD_NODENAME") {
        if !n.trim().is_empty() {
            return Ok(n.trim().to_string());
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .map_err(|e| format!("no SLURMD_NODENAME, and /proc/sys/kernel/hostname: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_eighty_characters() {
        let long = "x".repeat(200);
        let s = shorten(&format!("rocgate: unknown {long}"), MAX_LINE);
        assert_eq!(s.chars().count(), MAX_LINE);
        assert!(s.ends_with("..."));
        assert_eq!(
            shorten("rocgate: ok 8 GPUs", MAX_LINE),
            "rocgate: ok 8 GPUs"
        );
    }
}
