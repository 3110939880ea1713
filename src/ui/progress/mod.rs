//! Progress while a run goes, on stderr: what is running where, for how
//! long against its timeout, and what finished.
//!
//! Two renderings of one [`Tracker`]: on a terminal that takes cursor
//! control, live lines redrawn in place ([`live`]); anywhere else (a CI
//! log, a file, `--progress lines`), one line per finished check and per
//! phase, and a heartbeat naming the running checks when nothing was
//! printed for a while ([`lines`]), so no-output timeouts of Jenkins or
//! GitLab do not kill a run that is alive.

mod glance;
mod lines;
mod live;

pub use glance::Glance;

use super::style::{Capabilities, Style};
use rocgate_harness::{CheckResult, Event, Scope, Status};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// How progress is shown (`--progress`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Live lines on a terminal, plain lines anywhere else.
    #[default]
    Auto,
    /// Live lines redrawn in place (needs a terminal).
    Live,
    /// One line per finished check and per phase, and a heartbeat.
    Lines,
    /// Nothing while the run goes.
    None,
}

/// The share of its timeout past which a running check is marked slow.
const SLOW_SHARE: f64 = 0.5;

/// One check that is running.
#[derive(Clone, Debug)]
pub struct Running {
    /// Its test id (`gpu3.hip.memtest`).
    pub id: String,
    /// Where it runs.
    pub scope: Scope,
    /// When it started.
    pub started: Instant,
    /// How long it may take.
    pub timeout: Duration,
    /// Whether it is sustained: loaded for the burn-in's duration.
    pub sustained: bool,
    /// Past this it is marked slow: [`SLOW_SHARE`] of its timeout, or for
    /// a sustained check, half of what its timeout allows beyond its
    /// typical time (its duration is not slowness).
    pub slow_after: Duration,
}

impl Running {
    /// How long it has run.
    pub fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// Whether it has run past [`SLOW_SHARE`] of its timeout.
    pub fn slow(&self, now: Instant) -> bool {
        self.elapsed(now) > self.slow_after
    }
}

/// Done and planned checks of one scope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Finished (with any status).
    pub done: usize,
    /// Planned.
    pub total: usize,
}

/// One planned check instance as progress sees it: its test id, where it
/// runs, how long it usually takes ([`rocgate_harness::Check::typical`])
/// and whether it is sustained (runs beside the other scopes' sustained
/// checks for the burn-in's duration).
pub type Planned = (String, Scope, Duration, bool);

/// Where the run is, as the executor's events tell it.
#[derive(Debug)]
pub struct Tracker {
    /// Every scope's count, and the run's as the sum.
    pub scopes: BTreeMap<Scope, Count>,
    /// Running checks, oldest first.
    pub running: Vec<Running>,
    /// When the run started.
    pub started: Instant,
    /// The typical time of every instance not yet finished.
    pending: HashMap<String, (Scope, Duration, bool)>,
    /// The latest telemetry of GPUs under sustained load, when the run
    /// can read it.
    glance: Option<Glance>,
}

impl Tracker {
    /// A run of the planned instances.
    pub fn new(planned: impl IntoIterator<Item = Planned>) -> Self {
        let mut scopes: BTreeMap<Scope, Count> = BTreeMap::new();
        let mut pending = HashMap::new();
        for (id, scope, typical, sustained) in planned {
            scopes.entry(scope).or_default().total += 1;
            pending.insert(id, (scope, typical, sustained));
        }
        Tracker {
            scopes,
            running: Vec::new(),
            started: Instant::now(),
            pending,
            glance: None,
        }
    }

    /// About how long the run has left, from the typical times of what has
    /// not finished (the GPUs' side by side, the node's after each other),
    /// less what the running checks have already spent of theirs. An
    /// estimate: a check past its typical time counts as about to end.
    pub fn left(&self, now: Instant) -> Duration {
        let spent: HashMap<&str, Duration> = self
            .running
            .iter()
            .map(|r| (r.id.as_str(), r.elapsed(now)))
            .collect();
        rocgate_harness::plan::typical_wall_time(self.pending.iter().map(
            |(id, (scope, typical, sustained))| {
                let spent = spent.get(id.as_str()).copied().unwrap_or_default();
                (*scope, typical.saturating_sub(spent), *sustained)
            },
        ))
    }

    /// The run's count.
    pub fn overall(&self) -> Count {
        self.scopes.values().fold(Count::default(), |a, c| Count {
            done: a.done + c.done,
            total: a.total + c.total,
        })
    }

    /// A check started.
    fn start(&mut self, id: &str, scope: Scope, timeout: Duration) {
        let (typical, sustained) = self
            .pending
            .get(id)
            .map_or((Duration::ZERO, false), |&(_, t, s)| (t, s));
        let slow_after = if sustained {
            typical + timeout.saturating_sub(typical) / 2
        } else {
            timeout.mul_f64(SLOW_SHARE)
        };
        self.running.push(Running {
            id: id.to_string(),
            scope,
            started: Instant::now(),
            timeout,
            sustained,
            slow_after,
        });
    }

    /// A running check as [`running_line`] says it, with its GPU's latest
    /// telemetry beside a sustained one.
    fn running_text(&self, r: &Running, now: Instant) -> String {
        let line = running_line(r, now);
        match self
            .glance
            .as_ref()
            .filter(|_| r.sustained)
            .and_then(|g| g.at(r.scope, now))
        {
            Some(seen) => format!("{line} [{seen}]"),
            None => line,
        }
    }

