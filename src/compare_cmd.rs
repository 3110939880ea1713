//! `rocgate compare BEFORE.json AFTER.json`: the upgrade gate.

use crate::cli::{CompareArgs, CompareFormat};
use crate::error::Result;
use crate::output::Output;
use rocgate::exit::Exit;
use rocgate_harness::compare::{self, Tolerances};
use rocgate_harness::saved_report;
use rocgate_suites::thresholds::Thresholds;

/// One run's report: a regular file of bounded size, of the schema this
/// rocgate reads ([`saved_report`]).
fn load(path: &std::path::Path) -> Result<compare::Report> {
    Ok(saved_report::open(path)?)
}

/// The tolerances to judge throughputs with: `--tolerance` for every
/// family when given, else the thresholds file's `[compare]` table.
fn tolerances(args: &CompareArgs) -> Result<Tolerances> {
    // A file named is read even when --tolerance overrides it, so a wrong
    // path or a broken file is not silently ignored.
    let thresholds = match &args.thresholds {
        Some(path) => Thresholds::load(path)?,
        None => Thresholds::builtin()?,
    };
    match args.tolerance {
        Some(t) if !(0.0..1.0).contains(&t) => {
            Err(format!("--tolerance must be between 0 and 1, not {t}").into())
        }
        Some(t) => Ok(Tolerances::flat(t)),
        None => Ok(of(thresholds)),
    }
}

/// The compare tolerances `thresholds` set.
pub fn of(thresholds: Thresholds) -> Tolerances {
    Tolerances {
        default: thresholds.compare.tolerance,
        families: thresholds.compare.families,
    }
}

/// Prints the comparison; exit 1 when the second run regressed.
pub fn run(args: &CompareArgs) -> Result<Exit> {
    let tolerances = tolerances(args)?;
    let (before, after) = (load(&args.before)?, load(&args.after)?);
    let c = compare::compare(&before, &after, &tolerances, &rocgate_suites::stack::TERMS);
    Output::Stdout.text(&match args.format {
        CompareFormat::Markdown => compare::render_markdown(&c),
        CompareFormat::Text => compare::render_text(&c),
    })?;
    Ok(Exit::pass_if(!c.regressed()))
}
