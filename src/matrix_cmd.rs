//! `rocgate matrix check`: the node's combination against the matrix;
//! `rocgate matrix show` and `rocgate thresholds show`: the built-in files,
//! for an installed binary to hand a site the file it edits.

use crate::cli::{MatrixAction, MatrixArgs, ThresholdsAction, ThresholdsArgs};
use crate::error::{Error, Result};
use crate::output::Output;
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_suites::compat_matrix::{Evaluation, Fit, evaluate};
use serde::Serialize;

/// `matrix check --json`: one of three shapes, told apart by their keys.
/// Fields are in name order, as the document has always listed them.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum MatrixReport<'a> {
    /// The node has no ROCm release to look up.
    NoRocm {
        /// Why nothing was checked.
        reason: &'a str,
        /// Always null: nothing was checked.
        supported: Option<bool>,
    },
    /// The release is not in the matrix.
    UnknownRelease {
        /// `compat-unknown-release`.
        code: &'a str,
        /// The releases the matrix covers.
        covers: &'a str,
        /// The matrix file.
        matrix: &'a str,
        /// The node's release.
        rocm: &'a str,
        /// Always false.
        supported: bool,
    },
    /// The release's row, component by component.
    Checked {
        /// Each component against the row.
        components: Vec<ComponentRow<'a>>,
        /// The components that could not be read.
        not_checked: Vec<&'a str>,
        /// The node's release.
        rocm: &'a str,
        /// Where the row came from.
        source: &'a str,
        /// True when every component fits, false when one does not, null
        /// when none is out of range but some could not be checked.
        supported: Option<bool>,
    },
}

/// One component of a checked row.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ComponentRow<'a> {
    /// The finding code when it is out of range.
    code: Option<&'a str>,
    /// `amdgpu`, `os`, `kernel`, `gpu gfx942`, `firmware`.
    component: &'a str,
    /// What the node has.
    have: &'a str,
    /// What the row allows.
    matrix: &'a str,
    /// Whether the row allows it.
    ok: bool,
    /// Why it could not be checked.
    unknown: Option<&'a str>,
}

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
            MatrixReport::NoRocm {
                reason: "no ROCm release found (/opt/rocm/.info/version; an install elsewhere is read from --rocm-path or ROCM_PATH)",
                supported: None,
            },
            "no ROCm release found on the node (/opt/rocm/.info/version; an install elsewhere is read from --rocm-path or ROCM_PATH)\n".to_string(),
        ),
        Evaluation::UnknownRelease { rocm, span } => (
            false,
            MatrixReport::UnknownRelease {
                code: "compat-unknown-release",
                covers: span,
                matrix: &matrix.origin,
                rocm,
                supported: false,
            },
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
            let rows: Vec<ComponentRow<'_>> = components
                .iter()
                .map(|c| {
                    let (code, unknown) = match &c.verdict {
                        Fit::Unsupported(code) => (Some(code.code), None),
                        Fit::Unknown(why) => (None, Some(why.as_str())),
                        Fit::Supported => (None, None),
                    };
                    ComponentRow {
                        code,
                        component: &c.name,
                        have: &c.have,
                        matrix: &c.want,
                        ok: c.verdict.is_supported(),
                        unknown,
                    }
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
                (false, _) => Some(false),
                (true, true) => Some(true),
                (true, false) => None,
            };
            (
                ok,
                MatrixReport::Checked {
                    components: rows,
                    not_checked,
                    rocm,
                    source,
                    supported,
                },
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
