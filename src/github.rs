//! GitHub Actions: what the person looking at a run sees without opening
//! an artifact. The job summary ($GITHUB_STEP_SUMMARY, markdown) gets the
//! ladder as a table, the likely cause with its next step and the versions;
//! the log gets workflow commands (`::error`, `::warning`) that GitHub turns
//! into annotations, at most 10 of each (GitHub keeps 10 per step), most
//! important first, each beginning with its finding code.
//!
//! Node text (a VBIOS string, a message quoting a sysfs file, a host name)
//! is data, never markup: every such string in the summary goes through
//! [`rocgate_harness::markdown::cell`], so `</details>`, `<img src=...>` or `[x](http://...)`
//! read on a node show as typed and load or link nothing. In annotations it
//! is workflow-command data, escaped as the Actions toolkit does, so it
//! cannot end the command or start another.

use crate::reports::Presented;
use crate::ui::fold::{VersionRow, folded_versions, scope_ranges};
use crate::ui::ladder::{layer_cell, layer_fault};
use rocgate_harness::doctor::{DiagnosedFault, Diagnosis};
use rocgate_harness::{RunReport, Scope};
use rocgate_suites::stack::IDENTITY;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// GitHub keeps this many annotations of each kind per step.
const MAX_ANNOTATIONS: usize = 10;

/// A job summary may hold at most 1 MiB; rocgate's stays well under it.
const MAX_SUMMARY_BYTES: usize = 1 << 20;

