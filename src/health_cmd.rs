//! `rocgate health`: the checks inside a time budget, summed up in one line
//! and an exit code that schedulers and monitoring act on: 0 healthy, 1
//! unhealthy, 2 unknown (rocgate could not decide, so nothing may be
//! drained or tainted on its word).

use crate::cli::{HealthArgs, NodeArgs};
use crate::error::Result;
use crate::slurm;
use rocgate::config::Config;
use rocgate::decision::{Decision, Health, decide};
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_harness::{ExecOptions, Scope, Tier};
use rocgate_suites::context::GpuHolders;
use std::time::{Duration, Instant};

/// The longest line a health check prints, in bytes: node-problem-detector
/// keeps the first 80 bytes of a custom plugin's output (its
/// `max_output_length`, 80 by default, applied to the output as Go bytes).
const MAX_LINE: usize = 80;

/// Kept back from the budget for the engine's grace to running checks and
/// for writing the reports.
const RESERVE: Duration = Duration::from_secs(3);

/// Kept back from the budget, under `--slurm`, for `scontrol show node` and
/// `scontrol update`: the drain must land before slurmd kills the program.
const SLURM_RESERVE: Duration = Duration::from_secs(8);

/// The shortest timeout whose expiry is taken for a hang: a check the
/// budget cut below both this and its own timeout may only be slow (a
/// worker's start and ROCm's init take seconds on a loaded node), so its
/// timeout is rocgate's limit (the verdict is unknown), not a GPU fault.
/// Budgets of 18 s and more give every check at least this.
const HANG_EVIDENCE: Duration = Duration::from_secs(5);

/// The budget without `--budget`: inside Slurm's 60 s HealthCheckTimeout.
const DEFAULT_BUDGET: f64 = 50.0;

/// What the node is, as far as rocgate could tell, and what to print.
struct Verdict {
    decision: Decision,
    /// The GPU devices checked (a partitioned device counts once).
    gpus: usize,
    /// The partitions checked, when a device shows several.
    partitions: usize,
    /// Checks not run here (the runtime layers on a capture without
    /// `--rocm-path`, checks the selection left out): counted, not passed.
    not_run: usize,
    /// The tier that ran.
    tier: Tier,
    /// Reports that could not be written.
    not_written: usize,
}

/// Why a health check ended without a run's verdict.
enum Stop {
    /// rocgate could not decide (a configuration error, a node it cannot
    /// open): nothing may be drained on its word.
    Unknown(String),
    /// The node is unfit without running a check: a GPU the job was given
    /// is not there.
    Unhealthy(String),
}

impl From<String> for Stop {
    fn from(why: String) -> Stop {
        Stop::Unknown(why)
    }
}

/// A node health cannot open leaves it without a verdict.
impl From<rocgate_suites::context::OpenError> for Stop {
    fn from(e: rocgate_suites::context::OpenError) -> Stop {
        crate::error::Error::from(e).into()
    }
}

/// Whatever its kind, a command's error leaves health without a verdict.
impl From<crate::error::Error> for Stop {
    fn from(e: crate::error::Error) -> Stop {
        Stop::Unknown(e.to_string())
    }
}