    /// A check finished: it leaves the running ones and counts as done.
    fn finish(&mut self, r: &CheckResult) {
        self.running.retain(|x| x.id != r.test_id);
        self.pending.remove(&r.test_id);
        self.scopes.entry(r.scope).or_default().done += 1;
    }
}

/// The renderer chosen for this run.
enum Renderer {
    Live(live::Live),
    Lines(lines::Lines),
    Off,
}

/// Tracks and prints progress.
pub struct Progress {
    tracker: Tracker,
    renderer: Renderer,
}

impl Progress {
    /// Progress over a plan's `planned` instances, shown as `mode` says;
    /// `heartbeat` is how long the plain lines may stay silent while checks
    /// run.
    pub fn new(
        planned: impl IntoIterator<Item = Planned>,
        mode: ProgressMode,
        heartbeat: Duration,
    ) -> Self {
        // Decided by stderr, where all of this goes, not by stdout.
        let stderr = Capabilities::stderr();
        let style = Style::from(stderr);
        let tracker = Tracker::new(planned);
        let renderer = match mode {
            ProgressMode::None => Renderer::Off,
            ProgressMode::Live => Renderer::Live(live::Live::new(&tracker, style)),
            ProgressMode::Auto if stderr.cursor => Renderer::Live(live::Live::new(&tracker, style)),
            ProgressMode::Auto | ProgressMode::Lines => {
                Renderer::Lines(lines::Lines::new(style, heartbeat))
            }
        };
        Progress { tracker, renderer }
    }

    /// Shows each GPU's latest telemetry (`glance`) beside its sustained
    /// checks.
    pub fn with_glance(mut self, glance: Glance) -> Self {
        self.tracker.glance = Some(glance);
        self
    }

    /// Handles one executor event.
    pub fn on_event(&mut self, event: Event<'_>) {
        match event {
            Event::Started { id, scope, timeout } => self.tracker.start(id, scope, timeout),
            Event::Finished(r) => self.tracker.finish(r),
            Event::Waiting => {}
        }
        match &mut self.renderer {
            Renderer::Live(l) => l.on_event(&self.tracker, &event),
            Renderer::Lines(l) => l.on_event(&self.tracker, &event),
            Renderer::Off => {}
        }
    }

    /// Announces a phase of the run that is not a check of the plan (the
    /// all-reduce's narrowing, one line a try).
    pub fn phase(&mut self, what: &str) {
        match &mut self.renderer {
            Renderer::Live(l) => l.phase(what),
            Renderer::Lines(l) => l.phase(what),
            Renderer::Off => {}
        }
    }

    /// Ends the display: live lines are cleared, plain lines say how long
    /// the run took.
    pub fn finish(&mut self) {
        match &mut self.renderer {
            Renderer::Live(l) => l.finish(),
            Renderer::Lines(l) => l.finish(&self.tracker),
            Renderer::Off => {}
        }
    }
}

/// A status as the progress lines and the live view label it.
fn label(status: Status) -> &'static str {
    match status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Warn => "WARN",
        Status::Blocked => "BLOCKED",
        Status::Skipped => "SKIP",
        Status::Timeout => "TIMEOUT",
        Status::Crash => "CRASH",
    }
}

/// `label` painted for its status.
fn painted(style: Style, status: Status) -> String {
    style.status(status, &format!("{:>7}", label(status)))
}

/// A finished check's line: status, duration, count and id, and for a
/// check that found something or did not run, its code and message.
fn finished_line(style: Style, r: &CheckResult, overall: Count) -> String {
    let width = overall.total.to_string().len();
    let took = if matches!(r.status, Status::Blocked | Status::Skipped) && r.duration.is_zero() {
        " ".repeat(11)
    } else {
        format!("[{:>8.3}s]", r.duration.as_secs_f64())
    };
    let mut line = format!(
        "{} {took} ({:>width$}/{}) {}",
        painted(style, r.status),
        overall.done,
        overall.total,
        r.test_id
    );
    if let (Status::Blocked, Some(by)) = (r.status, &r.blocked_by) {
        // The blocker's own line said why; one line a cause.
        line.push_str(&format!(": blocked by {by}"));
    } else if r.status != Status::Pass {
        if let Some(f) = &r.finding {
            line.push_str(&format!(" [{}]", f.code));
        }
        let message = r.message.lines().next().unwrap_or_default();
        if !message.is_empty() {
            line.push_str(&format!(": {message}"));
        }
    }
    line
}

/// `secs` the way the progress lines show a running time (`4.2s`, `75s`).
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.1}s")
    } else {
        format!("{s:.0}s")
    }
}

/// The time left as the progress shows it: `about 40s left (typical
/// times)`, or nothing once the typical times are spent.
fn left_words(tracker: &Tracker, now: Instant) -> String {
    let left = tracker.left(now);
    if left < Duration::from_secs(1) {
        String::new()
    } else {
        format!("about {} left (typical times)", seconds(left))
    }
}

/// A running check as `id (12s of 60s timeout)`, with `SLOW` past half.
fn running_line(r: &Running, now: Instant) -> String {
    let slow = if r.slow(now) { ", SLOW" } else { "" };
    format!(
        "{} ({} of {} timeout{slow})",
        r.id,
        seconds(r.elapsed(now)),
        seconds(r.timeout)
    )
}

#[cfg(test)]
mod tests;
