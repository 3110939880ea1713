//! The executor: runs a plan's instances on a worker pool, in dependency
//! order, with gating, per-check timeouts and interruption.

use crate::isolate::Isolator;
use crate::model::Scope;
use crate::output;
use crate::plan::Plan;
use crate::result::CheckResult;
use crate::verdict::{Finding, SkipReason, Status, Verdict};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How the executor runs a plan.
#[derive(Clone)]
pub struct ExecOptions {
    /// Block checks whose dependencies did not pass (`--no-gate` clears it).
    pub gate: bool,
    /// Worker threads.
    pub workers: usize,
    /// Multiplies every check's timeout.
    pub timeout_scale: f64,
    /// Per-check timeouts (by check id, `hsa::init`) that replace the
    /// check's own, unscaled.
    pub timeouts: HashMap<String, Duration>,
    /// When non-zero, the number of the signal that interrupted the run; the
    /// executor starts nothing new once it is set.
    pub interrupt: Arc<AtomicUsize>,
    /// How long running checks may finish after an interruption.
    pub interrupt_grace: Duration,
    /// Bound for each result's captured output, in bytes.
    pub output_limit: usize,
    /// Runs isolated checks in worker processes; without one they run in
    /// this process like the others.
    pub isolator: Option<Arc<dyn Isolator>>,
    /// At most this many scopes bring up their worker at once (a scope's
    /// first isolated check, which starts the worker and initialises the
    /// vendor runtime), so a node of 64 GPU partitions does not start 64
    /// runtimes together. The wait does not count against any timeout.
    pub max_warming: usize,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            gate: true,
            workers: thread::available_parallelism()
                .map_or(4, |n| n.get())
                .clamp(2, 16),
            timeout_scale: 1.0,
            timeouts: HashMap::new(),
            interrupt: Arc::new(AtomicUsize::new(0)),
            interrupt_grace: Duration::from_secs(2),
            output_limit: output::DEFAULT_LIMIT,
            isolator: None,
            max_warming: 8,
        }
    }
}

/// The longest any one check may be given, whatever the scale: far beyond any
/// real check, and small enough that a deadline computed from it cannot
/// overflow the clock.
pub const MAX_CHECK_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a worker process needs beyond a timed-out check's timeout before the
/// executor has its result: the kill grace is added per check; this covers
/// reaping the process.
const REAP_ALLOWANCE: Duration = Duration::from_millis(500);

impl ExecOptions {
    /// The time `check` may take: its override, else its own timeout scaled;
    /// never more than [`MAX_CHECK_TIMEOUT`].
    pub fn timeout_of<C>(&self, check: &crate::check::Check<C>) -> Duration {
        let t = self.timeouts.get(check.id).copied().unwrap_or_else(|| {
            let scale = if self.timeout_scale.is_finite() {
                self.timeout_scale.max(0.01)
            } else {
                1.0
            };
            Duration::try_from_secs_f64(check.timeout.as_secs_f64() * scale)
                .unwrap_or(MAX_CHECK_TIMEOUT)
        });
        t.min(MAX_CHECK_TIMEOUT)
    }

    /// What a check costs at most when it runs into its timeout: an isolated
    /// check's worker is then killed, which takes the kill grace and a reap.
    fn worst_case_of<C>(&self, check: &crate::check::Check<C>) -> Duration {
        let kill = match (&self.isolator, check.isolated) {
            (Some(isolator), true) => isolator.kill_grace() + REAP_ALLOWANCE,
            _ => Duration::ZERO,
        };
        self.timeout_of(check) + kill
    }

