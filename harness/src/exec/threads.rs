//! The threads that run checks: a pool fed through a channel, answering on
//! another. A thread stuck in a check (a sysfs read blocked in the kernel) is
//! abandoned and replaced, never joined.

use crate::isolate::Isolator;
use crate::model::Scope;
use crate::verdict::Verdict;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SendError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How a job runs: the check's function here, or through the isolator.
pub(super) enum Runner<C> {
    /// The check's function, under the check's timeout.
    Direct(fn(&C, Scope) -> crate::check::Outcome, Duration),
    /// A request to the scope's worker process.
    Isolated {
        /// Runs the request and enforces the timeout.
        isolator: Arc<dyn Isolator>,
        /// The check's id (`hsa::init`).
        check: &'static str,
        /// Its timeout.
        timeout: Duration,
    },
}

/// One instance of the plan to run.
pub(super) struct Job<C> {
    /// Its index in the plan.
    pub index: usize,
    /// The scope it runs for.
    pub scope: Scope,
    /// How it runs.
    pub runner: Runner<C>,
}

/// A job's end: its index, its verdict or the panic's text, and how long it
/// took.
pub(super) type JobDone = (usize, Result<Verdict, String>, Duration);

/// The check threads and their two channels.
pub(super) struct CheckThreads<C> {
    ctx: Arc<C>,
    jobs_tx: Sender<Job<C>>,
    jobs_rx: Arc<Mutex<Receiver<Job<C>>>>,
    done_tx: Sender<JobDone>,
    done_rx: Receiver<JobDone>,
}

impl<C: Send + Sync + 'static> CheckThreads<C> {
    /// `count` threads running checks against `ctx`.
    pub fn start(ctx: Arc<C>, count: usize) -> Self {
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let threads = CheckThreads {
            ctx,
            jobs_tx,
            jobs_rx: Arc::new(Mutex::new(jobs_rx)),
            done_tx,
            done_rx,
        };
        for _ in 0..count {
            threads.add_thread();
        }
        threads
    }

    /// Hands `job` to the next free thread; an error when none is left.
    pub fn send(&self, job: Job<C>) -> Result<(), SendError<Job<C>>> {
        self.jobs_tx.send(job)
    }

    /// The next finished job, waiting at most `wait`.
    pub fn next_done(&self, wait: Duration) -> Result<JobDone, RecvTimeoutError> {
        self.done_rx.recv_timeout(wait)
    }

    /// Adds a thread: at start, and in place of one abandoned in a check
    /// that overran its timeout.
    pub fn add_thread(&self) {
        let ctx = Arc::clone(&self.ctx);
        let jobs = Arc::clone(&self.jobs_rx);
        let out = self.done_tx.clone();
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
                    let outcome = run_job(&*ctx, &job);
                    if out.send((job.index, outcome, start.elapsed())).is_err() {
                        return;
                    }
                }
            });
        // If the OS refuses a thread the remaining ones carry on; with none
        // left, dispatch reports every check as a crash.
        drop(spawned);
    }
}

/// Runs one job, turning a panic into its text.
fn run_job<C>(ctx: &C, job: &Job<C>) -> Result<Verdict, String> {
    catch_unwind(AssertUnwindSafe(|| match &job.runner {
        Runner::Direct(run, timeout) => {
            // A check that ended early (`Err`) is reported like one that
            // ran to its end.
            crate::deadline::run_check(Some(*timeout), || run(ctx, job.scope).unwrap_or_else(|v| v))
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
    })
}
