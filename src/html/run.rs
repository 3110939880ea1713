//! One run as a page: the likely cause and next step on top, the GPUs x
//! layers grid with the finding code in each faulty cell, measurements as
//! bars against their floors, identity and versions, and every check's
//! details.

use super::{bar, class_of, legend, number, page, prose};
use crate::reports::{Presented, node_property};
use crate::ui::fold::{VersionRow, folded_versions};
use crate::ui::ladder::{concerns, folded_rows, layer_cell, layer_fault};
use maud::{Markup, html};
use rocgate_harness::doctor::Diagnosis;
use rocgate_harness::{CheckResult, Layer, Metric, RunReport, Scope, Status};
use rocgate_suites::stack::IDENTITY;
use std::collections::{BTreeMap, BTreeSet};

/// The page for a run.
pub fn run_page(run: &Presented<'_>) -> String {
    let (report, diagnosis) = (run.report, &run.diagnosis);
    let (node, versions) = (&run.node, &run.versions);
    let host = node_property(node, IDENTITY.host).unwrap_or("this node");
    let decision = &run.decision;
    let verdict = rocgate::decision::headline(report, decision);
    let verdict_class = match decision.health {
        _ if report.interrupted.is_some() => "unverif",
        rocgate::decision::Health::Healthy if decision.warnings > 0 => "warn",
        rocgate::decision::Health::Healthy => "pass",
        rocgate::decision::Health::Unhealthy => "fail",
        rocgate::decision::Health::Unknown => "unverif",
    };
    let title = format!("rocgate {verdict} on {host}");
    let body = html! {
        header {
            h1 {
                "rocgate "
                span.verdict.(verdict_class) { (verdict) }
                " on " (host)
            }
            p.meta {
                (report.tier) " tier · started " (report.started_at.format("%Y-%m-%d %H:%M:%S %z"))
                " · " (elapsed(report.duration)) " · "
                (counts(report))
                @if report.strict { " · --strict" }
            }
        }
        (cause(report, diagnosis))
        h2 { "GPUs by layer" }
        (grid(report))
        (legend(&[
            ("pass", "every check passed"),
            ("FAIL", "a failure, timeout or crash: the node is not fit"),
            ("warn", "worth fixing; the node works"),
            ("waived", "the site accepts what was found"),
            ("blocked", "a layer below failed"),
            ("unverif", "a check could not look"),
            ("skip", "not applicable here"),
        ]))
        (metrics(report))
        (matrices(report))
        (super::telemetry::telemetry(report, &|r: &CheckResult| identity_line(report, r.scope)))
        (identity(report, node, versions))
        h2 { "Checks" }
        @for scope in report.scope_list() {
            (checks(report, scope))
        }
    };
    page(&title, body)
}

/// A run's or check's wall time: milliseconds under a second.
fn elapsed(d: std::time::Duration) -> String {
    match d.as_secs_f64() {
        s if s < 1.0 => format!("{:.1} ms", s * 1e3),
        s => format!("{s:.1} s"),
    }
}

/// `N checks: a pass, b fail, ...` for the statuses that occurred.
fn counts(report: &RunReport) -> String {
    let parts: Vec<String> = Status::ALL
        .into_iter()
        .map(|s| (s, report.count(s)))
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    format!("{} checks: {}", report.results.len(), parts.join(", "))
}

