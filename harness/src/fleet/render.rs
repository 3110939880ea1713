//! The fleet as markdown: for people and CI job summaries.

use super::diff::{Change, FleetDiff};
use super::{Fleet, FleetNode};
use crate::markdown;
use std::fmt::Write as _;

/// The most nodes named per component, metric or change in markdown (the
/// JSON names them all).
const LISTED: usize = 20;

/// `items` as `a, b, c and 17 more`.
fn listed<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let mut shown: Vec<String> = items.iter().take(LISTED).map(show).collect();
    if items.len() > LISTED {
        shown.push(format!("and {} more", items.len() - LISTED));
    }
    shown.join(", ")
}

/// A value as the fleet's tables print it: 3 significant digits or more.
pub(crate) fn value(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        format!("{v}")
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn since_markdown(since: &FleetDiff, out: &mut String) {
    let cell = markdown::cell;
    let _ = writeln!(
        out,
        "\n### Since the previous fleet run ({} nodes, as of {})\n",
        since.previous_nodes,
        cell(&since.previous_as_of)
    );
    if since.is_empty() {
        out.push_str("Nothing changed.\n");
        return;
    }
    let changes = |what: &str, list: &[Change], out: &mut String| {
        if !list.is_empty() {
            let text = listed(list, |c| {
                format!(
                    "{} ({}; was {})",
                    cell(&c.node),
                    cell(&c.now),
                    cell(&c.before)
                )
            });
            let _ = writeln!(out, "- {what} ({}): {text}", list.len());
        }
    };
    changes("newly failing", &since.newly_failing, out);
    changes("recovered", &since.recovered, out);
    changes("newly drifting", &since.newly_drifting, out);
    changes("new outliers", &since.new_outliers, out);
    for (what, list) in [("gone", &since.gone), ("new", &since.new)] {
        if !list.is_empty() {
            let _ = writeln!(
                out,
                "- {what} ({}): {}",
                list.len(),
                listed(list, |n| cell(n))
            );
        }
    }
}

impl Fleet {
    /// Markdown: the table, the counts per code, the nodes to drain, the
    /// reports that contradict themselves and those not read. Every string
    /// a report carries is escaped ([`markdown::cell`]).
    pub fn markdown(&self) -> String {
        let cell = markdown::cell;
        let mut out = format!(
            "## {}\n\nFailed nodes first; report ages as of {}.\n\n",
            self.title(),
            self.as_of
        );
        let mut header = vec!["node".to_string()];
        header.extend(self.layers.iter().map(|l| cell(l)));
        header.extend(
            [
                "first failing layer",
                "code",
                "GPU",
                "GPUs",
                "tier",
                "rocgate",
                "age",
            ]
            .map(String::from),
        );
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for n in &self.nodes {
            let mut row = vec![cell(&n.node)];
            row.extend(
                self.layers
                    .iter()
                    .map(|l| match n.layers.get(l).copied().unwrap_or("-") {
                        "fail" => "**fail**".to_string(),
                        other => cell(other),
                    }),
            );
            // A node that passed has no failing layer: its code is a
            // warning, and says so.
            if n.passed {
                row.push(String::new());
                let mut said: Vec<String> = n
                    .code
                    .as_deref()
                    .map(|c| format!("warn {}", markdown::code(c)))
                    .into_iter()
                    .collect();
                said.extend(n.apart().iter().map(|a| cell(a)));
                row.push(said.join("; "));
            } else {
                row.push(cell(n.first_failing_layer.as_deref().unwrap_or_default()));
                row.push(n.code.as_deref().map(markdown::code).unwrap_or_default());
            }
            row.push(cell(&n.gpu()));
            row.push(cell(&n.gpu_count()));
            row.push(cell(&n.tier));
            row.push(cell(n.tool.strip_prefix("rocgate ").unwrap_or(&n.tool)));
            row.push(cell(&n.age()));
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.codes.is_empty() {
            out.push_str("\n### Failures by code\n\n| code | nodes |\n|---|---|\n");
            for (code, n) in &self.codes {
                let _ = writeln!(out, "| {} | {n} |", markdown::code(code));
            }
        }
        let warnings = self.warning_codes();
        if !warnings.is_empty() {
            out.push_str(
                "\n### Warnings by code (these nodes passed)\n\n| code | nodes |\n|---|---|\n",
            );
            for (code, n) in &warnings {
                let _ = writeln!(out, "| {} | {n} |", markdown::code(code));
            }
        }
        let drain: Vec<&FleetNode> = self.to_drain().collect();
        if !drain.is_empty() {
            out.push_str("\n### Nodes to drain\n\n");
            for n in drain {
                let _ = writeln!(
                    out,
                    "- {}: {} on {}",
                    cell(&n.node),
                    markdown::code(n.code.as_deref().unwrap_or("?")),
                    cell(&n.gpu())
                );
            }
        }
        self.drift_markdown(&mut out);
        self.outliers_markdown(&mut out);
        if let Some(since) = &self.since {
            since_markdown(since, &mut out);
        }
        let disagreeing: Vec<_> = self.disagreeing().collect();
        if !disagreeing.is_empty() {
            out.push_str("\n### Reports that contradict their results (counted failed)\n\n");
            for (n, why) in disagreeing {
                let _ = writeln!(
                    out,
                    "- {} ({}): {}",
                    cell(&n.node),
                    cell(&n.file),
                    cell(why)
                );
            }
        }
        if !self.not_read.is_empty() {
            out.push_str("\n### Reports not read (their nodes are not judged)\n\n");
            for r in &self.not_read {
                let _ = writeln!(out, "- {}: {}", cell(&r.file), cell(&r.why));
            }
        }
        out
    }
}

impl Fleet {
    fn drift_markdown(&self, out: &mut String) {
        let cell = markdown::cell;
        if self.drift.differing.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n### Drift from the fleet's majority ({} of {} components differ)\n",
            self.drift.differing.len(),
            self.drift.components
        );
        out.push_str("| component | fleet's majority | nodes that differ |\n|---|---|---|\n");
        for c in &self.drift.differing {
            let name = if c.expected {
                format!("{} (expected mixed)", markdown::code(&c.component))
            } else {
                markdown::code(&c.component)
            };
            let _ = writeln!(
                out,
                "| {name} | {} ({} of {} nodes) | {} |",
                cell(&c.majority),
                c.majority_nodes,
                c.nodes,
                listed(&c.differ, |d| format!(
                    "{}: {}",
                    cell(&d.node),
                    cell(&d.value)
                ))
            );
        }
    }

    fn outliers_markdown(&self, out: &mut String) {
        let cell = markdown::cell;
        let with: Vec<_> = self
            .metrics
            .iter()
            .filter(|m| !m.outliers.is_empty())
            .collect();
        if with.is_empty() {
            return;
        }
        let total: usize = with.iter().map(|m| m.outliers.len()).sum();
        let _ = writeln!(
            out,
            "\n### Outliers ({total}: far on the bad side of the fleet, whatever their floors)\n"
        );
        out.push_str(
            "| metric | fleet median (MAD), healthy nodes | node | where | value | off the median |\n|---|---|---|---|---|---|\n",
        );
        for m in with {
            for o in m.outliers.iter().take(LISTED) {
                let _ = writeln!(
                    out,
                    "| {} | {} ({}) {}, {} nodes | {} | {} | {} | {} |",
                    cell(&m.title()),
                    value(m.healthy.median),
                    value(m.healthy.mad),
                    cell(&m.unit),
                    m.healthy.nodes,
                    cell(&o.node),
                    cell(&o.subject),
                    value(o.value),
                    o.off_median
                        .map_or("from 0".to_string(), |s| format!("{:+.1}%", s * 100.0))
                );
            }
            if m.outliers.len() > LISTED {
                let _ = writeln!(
                    out,
                    "| {} | and {} more |  |  |  |  |",
                    cell(&m.title()),
                    m.outliers.len() - LISTED
                );
            }
        }
    }
}
