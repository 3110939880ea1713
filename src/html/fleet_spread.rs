//! The fleet page's drift and outliers: the components whose value is not
//! the same on every node, with the nodes that differ; and every metric
//! with outliers drawn as a histogram of the fleet's values (inline SVG, no
//! script), the healthy median marked and the outliers' bins in the fault
//! colour, beside the table of outliers.

use super::number;
use maud::{Markup, html};
use rocgate_harness::fleet::{Fleet, MetricSpread};

const WIDTH: f64 = 300.0;
const HEIGHT: f64 = 90.0;
/// Room for the value labels below the bars.
const BOTTOM: f64 = 14.0;
/// The most nodes named per component or metric (the JSON names them all).
const LISTED: usize = 50;

/// The drift section, or nothing when every node runs the same.
pub(super) fn drift(fleet: &Fleet) -> Markup {
    let d = &fleet.drift;
    if d.differing.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Drift from the fleet's majority" }
        p.meta { (d.differing.len()) " of " (d.components) " components differ across the fleet; a node that differs is warned of unless the site expects the component mixed (" code { "--mixed" } ", " code { "[fleet] mixed" } ")." }
        div.scroll {
            table.codes {
                thead { tr { th { "component" } th { "fleet's majority" } th { "nodes" } th { "nodes that differ" } } }
                tbody {
                    @for c in &d.differing {
                        tr {
                            td { code { (c.component) } @if c.expected { " (expected mixed)" } }
                            td.ident { (c.majority) }
                            td.num { (c.majority_nodes) " of " (c.nodes) }
                            td {
                                @for (i, n) in c.differ.iter().take(LISTED).enumerate() {
                                    @if i > 0 { ", " }
                                    strong { (n.node) } ": " span.ident { (n.value) }
                                }
                                @if c.differ.len() > LISTED { " and " (c.differ.len() - LISTED) " more" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The outliers section, or nothing when no metric has one.
pub(super) fn outliers(fleet: &Fleet) -> Markup {
    let with: Vec<&MetricSpread> = fleet
        .metrics
        .iter()
        .filter(|m| !m.outliers.is_empty())
        .collect();
    if with.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Outliers" }
        p.meta { "Values far on the bad side of the healthy nodes' median (robust: median and MAD), whatever their floors. The histogram holds every node's values; the line is the median, red bins hold outliers." }
        div.scroll {
            table.telemetry {
                thead { tr { th { "metric" } th { "distribution" } th { "outliers" } } }
                tbody {
                    @for m in with {
                        tr {
                            td {
                                strong { (m.metric) } br;
                                (m.model) @if !m.partition.is_empty() { " " (m.partition) } ", " (m.tier) br;
                                "median " (number(m.healthy.median)) " " (m.unit) ", MAD " (number(m.healthy.mad)) br;
                                (m.samples) " values, " (m.healthy.nodes) " healthy nodes"
                            }
                            td { (histogram(m)) }
                            td {
                                ul {
                                    @for o in m.outliers.iter().take(LISTED) {
                                        li {
                                            strong { (o.node) } " " span.ident { (o.subject) } ": " (number(o.value)) " " (m.unit)
                                            @if let Some(share) = o.off_median { " (" (format!("{:+.1}%", share * 100.0)) ")" }
                                        }
                                    }
                                    @if m.outliers.len() > LISTED { li { "and " (m.outliers.len() - LISTED) " more" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The metric's histogram: a bar per bin, those holding an outlier in the
/// fault colour, the median as a line, the range's ends labelled.
fn histogram(m: &MetricSpread) -> Markup {
    let bins = m.histogram.len().max(1);
    let tallest = m.histogram.iter().copied().max().unwrap_or(0).max(1) as f64;
    let span = m.max - m.min;
    let bin_of = |v: f64| {
        if span > 0.0 {
            (((v - m.min) / span * bins as f64) as usize).min(bins - 1)
        } else {
            0
        }
    };
    let outlying: std::collections::BTreeSet<usize> =
        m.outliers.iter().map(|o| bin_of(o.value)).collect();
    let w = WIDTH / bins as f64;
    let plot = HEIGHT - BOTTOM;
    let median_x = if span > 0.0 {
        (m.healthy.median - m.min) / span * WIDTH
    } else {
        WIDTH / 2.0
    };
    html! {
        svg.plot width=(WIDTH) height=(HEIGHT) viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
            aria-label=(format!("{} values of {} from {} to {} {}", m.samples, m.metric, number(m.min), number(m.max), m.unit)) {
            line.axis x1="0" y1=(plot) x2=(WIDTH) y2=(plot) {}
            @for (i, &count) in m.histogram.iter().enumerate() {
                @if count > 0 {
                    // One outlying GPU among hundreds would be a sliver on a
                    // linear scale: its bin stays tall enough to see.
                    @let least = if outlying.contains(&i) { 8.0 } else { 1.5 };
                    @let h = (count as f64 / tallest * (plot - 4.0)).max(least);
                    rect x=(format!("{:.1}", i as f64 * w + 0.5)) y=(format!("{:.1}", plot - h)) width=(format!("{:.1}", (w - 1.0).max(0.5))) height=(format!("{h:.1}"))
                        fill=(if outlying.contains(&i) { "var(--fail)" } else { "#0969da" }) {
                        title { (count) " values near " (number(m.min + (i as f64 + 0.5) * span / bins as f64)) " " (m.unit) }
                    }
                }
            }
            line.limit x1=(format!("{median_x:.1}")) y1="0" x2=(format!("{median_x:.1}")) y2=(plot) stroke="var(--ink)" {}
            text.tick x="0" y=(HEIGHT - 2.0) { (number(m.min)) }
            text.tick x=(WIDTH) y=(HEIGHT - 2.0) text-anchor="end" { (number(m.max)) " " (m.unit) }
        }
    }
}
