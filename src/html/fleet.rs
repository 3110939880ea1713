//! A fleet as a page: nodes x layers coloured as each node's run ended,
//! the failures counted by code, the nodes to drain, and the reports that
//! contradict themselves or could not be read. Every string comes from a
//! report and goes through maud's `(...)`, which escapes `&`, `<`, `>`
//! and `"` in text and attributes alike (maud 0.27, src/escape.rs).

use super::{bar, class_of, legend, page};
use maud::html;
use rocgate_harness::fleet::Fleet;

/// The page for `fleet`.
pub fn fleet_page(fleet: &Fleet) -> String {
    let title = fleet.title();
    let most = fleet.codes.values().copied().max().unwrap_or(0) as f64;
    let body = html! {
        h1 { (title) }
        h2 { "Nodes by layer" }
        table.grid #grid {
            thead {
                tr {
                    th { "node" }
                    @for l in &fleet.layers { th { (l) } }
                    th { "GPU" }
                }
            }
            tbody {
                @for n in &fleet.nodes {
                    tr {
                        th title=(n.file) { (n.node) }
                        @for l in &fleet.layers {
                            @let text = n.layers.get(l).map_or("-", String::as_str);
                            // The layer that stopped the node shows its code.
                            @let shown = match (&n.code, &n.first_failing_layer) {
                                (Some(code), Some(first)) if first == l => code.as_str(),
                                _ => text,
                            };
                            td.cell.(class_of(text)) { span { (shown) } }
                        }
                        td.ident { (n.gpu()) }
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
            table.codes {
                thead { tr { th { "code" } th { "nodes" } th {} } }
                tbody {
                    @for (code, count) in &fleet.codes {
                        tr {
                            td { code { (code) } }
                            td.num { (count) }
                            td { (bar(*count as f64, None, most)) }
                        }
                    }
                }
            }
        }
        @let drain: Vec<_> = fleet.to_drain().collect();
        @if !drain.is_empty() {
            h2 { "Nodes to drain" }
            ul {
                @for n in drain {
                    li { strong { (n.node) } ": " code { (n.code.as_deref().unwrap_or("?")) } " on " (n.gpu()) }
                }
            }
        }
        @let disagreeing: Vec<_> = fleet.disagreeing().collect();
        @if !disagreeing.is_empty() {
            h2 { "Reports that contradict their results (counted failed)" }
            ul {
                @for (n, why) in disagreeing {
                    li { strong { (n.node) } " (" (n.file) "): " (why) }
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
