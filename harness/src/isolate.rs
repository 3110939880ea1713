//! Isolation: checks that call vendor libraries run in a worker process per
//! scope (the rocgate binary re-executing itself), in its own process group,
//! so a hang becomes `timeout` and a segfault becomes `crash` for that scope
//! while the other GPUs carry on.
//!
//! Protocol: the parent writes one JSON request per line to the worker's
//! stdin (`{"check":"hip::vector_add","scope":"gpu3"}`); the worker answers
//! each with one JSON [`Verdict`] line on its stdout. The worker moves
//! everything else printed to stdout (vendor libraries print) to stderr,
//! which the parent keeps as the worker's log.

use crate::check::Check;
use crate::model::Scope;
use crate::signal::signal_name;
use crate::verdict::Verdict;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Runs an isolated check somewhere safe and reports what happened.
pub trait Isolator: Send + Sync {
    /// Runs check `check` for `scope`, giving up after `timeout`.
    fn run(&self, check: &'static str, scope: Scope, timeout: Duration) -> Verdict;
    /// How long a timed-out worker gets between SIGTERM and SIGKILL.
    fn kill_grace(&self) -> Duration;
}

/// One request to a worker.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The check id.
    pub check: String,
    /// The scope.
    pub scope: Scope,
    /// The check's timeout, so the check can pace itself
    /// ([`crate::deadline`]).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The last bytes a worker printed, and how many it printed in all.
#[derive(Default)]
struct LogTail {
    text: String,
    total: usize,
}

impl LogTail {
    fn push(&mut self, chunk: &str, limit: usize) {
        self.total += chunk.len();
        self.text.push_str(chunk);
        if self.text.len() > limit {
            let mut cut = self.text.len() - limit;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
        }
    }

    /// What was printed after the first `mark` bytes (as much as is kept).
    fn since(&self, mark: usize) -> String {
        let new = self.total.saturating_sub(mark).min(self.text.len());
        let mut start = self.text.len() - new;
        while !self.text.is_char_boundary(start) {
            start += 1;
        }
        self.text[start..].to_string()
    }
}

struct Worker {
    child: Child,
    /// Requests go here; `None` once closed, which ends a healthy worker.
    stdin: Option<ChildStdin>,
    replies: Receiver<String>,
    log: Arc<Mutex<LogTail>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Builds the command that starts the worker for a scope.
pub type WorkerCommand = Box<dyn Fn(Scope) -> Command + Send + Sync>;

/// One worker process per scope, started on first use.
pub struct WorkerPool {
    command: WorkerCommand,
    slots: Mutex<HashMap<Scope, Arc<Mutex<Option<Worker>>>>>,
    grace: Duration,
    interrupt: Arc<AtomicUsize>,
    log_limit: usize,
}

impl WorkerPool {
    /// A pool that starts workers with `command`; `interrupt` is the run's
    /// interrupt flag; `grace` is the time between SIGTERM and SIGKILL.
    pub fn new(command: WorkerCommand, interrupt: Arc<AtomicUsize>, grace: Duration) -> WorkerPool {
        WorkerPool {
            command,
            slots: Mutex::new(HashMap::new()),
            grace,
            interrupt,
            log_limit: 64 * 1024,
        }
    }

    fn slot(&self, scope: Scope) -> Arc<Mutex<Option<Worker>>> {
        Arc::clone(lock(&self.slots).entry(scope).or_default())
    }

    fn start(&self, scope: Scope) -> Result<Worker, String> {
        let mut cmd = (self.command)(scope);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group, so a timeout kills the worker and anything
        // the vendor libraries started.
        cmd.process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("failed to start the worker for {scope}: {e}"))?;
        let stdin = child.stdin.take().ok_or("worker has no stdin")?;
        let stdout = child.stdout.take().ok_or("worker has no stdout")?;
        let stderr = child.stderr.take().ok_or("worker has no stderr")?;
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(LogTail::default()));
        let (sink, limit) = (Arc::clone(&log), self.log_limit);
        std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                lock(&sink).push(&String::from_utf8_lossy(&buf[..n]), limit);
            }
        });
        Ok(Worker {
            child,
            stdin: Some(stdin),
            replies,
            log,
        })
    }

    /// SIGTERM to the worker's group, SIGKILL after the grace period; never
    /// waits longer than that (a process stuck in the kernel is left behind).
    fn kill(&self, worker: &mut Worker) -> Option<ExitStatus> {
        let Ok(pid) = i32::try_from(worker.child.id()) else {
            return None;
        };
        let group = Pid::from_raw(pid);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = worker.child.try_wait() {
                let _ = killpg(group, Signal::SIGKILL);
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = killpg(group, Signal::SIGKILL);
        reap(&mut worker.child, Duration::from_millis(500))
    }
}

/// How long an interrupted worker's check has to answer after it was asked
/// to stop: within the executor's grace for running checks.
const WIND_DOWN: Duration = Duration::from_millis(1500);