/// `gpu3 · 0000:65:00.0 · AMD Instinct MI300X · gfx942`.
fn identity_line(report: &RunReport, scope: Scope) -> String {
    let info = report.scope_info(scope);
    [IDENTITY.address, "product", "gfx_target"]
        .into_iter()
        .filter_map(|k| info.get(k))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The box on top: what broke first and what to do, or that nothing did.
fn cause(report: &RunReport, diagnosis: &Diagnosis) -> Markup {
    let unverified = report.unverified();
    html! {
        @if let Some(f) = &diagnosis.likely_cause {
            section.cause.(if f.is_warning() { "unsure" } else { "stop" }) {
                @if f.is_warning() {
                    p { strong { "Nothing failed; the first warning is in layer " } (f.layer) }
                } @else {
                    p { strong { "First failing layer: " } (f.layer) }
                }
                p {
                    strong { (if f.is_warning() { "Warning: " } else { "Likely cause: " }) } code { (f.code) } " on " (f.scope.label())
                    @let ident = identity_line(report, f.scope);
                    @if !ident.is_empty() { " (" (ident) ")" }
                    ": " (f.message)
                }
                p.next { "Next step: " (prose(&f.next_step)) }
                @if diagnosis.findings.len() > 1 {
                    p { (diagnosis.findings.len() - 1) " more findings below, bottom-up." }
                }
            }
        } @else if !unverified.is_empty() {
            section.cause.unsure {
                p { strong { "No fault found, but " (unverified.len()) " checks could not look:" } }
                ul {
                    @for r in unverified.iter().take(10) {
                        li { a href=(format!("#{}", r.test_id)) { code { (r.test_id) } } ": " (r.message) }
                    }
                }
                p.next { "Next step: give rocgate what those checks need (see each one), or run with --strict to fail on them." }
            }
        } @else {
            section.cause.ok { p { strong { "Every layer passed on every GPU." } } }
        }
        @if !diagnosis.waived.is_empty() {
            section.cause.waived {
                p { strong { "Waived by the site (" (diagnosis.waived.len()) "):" } }
                ul {
                    @for f in diagnosis.waived.iter().take(10) {
                        li {
                            a href=(format!("#{}", f.test_id)) { code { (f.code) } } " on " (f.scope.label())
                            @if let Some(w) = &f.waiver { ": " (w.reason) " (" (w.source) ")" }
                        }
                    }
                }
            }
        }
        @if let Some(why) = &report.interrupted {
            section.cause.unsure { p { strong { "The run was interrupted: " } (why) } }
        }
    }
}

/// The grid: a row per scope (a device's partitions that agree folded into
/// one row, as the ladder folds them), a column per layer, coloured by the
/// worst result, the finding code in a faulty cell, each cell linking to
/// the check that decided it.
fn grid(report: &RunReport) -> Markup {
    let layers = report.layers();
    html! {
        div.scroll {
            table.grid #grid {
                thead {
                    tr {
                        th { "scope" }
                        th { "identity" }
                        @for l in &layers { th { (l) } }
                    }
                }
                tbody {
                    @for (label, scopes, tail) in folded_rows(report) {
                        @let Some(&scope) = scopes.first() else { continue };
                        tr {
                            th { a href=(format!("#scope-{}", scope.label())) { (label) } }
                            td.ident {
                                @if scopes.len() > 1 { (tail) } @else { (identity_line(report, scope)) }
                            }
                            @for &layer in &layers { (cell(report, scope, layer)) }
                        }
                    }
                }
            }
        }
    }
}

fn cell(report: &RunReport, scope: Scope, layer: Layer) -> Markup {
    let text = layer_cell(report, scope, layer);
    let fault = layer_fault(report, scope, layer);
    let first = report
        .results
        .iter()
        .find(|r| concerns(r, scope) && r.layer == layer);
    let class = class_of(text);
    let shown = fault
        .and_then(|r| r.finding.as_ref().map(|f| f.code.as_str()))
        .unwrap_or(text);
    let decided_by = fault.or(first);
    html! {
        td.cell.(class) title=(decided_by.map(|r| format!("{}: {}", r.test_id, r.message)).unwrap_or_default()) {
            @match decided_by {
                Some(r) => a href=(format!("#{}", r.test_id)) { (shown) },
                None => "-",
            }
        }
    }
}

