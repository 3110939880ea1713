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
        Some(Mark::Status(s)) if s.is_fault() => style.red(padded),
        Some(Mark::Status(Status::Pass)) => style.green(padded),
        Some(Mark::Unverified | Mark::Status(Status::Warn)) => style.yellow(padded),
        Some(Mark::Status(Status::Blocked)) => style.magenta(padded),
        Some(Mark::Waived) => style.cyan(padded),
        _ => style.dim(padded),
    }
}

/// Renders the ladder, grouping consecutive GPUs with identical rows when the
/// node has many (a 64-partition node stays readable).
pub fn ladder(report: &RunReport, style: Style) -> String {
    let layers = report.layers();
    let mut rows: Vec<(Scope, Vec<Option<Mark>>, String)> = Vec::new();
    for scope in report.scope_list() {
        let cells = layers
            .iter()
            .map(|l| layer_mark(report, scope, *l))
            .collect();
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
        rows.push((scope, cells, ident));
    }
    let gpu_rows = rows.iter().filter(|(s, _, _)| *s != Scope::Node).count();
    let mut out = String::new();
    let mut header = format!("{:<14}", "scope");
    for l in &layers {
        let _ = write!(header, "{:<9}", l.as_str());
    }
    let _ = writeln!(out, "{}", style.bold(header.trim_end()));
    let mut i = 0;
    while i < rows.len() {
        let (scope, cells, ident) = &rows[i];
        let mut j = i + 1;
        if gpu_rows > 16 && *scope != Scope::Node {
            while j < rows.len() && rows[j].1 == *cells && rows[j].0 != Scope::Node {
                j += 1;
            }
        }
        let label = if j - i > 1 {
            format!("{}..{}", scope.label(), rows[j - 1].0.label())
        } else {
            scope.label()
        };
        let tail = if j - i > 1 {
            format!("{} GPUs", j - i)
        } else {
            ident.clone()
        };
        let mut line = format!("{label:<14}");
        for (k, &c) in cells.iter().enumerate() {
            let text = if k + 1 == cells.len() && tail.is_empty() {
                cell_text(c).to_string()
            } else {
                format!("{:<9}", cell_text(c))
            };
            line.push_str(&paint(style, c, &text));
        }
        let _ = writeln!(out, "{}{}", line, style.dim(&tail));
        i = j;
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
