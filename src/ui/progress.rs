//! The live progress line on stderr (terminals that take cursor control
//! only) and failures as they happen (always, so CI logs show them in order).

use super::style::{Capabilities, Style};
use rocgate_harness::{Event, Status};
use std::io::Write;

/// Tracks and prints progress.
pub struct Progress {
    total: usize,
    done: usize,
    live: bool,
    quiet: bool,
    style: Style,
}

impl Progress {
    /// Progress over `total` check instances.
    pub fn new(total: usize, quiet: bool) -> Self {
        // Decided by stderr, where all of this goes, not by stdout.
        let stderr = Capabilities::stderr();
        Progress {
            total,
            done: 0,
            live: stderr.cursor && !quiet,
            quiet,
            style: Style::from(stderr),
        }
    }

    /// Handles one executor event.
    pub fn on_event(&mut self, event: Event<'_>) {
        let mut err = std::io::stderr().lock();
        match event {
            Event::Started { id } => {
                if self.live {
                    let _ = write!(err, "\r\x1b[K  [{:>4}/{}] {id}", self.done, self.total);
                    let _ = err.flush();
                }
            }
            Event::Finished(r) => {
                self.done += 1;
                if r.status.is_fault() && !self.quiet {
                    if self.live {
                        let _ = write!(err, "\r\x1b[K");
                    }
                    let label = format!("{:<7}", r.status.as_str().to_uppercase());
                    let code = r
                        .finding
                        .as_ref()
                        .map_or_else(String::new, |f| format!("[{}] ", f.code));
                    let _ = writeln!(
                        err,
                        "  {} {} {code}{}",
                        self.style.red(&label),
                        r.test_id,
                        r.message
                    );
                } else if self.live && r.status != Status::Blocked {
                    let _ = write!(
                        err,
                        "\r\x1b[K  [{:>4}/{}] {}",
                        self.done, self.total, r.test_id
                    );
                    let _ = err.flush();
                }
            }
        }
    }

    /// Clears the live line.
    pub fn finish(&self) {
        if self.live {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
