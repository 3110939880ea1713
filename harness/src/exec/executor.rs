//! The executor's state as a run goes: what is ready, running, done and
//! blocked, and the four things that change it — dispatch, completion,
//! timeout and blocking — each a method.

use super::results::{base_result, blocked_result, completed_result, engine_result};
use super::threads::{CheckThreads, Job, JobDone, Runner};
use super::{Event, ExecOptions};
use crate::model::Scope;
use crate::plan::Plan;
use crate::result::CheckResult;
use crate::signal::signal_name;
use crate::verdict::{SkipReason, Status};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// The longest the main thread sleeps between looks at the interrupt flag.
const POLL: Duration = Duration::from_millis(100);

/// Where the run is; one per [`super::execute`] call.
pub(super) struct Executor<'p, 'r, C> {
    plan: &'p Plan<'r, C>,
    opts: &'p ExecOptions,
    threads: CheckThreads<C>,
    /// Thread count: at most this many checks run at once.
    width: usize,
    results: Vec<Option<CheckResult>>,
    /// Per instance, how many of its dependencies have no result yet.
    waiting_on: Vec<usize>,
    /// Per instance, the instances that depend on it.
    dependents: Vec<Vec<usize>>,
    ready: BTreeSet<usize>,
    /// Running instances: when they started and their backstop deadline.
    running: HashMap<usize, (Instant, Instant)>,
    done: usize,
    /// Scopes whose worker is busy: one isolated check per scope at a time.
    busy: HashMap<Scope, usize>,
    /// GPUs whose check timed out, and that check: nothing more is sent
    /// to them.
    unresponsive: HashMap<Scope, String>,
    /// Scopes whose worker has answered once.
    warm: HashSet<Scope>,
    /// How many scopes are starting their worker now.
    warming: usize,
}

