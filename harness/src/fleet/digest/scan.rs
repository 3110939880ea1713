//! A report read for the fleet in one pass over its text, without
//! serde's visitors: the fast path of [`super::digest`]. serde_json's
//! typed parse reads reports at about half the speed `cat` copies them;
//! this reads the report as `rocgate run --json` writes it at the speed
//! of a scan, keeping what the fleet needs and passing over the rest.
//!
//! It reads what the serde reader (a `Document` of the fleet's `Saved`
//! results, through `loose.rs`) reads, as it reads it, and declines
//! everything else: a field of another type where serde would fail, a
//! field given twice, a metric written as a list. A declined report is
//! read by serde, which either reads it or says what is wrong with it; the
//! tests hold the two to the same digest on every report the scan reads.

use super::cursor::{self, Cursor, Decline, Step};
use super::{Entry, Report, Saved, SavedDecision, SavedFinding, SavedWaiver, Texts};
use crate::fleet::FleetTerms;
use crate::loose::{self, Field, Kind, MetricFields, Pair, SavedMetric, Shape};
use crate::model::Scope;
use crate::verdict::MetricKind;
use serde::Deserialize;
use serde::de::IntoDeserializer;
use serde::de::value::{Error as ValueError, StrDeserializer};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The report in `text`, or [`Decline`] when it is not of the shape this
/// reader takes. Of the node's properties and versions and of each scope's
/// properties it keeps those `terms` name, all the fleet reads of them.
pub(super) fn report<'a>(text: &'a str, terms: &FleetTerms) -> Step<Report<'a>> {
    let node_keys = |k: &str| k == terms.keys.host || terms.node_components.contains(&k);
    let scope_keys = |k: &str| {
        [
            terms.model,
            terms.model_fallback,
            terms.partition,
            terms.keys.address,
            terms.keys.serial,
        ]
        .contains(&k)
    };
    let mut c = Cursor::new(text);
    let mut doc = Report {
        tool: Cow::Borrowed(""),
        tier: Cow::Borrowed(""),
        started_at: Cow::Borrowed(""),
        duration_ms: 0.0,
        interrupted: None,
        passed: false,
        strict: false,
        fail_on: None,
        decision: None,
        first_failing_layer: None,
        node: BTreeMap::new(),
        versions: BTreeMap::new(),
        scopes: Vec::new(),
        // About one result per 400 bytes of a report as rocgate writes it.
        results: Vec::with_capacity(text.len() / 400),
    };
    let mut seen = Seen::default();
    let (mut schema, mut passed, mut results) = (false, false, false);
    c.object(|c, key| {
        match &*key {
            "schema_version" => {
                seen.once(0)?;
                // Anything but the integer 1 is refused by the serde
                // reader, which says why.
                if !c.is_one()? {
                    return Err(Decline);
                }
                schema = true;
            }
            "tool" => doc.tool = seen.once(1).and_then(|()| text_or_empty(c))?,
            "tier" => doc.tier = seen.once(2).and_then(|()| text_or_empty(c))?,
            "started_at" => doc.started_at = seen.once(3).and_then(|()| text_or_empty(c))?,
            "duration_ms" => {
                seen.once(4)?;
                doc.duration_ms = match c.peek()? {
                    b'-' | b'0'..=b'9' => c.f64()?,
                    _ => c.skip().map(|()| 0.0)?,
                };
            }
            "interrupted" => doc.interrupted = seen.once(5).and_then(|()| text_or_null(c))?,
            "passed" => {
                seen.once(6)?;
                doc.passed = c.bool()?;
                passed = true;
            }
            "strict" => doc.strict = seen.once(7).and_then(|()| c.bool())?,
            "fail_on" => doc.fail_on = seen.once(8).and_then(|()| text_or_null(c))?,
            "decision" => {
                seen.once(9)?;
                doc.decision = c.or_null(decision)?;
            }
            "first_failing_layer" => {
                doc.first_failing_layer = seen.once(10).and_then(|()| text_or_null(c))?;
            }
            "node" => {
                seen.once(11)?;
                doc.node = strings(c, &node_keys)?.ok_or(Decline)?;
            }
            "versions" => {
                seen.once(12)?;
                doc.versions = versions(c, &node_keys)?;
            }
            "scopes" => {
                seen.once(13)?;
                doc.scopes = scopes(c, &scope_keys)?;
            }
            "results" => {
                seen.once(14)?;
                c.array(|c| {
                    doc.results.push(result(c)?);
                    Ok(())
                })?;
                results = true;
            }
            // Read leniently by serde: whatever they hold, the report is
            // read, and the fleet does not look at them.
            "summary" | "skipped_by_reason" | "unverified" | "warnings" | "waived" => {
                seen.once(field_index(&key))?;
                c.skip()?;
            }
            _ => c.skip()?,
        }
        Ok(())
    })?;
    c.end()?;
    if !schema || !passed || !results {
        return Err(Decline);
    }
    Ok(doc)
}

