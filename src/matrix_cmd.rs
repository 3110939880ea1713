//! `rocgate matrix check`: the node's combination against the matrix;
//! `rocgate matrix show` and `rocgate thresholds show`: the built-in files,
//! for an installed binary to hand a site the file it edits.

use crate::cli::{MatrixAction, MatrixArgs, ThresholdsAction, ThresholdsArgs};
use crate::error::{Error, Result};
use crate::output::Output;
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_suites::compat_matrix::{Evaluation, Fit, evaluate};
use serde_json::json;

/// Evaluates and prints; exit 0 when nothing is out of range (components
/// that could not be checked are named, and make JSON `supported` null), 1
/// on a mismatch or when the release cannot be evaluated, 2 usage.
pub fn run(args: &MatrixArgs) -> Result<Exit> {
    let args = match &args.action {
        MatrixAction::Check(args) => args,
        MatrixAction::Show => {
            Output::Stdout.text(rocgate_suites::compat_matrix::BUILTIN)?;
            return Ok(Exit::Pass);
        }
    };
    // Owns an archive's unpacked directory: dropped (and removed) when this
    // command returns, after everything that reads the node.
    let node = args.node.open()?;
    let session = Session::open(
        node.sysroot(),
        args.node.options(&args.node.config()?, None, None),
    )?;
    let matrix = &session.ctx.matrix;
    let eval = evaluate(session.facts(), matrix);
    let (supported, doc, text) = match &eval {
        Evaluation::NoRocm => (
            false,
            json!({"supported": null, "reason": "no ROCm release found (/opt/rocm/.info/version; an install elsewhere is read from --rocm-path or ROCM_PATH)"}),
            "no ROCm release found on the node (/opt/rocm/.info/version; an install elsewhere is read from --rocm-path or ROCM_PATH)\n".to_string(),
        ),
        Evaluation::UnknownRelease { rocm, span } => (
            false,
            json!({"supported": false, "rocm": rocm, "code": "compat-unknown-release", "matrix": matrix.origin, "covers": span}),
            format!(
                "ROCm {rocm} is not in {} (it covers {span})\n",
                matrix.origin
            ),
        ),
        Evaluation::Checked {
            rocm,
            source,
            components,
        } => {
            // Unknown is not a mismatch: never red because a version could
            // not be read.
            let ok = !components
                .iter()
                .any(|c| matches!(c.verdict, Fit::Unsupported(_)));
            let rows: Vec<serde_json::Value> = components
                .iter()
                .map(|c| {
                    let (code, unknown) = match &c.verdict {
                        Fit::Unsupported(code) => (Some(code.code), None),
                        Fit::Unknown(why) => (None, Some(why.as_str())),
                        Fit::Supported => (None, None),
                    };
                    json!({"component": c.name, "have": c.have, "matrix": c.want, "ok": c.verdict.is_supported(), "code": code, "unknown": unknown})
                })
                .collect();
            let mut text = format!(
                "ROCm {rocm} against {} (row source: {source})\n",
                matrix.origin
            );
            for c in components {
                text.push_str(&format!(
                    "  {:<10} {:<9} {}\n             matrix: {}\n",
                    c.name,
                    c.verdict.label(),
                    c.have,
                    c.want
                ));
            }
            let unknown: Vec<String> = components
                .iter()
                .filter_map(|c| match &c.verdict {
                    Fit::Unknown(why) => Some(format!("{}: {why}", c.name)),
                    _ => None,
                })
                .collect();
            let not_checked: Vec<&str> = components
                .iter()
                .filter(|c| matches!(c.verdict, Fit::Unknown(_)))
                .map(|c| c.name.as_str())
                .collect();
            text.push_str(&match (ok, unknown.is_empty()) {
                (false, _) => "NOT SUPPORTED\n".to_string(),
                (true, true) => "supported\n".to_string(),
                (true, false) => format!(
                    "no mismatch, but not everything could be checked ({})\n",
                    unknown.join("; ")
                ),
            });
            // `supported` is true only when every component was checked.
            let supported = match (ok, not_checked.is_empty()) {
                (false, _) => json!(false),
                (true, true) => json!(true),
                (true, false) => serde_json::Value::Null,
            };
            (
                ok,
                json!({"supported": supported, "rocm": rocm, "source": source, "components": rows, "not_checked": not_checked}),
                text,
            )
        }
    };
    if let Some(out) = &args.json {
        let doc = serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::internal(format!("failed to serialise the matrix check: {e}")))?;
        out.json(&doc)?;
    } else {
        Output::Stdout.text(&text)?;
    }
    Ok(Exit::pass_if(supported))
}

/// Prints the built-in thresholds.
pub fn show_thresholds(args: &ThresholdsArgs) -> Result<Exit> {
    let ThresholdsAction::Show = args.action;
    Output::Stdout.text(rocgate_suites::thresholds::BUILTIN)?;
    Ok(Exit::Pass)
}
