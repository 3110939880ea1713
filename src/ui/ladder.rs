//! The end-of-run view: a ladder per scope (layer by layer), the failures
//! with their next steps, and a summary line.

use super::style::Style;
use rocgate_harness::{CheckResult, Layer, RunReport, Scope, SkipReason, Status};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one ladder cell shows: a status, that a check of the layer could
/// not look (a layer that passed only what it could see is not a pass), or
/// that what it found is waived.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Status(Status),
    Unverified,
    Waived,
}

/// The worst outcome of a scope's checks in one layer.
fn cell(results: &[&CheckResult]) -> Option<Mark> {
    let mark = |r: &CheckResult| match r.skip_reason {
        _ if r.waived() => Mark::Waived,
        Some(SkipReason::Unverifiable) => Mark::Unverified,
        _ => Mark::Status(r.status),
    };
    let rank = |m: Mark| match m {
        Mark::Status(Status::Crash) => 9,
        Mark::Status(Status::Timeout) => 8,
        Mark::Status(Status::Fail) => 7,
        Mark::Status(Status::Blocked) => 6,
        Mark::Status(Status::Warn) => 5,
        Mark::Unverified => 4,
        Mark::Waived => 3,
        Mark::Status(Status::Pass) => 2,
        Mark::Status(Status::Skipped) => 1,
    };
    results.iter().map(|r| mark(r)).max_by_key(|&m| rank(m))
}

/// Whether `r` speaks of `scope`: it ran there, or its finding blames it
/// (a node-wide all-reduce one GPU keeps from completing marks that GPU).
pub fn concerns(r: &CheckResult, scope: Scope) -> bool {
    r.scope == scope || r.finding.as_ref().and_then(|f| f.blames) == Some(scope)
}

/// The worst outcome of `scope`'s checks in `layer`, if it has any.
fn layer_mark(report: &RunReport, scope: Scope, layer: Layer) -> Option<Mark> {
    let mine: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| concerns(r, scope) && r.layer == layer)
        .collect();
    cell(&mine)
}

/// A ladder cell as text (`pass`, `FAIL`, `warn`, `waived`, `unverif`,
/// `-`), for other views of the same ladder.
pub fn layer_cell(report: &RunReport, scope: Scope, layer: Layer) -> &'static str {
    cell_text(layer_mark(report, scope, layer))
}

/// The result that names the cell in views that have room for a finding
/// code: the first fault of `scope`'s checks in `layer`, else its first
/// warning, else its first waived finding.
pub fn layer_fault(report: &RunReport, scope: Scope, layer: Layer) -> Option<&CheckResult> {
    let mine = || {
        report
            .results
            .iter()
            .filter(move |r| concerns(r, scope) && r.layer == layer)
    };
    mine()
        .find(|r| r.is_fault())
        .or_else(|| mine().find(|r| r.is_warning()))
        .or_else(|| mine().find(|r| r.waived()))
}

fn cell_text(mark: Option<Mark>) -> &'static str {
    match mark {
        None => "-",
        Some(Mark::Unverified) => "unverif",
        Some(Mark::Waived) => "waived",
        Some(Mark::Status(Status::Pass)) => "pass",
        Some(Mark::Status(Status::Fail)) => "FAIL",
        Some(Mark::Status(Status::Warn)) => "warn",
        Some(Mark::Status(Status::Blocked)) => "blocked",
        Some(Mark::Status(Status::Skipped)) => "skip",
        Some(Mark::Status(Status::Timeout)) => "TIMEOUT",
        Some(Mark::Status(Status::Crash)) => "CRASH",
    }
}

fn paint(style: Style, mark: Option<Mark>, padded: &str) -> String {
    match mark {
        Some(Mark::Status(s)) => style.status(s, padded),
        Some(Mark::Unverified) => style.yellow(padded),
        Some(Mark::Waived) => style.cyan(padded),
        None => style.dim(padded),
    }
}