/// The fields of an object met so far: serde refuses a field given twice.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn once(&mut self, field: u32) -> Step<()> {
        let bit = 1 << field;
        if self.0 & bit != 0 {
            return Err(Decline);
        }
        self.0 |= bit;
        Ok(())
    }
}

fn field_index(key: &str) -> u32 {
    match key {
        "summary" => 15,
        "skipped_by_reason" => 16,
        "unverified" => 17,
        "warnings" => 18,
        _ => 19,
    }
}

/// A text field read leniently: text, else empty.
fn text_or_empty<'a>(c: &mut Cursor<'a>) -> Step<Cow<'a, str>> {
    if c.peek()? == b'"' {
        c.string()
    } else {
        c.skip().map(|()| Cow::Borrowed(""))
    }
}

/// An optional text field: text or null.
fn text_or_null<'a>(c: &mut Cursor<'a>) -> Step<Option<Cow<'a, str>>> {
    c.or_null(Cursor::string)
}

/// `T` by the name serde gives it (a status, a scope label, a kind).
fn named<'a, T: Deserialize<'a>>(name: &'a str) -> Step<T> {
    let d: StrDeserializer<'a, ValueError> = name.into_deserializer();
    T::deserialize(d).map_err(|_| Decline)
}

fn decision(c: &mut Cursor<'_>) -> Step<SavedDecision> {
    let mut seen = Seen::default();
    let (mut drain, mut exit_code) = (None, None);
    c.object(|c, key| {
        match &*key {
            "drain" => drain = Some(seen.once(0).and_then(|()| c.bool())?),
            "exit_code" => exit_code = seen.once(1).and_then(|()| c.or_null(Cursor::i64))?,
            _ => c.skip()?,
        }
        Ok(())
    })?;
    Ok(SavedDecision {
        drain: drain.ok_or(Decline)?,
        exit_code,
    })
}

/// An object's text values ([`loose::put`]) of the keys `kept`; `None`
/// when the value is not an object.
fn strings<'a>(c: &mut Cursor<'a>, kept: &dyn Fn(&str) -> bool) -> Step<Option<Texts<'a>>> {
    if c.peek()? != b'{' {
        return c.skip().map(|()| None);
    }
    let mut out = BTreeMap::new();
    c.object(|c, key| {
        if !kept(&key) {
            return c.skip();
        }
        let value = if c.peek()? == b'"' {
            Some(c.string()?)
        } else {
            c.skip().map(|()| None)?
        };
        loose::put(&mut out, key, value);
        Ok(())
    })?;
    Ok(Some(out))
}

/// Each scope's text versions, as `loose::versions_of` reads them; of the
/// node's, those named `node_keys`.
fn versions<'a>(
    c: &mut Cursor<'a>,
    node_keys: &dyn Fn(&str) -> bool,
) -> Step<BTreeMap<Cow<'a, str>, Texts<'a>>> {
    let mut out = BTreeMap::new();
    if c.peek()? != b'{' {
        return c.skip().map(|()| out);
    }
    c.object(|c, scope| {
        // Of the node's versions the fleet compares those `terms` name;
        // of a GPU's, every one.
        let versions = if scope == "node" {
            strings(c, node_keys)?
        } else {
            strings(c, &|_| true)?
        };
        loose::put(&mut out, scope, versions);
        Ok(())
    })?;
    Ok(out)
}

