//! A comparison as plain text for a terminal and as Markdown for a job
//! summary.

use super::model::*;
use crate::markdown::{cell as md, code as md_code};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

impl Missing {
    /// The metric and where it was measured.
    pub(super) fn what(&self) -> String {
        match &self.on {
            Some(on) => format!("{} ({on})", self.metric),
            None => self.metric.clone(),
        }
    }

    /// How it is missing.
    fn how(&self) -> &'static str {
        if self.null {
            "missing (written with no value)"
        } else {
            "missing (not in the report)"
        }
    }
}

/// A spread's width as printed, `none` when the run measured none.
fn width_text(w: Option<f64>) -> String {
    w.map_or_else(|| "none".to_string(), |w| format!("{w:.3}"))
}

impl MetricChange {
    /// The metric and where it was measured: `gemm_tflops.fp16 (0000:65:00.0)`.
    fn what(&self) -> String {
        match &self.on {
            Some(on) => format!("{} ({on})", self.metric),
            None => self.metric.clone(),
        }
    }

    /// How the judgement was made: the tolerance and both runs' spreads.
    fn how(&self) -> String {
        format!(
            "tolerance {:.0}%, spread {} before, {} after",
            self.tolerance * 100.0,
            width_text(self.spread_before),
            width_text(self.spread_after),
        )
    }
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(none)")
}

impl VersionChange {
    /// What the version is after: its value, `(none)`, or why it was not
    /// read.
    fn after_text(&self) -> String {
        match (&self.after, &self.not_read) {
            (Some(a), _) => a.clone(),
            (None, Some(why)) => format!("not read ({why})"),
            (None, None) => "(none)".to_string(),
        }
    }
}

/// Versions not read for one reason, grouped when there are more than this
/// many (a node whose driver did not load reads no firmware version on any
/// GPU: one line says so).
const GROUP_NOT_READ: usize = 3;

/// Version changes as rows: each change, except that versions not read for
/// one reason are one row when there are many: (scope, component, before,
/// after).
fn version_rows(versions: &[VersionChange]) -> Vec<[String; 4]> {
    let mut by_reason: BTreeMap<&str, Vec<&VersionChange>> = BTreeMap::new();
    for v in versions {
        if let (None, Some(why)) = (&v.after, &v.not_read) {
            by_reason.entry(why).or_default().push(v);
        }
    }
    let grouped = |v: &VersionChange| {
        v.not_read
            .as_deref()
            .is_some_and(|why| v.after.is_none() && by_reason[why].len() > GROUP_NOT_READ)
    };
    let mut rows: Vec<[String; 4]> = versions
        .iter()
        .filter(|v| !grouped(v))
        .map(|v| {
            [
                v.scope.clone(),
                v.key.clone(),
                opt(&v.before).to_string(),
                v.after_text(),
            ]
        })
        .collect();
    for (why, vs) in by_reason.iter().filter(|(_, vs)| vs.len() > GROUP_NOT_READ) {
        let mut scopes: Vec<&str> = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        for v in vs {
            let scope = v.scope.split(' ').next().unwrap_or(&v.scope);
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
            if !keys.contains(&v.key.as_str()) {
                keys.push(&v.key);
            }
        }
        rows.push([
            list(&scopes, 4),
            format!("{} versions ({})", vs.len(), list(&keys, 6)),
            String::new(),
            format!("not read ({why})"),
        ]);
    }
    rows
}

/// A check that stopped passing with the checks it blocked after, or the
/// checks one root blocked when the root itself was not passing before.
struct StatusGroup<'a> {
    /// The change of the root, when it stopped passing.
    root: Option<&'a StatusChange>,
    /// The root's id, for a group without its change.
    root_id: &'a str,
    /// Checks above it that it blocked.
    blocked: usize,
}

