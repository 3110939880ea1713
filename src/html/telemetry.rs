//! What the burn-in sampled, drawn: per GPU, its temperatures, power and
//! graphics clock over the run as inline SVG lines, each with its limit
//! (the sensor's critical temperature, the power cap, the clock's highest
//! level) dashed beside it. No script: the page's policy allows none.

use super::number;
use maud::{Markup, html};
use rocgate_harness::{CheckResult, RunReport, Series};

const WIDTH: f64 = 320.0;
const HEIGHT: f64 = 110.0;
/// Room for the value axis's labels on the left and the time axis's below.
const LEFT: f64 = 34.0;
const BOTTOM: f64 = 14.0;
/// Room above the plot for the series' names.
const TOP: f64 = 14.0;

/// Whether a series is a GPU's telemetry (drawn in the GPU table) rather
/// than a measure of the work itself (an all-reduce's bandwidth).
fn is_telemetry(s: &Series) -> bool {
    s.name.starts_with("temp_") || s.name == "power" || s.name == "sclk" || s.name == "mclk"
}

/// The section, or nothing when no result sampled anything.
pub(super) fn telemetry(report: &RunReport, identity: &dyn Fn(&CheckResult) -> String) -> Markup {
    let sampled: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| r.series.iter().any(is_telemetry))
        .collect();
    // Each other series on its own row: the check, what it is, its plot.
    let measured: Vec<(&CheckResult, &Series)> = report
        .results
        .iter()
        .flat_map(|r| {
            r.series
                .iter()
                .filter(|s| !is_telemetry(s))
                .map(move |s| (r, s))
        })
        .collect();
    if sampled.is_empty() && measured.is_empty() {
        return html! {};
    }
    fn group(r: &CheckResult, pick: fn(&Series) -> bool) -> Vec<&Series> {
        r.series.iter().filter(|s| pick(s)).collect()
    }
    html! {
        h2 { "Telemetry under load" }
        @if !sampled.is_empty() {
            p.meta {
                "Sampled about once a second while the burn-in loaded each GPU; "
                "dashed: the limit (the sensor's critical temperature, the power cap, the clock's highest level)."
            }
            div.scroll {
                table.telemetry {
                    thead { tr { th { "GPU" } th { "temperature (°C)" } th { "power (W)" } th { "graphics clock (MHz)" } } }
                    tbody {
                        @for r in &sampled {
                            tr {
                                th { (r.scope.label()) br; span.ident { (identity(r)) } }
                                td { (plot(&group(r, |s| s.name.starts_with("temp_")))) }
                                td { (plot(&group(r, |s| s.name == "power"))) }
                                td { (plot(&group(r, |s| s.name == "sclk"))) }
                            }
                        }
                    }
                }
            }
        }
        @if !measured.is_empty() {
            p.meta { "Measured through the burn-in, iteration by iteration." }
            div.scroll {
                table.telemetry {
                    thead { tr { th { "check" } th { "measure" } th { "over the run" } } }
                    tbody {
                        @for (r, s) in &measured {
                            tr {
                                th { (r.scope.label()) " " (r.check) }
                                td { (s.name) " (" (s.unit) ")" }
                                td { (plot(&[*s])) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One plot of `series` sharing their axes; empty when none has a point.
fn plot(series: &[&Series]) -> Markup {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let Some(t_end) = points().map(|p| p[0]).reduce(f64::max) else {
        return html! { span.none { "not read" } };
    };
    let values = points()
        .map(|p| p[1])
        .chain(series.iter().filter_map(|s| s.limit));
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // From zero, unless the values sit far from it (a clock in the
    // thousands): then from a little below the least.
    let lo = if lo >= 0.0 && lo < hi * 0.5 {
        0.0
    } else {
        lo - (hi - lo) * 0.05
    };
    let hi = if hi > lo {
        hi + (hi - lo) * 0.05
    } else {
        lo + 1.0
    };
    let t_end = t_end.max(1.0);
    let x = |t: f64| LEFT + t / t_end * (WIDTH - LEFT - 2.0);
    let y = |v: f64| TOP + (hi - v) / (hi - lo) * (HEIGHT - TOP - BOTTOM);
    let label = series
        .iter()
        .map(|s| match s.spread() {
            Some(sp) => format!(
                "{}: min {} / median {} / max {} {}{}",
                s.name,
                number(sp.min),
                number(sp.median),
                number(sp.max),
                s.unit,
                s.limit
                    .map_or_else(String::new, |l| format!(" (limit {})", number(l)))
            ),
            None => s.name.clone(),
        })
        .collect::<Vec<_>>()
        .join("; ");
    html! {
        svg.plot width=(WIDTH) height=(HEIGHT) viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-label=(label) {
            title { (label) }
            line.axis x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(HEIGHT - BOTTOM) {}
            line.axis x1=(LEFT) x2=(WIDTH - 2.0) y1=(HEIGHT - BOTTOM) y2=(HEIGHT - BOTTOM) {}
            text.tick x=(LEFT - 3.0) y=(TOP + 4.0) text-anchor="end" { (number(hi)) }
            text.tick x=(LEFT - 3.0) y=(HEIGHT - BOTTOM) text-anchor="end" { (number(lo)) }
            text.tick x=(LEFT) y=(HEIGHT - 2.0) { "0 s" }
            text.tick x=(WIDTH - 2.0) y=(HEIGHT - 2.0) text-anchor="end" { (crate::ui::span_text(t_end)) }
            @for (i, s) in series.iter().enumerate() {
                @if let Some(l) = s.limit {
                    line class=(format!("limit s{}", i % 4)) x1=(LEFT) x2=(WIDTH - 2.0)
                        y1=(format!("{:.1}", y(l))) y2=(format!("{:.1}", y(l))) {}
                }
                polyline class=(format!("line s{}", i % 4)) points=(
                    s.points
                        .iter()
                        .map(|p| format!("{:.1},{:.1}", x(p[0]), y(p[1])))
                        .collect::<Vec<_>>()
                        .join(" ")
                ) {}
                text class=(format!("key s{}", i % 4)) x=(LEFT + 4.0 + 80.0 * i as f64) y=(TOP - 4.0) {
                    (s.name.trim_start_matches("temp_"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_a_line_with_its_limit_and_no_point_is_no_plot() {
        let s = Series::new(
            "temp_junction",
            "C",
            Some(100.0),
            &[[0.0, 40.0], [30.0, 78.0], [60.0, 79.0]],
        );
        let svg = plot(&[&s]).into_string();
        assert!(svg.contains("<polyline class=\"line s0\""), "{svg}");
        assert!(svg.contains("class=\"limit s0\""), "{svg}");
        assert!(
            svg.contains("min 40 / median 78 / max 79 C (limit 100)"),
            "{svg}"
        );
        assert!(svg.contains("60 s"), "{svg}");
        let empty = Series::new("power", "W", None, &[]);
        assert!(plot(&[&empty]).into_string().contains("not read"));
        assert!(plot(&[]).into_string().contains("not read"));
    }
}
