//! `rocgate health`: the checks inside a time budget, summed up in one line
//! and an exit code that schedulers and monitoring act on: 0 healthy, 1
//! unhealthy, 2 unknown (rocgate could not decide, so nothing may be
//! drained or tainted on its word).

use crate::cli::{HealthArgs, NodeArgs};
use crate::slurm;
use rocgate::config::Config;
use rocgate::decision::{Decision, Health, decide};
use rocgate::session::Session;
use rocgate_harness::{ExecOptions, Scope, Tier};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The longest line a health check prints: node-problem-detector keeps 80
/// characters of a plugin's output.
const MAX_LINE: usize = 80;

/// Kept back from the budget for the engine's grace to running checks and
/// for writing the reports.
const RESERVE: Duration = Duration::from_secs(3);

/// The budget without `--budget`: inside Slurm's 60 s HealthCheckTimeout.
const DEFAULT_BUDGET: f64 = 50.0;

/// What the node is, as far as rocgate could tell, and what to print.
struct Verdict {
    decision: Decision,
    /// The GPUs checked.
    gpus: usize,
    /// Checks not run here (the runtime layers on a capture without
    /// `--rocm-path`, checks the selection left out): counted, not passed.
    not_run: usize,
    /// The tier that ran.
    tier: Tier,
}

/// Runs the health check.
pub fn run(args: &HealthArgs) -> Result<ExitCode, String> {
    let started = Instant::now();
    let job = args.slurm_prolog || args.slurm_epilog;
    let verdict = check(args, started);
    let line = match &verdict {
        Ok(v) => one_line(v),
        Err(why) => shorten(
            &format!("rocgate: unknown {}", why.lines().next().unwrap_or("")),
            MAX_LINE,
        ),
    };
    let health = verdict
        .as_ref()
        .map_or(Health::Unknown, |v| v.decision.health);
    if job {
        // The job's log gets the line; Slurm is not called from a prolog.
        errln!("{line}");
        return Ok(ExitCode::from(u8::from(health == Health::Unhealthy)));
    }
    outln!("{line}");
    if args.slurm {
        let reason = verdict
            .as_ref()
            .ok()
            .filter(|v| v.decision.health == Health::Unhealthy)
            .map(drain_reason);
        let act = match (health, &reason) {
            (Health::Healthy, _) => slurm::Verdict::Healthy,
            (Health::Unhealthy, Some(r)) => slurm::Verdict::Unhealthy(r),
            _ => slurm::Verdict::Unknown,
        };
        match node_name(&args.node).and_then(|n| slurm::act(&n, act)) {
            Ok(done) => errln!("rocgate: {done}"),
            Err(e) => errln!("rocgate: {e}"),
        }
    }
    Ok(ExitCode::from(match health {
        Health::Healthy => 0,
        Health::Unhealthy => 1,
        Health::Unknown => 2,
    }))
}

/// The tier to run: `--tier`, else the policy file's; else, as Slurm's
/// health check, passive while jobs hold the node (or when its state cannot
/// be read: its GPUs may be in use) and quick when it is idle; else quick.
fn tier(args: &HealthArgs, config: &Config) -> Tier {
    if let Some(t) = args.select.tier.or(config.health_tier()) {
        return t;
    }
    if args.slurm {
        let busy = node_name(&args.node)
            .and_then(|n| slurm::show(&n))
            .map_or(true, |s| s.runs_jobs());
        if busy {
            return Tier::Passive;
        }
    }
    Tier::Quick
}