/// Whether to speak to GitHub Actions: inside it (GITHUB_ACTIONS=true),
/// unless `--no-github`.
pub fn active(no_github: bool) -> bool {
    !no_github && std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// Workflow command data escaped as the Actions toolkit does.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command property escaped as the Actions toolkit does.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// What a run shows in GitHub: annotation lines and the summary.
pub struct Publication {
    /// `::error ...` and `::warning ...` lines, errors first.
    pub annotations: Vec<String>,
    /// The job summary's markdown.
    pub summary: String,
}

/// One annotation: the finding code first, where it is, what was seen and
/// what to do.
fn annotation(kind: &str, f: &DiagnosedFault) -> String {
    let title = format!("rocgate {} on {}", f.code, f.scope.label());
    let text = format!(
        "{} {} ({}): {}\nnext: {}",
        f.code,
        f.scope.label(),
        f.test_id,
        f.message,
        f.next_step
    );
    format!(
        "::{kind} title={}::{}",
        escape_property(&title),
        escape_data(&text)
    )
}

/// The annotations and summary for a run.
pub fn publication(run: &Presented<'_>) -> Publication {
    let (report, diagnosis) = (run.report, &run.diagnosis);
    let (node, versions) = (&run.node, &run.versions);
    // Under --fail-on warn a warning fails the step, so it is an error.
    let is_error = |f: &&DiagnosedFault| !f.is_warning() || report.fail_on_warn;
    let errors: Vec<&DiagnosedFault> = diagnosis.findings.iter().filter(is_error).collect();
    let mut warnings: Vec<String> = diagnosis
        .findings
        .iter()
        .filter(|f| !is_error(f))
        .map(|f| annotation("warning", f))
        .collect();
    // A check that could not look is worth a warning: the run is not the
    // green it may seem.
    warnings.extend(
        report
            .results
            .iter()
            .filter(|r| r.is_unverified())
            .map(|r| {
                let text = format!("unverifiable {}: {}", r.test_id, r.message);
                format!(
                    "::warning title={}::{}",
                    escape_property(&format!("rocgate could not verify {}", r.test_id)),
                    escape_data(&text)
                )
            }),
    );
    let mut annotations: Vec<String> = errors
        .iter()
        .take(MAX_ANNOTATIONS)
        .map(|f| annotation("error", f))
        .collect();
    let more_errors = errors.len().saturating_sub(MAX_ANNOTATIONS);
    let more_warnings = warnings.len().saturating_sub(MAX_ANNOTATIONS);
    annotations.extend(warnings.into_iter().take(MAX_ANNOTATIONS));
    let mut summary = summary(report, diagnosis, &run.decision, node, versions);
    if more_errors + more_warnings > 0 {
        let _ = writeln!(
            summary,
            "\nGitHub shows 10 annotations of each kind per step: {more_errors} more errors and {more_warnings} more warnings are in the table above and in the reports."
        );
    }
    if summary.len() > MAX_SUMMARY_BYTES {
        let mut end = MAX_SUMMARY_BYTES - 200;
        while !summary.is_char_boundary(end) {
            end -= 1;
        }
        summary.truncate(end);
        summary.push_str(
            "\n\n(summary cut at GitHub's 1 MiB limit; the JSON report has everything)\n",
        );
    }
    Publication {
        annotations,
        summary,
    }
}

use rocgate_harness::markdown::{cell as escape_cell, code};

fn summary(
    report: &RunReport,
    diagnosis: &Diagnosis,
    decision: &rocgate::decision::Decision,
    node: &[(String, String)],
    versions: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let prop = |k: &str| crate::reports::node_property(node, k);
    let verdict = rocgate::decision::headline(report, decision);
    let mut out = format!(
        "## rocgate {} on {} ({} tier)\n\n",
        escape_cell(&verdict),
        escape_cell(prop(IDENTITY.host).unwrap_or("this node")),
        report.tier
    );
    if let Some(f) = &diagnosis.likely_cause {
        let (title, what) = if f.is_warning() {
            ("First warning in layer", "Warning")
        } else {
            ("First failing layer", "Likely cause")
        };
        let _ = writeln!(
            out,
            "**{title}:** {}  \n**{what}:** {} on {}: {}  \n**Next step:** {}\n",
            escape_cell(&f.layer.to_string()),
            code(&f.code),
            escape_cell(&f.scope.label()),
            escape_cell(&f.message),
            escape_cell(&f.next_step)
        );
    }
    for f in &diagnosis.waived {
        if let Some(w) = &f.waiver {
            let _ = writeln!(
                out,
                "**Waived:** {} on {} ({}; {})  ",
                code(&f.code),
                escape_cell(&f.scope.label()),
                escape_cell(&w.reason),
                escape_cell(&w.source)
            );
        }
    }
    if !diagnosis.waived.is_empty() {
        out.push('\n');
    }
    let layers = report.layers();
    let _ = writeln!(
        out,
        "| scope | {} |\n|---|{}",
        layers
            .iter()
            .map(|l| escape_cell(l.as_str()))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(layers.len())
    );
    // A device's partitions that agree are one row, as in the ladder.
    for (label, scopes, tail) in crate::ui::ladder::folded_rows(report) {
        let Some(&scope) = scopes.first() else {
            continue;
        };
        let info = report.scope_info(scope);
        let who = match (scopes.len(), info.get(IDENTITY.address)) {
            (1, Some(pci)) => format!("{} {}", escape_cell(&label), code(pci)),
            (1, None) => escape_cell(&label),
            _ => format!("{} ({})", escape_cell(&label), escape_cell(&tail)),
        };
        let cells: Vec<String> = layers
            .iter()
            .map(|&layer| {
                let cell = layer_cell(report, scope, layer);
                let code = layer_fault(report, scope, layer)
                    .and_then(|r| r.finding.as_ref())
                    .map(|f| code(&f.code));
                match code {
                    Some(c) if cell == "warn" || cell == "waived" => format!("{cell} {c}"),
                    Some(c) => format!("**{cell}** {c}"),
                    None => cell.to_string(),
                }
            })
            .collect();
        let _ = writeln!(out, "| {who} | {} |", cells.join(" | "));
    }
    findings(&mut out, diagnosis);
    out.push_str("\n<details><summary>Versions</summary>\n\n| scope | component | version |\n|---|---|---|\n");
    for VersionRow {
        scopes,
        component,
        version,
        differs,
    } in folded_versions(versions)
    {
        let (scopes, version) = (escape_cell(&scopes), escape_cell(&version));
        let (scopes, version) = if differs {
            (format!("**{scopes}**"), format!("**{version}** (differs)"))
        } else {
            (scopes, version)
        };
        let _ = writeln!(
            out,
            "| {scopes} | {} | {version} |",
            escape_cell(&component)
        );
    }
    out.push_str("\n</details>\n");
    out
}

/// Every finding with its message and next step, the same code with the
/// same next step on several scopes once (a hive's eight GPUs are one
/// line), at most [`MAX_FINDINGS`] lines.
fn findings(out: &mut String, diagnosis: &Diagnosis) {
    const MAX_FINDINGS: usize = 50;
    let mut groups: Vec<(&DiagnosedFault, Vec<Scope>)> = Vec::new();
    for f in &diagnosis.findings {
        match groups
            .iter_mut()
            .find(|(g, _)| g.code == f.code && g.layer == f.layer && g.next_step == f.next_step)
        {
            Some((_, scopes)) => scopes.push(f.scope),
            None => groups.push((f, vec![f.scope])),
        }
    }
    if groups.is_empty() {
        return;
    }
    out.push_str("\n### Findings\n\n");
    for (f, scopes) in groups.iter().take(MAX_FINDINGS) {
        let _ = writeln!(
            out,
            "- **{}** {} on {} ({}): {}  \n  next: {}",
            if f.is_warning() { "warn" } else { "fail" },
            code(&f.code),
            escape_cell(&scope_ranges(scopes)),
            code(&f.test_id),
            escape_cell(&f.message),
            escape_cell(&f.next_step)
        );
    }
    if groups.len() > MAX_FINDINGS {
        let _ = writeln!(
            out,
            "- and {} more in the reports",
            groups.len() - MAX_FINDINGS
        );
    }
}

/// Appends the summary to $GITHUB_STEP_SUMMARY (when set and not empty)
/// and prints the annotations; an error names the summary file. The
/// summary goes through the report writer's rules
/// ([`rocgate_harness::atomic::append`]): a planted link is not followed, a
/// FIFO nobody reads fails at once instead of blocking the run.
pub fn publish(publication: &Publication) -> Result<(), String> {
    for line in &publication.annotations {
        outln!("{line}");
    }
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let path = Path::new(&path);
    rocgate_harness::atomic::append(path, publication.summary.as_bytes()).map_err(|e| {
        format!(
            "GitHub job summary not written to {} ($GITHUB_STEP_SUMMARY): {e}",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_commands_are_escaped_as_the_toolkit_does() {
        assert_eq!(escape_data("50% off\r\nnext"), "50%25 off%0D%0Anext");
        assert_eq!(escape_property("a:b,c%"), "a%3Ab%2Cc%25");
    }
}
