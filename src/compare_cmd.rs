//! `rocgate compare BEFORE.json AFTER.json`: the upgrade gate.

use crate::cli::CompareArgs;
use rocgate_harness::compare::{self, Tolerances};
use rocgate_harness::saved_report;
use rocgate_suites::thresholds::Thresholds;
use std::process::ExitCode;

/// One run's report: a regular file of bounded size, of the schema this
/// rocgate reads ([`saved_report`]).
fn load(path: &std::path::Path) -> Result<serde_json::Value, String> {
    let doc = saved_report::read(path)?;
    compare::validate(&doc, &path.display().to_string())?;
    Ok(doc)
}

/// The tolerances to judge throughputs with: `--tolerance` for every
/// family when given, else the thresholds file's `[compare]` table.
fn tolerances(args: &CompareArgs) -> Result<Tolerances, String> {
    // A file named is read even when --tolerance overrides it, so a wrong
    // path or a broken file is not silently ignored.
    let thresholds = match &args.thresholds {
        Some(path) => Thresholds::load(path)?,
        None => Thresholds::builtin()?,
    };
    match args.tolerance {
        Some(t) if !(0.0..1.0).contains(&t) => {
            Err(format!("--tolerance must be between 0 and 1, not {t}"))
        }
        Some(t) => Ok(Tolerances::flat(t)),
        None => Ok(Tolerances {
            default: thresholds.compare.tolerance,
            families: thresholds.compare.families,
        }),
    }
}

/// Prints the comparison; exit 1 when the second run regressed.
pub fn run(args: &CompareArgs) -> Result<ExitCode, String> {
    let tolerances = tolerances(args)?;
    let (before, after) = (load(&args.before)?, load(&args.after)?);
    let c = compare::compare(
        &before,
        &after,
        &tolerances,
        &rocgate_suites::stack::IDENTITY,
    );
    if args.format == "markdown" {
        crate::ui::document::text(&compare::render_markdown(&c))?;
    } else {
        crate::ui::document::text(&compare::render_text(&c))?;
    }
    Ok(if c.regressed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
