//! Where a command's document goes, one convention for every output flag:
//! a file argument writes the file (through the one writer the reports use:
//! a regular file replaced atomically, a FIFO or device written through, a
//! symlink followed by its rules), and `-` or no argument prints it on
//! stdout. The file gets exactly the bytes stdout would have, so
//! `doctor --json out.json` and `doctor --json > out.json` agree.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The destination an output flag names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// rocgate's stdout (`-`, or the flag without a value).
    Stdout,
    /// A file, FIFO or device.
    File(PathBuf),
}

/// The value an output flag takes when given without one: stdout.
pub const STDOUT: &str = "-";

impl Output {
    /// Parses an output flag's value: `-` is stdout, anything else a path.
    pub fn parse(value: &str) -> std::result::Result<Output, String> {
        match value {
            STDOUT => Ok(Output::Stdout),
            "" => Err("an empty path: give a file, or `-` for stdout".to_string()),
            path => Ok(Output::File(PathBuf::from(path))),
        }
    }

    /// Writes the JSON document `json`, a line feed after it.
    pub fn json(&self, json: &str) -> Result<()> {
        match self {
            Output::Stdout => crate::ui::document::json(json).map_err(Error::node_io),
            Output::File(path) => {
                let mut doc = rocgate_harness::output::json_without_workflow_commands(json);
                doc.push('\n');
                put(path, &doc)
            }
        }
    }

    /// Writes the text `text`.
    pub fn text(&self, text: &str) -> Result<()> {
        match self {
            Output::Stdout => crate::ui::document::text(text).map_err(Error::node_io),
            Output::File(path) => put(path, &rocgate_harness::output::no_workflow_commands(text)),
        }
    }

    /// Writes the HTML page `page` unchanged.
    pub fn html(&self, page: &str) -> Result<()> {
        match self {
            Output::Stdout => crate::ui::document::html(page).map_err(Error::node_io),
            Output::File(path) => put(path, page),
        }
    }
}

/// Writes `doc` to `path`; the error names the path and what the writer
/// said.
fn put(path: &Path, doc: &str) -> Result<()> {
    rocgate_harness::atomic::write(path, doc.as_bytes()).map_err(|e| {
        Error::node_io(format!(
            "the output was not written to {}: {e}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dash_is_stdout_and_anything_else_a_file() {
        assert_eq!(Output::parse("-"), Ok(Output::Stdout));
        assert_eq!(
            Output::parse("out.json"),
            Ok(Output::File(PathBuf::from("out.json")))
        );
        assert_eq!(Output::parse("./-"), Ok(Output::File(PathBuf::from("./-"))));
        assert!(Output::parse("").is_err());
    }

    #[test]
    fn a_file_gets_what_stdout_would() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        let out = Output::File(path.clone());
        assert_eq!(out.json("{\"a\": 1}"), Ok(()));
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("{\"a\": 1}\n")
        );
        assert_eq!(out.text("x\n"), Ok(()));
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("x\n"));
        let missing = Output::File(dir.path().join("no/such/dir/out.json"));
        let e = missing.json("{}").unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::NodeIo);
        assert!(e.to_string().contains("no/such/dir/out.json"), "{e}");
    }
}
