//! `rocgate fleet report`: many nodes' run reports as one view.

use crate::cli::{FleetAction, FleetArgs};
use rocgate_harness::fleet::Fleet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Runs a fleet action.
pub fn run(args: &FleetArgs) -> Result<ExitCode, String> {
    match &args.action {
        FleetAction::Report(report) => {
            let files = reports_in(&report.inputs)?;
            let texts = files
                .iter()
                .map(|f| {
                    std::fs::read_to_string(f)
                        .map(|t| (f.display().to_string(), t))
                        .map_err(|e| format!("failed to read {}: {e}", f.display()))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let layers: Vec<&str> = rocgate_suites::stack::LAYERS
                .iter()
                .map(|l| l.as_str())
                .collect();
            let fleet = Fleet::read(&texts, &layers)?;
            match report.format.as_str() {
                "json" => crate::ui::document::json(&fleet.json()?)?,
                "html" => crate::ui::document::html(&crate::html::fleet_page(&fleet))?,
                _ => crate::ui::document::text(&fleet.markdown())?,
            }
            Ok(if fleet.all_passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

/// The report files named by `inputs`: files as given, directories' `*.json`
/// in name order. A fleet with no report is an error, not a green fleet.
fn reports_in(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(input)
                .map_err(|e| format!("failed to list {}: {e}", input.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    if files.is_empty() {
        return Err(format!(
            "no run report in {}: give `rocgate run --json` files or directories of them",
            inputs
                .iter()
                .map(|p| Path::new(p).display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(files)
}