/// The scope entries of an entry's shape, as `loose::scopes_of` reads them.
fn scopes<'a>(c: &mut Cursor<'a>, kept: &dyn Fn(&str) -> bool) -> Step<Vec<Entry<'a>>> {
    let mut out = Vec::new();
    if c.peek()? != b'[' {
        return c.skip().map(|()| out);
    }
    c.array(|c| {
        if c.peek()? != b'{' {
            return c.skip();
        }
        let (mut scope, mut first, mut properties) = (Field::Absent, Field::Absent, None);
        c.object(|c, key| {
            match &*key {
                "scope" => scope = field::<Cow<'a, str>>(c)?,
                "first_failing_layer" => first = field::<Cow<'a, str>>(c)?,
                "properties" => properties = Some(strings(c, kept)?),
                _ => c.skip()?,
            }
            Ok(())
        })?;
        out.extend(
            loose::scope_entry(scope, first, properties)
                .map(|(scope, _, properties)| Entry { scope, properties }),
        );
        Ok(())
    })?;
    Ok(out)
}

/// A field of a lenient entry, as `loose::FieldValue` reads it: null, a
/// `T`, or of another type.
fn field<'a, T: Shape<'a>>(c: &mut Cursor<'a>) -> Step<Field<T>> {
    let shaped = |v: Option<T>| v.map_or(Field::Bad, Field::Is);
    Ok(match c.peek()? {
        b'"' => shaped(match c.string()? {
            Cow::Borrowed(s) => T::from_borrowed(s),
            Cow::Owned(s) => T::from_str(&s),
        }),
        b'-' | b'0'..=b'9' => shaped(T::from_f64(c.f64()?)),
        b'n' => c.null().map(|()| Field::Null)?,
        _ => c.skip().map(|()| Field::Bad)?,
    })
}

fn result<'a>(c: &mut Cursor<'a>) -> Step<Saved<'a>> {
    let mut seen = Seen::default();
    let (mut id, mut layer, mut scope, mut status) = (None, None, None, None);
    let (mut finding, mut skip_reason, mut waiver) = (None, None, None);
    let mut metrics = Vec::new();
    c.object(|c, key| {
        match &*key {
            "id" => id = Some(seen.once(0).and_then(|()| c.string())?),
            "layer" => layer = Some(seen.once(1).and_then(|()| c.string())?),
            "scope" => scope = Some(seen.once(2).and_then(|()| label::<Scope>(c))?),
            "status" => status = Some(seen.once(3).and_then(|()| label(c))?),
            "finding" => finding = seen.once(4).and_then(|()| c.or_null(saved_finding))?,
            "skip_reason" => skip_reason = seen.once(5).and_then(|()| c.or_null(label))?,
            "waiver" => waiver = seen.once(6).and_then(|()| c.or_null(saved_waiver))?,
            "metrics" => {
                seen.once(7)?;
                metrics = metrics_of(c)?;
            }
            _ => c.skip()?,
        }
        Ok(())
    })?;
    Ok(Saved {
        id: id.ok_or(Decline)?,
        layer: layer.ok_or(Decline)?,
        scope: scope.ok_or(Decline)?,
        status: status.ok_or(Decline)?,
        finding,
        skip_reason,
        waiver,
        metrics,
    })
}

/// A value serde reads from its name (a string).
fn label<'a, T: Deserialize<'a>>(c: &mut Cursor<'a>) -> Step<T> {
    match c.string()? {
        Cow::Borrowed(s) => named(s),
        // An escaped name is no name serde knows either.
        Cow::Owned(_) => Err(Decline),
    }
}

fn saved_finding<'a>(c: &mut Cursor<'a>) -> Step<SavedFinding<'a>> {
    let mut seen = Seen::default();
    let (mut code, mut blames) = (None, None);
    c.object(|c, key| {
        match &*key {
            "code" => code = Some(seen.once(0).and_then(|()| c.string())?),
            "blames" => blames = seen.once(1).and_then(|()| c.or_null(label::<Scope>))?,
            _ => c.skip()?,
        }
        Ok(())
    })?;
    Ok(SavedFinding {
        code: code.ok_or(Decline)?,
        blames,
    })
}

fn saved_waiver(c: &mut Cursor<'_>) -> Step<SavedWaiver> {
    let mut seen = Seen::default();
    let mut expired = false;
    c.object(|c, key| {
        match &*key {
            "expired" => expired = seen.once(0).and_then(|()| c.bool())?,
            _ => c.skip()?,
        }
        Ok(())
    })?;
    Ok(SavedWaiver { expired })
}