/// Asks `worker`'s running check to stop (SIGINT to its process, which
/// [`crate::deadline::stop_asked`] sees) and waits up to [`WIND_DOWN`] for
/// its answer.
fn wind_down(worker: &mut Worker) -> Option<String> {
    let pid = i32::try_from(worker.child.id()).ok()?;
    let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGINT);
    worker.replies.recv_timeout(WIND_DOWN).ok()
}

/// Waits up to `limit` for the child to exit.
fn reap(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How a worker ended, for messages.
fn describe(status: Option<ExitStatus>) -> String {
    match status {
        None => "did not exit".to_string(),
        Some(s) => match (s.signal(), s.code()) {
            (Some(sig), _) => {
                let name = Signal::try_from(sig)
                    .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string());
                format!(
                    "died on {name}{}",
                    if s.core_dumped() {
                        " (core dumped)"
                    } else {
                        ""
                    }
                )
            }
            (None, Some(code)) => format!("exited with status {code}"),
            (None, None) => "ended".to_string(),
        },
    }
}

impl Isolator for WorkerPool {
    fn kill_grace(&self) -> Duration {
        self.grace
    }

    fn run(&self, check: &'static str, scope: Scope, timeout: Duration) -> Verdict {
        let slot = self.slot(scope);
        let mut guard = lock(&slot);
        if guard.is_none() {
            match self.start(scope) {
                Ok(w) => *guard = Some(w),
                Err(e) => return Verdict::crash(e),
            }
        }
        let Some(worker) = guard.as_mut() else {
            return Verdict::crash(format!("no worker for {scope}"));
        };
        let mark = lock(&worker.log).total;
        let request = Request {
            check: check.to_string(),
            scope,
            timeout_ms: u64::try_from(timeout.as_millis()).ok(),
        };
        let line = serde_json::to_string(&request).unwrap_or_default();
        let sent = match worker.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{line}").and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        let start = Instant::now();
        let outcome = if sent.is_err() {
            Err(RecvTimeoutError::Disconnected)
        } else {
            loop {
                let left = timeout.saturating_sub(start.elapsed());
                match worker
                    .replies
                    .recv_timeout(left.min(Duration::from_millis(50)))
                {
                    Ok(reply) => break Ok(reply),
                    Err(RecvTimeoutError::Disconnected) => {
                        break Err(RecvTimeoutError::Disconnected);
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        let signal = self.interrupt.load(Ordering::SeqCst);
                        if signal != 0 {
                            // A check that can stop early (a burn-in) is
                            // asked to and reports what it measured.
                            if let Some(reply) = wind_down(worker) {
                                break Ok(reply);
                            }
                            self.kill(worker);
                            *guard = None;
                            return Verdict::skip(
                                crate::verdict::SkipReason::Interrupted,
                                format!("interrupted by {} while running", signal_name(signal)),
                            );
                        }
                        if start.elapsed() >= timeout {
                            break Err(RecvTimeoutError::Timeout);
                        }
                    }
                }
            }
        };
        let log = |w: &Worker| lock(&w.log).since(mark);
        match outcome {
            Ok(reply) => match serde_json::from_str::<Verdict>(&reply) {
                Ok(mut v) => {
                    let printed = log(worker);
                    if !printed.trim().is_empty() {
                        if !v.output.is_empty() {
                            v.output.push('\n');
                        }
                        v.output.push_str(&printed);
                    }
                    // A check that gave up waiting (a copy that never
                    // ended) left that call running in the worker: the
                    // next check gets a fresh one.
                    if v.status == crate::verdict::Status::Timeout {
                        self.kill(worker);
                        *guard = None;
                    }
                    v
                }
                Err(e) => {
                    let out = log(worker);
                    self.kill(worker);
                    *guard = None;
                    Verdict::crash(format!(
                        "the {scope} worker answered {check} with an unreadable reply ({e})"
                    ))
                    .with_output(out)
                }
            },
            Err(RecvTimeoutError::Timeout) => {
                let status = self.kill(worker);
                let out = log(worker);
                *guard = None;
                let how = match status {
                    Some(_) => format!(
                        "worker killed (SIGTERM, SIGKILL after {:.1} s)",
                        self.grace.as_secs_f64()
                    ),
                    None => {
                        "worker did not die even after SIGKILL (stuck in the kernel?)".to_string()
                    }
                };
                Verdict::timeout(format!(
                    "did not finish within {:.1} s; {how}",
                    timeout.as_secs_f64()
                ))
                .with_output(out)
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = reap(&mut worker.child, Duration::from_secs(2));
                // The log reader may still be draining the last lines.
                std::thread::sleep(Duration::from_millis(20));
                let out = log(worker);
                *guard = None;
                Verdict::crash(format!(
                    "the {scope} worker {} during {check}",
                    describe(status)
                ))
                .with_output(out)
            }
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        let slots: Vec<_> = lock(&self.slots).drain().map(|(_, s)| s).collect();
        for slot in slots {
            if let Some(mut w) = lock(&slot).take() {
                // Closing stdin ends a healthy worker's loop.
                drop(w.stdin.take());
                if reap(&mut w.child, Duration::from_millis(500)).is_none() {
                    self.kill(&mut w);
                }
            }
        }
    }
}

/// The worker's side: answers requests on stdin until it closes. Each
/// request's scope is the parent's; `resolve` turns it into this process's
/// (the GPUs may have been renumbered since the parent looked), or into the
/// verdict to answer instead (the GPU is gone).
pub fn serve<C>(
    registry: &[Check<C>],
    ctx: &C,
    resolve: &dyn Fn(Scope) -> Result<Scope, Verdict>,
) -> std::io::Result<()> {
    // Keep the protocol on a private copy of stdout and send whatever else
    // is printed there (vendor libraries print) to stderr, the log.
    crate::deadline::stop_on_sigint();
    let protocol = nix::unistd::dup(std::io::stdout())?;
    nix::unistd::dup2_stdout(std::io::stderr())?;
    let mut out = std::fs::File::from(protocol);
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let verdict = match serde_json::from_str::<Request>(&line) {
            Err(e) => Verdict::crash(format!("worker received an unreadable request ({e})")),
            Ok(req) => match registry.iter().find(|c| c.id == req.check) {
                None => Verdict::crash(format!("worker knows no check {}", req.check)),
                Some(c) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let timeout = req.timeout_ms.map(std::time::Duration::from_millis);
                    match resolve(req.scope) {
                        Ok(scope) => crate::deadline::run_check(timeout, || {
                            (c.run)(ctx, scope).unwrap_or_else(|v| v)
                        }),
                        Err(v) => v,
                    }
                }))
                .unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    Verdict::crash(format!("check panicked: {msg}"))
                }),
            },
        };
        let json = serde_json::to_string(&verdict).map_err(std::io::Error::other)?;
        writeln!(out, "{json}")?;
        out.flush()?;
    }
    Ok(())
}

