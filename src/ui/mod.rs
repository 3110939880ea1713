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