/// A result's metrics the fleet compares (throughputs and counters, as
/// `samples` picks them), as `loose::metrics_of` reads them; the others
/// are checked and passed over, their values never parsed. A metric
/// written as a list is left to serde.
fn metrics_of<'a>(c: &mut Cursor<'a>) -> Step<Vec<SavedMetric<'a>>> {
    let mut out = Vec::new();
    if c.peek()? != b'[' {
        return c.skip().map(|()| out);
    }
    c.array(|c| {
        match c.peek()? {
            b'{' => {}
            b'[' => return Err(Decline),
            _ => return c.skip(),
        }
        let mut m = MetricFields::default();
        // The value's text, parsed once the kind says it is compared.
        let mut number = None;
        c.object(|c, key| {
            match &*key {
                "name" => m.name = field(c)?,
                "value" => match c.peek()? {
                    b'-' | b'0'..=b'9' => number = Some(c.number_text()?),
                    _ => (m.value, number) = (field(c)?, None),
                },
                "unit" => m.unit = field(c)?,
                "kind" => m.kind = field::<Kind>(c)?,
                "between" => m.between = pair(c)?,
                _ => c.skip()?,
            }
            Ok(())
        })?;
        if !matches!(
            m.kind,
            Field::Is(Kind(MetricKind::Throughput | MetricKind::Counter))
        ) {
            return Ok(());
        }
        if let Some(text) = number {
            m.value = Field::Is(cursor::number(text)?);
        }
        out.extend(m.metric());
        Ok(())
    })?;
    Ok(out)
}

