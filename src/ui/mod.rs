//! Terminal output: styles, the live progress line, the end-of-run ladder
//! and the documents commands print.

pub mod document;
pub mod fold;
pub mod ladder;
pub mod progress;
pub mod style;
pub mod width;

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a report claimed stdout (`run --json -`).
static HUMAN_ON_STDERR: AtomicBool = AtomicBool::new(false);

/// Sends what rocgate prints for people (the header, the ladder, the
/// summary, annotations) to stderr from now on: stdout carries a report,
/// which a pipe reads as the document alone.
pub fn print_human_on_stderr() {
    HUMAN_ON_STDERR.store(true, Ordering::SeqCst);
}

/// Whether what is printed for people goes to stderr
/// ([`print_human_on_stderr`]).
pub fn human_on_stderr() -> bool {
    HUMAN_ON_STDERR.load(Ordering::SeqCst)
}

/// The style of what is printed for people, decided by the stream it goes
/// to.
pub fn human_style() -> style::Style {
    if human_on_stderr() {
        style::Style::from(style::Capabilities::stderr())
    } else {
        style::Style::for_stdout()
    }
}

/// A span of `secs` seconds as a person reads a long run's length: `45 s`,
/// `30 min`, `24.0 h` (a burn-in's duration, a plot's time axis).
pub fn span_text(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}
