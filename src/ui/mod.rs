//! Terminal output: styles, the live progress line and the end-of-run ladder.

pub mod ladder;
pub mod progress;
pub mod style;