/// Runs the health check: 0 healthy, 1 unhealthy, 2 unknown or a report
/// not written; a prolog's 0 or 1.
pub fn run(args: &HealthArgs) -> Result<Exit> {
    // A health check answers within its budget; a burn-in is `run`'s.
    if args.select.tier == Some(Tier::Burnin) || args.select.duration.is_some() {
        return Err(crate::error::Error::usage(
            "health gives a verdict within its budget; run a burn-in with `rocgate run --tier burnin --duration SPAN`",
        ));
    }
    let started = Instant::now();
    let job = args.slurm_prolog || args.slurm_epilog;
    // A signal ends health with a code its caller documents: a prolog's
    // interrupted check lets the job run (0), health's own is unknown (2),
    // also when the watchdog has to end a command stuck in a system call.
    crate::signals::set_interrupted_exit_code(if job { Exit::Pass } else { Exit::NoVerdict });
    let mut budget_end = None;
    let verdict = check(args, started, &mut budget_end);
    let line = match &verdict {
        Ok(v) => one_line(v),
        Err(Stop::Unknown(why)) => shorten(
            &format!("rocgate: unknown {}", why.lines().next().unwrap_or("")),
            MAX_LINE,
        ),
        Err(Stop::Unhealthy(why)) => shorten(&format!("rocgate: {why}"), MAX_LINE),
    };
    let health = match &verdict {
        Ok(v) => v.decision.health,
        Err(Stop::Unknown(_)) => Health::Unknown,
        Err(Stop::Unhealthy(_)) => Health::Unhealthy,
    };
    let mut not_written = verdict.as_ref().map_or(0, |v| v.not_written);
    if job {
        // The job's log gets the line; Slurm is not called from a prolog.
        // Slurm drains the node on any other exit than 0, so only a fault
        // of the node exits 1; rocgate's own trouble (an unknown verdict, a
        // report not written, a signal) is said and exits 0.
        errln!("{line}");
        if not_written > 0 {
            errln!("rocgate: a report was not written (above); the verdict stands");
        }
        return Ok(Exit::pass_if(health != Health::Unhealthy));
    }
    // The line is what a monitor reads: node text in it is never a workflow
    // command, and a line stdout did not take is a report not written.
    if let Err(e) = crate::ui::document::text(&format!("{line}\n")) {
        errln!("rocgate: {e}");
        not_written += 1;
    }
    if args.slurm {
        let reason = match &verdict {
            Ok(v) if v.decision.health == Health::Unhealthy => Some(drain_reason(v)),
            Err(Stop::Unhealthy(why)) => Some(slurm::bounded_reason(&format!(
                "{} {why}",
                slurm::REASON_PREFIX
            ))),
            _ => None,
        };
        let act = match (health, &reason) {
            (Health::Healthy, _) => slurm::Verdict::Healthy,
            (Health::Unhealthy, Some(r)) => slurm::Verdict::Unhealthy(r),
            _ => slurm::Verdict::Unknown,
        };
        // The drain's calls come out of the budget, not on top of it.
        let until = budget_end.unwrap_or_else(|| started + Duration::from_secs_f64(DEFAULT_BUDGET));
        match node_name(&args.node).and_then(|n| slurm::act(&n, act, until)) {
            Ok(done) => errln!("rocgate: {done}"),
            Err(e) => errln!("rocgate: {e}"),
        }
    }
    // A scheduler reads health's three codes only: a report not written
    // leaves the node's health unknown, never a code of its own.
    Ok(if not_written > 0 {
        Exit::NoVerdict
    } else {
        match health {
            Health::Healthy => Exit::Pass,
            Health::Unhealthy => Exit::Fail,
            Health::Unknown => Exit::NoVerdict,
        }
    })
}

/// The tier to run: `--tier`, else the policy file's; else, as Slurm's
/// health check, passive while jobs hold the node (or when its state cannot
/// be read: its GPUs may be in use) and quick when it is idle; else quick.
/// Also says whether jobs hold the node as far as Slurm tells (then the
/// processes holding its GPUs are theirs).
fn tier(args: &HealthArgs, config: &Config, until: Instant) -> (Tier, bool) {
    let busy = args.slurm
        && node_name(&args.node)
            .and_then(|n| slurm::show(&n, until))
            .map_or(true, |s| s.runs_jobs());
    if let Some(t) = args.select.tier.or(config.health_tier()) {
        return (t, busy);
    }
    (if busy { Tier::Passive } else { Tier::Quick }, busy)
}

