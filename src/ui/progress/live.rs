//! Live progress on a terminal: a line for the run (done/total, elapsed)
//! and one per scope that is busy, with the
//! check it runs and how long it has run against its timeout, redrawn in
//! place by `indicatif`. Failures and phases print above the lines as
//! they happen, so the scrollback keeps them.

use super::{Count, Style, Tracker, finished_line, left_words};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rocgate_harness::{Event, Scope, Status};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Lines the live view keeps for itself when it sizes to the terminal.
const RESERVED_ROWS: usize = 3;

/// The live renderer.
pub struct Live {
    bars: MultiProgress,
    overall: ProgressBar,
    /// A line per busy scope, while the terminal has rows for them.
    scopes: BTreeMap<Scope, ProgressBar>,
    style: Style,
    /// How many scope lines fit.
    rows: usize,
    /// How wide a line may be.
    columns: usize,
    /// The phase the run is in, kept on the run's line while it lasts.
    phase: Option<String>,
}

impl Live {
    /// A live view of `tracker`'s run.
    pub fn new(tracker: &Tracker, style: Style) -> Self {
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = bars.add(ProgressBar::new(tracker.overall().total as u64));
        // A literal template: it cannot fail to parse; the default is kept
        // if it ever did.
        if let Ok(s) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:24} {pos}/{len} checks  {wide_msg}",
        ) {
            overall.set_style(s);
        }
        overall.enable_steady_tick(Duration::from_millis(200));
        let (rows, columns) = console::Term::stderr().size();
        Live {
            bars,
            overall,
            scopes: BTreeMap::new(),
            style,
            rows: usize::from(rows).saturating_sub(RESERVED_ROWS).max(1),
            columns: usize::from(columns).max(20),
            phase: None,
        }
    }

    /// Handles one executor event, the tracker already updated by it.
    pub fn on_event(&mut self, tracker: &Tracker, event: &Event<'_>) {
        match event {
            Event::Started { scope, .. } => {
                if !self.scopes.contains_key(scope) && self.scopes.len() < self.rows {
                    let bar = self.bars.add(ProgressBar::no_length());
                    if let Ok(s) = ProgressStyle::with_template("  {prefix:>6} {wide_msg}") {
                        bar.set_style(s);
                    }
                    bar.set_prefix(scope.label());
                    self.scopes.insert(*scope, bar);
                }
            }
            Event::Finished(r) => {
                self.overall.set_position(tracker.overall().done as u64);
                if r.status.is_fault() || r.status == Status::Warn {
                    // One row each: the full message is in the failures
                    // printed at the end.
                    let line = finished_line(self.style, r, tracker.overall());
                    let _ = self.bars.println(console::truncate_str(
                        &line,
                        self.columns.saturating_sub(1),
                        "…",
                    ));
                }
                let count = tracker.scopes.get(&r.scope).copied().unwrap_or_default();
                if count.done >= count.total {
                    if let Some(bar) = self.scopes.remove(&r.scope) {
                        bar.finish_and_clear();
                        self.bars.remove(&bar);
                    }
                }
            }
            Event::Waiting => {}
        }
        self.refresh(tracker);
    }

    /// Sets every scope line from the tracker: its running checks with
    /// their time against their timeout, and the scope's done/total.
    fn refresh(&self, tracker: &Tracker) {
        let now = Instant::now();
        for (scope, bar) in &self.scopes {
            let count: Count = tracker.scopes.get(scope).copied().unwrap_or_default();
            let running: Vec<String> = tracker
                .running
                .iter()
                .filter(|r| r.scope == *scope)
                .map(|r| {
                    let line = tracker.running_text(r, now);
                    let line = line
                        .strip_prefix(&format!("{}.", scope.label()))
                        .unwrap_or(&line)
                        .to_string();
                    if r.slow(now) {
                        self.style.yellow(&line)
                    } else {
                        line
                    }
                })
                .collect();
            let doing = if running.is_empty() {
                self.style.dim("waiting")
            } else {
                running.join(", ")
            };
            let text = format!("{:>4}/{:<4} {doing}", count.done, count.total);
            bar.set_message(
                console::truncate_str(&text, self.columns.saturating_sub(10), "…").into_owned(),
            );
        }
        let elsewhere = tracker
            .running
            .iter()
            .filter(|r| !self.scopes.contains_key(&r.scope))
            .count();
        let mut message = left_words(tracker, now);
        if elsewhere > 0 {
            if !message.is_empty() {
                message.push_str("; ");
            }
            message.push_str(&format!("{elsewhere} more running"));
        }
        if self.phase.is_none() {
            self.overall.set_message(message);
        }
    }

    /// A phase of the run outside the plan: printed above, and kept on the
    /// run's line while it lasts.
    pub fn phase(&mut self, what: &str) {
        let line = format!("{} {what}", self.style.bold(&format!("{:>7}", "PHASE")));
        // Wrapped, not cut: the GPUs a try covers and its bound are what
        // the line is for.
        let _ = self
            .bars
            .println(crate::ui::width::wrap(&line, self.columns.saturating_sub(1)).trim_end());
        let shown = console::truncate_str(what, self.columns.saturating_sub(60), "…").into_owned();
        self.overall.set_message(shown.clone());
        self.phase = Some(shown);
    }

    /// Clears the live lines.
    pub fn finish(&mut self) {
        for bar in self.scopes.values() {
            bar.finish_and_clear();
        }
        self.overall.finish_and_clear();
        let _ = self.bars.clear();
    }
}
