//! Terminal output: styles, the live progress line, the end-of-run ladder
//! and the documents commands print.

pub mod document;
pub mod ladder;
pub mod progress;
pub mod style;