/// Groups checks that stopped passing under the root cause that blocked
/// them: one entry per root, in the order of the changes.
fn status_groups(changes: &[StatusChange]) -> Vec<StatusGroup<'_>> {
    let mut groups: Vec<StatusGroup<'_>> = Vec::new();
    let mut blocked: BTreeMap<&str, usize> = BTreeMap::new();
    for s in changes {
        if let Some(root) = &s.blocked_by {
            *blocked.entry(root).or_default() += 1;
        }
    }
    let mut seen = BTreeSet::new();
    for s in changes.iter().filter(|s| s.blocked_by.is_none()) {
        // A check under another index (`gpu1.x.y (was gpu2)`) is blocked_by's
        // root by its id alone.
        let bare = s.id.split(' ').next().unwrap_or(&s.id);
        seen.insert(bare);
        groups.push(StatusGroup {
            root: Some(s),
            root_id: &s.id,
            blocked: blocked.get(bare).copied().unwrap_or(0),
        });
    }
    for s in changes {
        if let Some(root) = s.blocked_by.as_deref()
            && seen.insert(root)
        {
            groups.push(StatusGroup {
                root: None,
                root_id: root,
                blocked: blocked.get(root).copied().unwrap_or(0),
            });
        }
    }
    groups
}

fn blocked_text(n: usize) -> String {
    format!(
        "{n} check{} above it blocked",
        if n == 1 { "" } else { "s" }
    )
}

/// Appends `title: N` and the `lines`, indented.
fn text_list(out: &mut String, title: &str, count: usize, lines: impl Iterator<Item = String>) {
    let _ = writeln!(out, "{title}: {count}");
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// What was judged and what was not, as one sentence.
fn judged_text(c: &Comparison) -> String {
    format!(
        "Metrics judged: {} (throughputs and error counters); not judged: {} (durations, readings, counts)",
        c.judged, c.not_judged
    )
}

/// Plain text for a terminal.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    if let Some(why) = &c.by_index {
        let _ = writeln!(out, "Note: {why}");
    }
    if let Some((b, a)) = c.gpu_count {
        let _ = writeln!(out, "GPU count changed: {b} -> {a}");
    }
    if !c.gone.is_empty() {
        text_list(
            &mut out,
            "Gone since the first run",
            c.gone.len(),
            c.gone
                .iter()
                .map(|g| format!("{} (was {})", g.what, g.before)),
        );
    }
    text_list(
        &mut out,
        "Versions changed",
        c.versions.len(),
        version_rows(&c.versions).into_iter().map(|[s, k, b, a]| {
            if b.is_empty() {
                format!("{s}: {k} {a}")
            } else {
                format!("{s:<6} {k:<24} {b} -> {a}")
            }
        }),
    );
    let mut lines = Vec::new();
    for g in status_groups(&c.regressions) {
        match g.root {
            Some(r) => lines.push(format!(
                "{} {} -> {}: {}",
                r.id, r.before, r.after, r.message
            )),
            None => lines.push(format!("{} (did not pass before either)", g.root_id)),
        }
        if g.blocked > 0 {
            lines.push(format!("  {}", blocked_text(g.blocked)));
        }
    }
    text_list(
        &mut out,
        "Checks that stopped passing",
        c.regressions.len(),
        lines.into_iter(),
    );
    text_metrics(&mut out, c);
    out
}

/// The metric sections of the text: throughputs, counters, missing
/// measurements, then checks fixed and the verdict.
fn text_metrics(out: &mut String, c: &Comparison) {
    text_list(
        out,
        "Throughputs worse beyond their tolerance and spread",
        c.slower.len(),
        c.slower.iter().map(|m| {
            format!(
                "{} {}: {:.3} -> {:.3} {} ({:+.1}%; {})",
                m.id,
                m.what(),
                m.before,
                m.after,
                m.unit,
                m.change * 100.0,
                m.how()
            )
        }),
    );
    text_list(
        out,
        "Error counters that grew",
        c.grew.len(),
        c.grew.iter().map(|m| {
            format!(
                "{} {}: {} -> {} {} (+{})",
                m.id,
                m.what(),
                m.before,
                m.after,
                m.unit,
                m.change
            )
        }),
    );
    if !c.missing.is_empty() {
        text_list(
            out,
            "Measurements missing while their checks pass",
            c.missing.len(),
            c.missing.iter().map(|m| {
                format!(
                    "{} {}: {} {} -> {}",
                    m.id,
                    m.what(),
                    m.before,
                    m.unit,
                    m.how()
                )
            }),
        );
    }
    if !c.fixed.is_empty() {
        text_list(
            out,
            "Checks that now pass",
            c.fixed.len(),
            c.fixed
                .iter()
                .map(|r| format!("{} {} -> pass", r.id, r.before)),
        );
    }
    let _ = writeln!(out, "{}", judged_text(c));
    let _ = writeln!(
        out,
        "{}",
        if c.regressed() {
            "REGRESSED"
        } else {
            "NO REGRESSION"
        }
    );
}

