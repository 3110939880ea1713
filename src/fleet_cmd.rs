//! `rocgate fleet report`: many nodes' run reports as one view, read one
//! report at a time; `rocgate fleet baseline` (`fleet_baseline.rs`)
//! writes floors from them.
//!
//! Exit codes: 0 every report read and every node passed; 1 a node failed
//! (whatever else could not be read: a fault found is found); 2 no node
//! failed but a report could not be read (not every node was judged), or
//! there was no report at all.

use crate::cli::{FleetAction, FleetArgs, FleetFormat, FleetReadArgs, FleetReportArgs};
use crate::error::{Error, Result, ResultExt};
use crate::output::Output;
use rayon::prelude::*;
use rocgate::config::Config;
use rocgate::exit::Exit;
use rocgate_harness::fleet::{
    Fleet, FleetDiff, FleetOptions, FleetReader, Mixed, OutlierRule, digest,
};
use rocgate_harness::saved_report::{self, NotRead};
use std::path::{Path, PathBuf};

/// Runs a fleet action.
pub fn run(args: &FleetArgs) -> Result<Exit> {
    match &args.action {
        FleetAction::Report(report) => run_report(report),
        FleetAction::Baseline(baseline) => crate::fleet_baseline::run(baseline),
    }
}

fn run_report(report: &FleetReportArgs) -> Result<Exit> {
    let as_of = report
        .as_of
        .unwrap_or_else(|| chrono::Utc::now().fixed_offset());
    let options = options(&report.read)?;
    let mut fleet = read_fleet(&report.read.inputs, options.clone(), as_of)?;
    for r in &fleet.not_read {
        errln!("rocgate: not read: {}", r.why);
    }
    if !report.previous.is_empty() {
        let previous = read_fleet(&report.previous, options, as_of)
            .context("the previous fleet run (--previous)")?;
        for r in &previous.not_read {
            errln!("rocgate: not read in the previous fleet run: {}", r.why);
        }
        // A diff against nothing would call every node new: an operator
        // who mistyped the directory is told so instead.
        if previous.nodes.is_empty() {
            let given: Vec<String> = report
                .previous
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            return Err(Error::usage(format!(
                "the previous fleet run (--previous {}) has no report rocgate could read: give the directory of the earlier fleet run's `rocgate run --json` reports",
                given.join(" ")
            )));
        }
        fleet.since = Some(FleetDiff::between(&previous, &fleet));
    }
    if let Some(path) = &report.passing {
        write_list(
            path,
            fleet.passing().map(str::to_string).collect(),
            "--passing",
        )?;
    }
    if let Some(path) = &report.failing {
        write_list(path, fleet.failing(), "--failing")?;
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

/// How drift and outliers are judged: the flags, else the policy file's
/// `[fleet]` table, else the defaults; the mixed components of both.
pub(crate) fn options(read: &FleetReadArgs) -> Result<FleetOptions> {
    let config = Config::find(read.config.as_deref())?;
    let (mads, shortfall) = config.fleet_outliers();
    let defaults = OutlierRule::default();
    let mut mixed = config.fleet_mixed().to_vec();
    mixed.extend(read.mixed.iter().cloned());
    Ok(FleetOptions {
        rule: OutlierRule {
            mads: read.outlier_mads.or(mads).unwrap_or(defaults.mads),
            min_shortfall: read
                .outlier_shortfall
                .or(shortfall)
                .unwrap_or(defaults.min_shortfall),
            ..defaults
        },
        mixed: Mixed::new(&mixed).map_err(Error::usage)?,
    })
}

/// How many reports are read at once: each thread holds one report's
/// bytes while it digests it, and a batch's digests (each a few hundred
/// samples) wait to be added in order: a few dozen keep every core busy
/// and the memory in flight to a few MiB.
const BATCH: usize = 64;

/// Reads the reports in `inputs` one at a time (on every core, each
/// reduced to its digest as soon as it is read), in the order given.
pub(crate) fn read_fleet(
    inputs: &[PathBuf],
    options: FleetOptions,
    as_of: chrono::DateTime<chrono::FixedOffset>,
) -> Result<Fleet> {
    let files = reports_in(inputs)?;
    let terms = &rocgate_suites::stack::FLEET;
    let layers: Vec<&str> = terms.layers.iter().map(|l| l.as_str()).collect();
    let mut reader = FleetReader::new(&layers, as_of, options);
    let read = |batch: &[(PathBuf, std::result::Result<(), String>)]| -> Vec<_> {
        batch
            .par_iter()
            .map_init(Vec::new, |bytes, (file, listed)| {
                let shown = file.display().to_string();
                let digest = listed
                    .clone()
                    .map_err(NotRead)
                    .and_then(|()| saved_report::read_bytes_into(file, bytes))
                    .and_then(|()| digest(&shown, bytes, terms, as_of));
                (shown, digest)
            })
            .collect()
    };
    // A batch is added while the next one is read: the adding is in
    // order, on one thread, and would otherwise leave the others idle.
    let mut read_before = Vec::new();
    for batch in files.chunks(BATCH) {
        let (digests, ()) = rayon::join(
            || read(batch),
            || {
                for (file, digest) in read_before.drain(..) {
                    reader.add(file, digest);
                }
            },
        );
        read_before = digests;
    }
    for (file, digest) in read_before {
        reader.add(file, digest);
    }
    Ok(reader.finish())
}

/// Writes `names`, one per line, to `path` (atomically: a scheduler never
/// reads half a list).
fn write_list(path: &Path, names: Vec<String>, flag: &str) -> Result<()> {
    let mut text = names.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    Output::File(path.to_path_buf())
        .text(&text)
        .context(format!("the node list {flag} {}", path.display()))
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
