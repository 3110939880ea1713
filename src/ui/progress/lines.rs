//! Progress as plain lines, for CI logs and files: one line per finished
//! check (as nextest prints `PASS [0.012s] test`), a `SLOW` line once a
//! check runs past half its timeout, one line per phase, and a
//! `RUNNING` heartbeat naming the running checks whenever nothing was
//! printed for the heartbeat interval.

use super::{Style, Tracker, finished_line, left_words, seconds};
use rocgate_harness::Event;
use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};

/// The plain-lines renderer.
pub struct Lines {
    style: Style,
    heartbeat: Duration,
    last_printed: Instant,
    /// Test ids already marked slow: each is marked once.
    slow_said: HashSet<String>,
}

impl Lines {
    /// Lines in `style`, with a heartbeat after `heartbeat` of silence.
    pub fn new(style: Style, heartbeat: Duration) -> Self {
        Lines {
            style,
            heartbeat,
            last_printed: Instant::now(),
            slow_said: HashSet::new(),
        }
    }

    fn print(&mut self, line: &str) {
        // A closed stderr (a CI runner gone) must not stop the run.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        self.last_printed = Instant::now();
    }

    /// Handles one executor event, the tracker already updated by it.
    pub fn on_event(&mut self, tracker: &Tracker, event: &Event<'_>) {
        let now = Instant::now();
        match event {
            Event::Started { .. } => {}
            Event::Finished(r) => {
                self.slow_said.remove(&r.test_id);
                let line = finished_line(self.style, r, tracker.overall());
                self.print(&line);
            }
            Event::Waiting => {
                let mut newly_slow = Vec::new();
                for r in tracker.running.iter().filter(|r| r.slow(now)) {
                    if self.slow_said.insert(r.id.clone()) {
                        newly_slow.push(format!(
                            "{} [>{:>7}] {} (timeout {})",
                            self.style.yellow(&format!("{:>7}", "SLOW")),
                            seconds(r.elapsed(now)),
                            r.id,
                            seconds(r.timeout)
                        ));
                    }
                }
                for line in newly_slow {
                    self.print(&line);
                }
                if !tracker.running.is_empty()
                    && now.duration_since(self.last_printed) >= self.heartbeat
                {
                    let line = self.heartbeat_line(tracker, now);
                    self.print(&line);
                }
            }
        }
    }

    /// `RUNNING [ 95s] (12/317) about 40s left (typical times); 2 running:
    /// node.rccl.allreduce (62s of 120s timeout, SLOW), gpu3.hip.memtest
    /// (4.1s of 300s timeout)`.
    fn heartbeat_line(&self, tracker: &Tracker, now: Instant) -> String {
        let overall = tracker.overall();
        let names: Vec<String> = tracker
            .running
            .iter()
            .map(|r| tracker.running_text(r, now))
            .collect();
        let left = left_words(tracker, now);
        format!(
            "{} [{:>8}] ({}/{}) {left}{}{} running: {}",
            self.style.dim(&format!("{:>7}", "RUNNING")),
            seconds(now.duration_since(tracker.started)),
            overall.done,
            overall.total,
            if left.is_empty() { "" } else { "; " },
            names.len(),
            names.join(", ")
        )
    }

    /// A phase of the run outside the plan.
    pub fn phase(&mut self, what: &str) {
        let line = format!("{} {what}", self.style.bold(&format!("{:>7}", "PHASE")));
        self.print(&line);
    }

    /// The run's end: how many checks finished, in how long.
    pub fn finish(&mut self, tracker: &Tracker) {
        let overall = tracker.overall();
        let line = format!(
            "{} [{:>8}] {} of {} checks finished",
            self.style.bold(&format!("{:>7}", "DONE")),
            seconds(tracker.started.elapsed()),
            overall.done,
            overall.total
        );
        self.print(&line);
    }
}