    /// An upper bound on a run of `plan` in which every check runs into its
    /// timeout: node checks one after another, then each GPU's chain, GPUs in
    /// parallel but starting their workers `max_warming` at a time (a GPU
    /// waiting for a start slot waits for another GPU's first isolated check).
    pub fn time_budget<C>(&self, plan: &Plan<'_, C>) -> Duration {
        use crate::model::ScopeKind;
        let node: Duration = plan
            .instances
            .iter()
            .map(|i| plan.check(i))
            .filter(|c| c.scope == ScopeKind::Node)
            .map(|c| self.worst_case_of(c))
            .sum();
        if plan.gpus.is_empty() {
            return node;
        }
        let per_gpu: Vec<&crate::check::Check<C>> = plan
            .registry
            .iter()
            .filter(|c| c.scope == ScopeKind::PerGpu && c.tier <= plan.tier)
            .collect();
        let chain: Duration = per_gpu.iter().map(|c| self.worst_case_of(c)).sum();
        let first_start = per_gpu
            .iter()
            .find(|c| c.isolated && self.isolator.is_some())
            .map(|c| self.worst_case_of(c));
        let waves = plan.gpus.len().div_ceil(self.max_warming.max(1));
        let queued = match first_start {
            Some(start) if waves > 1 => {
                start.saturating_mul(u32::try_from(waves - 1).unwrap_or(u32::MAX))
            }
            _ => Duration::ZERO,
        };
        node.saturating_add(chain).saturating_add(queued)
    }
}

/// Progress the executor reports as it goes, on the calling thread.
#[derive(Debug)]
pub enum Event<'a> {
    /// A check started on a worker.
    Started {
        /// Its test id.
        id: &'a str,
    },
    /// A check has its final result (including blocked and skipped ones).
    Finished(&'a CheckResult),
}

/// How a job runs: the check's function here, or through the isolator.
enum Runner<C> {
    Direct(fn(&C, Scope) -> crate::check::Outcome, Duration),
    Isolated {
        isolator: Arc<dyn Isolator>,
        check: &'static str,
        timeout: Duration,
    },
}

struct Job<C> {
    index: usize,
    scope: Scope,
    runner: Runner<C>,
}

type Outcome = (usize, Result<Verdict, String>, Duration);