/// Every measurement, one row per check and metric with a column per
/// scope, so a slow GPU stands out beside its peers. Rates (GB/s,
/// TFLOP/s) and values judged against a floor get a bar; bars of one row
/// share a scale, and a floor is drawn as a mark.
fn metrics(report: &RunReport) -> Markup {
    type Row<'a> = BTreeMap<Scope, (&'a CheckResult, &'a Metric)>;
    // Rows in the order the checks ran: bottom-up through the layers.
    let mut rows: Vec<((&str, &str, &str), Row<'_>)> = Vec::new();
    for r in &report.results {
        // Measurements between two scopes are drawn as matrices instead.
        for m in r.metrics.iter().filter(|m| m.between.is_none()) {
            let key = (r.check.as_str(), m.name.as_str(), m.unit.as_str());
            let at = match rows.iter().position(|(k, _)| *k == key) {
                Some(at) => at,
                None => {
                    rows.push((key, Row::new()));
                    rows.len() - 1
                }
            };
            rows[at].1.insert(r.scope, (r, m));
        }
    }
    if rows.is_empty() {
        return html! {};
    }
    let scopes: Vec<Scope> = report
        .scope_list()
        .into_iter()
        .filter(|s| rows.iter().any(|(_, row)| row.contains_key(s)))
        .collect();
    html! {
        h2 { "Measurements" }
        div.scroll { table.metrics {
            thead {
                tr {
                    th { "check" } th { "metric" } th { "floor" }
                    @for s in &scopes { th { (s.label()) } }
                }
            }
            tbody {
                @for ((check, name, unit), row) in &rows {
                    @let floors: BTreeSet<String> = row.values().filter_map(|(_, m)| m.floor).map(number).collect();
                    @let drawn = !floors.is_empty() || unit.ends_with("/s");
                    @let scale = row.values().map(|(_, m)| m.value.max(m.floor.unwrap_or(0.0))).filter(|v| v.is_finite()).fold(0.0, f64::max) * 1.1;
                    tr {
                        td { code { (check) } }
                        td { (name) " (" (unit) ")" }
                        td.num { (floors.into_iter().collect::<Vec<_>>().join(", ")) }
                        @for s in &scopes {
                            @match row.get(s) {
                                Some((r, m)) => td.num title=(r.test_id) {
                                    a href=(format!("#{}", r.test_id)) { (quantity(m.value, unit)) }
                                    @if drawn { br; (bar(m.value, m.floor, scale)) }
                                },
                                None => td {},
                            }
                        }
                    }
                }
            }
        } }
    }
}

/// Every measurement taken between two scopes (peer-to-peer bandwidth), a
/// matrix per check and family: rows where it starts, columns where it
/// ends, cells below their floor marked as failures.
fn matrices(report: &RunReport) -> Markup {
    html! {
        @for r in &report.results {
            @for m in rocgate_harness::pair_grid::pair_grids(&r.metrics) {
                h2 { "Between GPUs: " (m.family) " (" (m.unit) ")" }
                p { "From the row to the column, measured by "
                    a href=(format!("#{}", r.test_id)) { code { (r.test_id) } }
                    "; a red cell is below the floor of its link." }
                div.scroll { table.matrix {
                    thead { tr { th { "from \\ to" } @for to in &m.scopes { th { (to) } } } }
                    tbody {
                        @for from in &m.scopes {
                            tr {
                                th { (from) }
                                @for to in &m.scopes {
                                    @match m.cell(from, to) {
                                        _ if from == to => td.num { "-" },
                                        Some(c) if c.below_floor() => td.num.fail title=(format!("floor {}", c.floor.map(number).unwrap_or_default())) { (number(c.value)) },
                                        Some(c) if c.floor.is_some() => td.num.pass { (number(c.value)) },
                                        Some(c) => td.num title="no floor" { (number(c.value)) },
                                        None => td.num { "." },
                                    }
                                }
                            }
                        }
                    }
                } }
            }
        }
    }
}

/// A measured value in its unit as people read it: byte counts in GiB.
fn quantity(value: f64, unit: &str) -> String {
    match unit {
        "bytes" if value >= f64::from(1u32 << 30) => {
            format!("{} GiB", number(value / f64::from(1u32 << 30)))
        }
        _ => number(value),
    }
}

/// The node's properties, then the versions: each GPU component once for
/// the GPUs that agree, a row per value (marked) where they do not.
fn identity(
    report: &RunReport,
    node: &[(String, String)],
    versions: &BTreeMap<String, BTreeMap<String, String>>,
) -> Markup {
    let rows = folded_versions(versions);
    html! {
        h2 { "Node and versions" }
        table.node {
            @for (k, v) in node { tr { th { (k) } td.mono { (v) } } }
        }
        @if !rows.is_empty() {
            h3 { "Versions" }
            div.scroll { table.versions {
                thead { tr { th { "component" } th { "scopes" } th { "version" } } }
                tbody {
                    @for VersionRow { scopes, component, version, differs } in &rows {
                        tr.differs[*differs] {
                            th { (component) }
                            td { (scopes) }
                            td.mono {
                                (version)
                                @if *differs { " " span.badge.warn { "differs" } }
                            }
                        }
                    }
                }
            } }
        }
        @let gpus: Vec<Scope> = report.scope_list().into_iter().filter(|s| *s != Scope::Node).collect();
        @if !gpus.is_empty() {
            h3 { "GPUs" }
            div.scroll { table.gpus {
                @for s in gpus {
                    tr {
                        th { (s.label()) }
                        // Versions are in the table above; the rest is identity.
                        @let known = versions.get(&s.label());
                        td.mono {
                            @for (k, v) in report.scope_info(s).properties {
                                @if known.is_none_or(|vs| !vs.contains_key(&k)) { (k) "=" (v) " " }
                            }
                        }
                    }
                }
            } }
        }
    }
}

/// One scope's checks, each in a `<details>` (open when it found a fault).
fn checks(report: &RunReport, scope: Scope) -> Markup {
    let mine: Vec<&CheckResult> = report.results.iter().filter(|r| r.scope == scope).collect();
    html! {
        section id=(format!("scope-{}", scope.label())) {
            h3 {
                (scope.label())
                @let ident = identity_line(report, scope);
                @if !ident.is_empty() { " · " (ident) }
            }
            @for r in mine { (check(r)) }
        }
    }
}

fn check(r: &CheckResult) -> Markup {
    let shown = if r.waived() {
        "waived"
    } else {
        r.status.as_str()
    };
    html! {
        details id=(r.test_id) open[r.is_fault() || r.is_warning()] {
            summary {
                span.badge.(class_of(shown)) { (shown) }
                code { (r.test_id) } " " (r.message)
            }
            div {
                @if let Some(f) = &r.finding {
                    p { strong { "Finding: " } code { (f.code) } " (" (f.severity) ") " (prose(&f.message)) }
                    p { strong { "Next step: " } (prose(&f.next_step)) }
                }
                @if let Some(w) = &r.waiver {
                    p {
                        strong { (if w.expired { "Waiver expired: " } else { "Waived: " }) }
                        (w.reason)
                        @if let Some(d) = &w.expires { " (until " (d) ")" }
                        " · " (w.source)
                    }
                }
                @if let Some(reason) = r.skip_reason { p { "Skipped: " (reason.as_str()) } }
                @if let Some(root) = &r.blocked_by {
                    p { "Blocked by " a href=(format!("#{root}")) { code { (root) } } }
                }
                p.meta { "layer " (r.layer) " · " (elapsed(r.duration)) }
                @if !r.facts.is_empty() {
                    table { @for (k, v) in &r.facts { tr { th { (k) } td.mono { (v) } } } }
                }
                @if !r.output.is_empty() { pre { (r.output) } }
            }
        }
    }
}