/// Appends a section `title` holding a table of `rows` under `header`;
/// nothing when there are no rows.
fn md_table(out: &mut String, title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "### {title}\n\n| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

/// Markdown for a pull-request comment or a CI job summary.
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!(
        "## rocgate: {}\n\n",
        if c.regressed() {
            "regression"
        } else {
            "no regression"
        }
    );
    if let Some(why) = &c.by_index {
        let _ = writeln!(out, "**Note:** {}\n", md(why));
    }
    if let Some((b, a)) = c.gpu_count {
        let _ = writeln!(out, "**GPU count changed: {b} -> {a}**\n");
    }
    let gone = c
        .gone
        .iter()
        .map(|g| vec![md(&g.what), md(&g.before)])
        .collect();
    md_table(
        &mut out,
        "Gone since the first run",
        &["what", "before"],
        gone,
    );
    let versions = version_rows(&c.versions)
        .into_iter()
        .map(|row| row.iter().map(|s| md(s)).collect())
        .collect();
    md_table(
        &mut out,
        "Versions",
        &["scope", "component", "before", "after"],
        versions,
    );
    let statuses = status_groups(&c.regressions)
        .into_iter()
        .map(|g| {
            let blocked = if g.blocked > 0 {
                format!("; {}", blocked_text(g.blocked))
            } else {
                String::new()
            };
            match g.root {
                Some(r) => vec![
                    md_code(&r.id),
                    md(&r.before),
                    format!("**{}**", md(&r.after)),
                    format!("{}{blocked}", md(&r.message)),
                ],
                None => vec![
                    md_code(g.root_id),
                    "not pass".to_string(),
                    "not pass".to_string(),
                    format!("did not pass before either{blocked}"),
                ],
            }
        })
        .collect();
    md_table(
        &mut out,
        "Checks that stopped passing",
        &["check", "before", "after", "message"],
        statuses,
    );
    md_metrics(&mut out, c);
    out
}

/// The metric sections of the Markdown: throughputs, counters, missing
/// measurements, then checks fixed and what was judged.
fn md_metrics(out: &mut String, c: &Comparison) {
    // A metric's row: where, what, before and after, then `rest`.
    let row = |m: &MetricChange, rest: Vec<String>| {
        let value = |v: f64| format!("{v:.3} {}", md(&m.unit));
        let mut cells = vec![
            md_code(&m.id),
            md(&m.what()),
            value(m.before),
            value(m.after),
        ];
        cells.extend(rest);
        cells
    };
    let slower = c
        .slower
        .iter()
        .map(|m| row(m, vec![format!("**{:+.1}%**", m.change * 100.0), m.how()]))
        .collect();
    md_table(
        out,
        "Throughputs worse beyond their tolerance and spread",
        &["check", "metric", "before", "after", "change", "decided by"],
        slower,
    );
    let grew = c
        .grew
        .iter()
        .map(|m| row(m, vec![format!("**+{}**", m.change)]))
        .collect();
    md_table(
        out,
        "Error counters that grew",
        &["check", "metric", "before", "after", "change"],
        grew,
    );
    let missing = c
        .missing
        .iter()
        .map(|m| {
            vec![
                md_code(&m.id),
                md(&m.what()),
                format!("{} {}", m.before, md(&m.unit)),
                format!("**{}**", m.how()),
            ]
        })
        .collect();
    md_table(
        out,
        "Measurements missing while their checks pass",
        &["check", "metric", "before", "after"],
        missing,
    );
    if !c.fixed.is_empty() {
        let _ = writeln!(
            out,
            "{} checks now pass that did not before.\n",
            c.fixed.len()
        );
    }
    let _ = writeln!(out, "{}.", judged_text(c));
}