/// Runs `plan` against `ctx` and returns one result per instance, in plan order.
pub fn execute<C: Send + Sync + 'static>(
    plan: &Plan<'_, C>,
    ctx: Arc<C>,
    opts: &ExecOptions,
    mut on_event: impl FnMut(Event<'_>),
) -> Vec<CheckResult> {
    let n = plan.instances.len();
    let (job_tx, job_rx) = mpsc::channel::<Job<C>>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (out_tx, out_rx) = mpsc::channel::<Outcome>();
    let workers = opts.workers.max(1);
    for _ in 0..workers.min(n.max(1)) {
        spawn_worker(&ctx, &job_rx, &out_tx);
    }

    let mut results: Vec<Option<CheckResult>> = vec![None; n];
    let mut waiting_on: Vec<usize> = plan.instances.iter().map(|i| i.deps.len()).collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, inst) in plan.instances.iter().enumerate() {
        for &d in &inst.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| waiting_on[i] == 0).collect();
    let mut running: HashMap<usize, (Instant, Instant)> = HashMap::new();
    let mut done = 0usize;
    // Scopes whose worker is busy: one isolated check per scope at a time.
    let mut busy: HashMap<Scope, usize> = HashMap::new();
    // GPUs whose check timed out: nothing more is sent to them.
    let mut unresponsive: HashMap<Scope, String> = HashMap::new();
    // Scopes whose worker has answered once, and how many are starting one.
    let mut warm: HashSet<Scope> = HashSet::new();
    let mut warming = 0usize;
    let isolated = |i: usize| opts.isolator.is_some() && plan.check(&plan.instances[i]).isolated;

    // Records a final result and releases the instances that waited on it.
    let mut finish = |i: usize,
                      result: CheckResult,
                      results: &mut Vec<Option<CheckResult>>,
                      ready: &mut BTreeSet<usize>,
                      done: &mut usize,
                      on_event: &mut dyn FnMut(Event<'_>)| {
        on_event(Event::Finished(&result));
        results[i] = Some(result);
        *done += 1;
        for &d in &dependents[i] {
            waiting_on[d] -= 1;
            if waiting_on[d] == 0 {
                ready.insert(d);
            }
        }
    };

    while done < n {
        let signal = opts.interrupt.load(Ordering::SeqCst);
        if signal != 0 {
            break;
        }
        // Dispatch what is ready, resolving gating on the way.
        while running.len() < workers {
            let cold = |i: usize| isolated(i) && !warm.contains(&plan.instances[i].scope);
            // One isolated check per scope at a time, and a bounded number
            // of scopes starting their worker.
            let waits = |i: usize| {
                let busy_scope = isolated(i) && busy.contains_key(&plan.instances[i].scope);
                let no_start_slot = cold(i) && warming >= opts.max_warming.max(1);
                busy_scope || no_start_slot
            };
            let pick = ready.iter().copied().find(|&i| !waits(i));
            let Some(i) = pick else { break };
            ready.remove(&i);
            let inst = &plan.instances[i];
            if opts.gate {
                if let Some(hung) = unresponsive.get(&inst.scope) {
                    let r = CheckResult {
                        status: Status::Blocked,
                        message: format!("blocked: GPU unresponsive after {hung} (timed out)"),
                        blocked_by: Some(hung.clone()),
                        ..base_result(plan, i)
                    };
                    finish(i, r, &mut results, &mut ready, &mut done, &mut on_event);
                    continue;
                }
                if let Some(blocker) = inst
                    .deps
                    .iter()
                    .filter(|&&d| !hang_spares(plan, opts, d, inst.scope, &results))
                    .filter_map(|&d| results[d].as_ref())
                    .find(|r| !r.status.lets_dependents_run())
                {
                    let blocked = blocked_result(plan, i, blocker, &results);
                    finish(
                        i,
                        blocked,
                        &mut results,
                        &mut ready,
                        &mut done,
                        &mut on_event,
                    );
                    continue;
                }
            }
            let check = plan.check(inst);
            let timeout = opts.timeout_of(check);
            let (runner, deadline) = match (&opts.isolator, check.isolated) {
                (Some(isolator), true) => (
                    Runner::Isolated {
                        isolator: Arc::clone(isolator),
                        check: check.id,
                        timeout,
                    },
                    // The isolator enforces the timeout and kills the worker;
                    // this is only the backstop.
                    timeout + isolator.kill_grace() + Duration::from_secs(2),
                ),
                _ => (Runner::Direct(check.run, timeout), timeout),
            };
            let now = Instant::now();
            on_event(Event::Started { id: &inst.test_id });
            if job_tx
                .send(Job {
                    index: i,
                    scope: inst.scope,
                    runner,
                })
                .is_err()
            {
                // Every worker is gone; nothing can run any more.
                let r = engine_result(
                    plan,
                    i,
                    Status::Crash,
                    "rocgate's worker pool stopped".into(),
                    Duration::ZERO,
                );
                finish(i, r, &mut results, &mut ready, &mut done, &mut on_event);
                continue;
            }
            running.insert(i, (now, now + deadline));
            if isolated(i) {
                busy.insert(inst.scope, i);
                if !warm.contains(&inst.scope) {
                    warming += 1;
                }
            }
        }
        if done >= n {
            break;
        }
        let next_deadline = running.values().map(|&(_, d)| d).min();
        let wait = next_deadline
            .map_or(Duration::from_millis(100), |d| {
                d.saturating_duration_since(Instant::now())
            })
            .min(Duration::from_millis(100));
        match out_rx.recv_timeout(wait) {
            Ok((i, outcome, elapsed)) => {
                if running.remove(&i).is_some() {
                    busy.retain(|_, &mut b| b != i);
                    if isolated(i) && warm.insert(plan.instances[i].scope) {
                        warming -= 1;
                    }
                    let r = completed_result(plan, i, outcome, elapsed, opts.output_limit);
                    if r.status == Status::Timeout && r.scope != Scope::Node {
                        unresponsive.insert(r.scope, r.id.clone());
                    }
                    finish(i, r, &mut results, &mut ready, &mut done, &mut on_event);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let expired: Vec<usize> = running
                    .iter()
                    .filter(|(_, (_, d))| *d <= now)
                    .map(|(&i, _)| i)
                    .collect();
                for i in expired {
                    let (started, _) = running.remove(&i).unwrap_or((now, now));
                    busy.retain(|_, &mut b| b != i);
                    if isolated(i) && warm.insert(plan.instances[i].scope) {
                        warming -= 1;
                    }
                    let check = plan.check(&plan.instances[i]);
                    let limit = opts.timeout_of(check);
                    let msg = format!(
                        "did not finish within {:.1} s; abandoned",
                        limit.as_secs_f64()
                    );
                    let r = engine_result(plan, i, Status::Timeout, msg, now - started);
                    if r.scope != Scope::Node {
                        unresponsive.insert(r.scope, r.id.clone());
                    }
                    finish(i, r, &mut results, &mut ready, &mut done, &mut on_event);
                    // The stuck worker keeps its thread; give the pool a new one.
                    spawn_worker(&ctx, &job_rx, &out_tx);
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }

    let signal = opts.interrupt.load(Ordering::SeqCst);
    if signal != 0 {
        // Let running checks finish within the grace period, then close out.
        let grace_end = Instant::now() + opts.interrupt_grace;
        while !running.is_empty() {
            let wait = grace_end.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                break;
            }
            if let Ok((i, outcome, elapsed)) = out_rx.recv_timeout(wait) {
                if running.remove(&i).is_some() {
                    let r = completed_result(plan, i, outcome, elapsed, opts.output_limit);
                    finish(i, r, &mut results, &mut ready, &mut done, &mut on_event);
                }
            }
        }
        for (i, slot) in results.iter_mut().enumerate() {
            if slot.is_none() {
                let why = if running.contains_key(&i) {
                    format!("interrupted by {} while running", signal_name(signal))
                } else {
                    format!("not run: interrupted by {}", signal_name(signal))
                };
                let r = CheckResult {
                    skip_reason: Some(SkipReason::Interrupted),
                    ..engine_result(plan, i, Status::Skipped, why, Duration::ZERO)
                };
                on_event(Event::Finished(&r));
                *slot = Some(r);
            }
        }
    }
    drop(job_tx);
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| {
                engine_result(
                    plan,
                    i,
                    Status::Crash,
                    "rocgate lost this check's result".into(),
                    Duration::ZERO,
                )
            })
        })
        .collect()
}

