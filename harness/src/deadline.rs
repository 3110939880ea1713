//! How long the running check has left. A check that waits on something
//! (an all-reduce, a copy) polls with this, so it can stop waiting, clean up
//! and report what hung before the executor's watchdog ends it without a
//! word. Set per thread by the executor (in-process checks) and by a
//! worker (isolated checks, from the request's timeout).

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Files the running check found not answering.
    static NO_ANSWER: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Records that the running check read a file that did not answer (the
/// node's deadline-bounded file access calls it), so the engine can turn
/// the check's verdict into a timeout.
pub fn note_no_answer(host: &str) {
    NO_ANSWER.with(|n| n.borrow_mut().push(host.to_string()));
}

/// Runs a check with the thread's deadline set to `timeout` from now. A
/// check that ran into a file that did not answer (a wedged device) did not
/// finish what it checks: its verdict becomes a timeout naming the file, so
/// the rest of its GPU is treated as unresponsive, as if the read had hung
/// until the check's own timeout.
pub(crate) fn run_check(
    timeout: Option<Duration>,
    check: impl FnOnce() -> crate::Verdict,
) -> crate::Verdict {
    NO_ANSWER.with(|n| n.borrow_mut().clear());
    let verdict = with_deadline(timeout, check);
    let silent = NO_ANSWER.with(|n| std::mem::take(&mut *n.borrow_mut()));
    if silent.is_empty()
        || matches!(
            verdict.status,
            crate::Status::Timeout | crate::Status::Crash
        )
    {
        return verdict;
    }
    let mut files = silent;
    files.dedup();
    crate::Verdict::timeout(format!(
        "{} did not answer (a wedged device?); the check could not finish",
        files.join(", ")
    ))
    .with_output(verdict.output)
}

/// Set when the run asks its running checks to stop early (it was
/// interrupted): in a worker by SIGINT from its parent, in rocgate's own
/// process by the executor.
static STOP: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

fn stop_flag() -> &'static std::sync::Arc<std::sync::atomic::AtomicBool> {
    STOP.get_or_init(Default::default)
}

/// Whether the run asked the running check to stop early: a check that
/// runs for a chosen time (a burn-in) ends then and reports what it
/// measured so far, instead of being cut off without a word.
pub fn stop_asked() -> bool {
    stop_flag().load(std::sync::atomic::Ordering::SeqCst)
}

/// Asks the running checks to stop early ([`stop_asked`]).
pub(crate) fn ask_stop() {
    stop_flag().store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Makes SIGINT ask this process's checks to stop ([`stop_asked`]) rather
/// than end it: a worker's parent sends it when the run is interrupted.
pub(crate) fn stop_on_sigint() {
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, stop_flag().clone());
}

/// The time the running check has left; `None` outside a check or when it
/// has no limit.
pub fn time_left() -> Option<Duration> {
    DEADLINE
        .with(Cell::get)
        .map(|d| d.saturating_duration_since(Instant::now()))
}

/// How long a check may wait for something that may hang: what it has
/// left less `reserve` (for cleaning up and reporting), or `default` when
/// it runs without a limit.
pub fn wait_budget(reserve: Duration, default: Duration) -> Duration {
    time_left().map_or(default, |left| left.saturating_sub(reserve))
}

/// Runs `f` with the thread's deadline set to `timeout` from now.
pub(crate) fn with_deadline<T>(timeout: Option<Duration>, f: impl FnOnce() -> T) -> T {
    let previous = DEADLINE.with(|d| d.replace(timeout.map(|t| Instant::now() + t)));
    let out = f();
    DEADLINE.with(|d| d.set(previous));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_what_is_left_less_the_reserve() {
        assert_eq!(time_left(), None);
        assert_eq!(
            wait_budget(Duration::from_secs(1), Duration::from_secs(60)),
            Duration::from_secs(60)
        );
        with_deadline(Some(Duration::from_secs(10)), || {
            let b = wait_budget(Duration::from_secs(2), Duration::from_secs(60));
            assert!(
                b <= Duration::from_secs(8) && b > Duration::from_secs(7),
                "{b:?}"
            );
        });
        assert_eq!(time_left(), None, "restored after the check");
    }
}