/// How often a worker checks that its parent is alive.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Kills this worker's process group when the parent rocgate dies (SIGKILL
/// leaves it no chance to clean up). A hung vendor call holds the thread that
/// reads requests, so stdin's EOF cannot be seen there: a thread of its own
/// watches the parent instead. It kills rather than exits, since exit
/// handlers of a wedged runtime can hang too.
pub fn die_with_parent() {
    let parent = nix::unistd::getppid();
    let orphaned = move || nix::unistd::getppid() != parent;
    let kill_group = || {
        let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), nix::sys::signal::SIGKILL);
        let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::SIGKILL);
    };
    if parent.as_raw() == 1 {
        kill_group();
    }
    let spawned = std::thread::Builder::new()
        .name("parent-watch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(PARENT_POLL);
                if orphaned() {
                    kill_group();
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!(
            "rocgate worker: cannot watch the parent process ({e}); a killed rocgate may leave this worker behind"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_keeps_the_end_and_what_came_since_a_mark() {
        let mut t = LogTail::default();
        t.push("hello ", 8);
        let mark = t.total;
        t.push("world", 8);
        assert_eq!(t.text, "lo world");
        assert_eq!(t.since(mark), "world");
        assert_eq!(t.since(0), "lo world");
    }

    /// A shell script as the worker: answers, hangs, dies, or prints.
    fn pool(script: &'static str) -> WorkerPool {
        WorkerPool::new(
            Box::new(move |_scope| {
                let mut c = Command::new("sh");
                c.args(["-c", script]);
                c
            }),
            Arc::new(AtomicUsize::new(0)),
            Duration::from_millis(300),
        )
    }

    const PASS: &str =
        r#"{"status":"pass","message":"ok","finding":null,"output":"","metrics":[]}"#;

    #[test]
    fn answers_pass_through_with_the_workers_log() {
        let script = Box::leak(
            format!("while read l; do echo 'library says hi' >&2; echo '{PASS}'; done")
                .into_boxed_str(),
        );
        let p = pool(script);
        let v = p.run("hip::x", Scope::Gpu(0), Duration::from_secs(5));
        assert_eq!(v.status, crate::verdict::Status::Pass, "{v:?}");
        // Stderr arrives asynchronously; it is attached when present.
        let v2 = p.run("hip::y", Scope::Gpu(0), Duration::from_secs(5));
        assert_eq!(v2.status, crate::verdict::Status::Pass);
    }

    #[test]
    fn a_hang_is_killed_after_the_timeout_plus_grace() {
        let p = pool("read l; echo stuck >&2; sleep 60");
        let start = Instant::now();
        let v = p.run("hip::hang", Scope::Gpu(1), Duration::from_millis(500));
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(v.status, crate::verdict::Status::Timeout);
        let said = &v.message;
        assert!(said.contains("did not finish within 0.5 s"), "{said}");
    }

    #[test]
    fn a_dying_worker_is_a_crash_naming_the_signal() {
        let p = pool("read l; echo 'about to fault' >&2; kill -SEGV $$");
        let v = p.run("hip::crash", Scope::Gpu(2), Duration::from_secs(60));
        assert_eq!(v.status, crate::verdict::Status::Crash);
        assert!(v.message.contains("SIGSEGV"), "{}", v.message);
        assert!(v.output.contains("about to fault"), "{}", v.output);
        // The next call starts a fresh worker.
        let v = p.run("hip::again", Scope::Gpu(2), Duration::from_secs(60));
        assert_eq!(v.status, crate::verdict::Status::Crash);
    }
}