/// Whether dependency `d` of an instance in `scope` is spared from gating
/// because it hung: a node-wide isolated check that times out may hang on
/// one GPU it sees (a vendor runtime opens every visible GPU when it
/// starts), while each GPU's checks run in a worker of their own. So they
/// still run and show which GPU hangs, instead of all being blocked; the
/// same holds for node-wide checks blocked only by such a hang.
fn hang_spares<C>(
    plan: &Plan<'_, C>,
    opts: &ExecOptions,
    d: usize,
    scope: Scope,
    results: &[Option<CheckResult>],
) -> bool {
    let node_hang = |r: &CheckResult| {
        r.scope == Scope::Node
            && r.status == Status::Timeout
            && plan
                .instances
                .iter()
                .find(|i| i.test_id == r.id)
                .is_some_and(|i| plan.check(i).isolated)
    };
    let Some(dep) = results[d].as_ref() else {
        return false;
    };
    if opts.isolator.is_none() || scope == Scope::Node || dep.scope != Scope::Node {
        return false;
    }
    match dep.status {
        Status::Timeout => node_hang(dep),
        Status::Blocked => dep.blocked_by.as_ref().is_some_and(|root| {
            results
                .iter()
                .flatten()
                .find(|r| &r.id == root)
                .is_some_and(node_hang)
        }),
        _ => false,
    }
}

/// The conventional name of a signal number, for messages.
pub fn signal_name(signal: usize) -> String {
    match signal {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

fn spawn_worker<C: Send + Sync + 'static>(
    ctx: &Arc<C>,
    jobs: &Arc<Mutex<Receiver<Job<C>>>>,
    out: &Sender<Outcome>,
) {
    let (ctx, jobs, out) = (Arc::clone(ctx), Arc::clone(jobs), out.clone());
    let spawned = thread::Builder::new()
        .name("rocgate-check".into())
        .spawn(move || {
            loop {
                let job = match jobs.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok(job) = job else { return };
                let start = Instant::now();
                let outcome = catch_unwind(AssertUnwindSafe(|| match &job.runner {
                    Runner::Direct(run, timeout) => {
                        crate::deadline::run_check(Some(*timeout), || {
                            run(&ctx, job.scope).unwrap_or_else(|v| v)
                        })
                    }
                    Runner::Isolated {
                        isolator,
                        check,
                        timeout,
                    } => isolator.run(check, job.scope, *timeout),
                }))
                .map_err(|payload| {
                    payload
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into())
                });
                if out.send((job.index, outcome, start.elapsed())).is_err() {
                    return;
                }
            }
        });
    // If the OS refuses a thread the remaining workers carry on; with none
    // left, dispatch reports every check as a crash.
    drop(spawned);
}