/// Runs the checks and judges them; an `Err` is a reason for unknown.
fn check(args: &HealthArgs, started: Instant) -> Result<Verdict, String> {
    crate::reports::distinct_paths(&args.reports)?;
    let config = args.node.config()?;
    let budget = args
        .budget
        .or(config.health_budget())
        .unwrap_or(DEFAULT_BUDGET);
    let node = args.node.open()?;
    let selector = if args.slurm_prolog || args.slurm_epilog {
        Some(job_gpus()?)
    } else {
        args.select.gpus.clone()
    };
    let session = Session::open(
        node.sysroot(),
        args.node
            .options(&config, args.select.expect_gpus, selector.as_deref()),
    )?;
    let gpus = session.select_gpus(None)?;
    let tier = tier(args, &config);
    let plan = args.select.checks.plan(&session, &config, &gpus, tier)?;
    let interrupt = crate::signals::interrupt_flag()?;
    let for_checks = Duration::from_secs_f64(budget)
        .saturating_sub(RESERVE)
        .max(Duration::from_secs(1));
    let mut opts = ExecOptions {
        interrupt: std::sync::Arc::clone(&interrupt),
        workers: crate::worker_cmd::threads(plan.gpus.len()),
        // The passive tier starts no worker: it reads files only.
        isolator: if tier == Tier::Passive {
            None
        } else {
            crate::worker_cmd::isolator(&session, &interrupt)?
        },
        deadline: Some(started + for_checks),
        waivers: std::sync::Arc::new(session.waivers(&config)?),
        ..ExecOptions::default()
    };
    // A hung GPU must time out inside the budget: a timeout is a finding
    // (the node is drained), a run cut short by the budget decides nothing.
    let cap = args
        .check_timeout
        .or(config.health_check_timeout())
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
    (report.strict, report.fail_on_warn) = args.verdict.resolve(&config);
    let (_, not_written) = crate::reports::write(
        crate::reports::Source::Health,
        &args.reports,
        &session,
        &report,
    );
    not_written.iter().for_each(|e| errln!("rocgate: {e}"));
    Ok(Verdict {
        decision: decide(&report),
        gpus: plan.gpus.len(),
        not_run: report.count_skipped(rocgate_harness::SkipReason::NotConfigured),
        tier,
    })
}

/// The reason a drained node carries (at most 255 bytes): the cause's code
/// and every GPU it was found on, by PCI address.
fn drain_reason(v: &Verdict) -> String {
    let d = &v.decision;
    let code = d.cause.as_ref().map_or("unhealthy", |c| c.code.as_str());
    let text = match d.places.as_slice() {
        [] => d.reason.clone(),
        places => format!(
            "{code} {}{}",
            if d.every_gpu {
                format!("all {} GPUs ", places.len())
            } else {
                String::new()
            },
            places.join(",")
        ),
    };
    slurm::bounded_reason(&format!("{} {text}", slurm::REASON_PREFIX))
}

/// The one line: `rocgate: ok 8 GPUs`, `rocgate: <code> <where> <text>` or
/// `rocgate: unknown <why>`, at most [`MAX_LINE`] characters.
fn one_line(v: &Verdict) -> String {
    let d = &v.decision;
    let line = match d.health {
        Health::Healthy => {
            let plural = if v.gpus == 1 { "" } else { "s" };
            let mut line = format!("rocgate: ok {} GPU{plural}", v.gpus);
            if v.tier == Tier::Passive {
                line.push_str(" (passive)");
            }
            if let Some(f) = d.cause.as_ref().filter(|f| f.is_warning()) {
                let at = match f.scope {
                    Scope::Node => String::new(),
                    s => format!(
                        " {}",
                        d.places.first().cloned().unwrap_or_else(|| s.label())
                    ),
                };
                line.push_str(&format!("; warn {}{at}", f.code));
            }
            for (count, what) in [
                (d.waived, "waived"),
                (d.unverified, "unverified"),
                (v.not_run, "not run"),
            ] {
                if count > 0 {
                    line.push_str(&format!("; {count} {what}"));
                }
            }
            line
        }
        Health::Unhealthy => format!("rocgate: {}", d.reason),
        Health::Unknown => format!("rocgate: unknown {}", d.reason),
    };
    shorten(&line, MAX_LINE)
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

/// The Slurm node this runs on: SLURMD_NODENAME, else `--node-name`, else
/// the host name.
fn node_name(node: &NodeArgs) -> Result<String, String> {
    let given = [
        std::env::var("SLURMD_NODENAME").ok(),
        node.node_name.clone(),
    ];
    if let Some(n) = given.into_iter().flatten().find(|n| !n.trim().is_empty()) {
        return Ok(n.trim().to_string());
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
