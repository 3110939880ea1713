//! `rocgate compare BEFORE.json AFTER.json`: the upgrade gate.

use crate::cli::CompareArgs;
use rocgate_harness::compare;
use std::process::ExitCode;

fn load(path: &std::path::Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("failed to parse {}: {e}", path.display()))?;
    compare::validate(&doc, &path.display().to_string())?;
    Ok(doc)
}

/// Prints the comparison; exit 1 when the second run regressed.
pub fn run(args: &CompareArgs) -> Result<ExitCode, String> {
    if !(0.0..1.0).contains(&args.tolerance) {
        return Err(format!(
            "--tolerance must be between 0 and 1, not {}",
            args.tolerance
        ));
    }
    let (before, after) = (load(&args.before)?, load(&args.after)?);
    let c = compare::compare(&before, &after, args.tolerance);
    if args.format == "markdown" {
        out!("{}", compare::render_markdown(&c));
    } else {
        out!("{}", compare::render_text(&c));
    }
    Ok(if c.regressed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