fn base_result<C>(plan: &Plan<'_, C>, i: usize) -> CheckResult {
    let inst = &plan.instances[i];
    let check = plan.check(inst);
    CheckResult {
        id: inst.test_id.clone(),
        check: check.id.to_string(),
        layer: check.layer,
        scope: inst.scope,
        status: Status::Skipped,
        message: String::new(),
        finding: None,
        skip_reason: None,
        advisory: !check.gates,
        blocked_by: None,
        duration: Duration::ZERO,
        output: String::new(),
        metrics: Vec::new(),
        facts: std::collections::BTreeMap::new(),
    }
}

fn engine_result<C>(
    plan: &Plan<'_, C>,
    i: usize,
    status: Status,
    message: String,
    duration: Duration,
) -> CheckResult {
    CheckResult {
        status,
        message,
        duration,
        ..base_result(plan, i)
    }
}

fn completed_result<C>(
    plan: &Plan<'_, C>,
    i: usize,
    outcome: Result<Verdict, String>,
    elapsed: Duration,
    output_limit: usize,
) -> CheckResult {
    match outcome {
        Ok(v) => CheckResult {
            status: v.status,
            message: output::clean(&v.message, output_limit),
            finding: v.finding.map(|f| Finding {
                code: output::clean(&f.code, 128),
                message: output::clean(&f.message, output_limit),
                next_step: output::clean(&f.next_step, output_limit),
            }),
            skip_reason: v.skip_reason,
            duration: elapsed,
            output: output::clean(&v.output, output_limit),
            metrics: v.metrics,
            facts: v.facts,
            ..base_result(plan, i)
        },
        Err(panic) => engine_result(
            plan,
            i,
            Status::Crash,
            format!("check panicked: {panic}"),
            elapsed,
        ),
    }
}