/// One ladder row: a scope, or consecutive scopes folded into one.
#[derive(Clone)]
struct Row {
    /// `gpu3`, or `gpu0..gpu7` for folded scopes.
    label: String,
    /// The scopes it holds.
    scopes: Vec<Scope>,
    cells: Vec<Option<Mark>>,
    /// Address, product and target, or how many scopes the row folds.
    tail: String,
}

/// The ladder's rows: partitions of one device (same serial) with the same
/// cells fold into one row under their device, and on a node with more
/// than 16 GPU rows left, consecutive identical rows fold too.
fn rows(report: &RunReport, layers: &[Layer]) -> Vec<Row> {
    struct Scoped {
        scope: Scope,
        cells: Vec<Option<Mark>>,
        ident: String,
        device: Option<String>,
    }
    let scoped: Vec<Scoped> = report
        .scope_list()
        .into_iter()
        .map(|scope| {
            let info = report.scope_info(scope);
            let ident = [
                info.get(rocgate_suites::stack::IDENTITY.address),
                info.get("product"),
                info.get("gfx_target"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("  ");
            Scoped {
                scope,
                cells: layers
                    .iter()
                    .map(|l| layer_mark(report, scope, *l))
                    .collect(),
                ident,
                device: info
                    .get(rocgate_suites::stack::IDENTITY.serial)
                    .map(str::to_string),
            }
        })
        .collect();
    let label = |group: &[Scoped]| match group {
        [one] => one.scope.label(),
        [first, .., last] => format!("{}..{}", first.scope.label(), last.scope.label()),
        [] => String::new(),
    };
    // First pass: a device's partitions, when they agree.
    // Each row with how many scopes it holds and whether they are GPUs.
    let mut by_device: Vec<(Row, usize, bool)> = Vec::new();
    let mut i = 0;
    while i < scoped.len() {
        let mut j = i + 1;
        if scoped[i].scope != Scope::Node && scoped[i].device.is_some() {
            while j < scoped.len()
                && scoped[j].scope != Scope::Node
                && scoped[j].device == scoped[i].device
                && scoped[j].cells == scoped[i].cells
            {
                j += 1;
            }
        }
        let group = &scoped[i..j];
        let tail = if group.len() > 1 {
            format!("{}  ({} partitions)", group[0].ident, group.len())
        } else {
            group[0].ident.clone()
        };
        let gpu = group[0].scope != Scope::Node;
        by_device.push((
            Row {
                label: label(group),
                scopes: group.iter().map(|g| g.scope).collect(),
                cells: group[0].cells.clone(),
                tail,
            },
            group.len(),
            gpu,
        ));
        i = j;
    }
    let gpu_rows = by_device.iter().filter(|(_, _, gpu)| *gpu).count();
    if gpu_rows <= 16 {
        return by_device.into_iter().map(|(r, _, _)| r).collect();
    }
    // Second pass: many rows that say the same thing say it once.
    let mut rows: Vec<Row> = Vec::new();
    let mut k = 0;
    while k < by_device.len() {
        let (row, _, gpu) = &by_device[k];
        let mut j = k + 1;
        if *gpu {
            while j < by_device.len() && by_device[j].2 && by_device[j].0.cells == row.cells {
                j += 1;
            }
        }
        if j - k == 1 {
            rows.push(row.clone());
        } else {
            let first = row.label.split("..").next().unwrap_or_default();
            let last = by_device[j - 1]
                .0
                .label
                .rsplit("..")
                .next()
                .unwrap_or_default();
            let scopes: usize = by_device[k..j].iter().map(|(_, n, _)| n).sum();
            let devices = j - k;
            let tail = if scopes > devices {
                format!("{scopes} partitions of {devices} devices")
            } else {
                format!("{scopes} GPUs")
            };
            rows.push(Row {
                label: format!("{first}..{last}"),
                scopes: by_device[k..j]
                    .iter()
                    .flat_map(|(r, _, _)| r.scopes.iter().copied())
                    .collect(),
                cells: row.cells.clone(),
                tail,
            });
        }
        k = j;
    }
    rows
}

/// The ladder's rows as other views show them: each row's label
/// (`gpu8..gpu15` for a device's partitions that agree), its scopes, and
/// its identity (address, product, target, or how many it folds).
pub fn folded_rows(report: &RunReport) -> Vec<(String, Vec<Scope>, String)> {
    rows(report, &report.layers())
        .into_iter()
        .map(|r| (r.label, r.scopes, r.tail))
        .collect()
}

/// The full ladder's column widths: scope label, then each layer.
const LABEL_COLUMNS: usize = 14;
const CELL_COLUMNS: usize = 9;

/// Renders the ladder to fit `width` columns (none: as wide as it is). The
/// full grid, a scope a row and a layer a column, when it fits; else one
/// line per scope saying only what did not pass, so no row wraps.
pub fn ladder(report: &RunReport, style: Style, width: Option<usize>) -> String {
    let layers = report.layers();
    let rows = rows(report, &layers);
    let full_width = rows
        .iter()
        .map(|r| {
            let label = r.label.chars().count().max(LABEL_COLUMNS - 1) + 1;
            let tail = r.tail.chars().count();
            label + CELL_COLUMNS * layers.len() + tail
        })
        .max()
        .unwrap_or(0);
    if width.is_some_and(|w| full_width > w) {
        return compact(&rows, &layers, style, width.unwrap_or(usize::MAX));
    }
    let mut out = String::new();
    let mut header = format!("{:<LABEL_COLUMNS$}", "scope");
    for l in &layers {
        let _ = write!(header, "{:<CELL_COLUMNS$}", l.as_str());
    }
    let _ = writeln!(out, "{}", style.bold(header.trim_end()));
    for row in &rows {
        let mut line = format!(
            "{:<w$}",
            row.label,
            w = LABEL_COLUMNS.max(row.label.len() + 1)
        );
        for (k, &c) in row.cells.iter().enumerate() {
            let text = if k + 1 == row.cells.len() && row.tail.is_empty() {
                cell_text(c).to_string()
            } else {
                format!("{:<CELL_COLUMNS$}", cell_text(c))
            };
            line.push_str(&paint(style, c, &text));
        }
        let _ = writeln!(out, "{}{}", line, style.dim(&row.tail));
    }
    out
}

/// The ladder for a narrow terminal: per row its label, then either `pass`
/// (every layer that ran passed) or each layer that did not, as `layer
/// MARK`, wrapped under the label; the row's identity on a line of its own
/// below it when it does not fit beside.
fn compact(rows: &[Row], layers: &[Layer], style: Style, width: usize) -> String {
    let label_width = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let indent = " ".repeat(label_width);
    let mut out = String::new();
    let heading = format!(
        "{:<label_width$}layers that did not pass (narrow terminal: one line per scope)",
        "scope"
    );
    let _ = writeln!(
        out,
        "{}",
        style.bold(console::truncate_str(&heading, width, "").as_ref())
    );
    for row in rows {
        let notable: Vec<(Layer, Option<Mark>)> = layers
            .iter()
            .copied()
            .zip(row.cells.iter().copied())
            .filter(|(_, c)| !matches!(c, None | Some(Mark::Status(Status::Pass))))
            .collect();
        let mut items: Vec<(String, Option<Mark>)> = notable
            .iter()
            .map(|(l, c)| (format!("{} {}", l.as_str(), cell_text(*c)), *c))
            .collect();
        if items.is_empty() {
            items.push(("pass".to_string(), Some(Mark::Status(Status::Pass))));
        }
        let mut line = format!("{:<label_width$}", row.label);
        let mut used = label_width;
        for (n, (text, mark)) in items.iter().enumerate() {
            let sep = if n + 1 < items.len() { ", " } else { "" };
            let len = text.chars().count() + sep.len();
            if used > label_width && used + len > width {
                let _ = writeln!(out, "{}", line.trim_end());
                line = indent.clone();
                used = label_width;
            }
            line.push_str(&paint(style, *mark, text));
            line.push_str(sep);
            used += len;
        }
        let tail = row.tail.chars().count();
        if !row.tail.is_empty() && used + 2 + tail <= width {
            let _ = writeln!(out, "{}  {}", line.trim_end(), style.dim(&row.tail));
        } else {
            let _ = writeln!(out, "{}", line.trim_end());
            if !row.tail.is_empty() {
                let shown =
                    console::truncate_str(&row.tail, width.saturating_sub(label_width), "…");
                let _ = writeln!(out, "{indent}{}", style.dim(&shown));
            }
        }
    }
    out
}

/// Renders each finding with its next step: faults bottom-up, then
/// warnings, then waived findings with the site's reason; identical
/// findings on many GPUs are folded into one entry.
pub fn failures(report: &RunReport, style: Style) -> String {
    let mut faults: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| r.status.has_finding())
        .collect();
    if faults.is_empty() {
        return String::new();
    }
    // Faults first, warnings after, waived findings last.
    let order = |r: &CheckResult| {
        if r.waived() {
            2
        } else if r.status == Status::Warn {
            1
        } else {
            0
        }
    };
    faults.sort_by_key(|r| (order(r), r.layer, r.scope));
    // Fold the same check with the same code across scopes.
    let mut groups: BTreeMap<(Layer, String, String), Vec<&CheckResult>> = BTreeMap::new();
    let mut order = Vec::new();
    for r in faults {
        let code = r
            .finding
            .as_ref()
            .map_or_else(|| r.status.to_string(), |f| f.code.clone());
        let key = (r.layer, r.check.clone(), code);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    let mut out = String::new();
    let first = report
        .first_failing_layer(None)
        .map_or("none", Layer::as_str);
    let heading = if report.results.iter().any(CheckResult::is_fault) {
        format!("Failures (first failing layer: {first})")
    } else if report.results.iter().any(CheckResult::is_warning) {
        format!("Warnings (nothing failed; first warning in layer {first})")
    } else {
        "Waived findings (the site accepts these)".to_string()
    };
    let _ = writeln!(out, "{}", style.bold(&heading));
    for key in order {
        let rs = &groups[&key];
        let r = rs[0];
        let scopes = if rs.len() > 1 {
            format!(
                " (and {} more: {})",
                rs.len() - 1,
                rs[1..]
                    .iter()
                    .take(8)
                    .map(|r| r.scope.label())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        };
        let word = r.status.as_str().to_uppercase();
        let tag = if r.waived() {
            style.cyan("WAIVED")
        } else if r.status == Status::Warn {
            style.yellow(&word)
        } else {
            style.red(&word)
        };
        let _ = writeln!(out, "  {tag} {} [{}]{scopes}", r.test_id, key.2);
        let _ = writeln!(out, "      {}", r.message);
        match (&r.waiver, &r.finding) {
            (Some(w), _) if !w.expired => {
                let until = w
                    .expires
                    .as_deref()
                    .map_or_else(String::new, |d| format!(" until {d}"));
                let _ = writeln!(out, "      waived{until}: {} ({})", w.reason, w.source);
            }
            (w, f) => {
                if let Some(w) = w {
                    let _ = writeln!(
                        out,
                        "      {}",
                        style.yellow(&format!(
                            "waiver expired on {}: {} ({}); it no longer applies",
                            w.expires.as_deref().unwrap_or("?"),
                            w.reason,
                            w.source
                        ))
                    );
                }
                if let Some(f) = f {
                    let _ = writeln!(out, "      next: {}", f.next_step);
                }
            }
        }
    }
    out
}

/// Every measurement taken between two scopes (peer-to-peer bandwidth), as
/// a matrix per check and family, values below their floor in red.
pub fn matrices(report: &RunReport, style: Style) -> String {
    let mut out = String::new();
    for r in &report.results {
        for m in rocgate_harness::pair_grid::pair_grids(&r.metrics) {
            if !out.is_empty() {
                out.push('\n');
            }
            let _ = writeln!(
                out,
                "{}",
                style.bold(&format!("Between GPUs: {}", r.test_id))
            );
            for line in m.text().lines() {
                let line: Vec<String> = line
                    .split_inclusive(' ')
                    .map(|cell| {
                        if cell.trim_end().ends_with('!') {
                            style.red(cell)
                        } else {
                            cell.to_string()
                        }
                    })
                    .collect();
                let _ = writeln!(out, "{}", line.concat());
            }
        }
    }
    out
}

/// The checks that could not look, and why: they are not passes, and
/// `--strict` fails the run on them.
pub fn unverified(report: &RunReport, style: Style) -> String {
    let rs = report.unverified();
    if rs.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let heading = if report.strict {
        format!(
            "Could not verify ({}; --strict fails the run on these)",
            rs.len()
        )
    } else {
        format!(
            "Could not verify ({}; --strict would fail the run)",
            rs.len()
        )
    };
    let _ = writeln!(out, "{}", style.bold(&heading));
    // The same reason on many GPUs is one line.
    let mut groups: BTreeMap<&str, Vec<&CheckResult>> = BTreeMap::new();
    let mut order = Vec::new();
    for r in rs {
        if !groups.contains_key(r.message.as_str()) {
            order.push(r.message.as_str());
        }
        groups.entry(r.message.as_str()).or_default().push(r);
    }
    for message in order {
        let ids: Vec<&str> = groups[message].iter().map(|r| r.test_id.as_str()).collect();
        let shown = if ids.len() > 3 {
            format!("{} and {} more", ids[..3].join(", "), ids.len() - 3)
        } else {
            ids.join(", ")
        };
        let _ = writeln!(out, "  {} {shown}", style.yellow("UNVERIFIED"));
        let _ = writeln!(out, "      {message}");
    }
    out
}

/// One line: the verdict (in the words every report uses), counts and time.
pub fn summary(report: &RunReport, style: Style) -> String {
    let decision = rocgate::decision::decide(report);
    let headline = rocgate::decision::headline(report, &decision);
    let verdict = match decision.health {
        _ if report.interrupted.is_some() => style.yellow(&headline),
        rocgate::decision::Health::Healthy if decision.warnings > 0 => style.yellow(&headline),
        rocgate::decision::Health::Healthy => style.green(&headline),
        rocgate::decision::Health::Unhealthy => style.red(&headline),
        rocgate::decision::Health::Unknown => style.yellow(&headline),
    };
    let skipped = report.count(Status::Skipped);
    let reasons: Vec<String> = SkipReason::ALL
        .into_iter()
        .map(|r| (r, report.count_skipped(r)))
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{n} {}", r.as_str().replace('-', " ")))
        .collect();
    let skipped = if reasons.is_empty() {
        format!("{skipped} skipped")
    } else {
        format!("{skipped} skipped ({})", reasons.join(", "))
    };
    let waived = report.waived().len();
    let waived = if waived > 0 {
        format!(" ({waived} of them waived)")
    } else {
        String::new()
    };
    format!(
        "{verdict}: {} passed, {} failed, {} warned, {} blocked, {skipped}, {} timed out, {} crashed{waived} in {}",
        report.count(Status::Pass),
        report.count(Status::Fail),
        report.count(Status::Warn),
        report.count(Status::Blocked),
        report.count(Status::Timeout),
        report.count(Status::Crash),
        took(report.duration)
    )
}

/// A run's duration as people read it: milliseconds below ten seconds
/// (node layers take a few), seconds above, minutes past two of them.
fn took(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{:.1} ms", s * 1e3)
    } else if s < 120.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::took;
    use std::time::Duration;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(took(Duration::from_micros(1800)), "1.8 ms");
        assert_eq!(took(Duration::from_millis(37_912)), "37.9 s");
        assert_eq!(took(Duration::from_secs(1122)), "18m42s");
    }
}
