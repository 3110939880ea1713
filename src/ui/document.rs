//! What a command prints on stdout as its result (an inventory, a report, a
//! catalogue), written whole, flushed and checked: a command whose output
//! was lost (a full disk) says so and exits 2 rather than passing for one
//! that printed it. Nothing in it is taken for a GitHub
//! Actions workflow command ([`rocgate_harness::output::no_workflow_commands`]).

use std::io::Write as _;

/// Prints `text`, lines that would be workflow commands broken.
pub fn text(text: &str) -> Result<(), String> {
    put(&rocgate_harness::output::no_workflow_commands(text))
}

/// Prints the JSON document `json` and a line feed; its strings say the
/// same, none taken for a workflow command.
pub fn json(json: &str) -> Result<(), String> {
    let mut doc = rocgate_harness::output::json_without_workflow_commands(json);
    doc.push('\n');
    put(&doc)
}

/// Prints the HTML page `page` unchanged: a file format, redirected to a
/// file rather than read in a log, whose own escaping keeps node text text
/// (a `::` in CSS must not be altered here).
pub fn html(page: &str) -> Result<(), String> {
    put(page)
}

/// Writes `doc` to stdout and flushes it; the error names stdout and what
/// the OS said. A reader that went away (`| head -1`: EPIPE) chose to stop
/// reading, so the output ends there and the command's verdict stands; a
/// full disk or an I/O error lost output nobody chose to drop.
fn put(doc: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(doc.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!(
            "failed to write the output to stdout: {e}; make sure stdout can take it (free space where it is redirected)"
        )),
        _ => Ok(()),
    }
}