/// Runs the checks and judges them; `budget_end` is set to when the budget
/// ends, for what comes after the checks.
fn check(
    args: &HealthArgs,
    started: Instant,
    budget_end: &mut Option<Instant>,
) -> Result<Verdict, Stop> {
    crate::reports::distinct_paths(&args.reports)?;
    if crate::reports::claims_stdout(&args.reports) {
        // Slurm and node-problem-detector read health's stdout for its
        // verdict line: a report there would bury it.
        return Err(Stop::Unknown(
            "report to -: stdout is health's verdict; give the report a file".to_string(),
        ));
    }
    let config = args.node.config()?;
    let budget = args
        .budget
        .or(config.health_budget())
        .unwrap_or(DEFAULT_BUDGET);
    let end = started + Duration::from_secs_f64(budget);
    *budget_end = Some(end);
    let node = args.node.open()?;
    let job = args.slurm_prolog || args.slurm_epilog;
    let mut options = args.node.options(
        &config,
        args.select.expect_gpus,
        if job {
            None
        } else {
            args.select.gpus.as_deref()
        },
    );
    // Health runs again and again: what it judges is what is new since
    // its last run, not every event since boot.
    options.since = args
        .node
        .since_or(rocgate_suites::gpu_events::Since::LastRun);
    let mut session = Session::open(node.sysroot(), options)?;
    // The job's GPUs, as Slurm numbers them, to this node's GPUs; the
    // workers are given the inventory indices.
    let job_gpus = if job {
        let indices = crate::slurm_gpus::job_gpus(&session.facts().gpus).map_err(|e| match e {
            crate::slurm_gpus::JobGpus::Unknown(why) => Stop::Unknown(why),
            crate::slurm_gpus::JobGpus::Missing(why) => Stop::Unhealthy(why),
        })?;
        let list: Vec<String> = indices.iter().map(u32::to_string).collect();
        Some(list.join(","))
    } else {
        None
    };
    // The node's state only picks the tier: a tenth of the budget for it,
    // so a slow slurmctld leaves time for the checks and the drain (and an
    // unanswered question is the passive tier, which touches no GPU).
    let (tier, busy) = tier(
        args,
        &config,
        started + Duration::from_secs_f64(budget / 10.0),
    );
    // A prolog's GPUs are promised to the job about to start: anything
    // holding them is a leftover. On a node whose jobs run, they are the
    // jobs' (an epilog's job is ending, so its processes may linger).
    let holders = if args.slurm_prolog {
        GpuHolders::Forbidden
    } else if busy || args.slurm_epilog {
        GpuHolders::Expected
    } else {
        GpuHolders::Unexpected
    };
    match std::sync::Arc::get_mut(&mut session.ctx) {
        Some(ctx) => {
            ctx.options.gpu_holders = holders;
            if job_gpus.is_some() {
                ctx.options.gpus = job_gpus;
            }
        }
        None => {
            return Err(Stop::Unknown(
                "internal error: the session is shared".into(),
            ));
        }
    }
    let gpus = session.select_gpus(None)?;
    // A short budget keeps a quarter for the drain, not all of itself.
    let slurm_reserve = if args.slurm {
        SLURM_RESERVE.min(Duration::from_secs_f64(budget / 4.0))
    } else {
        Duration::ZERO
    };
    let plan = args.select.checks.plan(&session, &config, &gpus, tier)?;
    let interrupt = crate::signals::interrupt_flag()?;
    let for_checks = Duration::from_secs_f64(budget)
        .saturating_sub(RESERVE + slurm_reserve)
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
    let given = args.check_timeout.or(config.health_check_timeout());
    let cap = given.map_or(for_checks / 3, Duration::from_secs_f64);
    // Checks whose timeout the budget cut too short to tell a hang from
    // a slow check: their timeout is the budget's, not the GPU's.
    let mut too_short = std::collections::BTreeSet::new();
    for check in &session.registry {
        let own = opts.timeout_of(check);
        if own > cap {
            opts.timeouts.insert(check.id.to_string(), cap);
            if given.is_none() && cap < own.min(HANG_EVIDENCE) {
                too_short.insert(check.id.to_string());
            }
        }
    }
    let mut report = session.run(&plan, &opts, |_| {});
    let cut = budget_timeouts(&mut report, &too_short, cap, budget);
    // A failed all-reduce is narrowed down to its GPU while the budget lasts,
    // so a drain reason can name the GPU rather than the node.
    if opts.isolator.is_some() {
        if let Ok(program) = std::env::current_exe() {
            session.narrow_collectives(&mut report, &opts, &program, &|_| {});
        }
    }
    if cut && report.interrupted.is_none() {
        report.interrupted = Some("time budget".to_string());
    }
    (report.strict, report.fail_on_warn) = args.verdict.resolve(&config);
    let shown = crate::reports::Presented::of(&session, &report);
    let history = args.node.history(session.facts().sysroot.is_live());
    crate::reports::keep_in_history(history.as_ref(), &shown);
    let (_, not_written) =
        crate::reports::write(crate::reports::Source::Health, &args.reports, &shown);
    not_written.iter().for_each(|e| errln!("rocgate: {e}"));
    let devices: std::collections::BTreeSet<&str> = plan
        .gpus
        .iter()
        .filter_map(|&g| session.facts().gpu(g))
        .map(|g| g.physical_address())
        .collect();
    Ok(Verdict {
        decision: decide(&report),
        gpus: devices.len(),
        partitions: plan.gpus.len(),
        not_run: report.count_skipped(rocgate_harness::SkipReason::NotConfigured),
        tier,
        not_written: not_written.len(),
    })
}

