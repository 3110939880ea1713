//! A fleet as a page: nodes x layers coloured as each node's run ended,
//! the failed nodes first, filters by standing and by code, the failures
//! and the warnings counted by code apart, the nodes to drain, drift and
//! outliers (`fleet_spread.rs`), what changed since the previous fleet run,
//! and the reports that contradict themselves or could not be read. Every string
//! comes from a report and goes through maud's `(...)`, which escapes `&`,
//! `<`, `>` and `"` in text and attributes alike (maud 0.27,
//! src/escape.rs).
//!
//! The filters need no script (the page's policy forbids any): each is a
//! radio button, and a rule of the page's own style sheet hides the rows
//! that do not match the checked one (`:has()`, in every browser since
//! 2023). Without `:has()` every row shows, which is the page unfiltered.

use super::{bar, class_of, legend, page};
use maud::{Markup, PreEscaped, html};
use rocgate_harness::fleet::{Fleet, FleetNode};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The standings a node can have, as the filters name them.
const STANDINGS: [(&str, &str); 3] = [
    ("failed", "failed"),
    ("warned", "passed with a warning"),
    ("passed", "passed"),
];

/// The page for `fleet`.
pub fn fleet_page(fleet: &Fleet) -> String {
    let title = fleet.title();
    let most = fleet.codes.values().copied().max().unwrap_or(0) as f64;
    let warnings = fleet.warning_codes();
    // Every code a node shows, failure or warning, gets a filter; its
    // index names the filter and the rows it keeps.
    let codes: Vec<&str> = fleet
        .codes
        .keys()
        .map(String::as_str)
        .chain(warnings.keys().copied())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let code_index: BTreeMap<&str, usize> =
        codes.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let body = html! {
        h1 { (title) }
        p.meta { "Failed nodes first, then those that passed with a warning; report ages as of " (fleet.as_of) "." }
        style { (PreEscaped(filter_rules(codes.len()))) }
        h2 { "Nodes by layer" }
        (filters(fleet, &codes))
        div.scroll {
            table.grid.fleet #grid {
                thead {
                    tr {
                        th { "node" }
                        @for l in &fleet.layers { th { (l) } }
                        th { "GPU" }
                        th { "GPUs" }
                        th { "tier" }
                        th { "rocgate" }
                        th { "age" }
                    }
                }
                tbody {
                    @for n in &fleet.nodes {
                        @let code_class = n.code.as_deref().and_then(|c| code_index.get(c)).map(|i| format!("code-{i}"));
                        tr id=(anchor(n)) class=(format!("{} {}", n.standing(), code_class.unwrap_or_default())) {
                            th title=(n.file) {
                                @match &n.page {
                                    Some(href) => a href=(href) { (n.node) },
                                    None => (n.node),
                                }
                                // A short mark keeps the grid narrow; what it
                                // is shows on hover and in the sections below.
                                @for a in n.apart() {
                                    " " span.meta title=(a) { (a.split(' ').next().unwrap_or_default()) }
                                }
                            }
                            @for l in &fleet.layers { (cell(n, l)) }
                            td.ident { (n.gpu()) }
                            td.num { (n.gpu_count()) }
                            td { (n.tier) }
                            td.ident { (n.tool.strip_prefix("rocgate ").unwrap_or(&n.tool)) }
                            td.num title=(n.finished_at.as_deref().unwrap_or("the report does not say when it ran")) { (n.age()) }
                        }
                    }
                }
            }
        }
        (legend(&[
            ("pass", "every check passed"),
            ("fail", "a fault stops the stack"),
            ("warn", "a warning: the node works"),
            ("blocked", "a layer below failed"),
            ("skip", "nothing ran or applied"),
        ]))
        @if !fleet.codes.is_empty() {
            h2 { "Failures by code" }
            (code_table(fleet.codes.iter().map(|(c, n)| (c.as_str(), *n)), most))
        }
        @if !warnings.is_empty() {
            h2 { "Warnings by code (these nodes passed)" }
            (code_table(warnings.iter().map(|(c, n)| (*c, *n)), most.max(warnings.values().copied().max().unwrap_or(0) as f64)))
        }
        @let drain: Vec<_> = fleet.to_drain().collect();
        @if !drain.is_empty() {
            h2 { "Nodes to drain" }
            ul {
                @for n in drain {
                    li { a href=(format!("#{}", anchor(n))) { strong { (n.node) } } ": " code { (n.code.as_deref().unwrap_or("?")) } " on " (n.gpu()) }
                }
            }
        }
        (super::fleet_spread::drift(fleet))
        (super::fleet_spread::outliers(fleet))
        @if let Some(since) = &fleet.since {
            h2 { "Since the previous fleet run" }
            p.meta { (since.previous_nodes) " nodes, as of " (since.previous_as_of) "." }
            @if since.is_empty() { p { "Nothing changed." } }
            ul {
                @for (what, list) in [("newly failing", &since.newly_failing), ("recovered", &since.recovered), ("newly drifting", &since.newly_drifting), ("new outliers", &since.new_outliers)] {
                    @if !list.is_empty() {
                        li { strong { (what) } " (" (list.len()) "): "
                            @for (i, c) in list.iter().take(50).enumerate() {
                                @if i > 0 { ", " }
                                (c.node) " (" (c.now) "; was " (c.before) ")"
                            }
                        }
                    }
                }
                @for (what, list) in [("gone", &since.gone), ("new", &since.new)] {
                    @if !list.is_empty() {
                        li { strong { (what) } " (" (list.len()) "): " (list.iter().take(50).cloned().collect::<Vec<_>>().join(", ")) }
                    }
                }
            }
        }
        @let disagreeing: Vec<_> = fleet.disagreeing().collect();
        @if !disagreeing.is_empty() {
            h2 { "Reports that contradict their results (counted failed)" }
            ul {
                @for (n, why) in disagreeing {
                    li { a href=(format!("#{}", anchor(n))) { strong { (n.node) } } " (" (n.file) "): " (why) }
                }
            }
        }
        @if !fleet.not_read.is_empty() {
            h2 { "Reports not read (their nodes are not judged)" }
            ul {
                @for r in &fleet.not_read {
                    li { strong { (r.file) } ": " (r.why) }
                }
            }
        }
    };
    page(&title, body)
}