impl<'p, 'r, C: Send + Sync + 'static> Executor<'p, 'r, C> {
    /// An executor for `plan` with its check threads started.
    pub fn new(plan: &'p Plan<'r, C>, ctx: Arc<C>, opts: &'p ExecOptions) -> Self {
        let n = plan.instances.len();
        let width = opts.workers.max(1);
        let mut dependents = vec![Vec::new(); n];
        for (i, inst) in plan.instances.iter().enumerate() {
            for &d in &inst.deps {
                dependents[d].push(i);
            }
        }
        let waiting_on: Vec<usize> = plan.instances.iter().map(|i| i.deps.len()).collect();
        Executor {
            plan,
            opts,
            threads: CheckThreads::start(ctx, width.min(n.max(1))),
            width,
            results: vec![None; n],
            ready: (0..n).filter(|&i| waiting_on[i] == 0).collect(),
            waiting_on,
            dependents,
            running: HashMap::new(),
            done: 0,
            busy: HashMap::new(),
            unresponsive: HashMap::new(),
            warm: HashSet::new(),
            warming: 0,
        }
    }

    /// Runs the plan to its end or to an interruption; one result per
    /// instance, in plan order.
    pub fn run(mut self, on_event: &mut dyn FnMut(Event<'_>)) -> Vec<CheckResult> {
        let n = self.plan.instances.len();
        while self.done < n && self.stop().is_none() {
            self.dispatch(on_event);
            if self.done >= n {
                break;
            }
            match self.threads.next_done(self.wait()) {
                Ok(done) => self.complete(done, on_event),
                Err(RecvTimeoutError::Timeout) => {
                    self.time_out_expired(on_event);
                    on_event(Event::Waiting);
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if let Some(why) = self.stop() {
            self.close_interrupted(&why, on_event);
        }
        self.into_results()
    }

    /// Why the run must stop now, if it must: a signal, or its deadline.
    fn stop(&self) -> Option<String> {
        let signal = self.opts.interrupt.load(Ordering::SeqCst);
        if signal != 0 {
            return Some(format!("interrupted by {}", signal_name(signal)));
        }
        self.opts
            .deadline
            .filter(|&d| Instant::now() >= d)
            .map(|_| "cut short: the run's time budget was spent".to_string())
    }

    fn isolated(&self, i: usize) -> bool {
        self.opts.isolator.is_some() && self.plan.check(&self.plan.instances[i]).isolated
    }

    /// Whether ready instance `i` must wait: its scope's worker is busy,
    /// or it would start a worker while `max_warming` are starting.
    fn must_wait(&self, i: usize) -> bool {
        if !self.isolated(i) {
            return false;
        }
        let scope = self.plan.instances[i].scope;
        let cold = !self.warm.contains(&scope);
        self.busy.contains_key(&scope) || (cold && self.warming >= self.opts.max_warming.max(1))
    }

    /// How long to wait for a result: until the next deadline, at most
    /// [`POLL`].
    fn wait(&self) -> Duration {
        self.running
            .values()
            .map(|&(_, d)| d)
            .chain(self.opts.deadline)
            .min()
            .map_or(POLL, |d| d.saturating_duration_since(Instant::now()))
            .min(POLL)
    }

    /// Starts ready instances while threads are free, blocking those whose
    /// dependencies did not let them run.
    fn dispatch(&mut self, on_event: &mut dyn FnMut(Event<'_>)) {
        while self.running.len() < self.width {
            let Some(i) = self.ready.iter().copied().find(|&i| !self.must_wait(i)) else {
                break;
            };
            self.ready.remove(&i);
            if let Some(why) = &self.plan.instances[i].excluded {
                let r = CheckResult {
                    skip_reason: Some(SkipReason::NotConfigured),
                    message: why.clone(),
                    ..base_result(self.plan, i)
                };
                self.finish(i, r, on_event);
                continue;
            }
            if self.opts.gate {
                if let Some(blocked) = self.block(i) {
                    self.finish(i, blocked, on_event);
                    continue;
                }
            }
            self.start(i, on_event);
        }
    }

    /// Instance `i`'s blocked result, when gating stops it: its GPU hung
    /// before, or a dependency did not let dependents run (a node-wide hang
    /// in a worker spares the GPUs; see [`Executor::hang_spares`]).
    fn block(&self, i: usize) -> Option<CheckResult> {
        let inst = &self.plan.instances[i];
        if let Some(hung) = self.unresponsive.get(&inst.scope) {
            return Some(CheckResult {
                status: Status::Blocked,
                message: format!("blocked: GPU unresponsive after {hung} (timed out)"),
                blocked_by: Some(hung.clone()),
                ..base_result(self.plan, i)
            });
        }
        inst.deps
            .iter()
            .filter(|&&d| !self.hang_spares(d, inst.scope))
            .filter_map(|&d| self.results[d].as_ref())
            .find(|r| !r.lets_dependents_run())
            .map(|blocker| blocked_result(self.plan, i, blocker, &self.results))
    }

    /// Hands instance `i` to a check thread.
    fn start(&mut self, i: usize, on_event: &mut dyn FnMut(Event<'_>)) {
        let inst = &self.plan.instances[i];
        let check = self.plan.check(inst);
        let timeout = self.opts.timeout_of(check);
        let (runner, deadline) = match (&self.opts.isolator, check.isolated) {
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
        let scope = inst.scope;
        on_event(Event::Started {
            id: &inst.test_id,
            scope,
            timeout,
        });
        let job = Job {
            index: i,
            scope,
            runner,
        };
        if self.threads.send(job).is_err() {
            // Every thread is gone; nothing can run any more.
            let r = engine_result(
                self.plan,
                i,
                Status::Crash,
                "rocgate's worker pool stopped".into(),
                Duration::ZERO,
            );
            self.finish(i, r, on_event);
            return;
        }
        self.running.insert(i, (now, now + deadline));
        if self.isolated(i) {
            self.busy.insert(scope, i);
            if !self.warm.contains(&scope) {
                self.warming += 1;
            }
        }
    }

    /// Instance `i` left its thread (finished or abandoned): its scope's
    /// worker is free, and warm once it answered.
    fn release(&mut self, i: usize) -> Option<Instant> {
        let (started, _) = self.running.remove(&i)?;
        self.busy.retain(|_, &mut b| b != i);
        if self.isolated(i) && self.warm.insert(self.plan.instances[i].scope) {
            self.warming -= 1;
        }
        Some(started)
    }

    /// A check thread brought back a verdict. One that comes after its
    /// instance timed out is dropped.
    fn complete(&mut self, (i, outcome, elapsed): JobDone, on_event: &mut dyn FnMut(Event<'_>)) {
        if self.release(i).is_none() {
            return;
        }
        let r = completed_result(self.plan, i, outcome, elapsed, self.opts.output_limit);
        if r.status == Status::Timeout && r.scope != Scope::Node {
            self.unresponsive.insert(r.scope, r.test_id.clone());
        }
        self.finish(i, r, on_event);
    }

    /// Reports every running instance past its deadline as timed out, marks
    /// its GPU unresponsive, and replaces the thread it holds.
    fn time_out_expired(&mut self, on_event: &mut dyn FnMut(Event<'_>)) {
        let now = Instant::now();
        let expired: Vec<usize> = self
            .running
            .iter()
            .filter(|(_, (_, d))| *d <= now)
            .map(|(&i, _)| i)
            .collect();
        for i in expired {
            let started = self.release(i).unwrap_or(now);
            let limit = self
                .opts
                .timeout_of(self.plan.check(&self.plan.instances[i]));
            let msg = format!(
                "did not finish within {:.1} s; abandoned",
                limit.as_secs_f64()
            );
            let r = engine_result(self.plan, i, Status::Timeout, msg, now - started);
            if r.scope != Scope::Node {
                self.unresponsive.insert(r.scope, r.test_id.clone());
            }
            self.finish(i, r, on_event);
            // The stuck thread stays in its check; the pool gets a new one.
            self.threads.add_thread();
        }
    }

    /// Records a final result and releases the instances that waited on it.
    fn finish(&mut self, i: usize, mut result: CheckResult, on_event: &mut dyn FnMut(Event<'_>)) {
        self.opts.waivers.apply(&mut result);
        on_event(Event::Finished(&result));
        self.results[i] = Some(result);
        self.done += 1;
        for &d in &self.dependents[i] {
            self.waiting_on[d] -= 1;
            if self.waiting_on[d] == 0 {
                self.ready.insert(d);
            }
        }
    }

    /// After an interruption (`why`: a signal, or the deadline): lets
    /// running checks finish within the grace, then skips everything
    /// without a result as interrupted.
    fn close_interrupted(&mut self, why: &str, on_event: &mut dyn FnMut(Event<'_>)) {
        crate::deadline::ask_stop();
        let grace_end = Instant::now() + self.opts.interrupt_grace;
        while !self.running.is_empty() {
            let wait = grace_end.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                break;
            }
            if let Ok((i, outcome, elapsed)) = self.threads.next_done(wait) {
                if self.running.remove(&i).is_some() {
                    let r =
                        completed_result(self.plan, i, outcome, elapsed, self.opts.output_limit);
                    self.finish(i, r, on_event);
                }
            }
        }
        for i in 0..self.results.len() {
            if self.results[i].is_some() {
                continue;
            }
            let why = if self.running.contains_key(&i) {
                format!("{why} while running")
            } else {
                format!("not run: {why}")
            };
            let r = CheckResult {
                skip_reason: Some(SkipReason::Interrupted),
                ..engine_result(self.plan, i, Status::Skipped, why, Duration::ZERO)
            };
            on_event(Event::Finished(&r));
            self.results[i] = Some(r);
        }
    }

    /// Whether dependency `d` of an instance in `scope` is spared from
    /// gating because it hung: a node-wide isolated check that times out
    /// may hang on one GPU it sees (a vendor runtime opens every visible GPU
    /// when it starts), while each GPU's checks run in a worker of their
    /// own. So they still run and show which GPU hangs, instead of all being
    /// blocked; the same holds for node-wide checks blocked only by such a
    /// hang.
    fn hang_spares(&self, d: usize, scope: Scope) -> bool {
        let node_hang = |r: &CheckResult| {
            r.scope == Scope::Node
                && r.status == Status::Timeout
                && self
                    .plan
                    .instances
                    .iter()
                    .find(|i| i.test_id == r.test_id)
                    .is_some_and(|i| self.plan.check(i).isolated)
        };
        let Some(dep) = self.results[d].as_ref() else {
            return false;
        };
        if self.opts.isolator.is_none() || scope == Scope::Node || dep.scope != Scope::Node {
            return false;
        }
        match dep.status {
            Status::Timeout => node_hang(dep),
            Status::Blocked => dep.blocked_by.as_ref().is_some_and(|root| {
                self.results
                    .iter()
                    .flatten()
                    .find(|r| &r.test_id == root)
                    .is_some_and(node_hang)
            }),
            _ => false,
        }
    }

    /// The results in plan order; an instance without one (which the loop
    /// above cannot leave) is a crash, never a silent gap.
    fn into_results(self) -> Vec<CheckResult> {
        let plan = self.plan;
        self.results
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
}