/// Turns the timeouts of the checks in `too_short` (their timeout cut to
/// `cap` by a `budget` too short to tell a hang from a slow check) into
/// checks the budget interrupted, with the checks they blocked; returns
/// whether there were any. A short budget is rocgate's limit: it must never
/// drain a node.
fn budget_timeouts(
    report: &mut rocgate_harness::RunReport,
    too_short: &std::collections::BTreeSet<String>,
    cap: Duration,
    budget: f64,
) -> bool {
    use rocgate_harness::{SkipReason, Status};
    let mut cut = Vec::new();
    for r in report
        .results
        .iter_mut()
        .filter(|r| r.status == Status::Timeout && too_short.contains(&r.check))
    {
        r.status = Status::Skipped;
        r.skip_reason = Some(SkipReason::Interrupted);
        r.finding = None;
        r.message = format!(
            "cut short after {:.1} s by the health budget (--budget {budget} s), too short to tell a hang from a slow check: {}",
            cap.as_secs_f64(),
            r.message
        );
        cut.push(r.test_id.clone());
    }
    // What the executor blocked as "GPU unresponsive after <id>" was only
    // not reached.
    for r in report.results.iter_mut().filter(|r| {
        r.status == Status::Blocked
            && cut
                .iter()
                .any(|id| r.message.contains(&format!("after {id} (timed out)")))
    }) {
        r.status = Status::Skipped;
        r.skip_reason = Some(SkipReason::Interrupted);
        r.message = format!("not run: {}", r.message.trim_start_matches("blocked: "));
    }
    !cut.is_empty()
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

/// The one line: `rocgate: ok 8 GPUs` (`ok 8 GPUs (64 partitions)`),
/// `rocgate: <code> <where> <text>` or `rocgate: unknown <why>`, at most
/// [`MAX_LINE`] bytes. GPUs are devices, as `--expect-gpus` counts them.
fn one_line(v: &Verdict) -> String {
    let d = &v.decision;
    let line = match d.health {
        Health::Healthy => {
            let plural = if v.gpus == 1 { "" } else { "s" };
            let mut line = format!("rocgate: ok {} GPU{plural}", v.gpus);
            if v.partitions > v.gpus {
                line.push_str(&format!(" ({} partitions)", v.partitions));
            }
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

/// `s` cut to `max` bytes on a character boundary, ending in `...` when
/// cut.
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", s[..end].trim_end())
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
        assert_eq!(s.len(), MAX_LINE);
        assert!(s.ends_with("..."));
        // Bytes, on a character boundary.
        let wide = shorten(&format!("rocgate: x {}", "é".repeat(100)), MAX_LINE);
        assert!(
            wide.len() <= MAX_LINE && wide.ends_with("..."),
            "{}",
            wide.len()
        );
        assert_eq!(
            shorten("rocgate: ok 8 GPUs", MAX_LINE),
            "rocgate: ok 8 GPUs"
        );
    }
}
