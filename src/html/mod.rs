//! HTML reports: one self-contained page for a run (`--html`) or a fleet
//! (`fleet report --format html`). Everything is inline (CSS, SVG bars); the
//! page has no script and its Content-Security-Policy forbids any request,
//! so it opens the same from a CI artifact, a mail or an air-gapped node.
//! Text is escaped by the templates (maud), never pasted.

mod fleet;
mod fleet_spread;
mod run;
mod telemetry;

pub use fleet::fleet_page;
pub use run::run_page;

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// The page's style sheet, inlined into every page.
const STYLE: &str = include_str!("style.css");

/// What the page may load: nothing but its own inline style and data
/// images. A browser enforces this, so a report can never call out.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// A complete page titled `title` around `body`.
fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(POLICY);
                meta name="viewport" content="width=device-width, initial-scale=1";
                // Without it a browser asks the server for /favicon.ico.
                link rel="icon" href="data:,";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                (body)
                footer {
                    "rocgate " (env!("CARGO_PKG_VERSION"))
                    " · a self-contained page: no script, no request to any address"
                }
            }
        }
    }
    .into_string()
}

/// The style class of a cell or badge whose text is `text`, as the ladder
/// and the fleet table write it (`pass`, `FAIL`, `unverif`, `warn`, `-`).
fn class_of(text: &str) -> &'static str {
    match text.to_ascii_lowercase().as_str() {
        "pass" => "pass",
        "fail" => "fail",
        "timeout" => "timeout",
        "crash" => "crash",
        "warn" => "warn",
        "blocked" => "blocked",
        "waived" => "waived",
        "unverif" | "unverifiable" => "unverif",
        "skip" | "skipped" => "skip",
        _ => "none",
    }
}

/// Text with its `backtick spans` as code, the way the terminal and the
/// GitHub summary show a command to paste; everything else stays text
/// (maud escapes it). An unmatched backtick is left as typed.
fn prose(text: &str) -> Markup {
    let parts: Vec<&str> = text.split('`').collect();
    // An even count of parts means an odd count of backticks: the last one
    // opens nothing and is shown.
    let closed = parts.len() % 2 == 1;
    html! {
        @for (i, part) in parts.iter().enumerate() {
            @if i % 2 == 1 && (closed || i + 1 < parts.len()) {
                code { (part) }
            } @else {
                @if i % 2 == 1 { "`" }
                (part)
            }
        }
    }
}

/// The legend of the grid's colours.
fn legend(entries: &[(&str, &str)]) -> Markup {
    html! {
        p.legend {
            @for (text, meaning) in entries {
                span class=(class_of(text)) { (text) } (meaning) " "
            }
        }
    }
}

/// A number as reports print measurements: an integral value (a count,
/// lanes, pages) as an integer; else three significant figures or so,
/// never in exponent form, so a small GEMM's 0.000512 TFLOP/s is not 0.000.
fn number(v: f64) -> String {
    let a = v.abs();
    if !a.is_finite() {
        return v.to_string();
    }
    if v.fract() == 0.0 && a < 1e15 {
        return format!("{v:.0}");
    }
    match a {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        a => {
            // Digits after the point for three significant ones.
            let lead = (-a.log10().floor()).clamp(1.0, 12.0);
            let digits = lead as usize + 2;
            format!("{v:.digits$}")
        }
    }
}

/// A small horizontal bar of `value` on a scale of `0..scale`, with a mark
/// at `floor` when the value was judged against one; red when below it.
fn bar(value: f64, floor: Option<f64>, scale: f64) -> Markup {
    const WIDTH: f64 = 100.0;
    if !(value.is_finite() && scale.is_finite() && scale > 0.0) {
        return html! {};
    }
    let x = |v: f64| (v / scale * WIDTH).clamp(0.0, WIDTH);
    let class = match floor {
        Some(f) if value < f => "value low",
        Some(_) => "value",
        None => "value plain",
    };
    let label = match floor {
        Some(f) => format!("{} against a floor of {}", number(value), number(f)),
        None => number(value),
    };
    html! {
        svg.bar width="100" height="14" viewBox="0 0 100 14" role="img" aria-label=(label) {
            title { (label) }
            rect.track x="0" y="3" width="100" height="8" {}
            rect class=(class) x="0" y="3" width=(format!("{:.1}", x(value))) height="8" {}
            @if let Some(f) = floor.filter(|f| f.is_finite()) {
                line.floor x1=(format!("{:.1}", x(f))) x2=(format!("{:.1}", x(f))) y1="0" y2="14" {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_below_its_floor_is_red_and_marks_the_floor() {
        let low = bar(50.0, Some(80.0), 100.0).into_string();
        assert!(low.contains("value low"), "{low}");
        assert!(low.contains(r#"x1="80.0""#), "{low}");
        let ok = bar(90.0, Some(80.0), 100.0).into_string();
        assert!(ok.contains(r#"class="value""#), "{ok}");
        assert!(!bar(90.0, None, 100.0).into_string().contains("line"));
    }

    #[test]
    fn a_bar_without_a_sane_scale_is_left_out_rather_than_drawn_wrong() {
        assert!(bar(f64::NAN, None, 1.0).into_string().is_empty());
        assert!(bar(1.0, None, 0.0).into_string().is_empty());
        assert_eq!(number(f64::INFINITY), "inf");
        assert_eq!(number(1234.5), "1234");
        assert_eq!(number(0.01234), "0.0123");
        assert_eq!(number(0.000512), "0.000512");
        assert_eq!(number(16.0), "16");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(8.34), "8.3");
    }

    #[test]
    fn backtick_spans_become_code_and_the_rest_stays_text() {
        let shown = prose("run `rocgate run --gpus 3` then <b>reboot</b>").into_string();
        assert_eq!(
            shown,
            "run <code>rocgate run --gpus 3</code> then &lt;b&gt;reboot&lt;/b&gt;"
        );
        assert_eq!(prose("a ` b").into_string(), "a ` b");
        assert_eq!(prose("`x` and ` y").into_string(), "<code>x</code> and ` y");
        assert_eq!(prose("").into_string(), "");
    }

    #[test]
    fn text_is_escaped_and_the_page_forbids_requests() {
        let page = page("<script>x</script>", html! { p { "a & b <i>" } });
        assert!(page.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(page.contains("a &amp; b &lt;i&gt;"));
        assert!(page.contains("default-src 'none'"));
        assert!(!page.contains("http://") && !page.contains("https://"));
    }
}
