//! Results and runs of any text, for property tests of the renderers.

use crate::model::{Scope, Tier, test_stack};
use crate::result::{CheckResult, RunReport, ScopeInfo};
use crate::verdict::{Finding, Severity, Status};
use proptest::prelude::*;
use std::time::Duration;

/// Text a report may be handed: anything a Rust string holds, with the
/// characters and sequences that break XML or JSON made likely.
pub(crate) fn text() -> BoxedStrategy<String> {
    joined(prop_oneof![
        any::<char>().prop_map(String::from),
        (0u32..0x20).prop_filter_map("control", |b| char::from_u32(b).map(String::from)),
        (0x7fu32..0xa0).prop_filter_map("C1", |b| char::from_u32(b).map(String::from)),
        Just("\u{FFFE}".to_string()),
        Just("\u{FFFF}".to_string()),
        Just("]]>".to_string()),
        Just("\"'".to_string()),
        Just("<&>;&amp;".to_string()),
        Just("\u{1b}[1;31m".to_string()),
        Just("\r\n\t ".to_string()),
        Just("::".to_string()),
    ])
}

/// Up to 12 of `parts`, one after the other.
pub(crate) fn joined(parts: impl Strategy<Value = String> + 'static) -> BoxedStrategy<String> {
    proptest::collection::vec(parts, 0..12)
        .prop_map(|parts| parts.concat())
        .boxed()
}

/// Text with no character that cleaning drops or XML normalises: no
/// control character (so no tab, newline or escape sequence either) and
/// no U+FFFE/U+FFFF, but markup, quotes and any other plane.
pub(crate) fn ordinary_text() -> BoxedStrategy<String> {
    joined(prop_oneof![
        any::<char>()
            .prop_filter("ordinary", |c| !c.is_control()
                && !matches!(c, '\u{FFFE}' | '\u{FFFF}'))
            .prop_map(String::from),
        Just("]]>".to_string()),
        Just("\"'".to_string()),
        Just("<&>;&amp;&#1;".to_string()),
        Just("::".to_string()),
        Just(" ".to_string()),
    ])
}

pub(crate) fn any_result(text: BoxedStrategy<String>) -> impl Strategy<Value = CheckResult> {
    (
        (
            text.clone(),
            text.clone(),
            text.clone(),
            text.clone(),
            text.clone(),
            text.clone(),
        ),
        (
            0usize..7,
            any::<bool>(),
            0u32..3,
            (-1_000_000i32..1_000_000).prop_map(f64::from),
        ),
        proptest::collection::vec((text.clone(), text), 0..3),
    )
        .prop_map(
            |((id, check, message, code, next, output), (status, waived, gpu, value), facts)| {
                let status = Status::ALL[status];
                CheckResult {
                    test_id: id,
                    check,
                    layer: test_stack::ALL[gpu as usize % test_stack::ALL.len()],
                    scope: if gpu == 0 {
                        Scope::Node
                    } else {
                        Scope::Gpu(gpu - 1)
                    },
                    status,
                    message: message.clone(),
                    finding: status.has_finding().then(|| {
                        Finding::new(
                            code.as_str(),
                            Severity::Fail,
                            message.as_str(),
                            next.as_str(),
                        )
                    }),
                    skip_reason: (status == Status::Skipped)
                        .then_some(crate::SkipReason::Unverifiable),
                    waiver: waived.then(|| crate::policy::WaiverNote {
                        reason: message.clone(),
                        expires: None,
                        expired: false,
                        source: next.clone(),
                    }),
                    blocked_by: (status == Status::Blocked).then(|| next.clone()),
                    duration: Duration::ZERO,
                    output: output.clone(),
                    metrics: vec![crate::verdict::Metric {
                        name: code,
                        value,
                        unit: next,
                        kind: None,
                        spread: None,
                        floor: Some(value),
                        between: None,
                    }],
                    facts: facts.into_iter().collect(),
                    series: vec![crate::verdict::Series::new(
                        "temp",
                        "C",
                        Some(value),
                        &[[0.0, value], [1.0, -value]],
                    )],
                }
            },
        )
}

/// A run over `results` with `props` as GPU 0's identity.
pub(crate) fn any_report(text: BoxedStrategy<String>) -> impl Strategy<Value = RunReport> {
    (
        proptest::collection::vec(any_result(text.clone()), 1..4),
        proptest::collection::vec((text.clone(), text.clone()), 0..4),
        proptest::option::of(text),
    )
        .prop_map(|(results, props, interrupted)| RunReport {
            tier: Tier::Standard,
            started_at: chrono::Local::now(),
            duration: Duration::from_millis(1),
            results,
            scopes: vec![(Scope::Gpu(0), ScopeInfo { properties: props })],
            interrupted,
            strict: false,
            fail_on_warn: false,
        })
}

/// A JSON value of the shapes a report's fields take, and others: null,
/// booleans, numbers, one of `words`, and lists and objects of them (up to
/// three deep) whose keys are among `keys` or short words.
pub(crate) fn json_value(
    words: &'static [&'static str],
    keys: &'static [&'static str],
) -> BoxedStrategy<serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        proptest::sample::select(words).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    proptest::sample::select(keys).prop_map(String::from),
                    "[a-z]{1,4}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}