/// A node's layer cell: the layer that stopped it shows its code.
fn cell(n: &FleetNode, layer: &str) -> Markup {
    let text = n.layers.get(layer).copied().unwrap_or("-");
    let shown = match (&n.code, &n.first_failing_layer) {
        (Some(code), Some(first)) if first == layer => code.as_str(),
        _ => text,
    };
    html! { td.cell.(class_of(text)) { span { (shown) } } }
}

/// The radio buttons that filter the grid: every node, each standing with
/// its count, each code with its count.
fn filters(fleet: &Fleet, codes: &[&str]) -> Markup {
    let count = |standing: &str| {
        fleet
            .nodes
            .iter()
            .filter(|n| n.standing() == standing)
            .count()
    };
    let with_code = |code: &str| {
        fleet
            .nodes
            .iter()
            .filter(|n| n.code.as_deref() == Some(code))
            .count()
    };
    html! {
        form.filters aria-label="show" {
            "Show: "
            label { input type="radio" name="show" id="show-all" checked; " all (" (fleet.nodes.len()) ")" }
            @for (standing, words) in STANDINGS {
                @let n = count(standing);
                @if n > 0 {
                    label { input type="radio" name="show" id=(format!("show-{standing}")); " " (words) " (" (n) ")" }
                }
            }
            @for (i, code) in codes.iter().enumerate() {
                label { input type="radio" name="show" id=(format!("show-code-{i}")); " " code { (code) } " (" (with_code(code)) ")" }
            }
        }
    }
}

/// The style rules behind [`filters`]: a checked filter hides the grid's
/// other rows.
fn filter_rules(codes: usize) -> String {
    let mut css = String::new();
    for (standing, _) in STANDINGS {
        let _ = writeln!(
            css,
            "body:has(#show-{standing}:checked) #grid tbody tr:not(.{standing}) {{ display: none; }}"
        );
    }
    for i in 0..codes {
        let _ = writeln!(
            css,
            "body:has(#show-code-{i}:checked) #grid tbody tr:not(.code-{i}) {{ display: none; }}"
        );
    }
    css
}

/// A table of codes with how many nodes show each, and a bar.
fn code_table<'a>(codes: impl Iterator<Item = (&'a str, usize)>, most: f64) -> Markup {
    html! {
        table.codes {
            thead { tr { th { "code" } th { "nodes" } th {} } }
            tbody {
                @for (code, count) in codes {
                    tr {
                        td { code { (code) } }
                        td.num { (count) }
                        td { (bar(count as f64, None, most)) }
                    }
                }
            }
        }
    }
}

/// The node's row anchor (`node-gpu-17`), from its name with anything but
/// letters, digits, `-` and `_` as `_`, so the drain list can link to it.
fn anchor(n: &FleetNode) -> String {
    let safe: String = n
        .node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("node-{safe}")
}