fn blocked_result<C>(
    plan: &Plan<'_, C>,
    i: usize,
    blocker: &CheckResult,
    results: &[Option<CheckResult>],
) -> CheckResult {
    // Name the root cause, not the chain of blocked checks in between.
    let root = match &blocker.blocked_by {
        Some(root_id) => results
            .iter()
            .flatten()
            .find(|r| &r.id == root_id)
            .unwrap_or(blocker),
        None => blocker,
    };
    let message = match root.status {
        Status::Timeout if root.scope != Scope::Node && root.scope == plan.instances[i].scope => {
            format!("blocked: GPU unresponsive after {} (timed out)", root.id)
        }
        _ => format!("blocked by {}: {}", root.id, root.message),
    };
    CheckResult {
        status: Status::Blocked,
        message,
        blocked_by: Some(root.id.clone()),
        ..base_result(plan, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Check;
    use crate::model::{Layer, ScopeKind, Tier};
    use crate::plan::plan;

    fn check(
        id: &'static str,
        layer: Layer,
        scope: ScopeKind,
        run: fn(&(), Scope) -> crate::check::Outcome,
    ) -> Check<()> {
        Check {
            id,
            layer,
            scope,
            tier: Tier::Quick,
            deps: &[],
            gates: true,
            timeout: Duration::from_millis(300),
            isolated: false,
            summary: "",
            run,
        }
    }

    fn fail_on_gpu1(_: &(), s: Scope) -> crate::check::Outcome {
        if s == Scope::Gpu(1) {
            return Err(Verdict::fail(Finding::new(
                "x-broken",
                "gpu1 is broken",
                "fix it",
            )));
        }
        Ok(Verdict::pass("ok"))
    }

    fn run(reg: &[Check<()>], gpus: &[u32], opts: &ExecOptions) -> Vec<CheckResult> {
        let p = plan(reg, gpus, Tier::Quick).unwrap();
        execute(&p, Arc::new(()), opts, |_| {})
    }

    fn status(rs: &[CheckResult], id: &str) -> Status {
        rs.iter().find(|r| r.id == id).unwrap().status
    }

    #[test]
    fn a_failure_blocks_the_same_gpu_above_and_not_the_others() {
        let reg = vec![
            check("pci::a", Layer::Pci, ScopeKind::PerGpu, fail_on_gpu1),
            check("amdgpu::b", Layer::Amdgpu, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
            check("kfd::c", Layer::Kfd, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let rs = run(&reg, &[0, 1, 2], &ExecOptions::default());
        assert_eq!(status(&rs, "gpu1.pci.a"), Status::Fail);
        assert_eq!(status(&rs, "gpu1.amdgpu.b"), Status::Blocked);
        let c = rs.iter().find(|r| r.id == "gpu1.kfd.c").unwrap();
        assert_eq!(c.status, Status::Blocked);
        assert_eq!(c.blocked_by.as_deref(), Some("gpu1.pci.a"));
        assert_eq!(c.message, "blocked by gpu1.pci.a: gpu1 is broken");
        assert_eq!(status(&rs, "gpu0.kfd.c"), Status::Pass);
        assert_eq!(status(&rs, "gpu2.kfd.c"), Status::Pass);
    }

    #[test]
    fn no_gate_runs_everything() {
        let reg = vec![
            check("pci::a", Layer::Pci, ScopeKind::Node, |_, _| {
                Ok(Verdict::fail(Finding::new("x", "broken", "fix")))
            }),
            check("kfd::c", Layer::Kfd, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let opts = ExecOptions {
            gate: false,
            ..ExecOptions::default()
        };
        let rs = run(&reg, &[0, 1], &opts);
        assert_eq!(status(&rs, "gpu0.kfd.c"), Status::Pass);
        let gated = run(&reg, &[0, 1], &ExecOptions::default());
        assert_eq!(status(&gated, "gpu0.kfd.c"), Status::Blocked);
    }

    #[test]
    fn hung_check_times_out_and_others_finish() {
        let reg = vec![
            check("pci::hang", Layer::Pci, ScopeKind::PerGpu, |_, s| {
                if s == Scope::Gpu(0) {
                    thread::sleep(Duration::from_secs(30));
                }
                Ok(Verdict::pass("ok"))
            }),
            check("kfd::after", Layer::Kfd, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let opts = ExecOptions {
            workers: 1,
            ..ExecOptions::default()
        };
        let start = Instant::now();
        let rs = run(&reg, &[0, 1, 2], &opts);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(status(&rs, "gpu0.pci.hang"), Status::Timeout);
        let after = rs.iter().find(|r| r.id == "gpu0.kfd.after").unwrap();
        assert_eq!(after.status, Status::Blocked);
        assert!(
            after
                .message
                .contains("GPU unresponsive after gpu0.pci.hang"),
            "{}",
            after.message
        );
        // The replacement worker ran the other GPUs' checks.
        assert_eq!(status(&rs, "gpu2.kfd.after"), Status::Pass);
    }

    #[test]
    fn panicking_check_is_a_crash() {
        #[allow(clippy::panic)]
        fn boom(_: &(), _: Scope) -> crate::check::Outcome {
            panic!("parser bug")
        }
        let mut boom = check("pci::boom", Layer::Pci, ScopeKind::Node, boom);
        // The panic is the point, not the time: with RUST_BACKTRACE set, the
        // hook symbolises a backtrace first, which on a loaded machine takes
        // longer than the other checks' short timeout.
        boom.timeout = Duration::from_secs(120);
        let rs = run(&[boom], &[], &ExecOptions::default());
        assert_eq!(rs[0].status, Status::Crash);
        assert!(rs[0].message.contains("parser bug"));
    }

    #[test]
    fn interruption_skips_what_did_not_run() {
        let reg = vec![
            check("pci::a", Layer::Pci, ScopeKind::Node, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
            check("kfd::b", Layer::Kfd, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let opts = ExecOptions::default();
        opts.interrupt.store(2, Ordering::SeqCst);
        let rs = run(&reg, &[0], &opts);
        assert!(rs.iter().all(|r| r.status == Status::Skipped));
        assert!(rs[0].message.contains("SIGINT"));
    }

    /// An isolator that records how many scopes start at once, and hangs
    /// one check.
    struct Recorder {
        started: Mutex<std::collections::HashSet<Scope>>,
        starting: AtomicUsize,
        most_starting: AtomicUsize,
        hangs: &'static str,
    }

    impl Isolator for Recorder {
        fn run(&self, check: &'static str, scope: Scope, _timeout: Duration) -> Verdict {
            if check == self.hangs {
                return Verdict::timeout("did not finish (test)");
            }
            let first = self.started.lock().unwrap().insert(scope);
            if first {
                let now = self.starting.fetch_add(1, Ordering::SeqCst) + 1;
                self.most_starting.fetch_max(now, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(40));
                self.starting.fetch_sub(1, Ordering::SeqCst);
            }
            Verdict::pass("ok")
        }

        fn kill_grace(&self) -> Duration {
            Duration::from_millis(10)
        }
    }

    fn recorder(hangs: &'static str) -> Arc<Recorder> {
        Arc::new(Recorder {
            started: Mutex::new(std::collections::HashSet::new()),
            starting: AtomicUsize::new(0),
            most_starting: AtomicUsize::new(0),
            hangs,
        })
    }

    fn isolated(id: &'static str, layer: Layer, scope: ScopeKind) -> Check<()> {
        Check {
            isolated: true,
            ..check(id, layer, scope, |_, _| Ok(Verdict::pass("in process")))
        }
    }

    #[test]
    fn a_bounded_number_of_scopes_start_their_worker_at_once() {
        let reg = vec![
            isolated("hsa::a", Layer::Hsa, ScopeKind::PerGpu),
            isolated("hsa::b", Layer::Hsa, ScopeKind::PerGpu),
        ];
        let rec = recorder("none");
        let opts = ExecOptions {
            workers: 16,
            max_warming: 3,
            isolator: Some(rec.clone()),
            ..ExecOptions::default()
        };
        let rs = run(&reg, &[0, 1, 2, 3, 4, 5, 6, 7], &opts);
        assert!(rs.iter().all(|r| r.status == Status::Pass), "{rs:?}");
        let most = rec.most_starting.load(Ordering::SeqCst);
        assert!((1..=3).contains(&most), "{most} scopes started at once");
    }

    #[test]
    fn a_node_wide_hang_in_a_worker_spares_the_gpus_own_workers() {
        let reg = vec![
            isolated("hsa::init", Layer::Hsa, ScopeKind::Node),
            Check {
                deps: &["hsa::init"],
                ..isolated("hsa::agents", Layer::Hsa, ScopeKind::Node)
            },
            Check {
                deps: &["hsa::init"],
                ..isolated("hsa::agent", Layer::Hsa, ScopeKind::PerGpu)
            },
            isolated("hip::device", Layer::Hip, ScopeKind::PerGpu),
        ];
        let opts = ExecOptions {
            isolator: Some(recorder("hsa::init")),
            ..ExecOptions::default()
        };
        let rs = run(&reg, &[0, 1], &opts);
        assert_eq!(status(&rs, "node.hsa.init"), Status::Timeout);
        // Node checks share the hung worker's scope: blocked.
        assert_eq!(status(&rs, "node.hsa.agents"), Status::Blocked);
        // Each GPU's checks run in their own workers, through the node's hang
        // and through node checks blocked only by it.
        for id in ["gpu0.hsa.agent", "gpu1.hip.device"] {
            assert_eq!(status(&rs, id), Status::Pass, "{id}");
        }
        // Without worker processes a hang is shared: everything above blocks.
        let reg = vec![
            check("hsa::init", Layer::Hsa, ScopeKind::Node, |_, _| {
                thread::sleep(Duration::from_secs(5));
                Ok(Verdict::pass("late"))
            }),
            check("hip::device", Layer::Hip, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let rs = run(&reg, &[0], &ExecOptions::default());
        assert_eq!(status(&rs, "gpu0.hip.device"), Status::Blocked);
    }
}
