//! `rocgate fleet report`: many nodes' run reports as one view.
//!
//! Exit codes: 0 every report read and every node passed; 1 a node failed
//! (whatever else could not be read: a fault found is found); 2 no node
//! failed but a report could not be read (not every node was judged), or
//! there was no report at all.

use crate::cli::{FleetAction, FleetArgs, FleetFormat};
use crate::error::{Result, ResultExt};
use crate::output::Output;
use rocgate::exit::Exit;
use rocgate_harness::fleet::{Fleet, Input};
use rocgate_harness::saved_report;
use std::path::{Path, PathBuf};

/// Runs a fleet action.
pub fn run(args: &FleetArgs) -> Result<Exit> {
    match &args.action {
        FleetAction::Report(report) => {
            let inputs: Vec<Input> = reports_in(&report.inputs)?
                .into_iter()
                .map(|(file, listed)| {
                    let doc = listed
                        .map_err(saved_report::NotRead)
                        .and_then(|()| saved_report::read(&file));
                    (file.display().to_string(), doc)
                })
                .collect();
            let layers: Vec<&str> = rocgate_suites::stack::LAYERS
                .iter()
                .map(|l| l.as_str())
                .collect();
            let as_of = report
                .as_of
                .unwrap_or_else(|| chrono::Utc::now().fixed_offset());
            let mut fleet = Fleet::read(inputs, &layers, &rocgate_suites::stack::IDENTITY, as_of);
            for r in &fleet.not_read {
                errln!("rocgate: not read: {}", r.why);
            }
            let out = &report.out;
            if report.format == FleetFormat::Html {
                link_pages(&mut fleet, out);
            }
            match report.format {
                FleetFormat::Json => out.json(&fleet.json().internal()?)?,
                FleetFormat::Html => out.html(&crate::html::fleet_page(&fleet))?,
                FleetFormat::Markdown => out.text(&fleet.markdown())?,
            }
            Ok(match fleet.exit_code() {
                0 => Exit::Pass,
                1 => Exit::Fail,
                // Not every node was judged: a report could not be read.
                _ => Exit::NodeIo,
            })
        }
    }
}

/// Links each node to its own page, `NODE.html` beside `NODE.json` (as
/// `rocgate run --json NODE.json --html NODE.html` writes them), relative
/// to the directory the fleet page is written to (the current one for
/// stdout), so a directory of reports opens as one site.
fn link_pages(fleet: &mut Fleet, out: &Output) {
    let here = match out {
        Output::File(path) => path.parent().map(Path::to_path_buf).unwrap_or_default(),
        Output::Stdout => PathBuf::new(),
    };
    let here = std::fs::canonicalize(if here.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &here
    });
    for node in &mut fleet.nodes {
        let page = Path::new(&node.file).with_extension("html");
        if !page.is_file() {
            continue;
        }
        let Ok(page) = std::fs::canonicalize(&page) else {
            continue;
        };
        let link = match here.as_ref().ok().and_then(|h| page.strip_prefix(h).ok()) {
            Some(relative) => relative.to_path_buf(),
            None => page,
        };
        node.page = Some(href(&link));
    }
}

/// A path as a link: each component percent-encoded where a URL needs it
/// (a space, `#`, `?`, `%`), so a host name with odd characters still
/// links to its page.
fn href(path: &Path) -> String {
    let encode = |part: &str| -> String {
        part.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(p) => Some(encode(&p.to_string_lossy())),
            _ => None,
        })
        .collect();
    let joined = parts.join("/");
    if path.is_absolute() {
        format!("file:///{joined}")
    } else {
        joined
    }
}

/// A report file to read, or why it could not even be listed.
type Listed = (PathBuf, Result<(), String>);

/// The report files named by `inputs`: files as given, directories' `*.json`
/// in name order; a directory that cannot be listed is an entry of its own
/// with the error, so the rest of the fleet is still read. A fleet with no
/// report is an error, not a green fleet.
fn reports_in(inputs: &[PathBuf]) -> Result<Vec<Listed>> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let listed = std::fs::read_dir(input).and_then(|d| {
                d.map(|e| e.map(|e| e.path()))
                    .collect::<Result<Vec<_>, _>>()
            });
            match listed {
                Ok(mut found) => {
                    found.retain(|p| p.extension().is_some_and(|x| x == "json") && p.is_file());
                    found.sort();
                    files.extend(found.into_iter().map(|p| (p, Ok(()))));
                }
                Err(e) => {
                    let why = format!("failed to list {}: {e}", input.display());
                    files.push((input.clone(), Err(why)));
                }
            }
        } else {
            files.push((input.clone(), Ok(())));
        }
    }
    if files.is_empty() {
        return Err(crate::error::Error::usage(format!(
            "no run report in {}: give `rocgate run --json` files or directories of them",
            inputs
                .iter()
                .map(|p| Path::new(p).display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(files)
}
