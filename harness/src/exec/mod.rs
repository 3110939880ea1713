//! The executor: runs a plan's instances on a pool of check threads, in
//! dependency order, with gating, per-check timeouts and interruption.
//!
//! `executor.rs` holds the run's state and its transitions (dispatch,
//! complete, time out, block), `threads.rs` the check threads, `results.rs`
//! the results the executor writes itself.

mod executor;
mod results;
mod threads;

use crate::isolate::Isolator;
use crate::model::Scope;
use crate::output;
use crate::plan::Plan;
use crate::result::CheckResult;
use executor::Executor;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::thread;
use std::time::Duration;

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
    /// When the run must end (a health check's budget under a scheduler
    /// that kills it): nothing starts after it, running checks get the
    /// interrupt grace, and what has no result then is skipped as cut
    /// short, as after a signal.
    pub deadline: Option<std::time::Instant>,
    /// Bound for each result's captured output, in bytes.
    pub output_limit: usize,
    /// Runs isolated checks in worker processes; without one they run in
    /// this process like the others.
    pub isolator: Option<Arc<dyn Isolator>>,
    /// The site's waivers, applied to each result as it is recorded, so a
    /// waived fault blocks nothing above it.
    pub waivers: Arc<crate::policy::Waivers>,
    /// At most this many scopes bring up their worker at once (a scope's
    /// first isolated check, which starts the worker and initialises the
    /// vendor runtime), so a node of 64 GPU partitions does not start 64
    /// runtimes together. The wait does not count against any timeout.
    pub max_warming: usize,
    /// How long sustained checks ([`crate::Check::sustained`]) run beyond
    /// their own timeout and typical time: the burn-in's duration.
    pub sustain: Duration,
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
            deadline: None,
            output_limit: output::DEFAULT_LIMIT,
            isolator: None,
            waivers: Arc::default(),
            max_warming: 8,
            sustain: Duration::ZERO,
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
    /// The time `check` may take: its override, else its own timeout scaled
    /// (plus [`ExecOptions::sustain`] for a sustained check, unscaled: the
    /// run asked for that long); never more than [`MAX_CHECK_TIMEOUT`].
    pub fn timeout_of<C>(&self, check: &crate::check::Check<C>) -> Duration {
        let t = self.timeouts.get(check.id).copied().unwrap_or_else(|| {
            let scale = if self.timeout_scale.is_finite() {
                self.timeout_scale.max(0.01)
            } else {
                1.0
            };
            Duration::try_from_secs_f64(check.timeout.as_secs_f64() * scale)
                .unwrap_or(MAX_CHECK_TIMEOUT)
                .saturating_add(self.sustained_for(check))
        });
        t.min(MAX_CHECK_TIMEOUT)
    }

    /// How long `check` usually takes in this run: its typical time, plus
    /// the sustained time for a sustained check.
    pub fn typical_of<C>(&self, check: &crate::check::Check<C>) -> Duration {
        check.typical.saturating_add(self.sustained_for(check))
    }

    fn sustained_for<C>(&self, check: &crate::check::Check<C>) -> Duration {
        if check.sustained {
            self.sustain
        } else {
            Duration::ZERO
        }
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
        use crate::model::Scope;
        let node: Duration = plan
            .selected()
            .filter(|i| i.scope == Scope::Node)
            .map(|i| self.worst_case_of(plan.check(i)))
            .sum();
        let Some(&first) = plan.gpus.first() else {
            return node;
        };
        // Every GPU runs the same checks; the first one's chain stands for all.
        let per_gpu: Vec<&crate::check::Check<C>> = plan
            .selected()
            .filter(|i| i.scope == Scope::Gpu(first))
            .map(|i| plan.check(i))
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
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A check started on a worker.
    Started {
        /// Its test id.
        id: &'a str,
        /// The node or the GPU it runs on.
        scope: Scope,
        /// How long it may take before it is reported `timeout`.
        timeout: Duration,
    },
    /// A check has its final result (including blocked and skipped ones).
    Finished(&'a CheckResult),
    /// Checks are running and none finished for a while (at most a tenth
    /// of a second): a reporter can show elapsed times and that the run
    /// is alive.
    Waiting,
}

/// Runs `plan` against `ctx` and returns one result per instance, in plan order.
pub fn execute<C: Send + Sync + 'static>(
    plan: &Plan<'_, C>,
    ctx: Arc<C>,
    opts: &ExecOptions,
    mut on_event: impl FnMut(Event<'_>),
) -> Vec<CheckResult> {
    Executor::new(plan, ctx, opts).run(&mut on_event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Check;
    use crate::model::test_stack::{A, B, C, D, E, timed as check};
    use crate::model::{Layer, Scope, ScopeKind, Tier};
    use crate::plan::plan;
    use crate::verdict::{Finding, Severity, SkipReason, Status, Verdict};
    use std::sync::Mutex;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    /// A verdict with a finding of `code`, as serious as `severity`.
    fn found(code: &str, severity: Severity, message: &str, next: &str) -> Verdict {
        Verdict::found(Finding::new(code, severity, message, next))
    }

    fn fail_on_gpu1(_: &(), s: Scope) -> crate::check::Outcome {
        if s == Scope::Gpu(1) {
            return Err(found(
                "x-broken",
                Severity::Fail,
                "gpu1 is broken",
                "fix it",
            ));
        }
        Ok(Verdict::pass("ok"))
    }

    fn run(reg: &[Check<()>], gpus: &[u32], opts: &ExecOptions) -> Vec<CheckResult> {
        let p = plan(reg, gpus, Tier::Quick).unwrap();
        execute(&p, Arc::new(()), opts, |_| {})
    }

    fn status(rs: &[CheckResult], id: &str) -> Status {
        rs.iter().find(|r| r.test_id == id).unwrap().status
    }

    #[test]
    fn a_failure_blocks_the_same_gpu_above_and_not_the_others() {
        let reg = vec![
            check("a::a", A, ScopeKind::PerGpu, fail_on_gpu1),
            check("b::b", B, ScopeKind::PerGpu, |_, _| Ok(Verdict::pass("ok"))),
            check("c::c", C, ScopeKind::PerGpu, |_, _| Ok(Verdict::pass("ok"))),
        ];
        let rs = run(&reg, &[0, 1, 2], &ExecOptions::default());
        assert_eq!(status(&rs, "gpu1.a.a"), Status::Fail);
        assert_eq!(status(&rs, "gpu1.b.b"), Status::Blocked);
        let c = rs.iter().find(|r| r.test_id == "gpu1.c.c").unwrap();
        assert_eq!(c.status, Status::Blocked);
        assert_eq!(c.blocked_by.as_deref(), Some("gpu1.a.a"));
        assert_eq!(c.message, "blocked by gpu1.a.a: gpu1 is broken");
        assert_eq!(status(&rs, "gpu0.c.c"), Status::Pass);
        assert_eq!(status(&rs, "gpu2.c.c"), Status::Pass);
    }

    #[test]
    fn warnings_and_waived_failures_block_nothing_and_left_out_checks_say_so() {
        use crate::policy::{CheckPattern, Selection, Waiver, WaiverNote, Waivers};
        let reg = vec![
            check("a::warns", A, ScopeKind::PerGpu, |_, _| {
                Ok(found("w", Severity::Warn, "odd", "tune"))
            }),
            check("b::fails", B, ScopeKind::PerGpu, fail_on_gpu1),
            check("c::c", C, ScopeKind::PerGpu, |_, _| Ok(Verdict::pass("ok"))),
            check("d::d", D, ScopeKind::PerGpu, |_, _| Ok(Verdict::pass("ok"))),
        ];
        let waivers = Waivers(vec![Waiver {
            code: Some("x-broken".into()),
            checks: None,
            scopes: Some(vec![Scope::Gpu(1)]),
            note: WaiverNote {
                reason: "gpu1 is being replaced".into(),
                expires: None,
                expired: false,
                source: "site.toml:4".into(),
            },
        }]);
        let opts = ExecOptions {
            waivers: Arc::new(waivers),
            ..ExecOptions::default()
        };
        let mut p = plan(&reg, &[0, 1], Tier::Quick).unwrap();
        p.select(&Selection {
            skip: vec![CheckPattern::parse("d::*", &reg).unwrap()],
            origin: "--skip".into(),
            ..Selection::default()
        });
        let rs = execute(&p, Arc::new(()), &opts, |_| {});
        assert_eq!(status(&rs, "gpu0.a.warns"), Status::Warn);
        let waived = rs.iter().find(|r| r.test_id == "gpu1.b.fails").unwrap();
        assert_eq!(waived.status, Status::Fail);
        assert!(waived.waived());
        // Neither the warning nor the waived failure blocks gpu1's c.
        assert_eq!(status(&rs, "gpu1.c.c"), Status::Pass);
        let left_out = rs.iter().find(|r| r.test_id == "gpu0.d.d").unwrap();
        assert_eq!(left_out.status, Status::Skipped);
        assert_eq!(left_out.skip_reason, Some(SkipReason::NotConfigured));
        assert_eq!(left_out.message, "not selected: skipped by 'd::*' (--skip)");
    }

    #[test]
    fn no_gate_runs_everything() {
        let reg = vec![
            check("a::a", A, ScopeKind::Node, |_, _| {
                Ok(found("x", Severity::Fail, "broken", "fix"))
            }),
            check("c::c", C, ScopeKind::PerGpu, |_, _| Ok(Verdict::pass("ok"))),
        ];
        let opts = ExecOptions {
            gate: false,
            ..ExecOptions::default()
        };
        let rs = run(&reg, &[0, 1], &opts);
        assert_eq!(status(&rs, "gpu0.c.c"), Status::Pass);
        let gated = run(&reg, &[0, 1], &ExecOptions::default());
        assert_eq!(status(&gated, "gpu0.c.c"), Status::Blocked);
    }

    #[test]
    fn hung_check_times_out_and_others_finish() {
        let reg = vec![
            check("a::hang", A, ScopeKind::PerGpu, |_, s| {
                if s == Scope::Gpu(0) {
                    thread::sleep(Duration::from_secs(30));
                }
                Ok(Verdict::pass("ok"))
            }),
            check("c::after", C, ScopeKind::PerGpu, |_, _| {
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
        assert_eq!(status(&rs, "gpu0.a.hang"), Status::Timeout);
        let after = rs.iter().find(|r| r.test_id == "gpu0.c.after").unwrap();
        assert_eq!(after.status, Status::Blocked);
        assert!(
            after.message.contains("GPU unresponsive after gpu0.a.hang"),
            "{}",
            after.message
        );
        // The replacement worker ran the other GPUs' checks.
        assert_eq!(status(&rs, "gpu2.c.after"), Status::Pass);
    }

    #[test]
    fn panicking_check_is_a_crash() {
        #[allow(clippy::panic)]
        fn boom(_: &(), _: Scope) -> crate::check::Outcome {
            panic!("parser bug")
        }
        let mut boom = check("a::boom", A, ScopeKind::Node, boom);
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
            check("a::a", A, ScopeKind::Node, |_, _| Ok(Verdict::pass("ok"))),
            check("c::b", C, ScopeKind::PerGpu, |_, _| Ok(Verdict::pass("ok"))),
        ];
        let opts = ExecOptions::default();
        opts.interrupt.store(2, Ordering::SeqCst);
        let rs = run(&reg, &[0], &opts);
        assert!(rs.iter().all(|r| r.status == Status::Skipped));
        assert!(rs[0].message.contains("SIGINT"));
    }

    #[test]
    fn the_deadline_ends_the_run_and_skips_what_it_cut_short() {
        let reg = vec![
            check("a::a", A, ScopeKind::Node, |_, _| Ok(Verdict::pass("ok"))),
            Check {
                timeout: Duration::from_secs(60),
                ..check("b::slow", B, ScopeKind::Node, |_, _| {
                    thread::sleep(Duration::from_secs(30));
                    Ok(Verdict::pass("late"))
                })
            },
            check("c::c", C, ScopeKind::Node, |_, _| Ok(Verdict::pass("ok"))),
        ];
        let opts = ExecOptions {
            deadline: Some(Instant::now() + Duration::from_millis(300)),
            interrupt_grace: Duration::from_millis(100),
            ..ExecOptions::default()
        };
        let start = Instant::now();
        let rs = run(&reg, &[], &opts);
        // Far sooner than the slow check's 30 s, with slack for a busy machine.
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(rs[0].status, Status::Pass);
        for (r, how) in [(&rs[1], "while running"), (&rs[2], "not run: ")] {
            assert_eq!(r.status, Status::Skipped, "{}", r.test_id);
            assert_eq!(r.skip_reason, Some(SkipReason::Interrupted));
            assert!(r.message.contains("time budget was spent"), "{}", r.message);
            assert!(r.message.contains(how), "{}", r.message);
        }
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
            isolated("d::a", D, ScopeKind::PerGpu),
            isolated("d::b", D, ScopeKind::PerGpu),
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
            isolated("d::init", D, ScopeKind::Node),
            Check {
                deps: &["d::init"],
                ..isolated("d::agents", D, ScopeKind::Node)
            },
            Check {
                deps: &["d::init"],
                ..isolated("d::agent", D, ScopeKind::PerGpu)
            },
            isolated("e::device", E, ScopeKind::PerGpu),
        ];
        let opts = ExecOptions {
            isolator: Some(recorder("d::init")),
            ..ExecOptions::default()
        };
        let rs = run(&reg, &[0, 1], &opts);
        assert_eq!(status(&rs, "node.d.init"), Status::Timeout);
        // Node checks share the hung worker's scope: blocked.
        assert_eq!(status(&rs, "node.d.agents"), Status::Blocked);
        // Each GPU's checks run in their own workers, through the node's hang
        // and through node checks blocked only by it.
        for id in ["gpu0.d.agent", "gpu1.e.device"] {
            assert_eq!(status(&rs, id), Status::Pass, "{id}");
        }
        // Without worker processes a hang is shared: everything above blocks.
        let reg = vec![
            check("d::init", D, ScopeKind::Node, |_, _| {
                thread::sleep(Duration::from_secs(5));
                Ok(Verdict::pass("late"))
            }),
            check("e::device", E, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let rs = run(&reg, &[0], &ExecOptions::default());
        assert_eq!(status(&rs, "gpu0.e.device"), Status::Blocked);
    }

    /// Seconds of the budget of `reg` over `gpus` under `opts`.
    fn budget(reg: &[Check<()>], gpus: &[u32], opts: &ExecOptions) -> f64 {
        let p = plan(reg, gpus, Tier::Quick).unwrap();
        opts.time_budget(&p).as_secs_f64()
    }

    #[test]
    fn the_budget_counts_each_isolated_checks_kill_grace_and_reap() {
        // Each check times out after 0.3 s; the recorder's grace is 10 ms.
        let reg = vec![
            check("a::node", A, ScopeKind::Node, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
            isolated("d::gpu", D, ScopeKind::PerGpu),
            check("e::gpu", E, ScopeKind::PerGpu, |_, _| {
                Ok(Verdict::pass("ok"))
            }),
        ];
        let in_process = ExecOptions::default();
        // No isolator: timeouts only; GPUs side by side count once.
        assert!((budget(&reg, &[0, 1], &in_process) - 0.9).abs() < 1e-9);
        let isolating = ExecOptions {
            isolator: Some(recorder("none")),
            ..ExecOptions::default()
        };
        let expected = 0.9 + 0.010 + REAP_ALLOWANCE.as_secs_f64();
        assert!((budget(&reg, &[0, 1], &isolating) - expected).abs() < 1e-9);
    }

    #[test]
    fn the_budget_counts_the_waves_of_worker_start_up() {
        let reg = vec![isolated("d::gpu", D, ScopeKind::PerGpu)];
        let one_check = 0.3 + 0.010 + REAP_ALLOWANCE.as_secs_f64();
        let opts = |max_warming| ExecOptions {
            isolator: Some(recorder("none")),
            max_warming,
            ..ExecOptions::default()
        };
        let gpus = [0, 1, 2, 3, 4];
        // All five start together: one check's worth.
        assert!((budget(&reg, &gpus, &opts(8)) - one_check).abs() < 1e-9);
        // Two at a time: three waves, the last GPU waits for two others'
        // first isolated check.
        assert!((budget(&reg, &gpus, &opts(2)) - 3.0 * one_check).abs() < 1e-9);
    }

    #[test]
    fn scaled_timeouts_saturate_instead_of_overflowing() {
        let c = check("a::x", A, ScopeKind::Node, |_, _| Ok(Verdict::pass("ok")));
        for scale in [1e17, 1e308, f64::INFINITY, f64::NAN] {
            let opts = ExecOptions {
                timeout_scale: scale,
                ..ExecOptions::default()
            };
            assert!(opts.timeout_of(&c) <= MAX_CHECK_TIMEOUT, "{scale}");
        }
        let reg = [c];
        let p = plan(&reg, &[], Tier::Quick).unwrap();
        let opts = ExecOptions {
            timeout_scale: 1e308,
            ..ExecOptions::default()
        };
        assert_eq!(opts.time_budget(&p), MAX_CHECK_TIMEOUT);
    }
}