/// A pair of GPUs, `["gpu0", "gpu1"]`, as `loose::Pair` reads it.
fn pair<'a>(c: &mut Cursor<'a>) -> Step<Field<Pair<'a>>> {
    if c.peek()? != b'[' {
        return field(c);
    }
    let mut items: Vec<Option<Cow<'a, str>>> = Vec::new();
    c.array(|c| {
        items.push(if c.peek()? == b'"' {
            Some(c.string()?)
        } else {
            c.skip().map(|()| None)?
        });
        Ok(())
    })?;
    Ok(match <[_; 2]>::try_from(items) {
        Ok([Some(a), Some(b)]) => Field::Is(Pair(a, b)),
        _ => Field::Bad,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Digest, reduce};
    use super::*;
    use crate::json::{JsonContext, render};
    use crate::result::RunReport;
    use crate::saved_report;
    use crate::test_support::{KEYS, strategies};
    use crate::verdict::MetricKind;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    const TERMS: FleetTerms = FleetTerms {
        layers: &[crate::model::test_stack::A, BESIDE],
        keys: KEYS,
        model: "product",
        model_fallback: "gfx_target",
        partition: "partition",
        node_components: &["rocm", "kernel", "hostname"],
    };

    const BESIDE: crate::model::Layer = crate::model::Layer::beside("e", 9);

    fn as_of() -> chrono::DateTime<chrono::FixedOffset> {
        chrono::DateTime::parse_from_rfc3339("2026-12-06T00:00:00Z").unwrap()
    }

    /// The digest of `text` as the scan reads it, and as serde does.
    fn both(text: &str) -> (Step<String>, Result<String, String>) {
        let shown = |d: Digest| format!("{d:?}");
        let scanned = report(text, &TERMS).map(|r| shown(reduce("n.json", &r, &TERMS, as_of())));
        let parsed = saved_report::parse_bytes::<Saved<'_>, SavedDecision>(text.as_bytes(), "n")
            .map(|d| shown(reduce("n.json", &Report::of(d), &TERMS, as_of())))
            .map_err(|e| e.0);
        (scanned, parsed)
    }

    /// A report as `rocgate run --json` writes it, with the identity and
    /// versions the fleet reads and metrics of every kind.
    fn written(mut run: RunReport, drain: bool) -> String {
        for (i, r) in run.results.iter_mut().enumerate() {
            for m in &mut r.metrics {
                m.kind = [
                    None,
                    Some(MetricKind::Throughput),
                    Some(MetricKind::Counter),
                ][i % 3];
            }
            if let Some(first) = r.metrics.first().filter(|_| i % 2 == 1) {
                let mut pair = first.clone();
                pair.name = "p2p_gbps.gpu0>gpu1".into();
                pair.between = Some(("gpu0".into(), "gpu1".into()));
                pair.kind = Some(MetricKind::Throughput);
                r.metrics.push(pair);
            }
        }
        if run.scopes.is_empty() {
            run.scopes
                .push((crate::model::Scope::Gpu(0), Default::default()));
        }
        for (key, value) in [
            ("product", "AMD Instinct MI300X"),
            ("partition", "SPX"),
            ("pci_address", "0000:05:00.0"),
            ("unique_id", "0x1d2a"),
        ] {
            run.scopes[0].1.properties.push((key.into(), value.into()));
        }
        let node = [
            ("hostname".to_string(), "n1".to_string()),
            ("kernel".to_string(), "6.8.0-79-generic".to_string()),
        ];
        let versions = [
            ("node", json!({"rocm": "7.1.1"})),
            (
                "gpu0",
                json!({"vbios": "113-M3000100-102", "fw_sos": "0x00550046"}),
            ),
        ]
        .into_iter()
        .map(|(s, v)| (s.to_string(), serde_json::from_value(v).unwrap()))
        .collect();
        let ctx = JsonContext {
            tool: "rocgate 0.1.0",
            node_properties: &node,
            versions: &versions,
            decision: Some(json!({"drain": drain, "exit_code": i64::from(drain), "health": "x"})),
        };
        render(&run, &ctx).unwrap()
    }

    #[test]
    fn odd_reports_are_left_to_serde_which_reads_them_or_says_why() {
        let base: Value = serde_json::from_str(&written(
            crate::test_support::run(vec![crate::test_support::result(
                "gpu0.a.x",
                crate::model::test_stack::A,
                crate::model::Scope::Gpu(0),
                crate::verdict::Status::Pass,
            )]),
            false,
        ))
        .unwrap();
        let text = base.to_string();
        assert!(report(&text, &TERMS).is_ok(), "{text}");
        let with = |edit: &dyn Fn(&mut Value)| {
            let mut v = base.clone();
            edit(&mut v);
            v.to_string()
        };
        let cases = [
            // serde refuses these: the scan leaves them to it.
            with(&|v| v["schema_version"] = json!(1.0)),
            with(&|v| v["passed"] = json!("yes")),
            with(&|v| v["results"][0]["status"] = json!("sideways")),
            with(&|v| v["results"][0]["scope"] = json!("gpu")),
            with(&|v| v["decision"] = json!({"exit_code": 0})),
            text.replacen("{", "{\"passed\":true,", 1),
            text.replacen("\"results\"", "\"results\":[],\"results\"", 1),
            format!("{text} x"),
            // serde reads these in its own way: the scan leaves them to it.
            with(&|v| v["results"][0]["metrics"] = json!([["listed", 4, "GB/s", "throughput"]])),
            with(&|v| v["results"][0]["message"] = json!("\u{1}")).replace("\\u0001", "\\ud800"),
            with(&|v| v["decision"] = json!([true, 0])),
        ];
        for case in &cases {
            assert_eq!(report(case, &TERMS).err(), Some(Decline), "{case}");
        }
        // A lone surrogate where serde passes over the text, a metric
        // list, a decision as a list: serde still reads the report.
        for case in &cases[8..] {
            assert!(both(case).1.is_ok(), "{case}");
        }
        // Odd values serde reads leniently, the scan reads the same way.
        for case in [
            with(
                &|v| v["results"][0]["metrics"] = json!([{"name": "x", "value": null}, 3, {"name": "y", "value": 1, "kind": "sideways"}, {"name": "z", "value": 2, "kind": "throughput", "between": ["gpu0"]}]),
            ),
            with(
                &|v| v["scopes"] = json!([{"scope": 7}, {"scope": "gpu0", "properties": "odd"}, {"scope": "gpu1", "first_failing_layer": null, "properties": {"product": "AMD Instinct MI300X", "n": 1}}]),
            ),
            with(&|v| v["versions"] = json!({"node": {"rocm": 7}, "gpu0": "odd"})),
            with(&|v| v["tool"] = json!(["odd"])),
            with(&|v| v["duration_ms"] = json!("odd")),
            with(&|v| v["summary"] = json!(null)),
            text.replacen("\"hostname\"", "\"host\\u006eame\"", 1),
        ] {
            let (scanned, parsed) = both(&case);
            assert_eq!(scanned, Ok(parsed.unwrap()), "{case}");
        }
    }

    #[test]
    fn a_layer_beside_the_stack_that_applied_nowhere_has_no_cell() {
        use crate::model::Scope;
        use crate::verdict::{SkipReason, Status};
        let digest_of = |statuses: &[(crate::model::Layer, Status)]| {
            let results = statuses
                .iter()
                .enumerate()
                .map(|(i, &(layer, status))| {
                    let mut r = crate::test_support::result(
                        &format!("node.{layer}.c{i}"),
                        layer,
                        Scope::Node,
                        status,
                    );
                    if status == Status::Skipped {
                        r.skip_reason = Some(SkipReason::NotApplicable);
                    }
                    r
                })
                .collect();
            let text = written(crate::test_support::run(results), false);
            let (scanned, parsed) = both(&text);
            assert_eq!(scanned, Ok(parsed.unwrap()));
            let r = report(&text, &TERMS).unwrap();
            reduce("n.json", &r, &TERMS, as_of())
        };
        let a = crate::model::test_stack::A;
        let none = digest_of(&[
            (a, Status::Skipped),
            (BESIDE, Status::Skipped),
            (BESIDE, Status::Skipped),
        ]);
        assert_eq!(
            none.layers,
            ["a"],
            "a stack layer shows as skip; the beside one not at all"
        );
        assert_eq!(none.node.layers.get("a"), Some(&"skip"));
        assert_eq!(none.node.layers.get("e"), None);
        let some = digest_of(&[
            (a, Status::Pass),
            (BESIDE, Status::Skipped),
            (BESIDE, Status::Warn),
        ]);
        assert_eq!(some.layers, ["a", "e"]);
        assert_eq!(some.node.layers.get("e"), Some(&"warn"));
    }

    /// A value of the shapes a report's fields take, and others.
    fn odd_value() -> impl Strategy<Value = Value> {
        strategies::json_value(
            &[
                "gpu0",
                "node",
                "pass",
                "fail",
                "warn",
                "throughput",
                "unverifiable",
                "x",
            ],
            &["name", "value", "code", "drain", "expired", "scope"],
        )
    }

    /// Every place in `v` a value sits, as a JSON pointer.
    fn places(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    places(x, format!("{at}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    places(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
        out.push(at);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever a report holds, the scan reads it as rocgate wrote it.
        #[test]
        fn written_reports_are_scanned_as_serde_reads_them(
            run in strategies::any_report(strategies::text()),
            drain in any::<bool>(),
        ) {
            let text = written(run, drain);
            let (scanned, parsed) = both(&text);
            prop_assert_eq!(scanned, Ok(parsed.unwrap()));
        }

        /// Any text at all: the scan never panics, and what it reads serde
        /// reads the same way.
        #[test]
        fn any_text_is_scanned_alike_or_declined(text in r#"[ \[\]{}",:0-9a-z_.\-\\\x00-\x1f\u{e9}]{0,200}"#) {
            let (scanned, parsed) = both(&text);
            if let Ok(scanned) = scanned {
                prop_assert_eq!(Ok(scanned), parsed);
            }
            let framed = format!(r#"{{"schema_version": 1, "passed": true, "results": [{text}]}}"#);
            let (scanned, parsed) = both(&framed);
            if let Ok(scanned) = scanned {
                prop_assert_eq!(Ok(scanned), parsed);
            }
        }

        /// A report changed anywhere is read by the scan as serde reads
        /// it, or left to serde.
        #[test]
        fn changed_reports_are_scanned_alike_or_left_to_serde(
            run in strategies::any_report(strategies::ordinary_text()),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), odd_value(), any::<bool>()), 1..4),
            pretty in any::<bool>(),
        ) {
            let mut v: Value = serde_json::from_str(&written(run, false)).unwrap();
            for (at, value, remove) in edits {
                let mut all = Vec::new();
                places(&v, String::new(), &mut all);
                let at = at.get(&all).clone();
                let (parent, key) = at.rsplit_once('/').unwrap_or(("", ""));
                match v.pointer_mut(parent) {
                    Some(Value::Object(m)) if remove => {
                        m.remove(key);
                    }
                    _ => {
                        if let Some(slot) = v.pointer_mut(&at) {
                            *slot = value;
                        }
                    }
                }
            }
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            let (scanned, parsed) = both(&text);
            if let Ok(scanned) = scanned {
                prop_assert_eq!(Ok(scanned), parsed);
            }
        }
    }
}
