//! Parts of a saved report read straight from its bytes, leniently: a
//! metric of the wrong shape (a `null` reading, a kind this rocgate does
//! not know) is left out as `document::each` leaves it out, a property or
//! version that is not text as `document::strings_of` leaves it out, but
//! without building a JSON tree of them first, which cost a fleet of
//! 100,000 reports a third of its time. Every value is taken whatever its
//! type, so an odd one never breaks the parse of the rest.

use crate::verdict::MetricKind;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// The visit methods of a visitor whose value is `$none` for every type
/// it does not take.
macro_rules! forward_other {
    ($none:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
    };
}

/// The part of a metric the fleet compares; its text borrowed from the
/// report where the report's bytes allow.
#[derive(Debug, PartialEq)]
pub(crate) struct SavedMetric<'a> {
    pub name: Cow<'a, str>,
    pub value: f64,
    pub unit: Cow<'a, str>,
    pub kind: Option<MetricKind>,
    pub between: Option<(Cow<'a, str>, Cow<'a, str>)>,
}

/// The metrics of a result: those of a metric's shape, in order; a value
/// that is not a list is no metrics.
pub(crate) fn metrics_of<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<SavedMetric<'de>>, D::Error> {
    d.deserialize_any(ListOf).map(Option::unwrap_or_default)
}

/// Anything, as the metrics it holds when it is a list.
struct ListOf;

impl<'de> Visitor<'de> for ListOf {
    type Value = Option<Vec<SavedMetric<'de>>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of metrics")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Loose(m)) = seq.next_element::<Loose<MetricFields>>()? {
            if let Some(m) = m.and_then(MetricFields::metric) {
                out.push(m);
            }
        }
        Ok(Some(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    forward_other!(None);
}

/// A value of any type: `Some` when it is a `T` (see [`Shape`]), else
/// `None`, its content skipped.
pub(crate) struct Loose<T>(pub(crate) Option<T>);

/// A type [`Loose`] can take from whatever value it meets, in a document
/// whose text lives for `'de`.
pub(crate) trait Shape<'de>: Sized {
    /// Text that does not live as long as the document.
    fn from_str(_: &str) -> Option<Self> {
        None
    }
    /// Text that lives as long as the document: kept without a copy by
    /// those that can.
    fn from_borrowed(s: &'de str) -> Option<Self> {
        Self::from_str(s)
    }
    fn from_f64(_: f64) -> Option<Self> {
        None
    }
    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Option<Self>, A::Error> {
        skip_seq(seq).map(|()| None)
    }
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        skip_map(map).map(|()| None)
    }
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

struct LooseVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Shape<'de>> Visitor<'de> for LooseVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(T::from_f64(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(T::from_f64(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(T::from_f64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(T::from_str(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(T::from_borrowed(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        T::from_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::from_map(map)
    }
}

impl<'de, T: Shape<'de>> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LooseVisitor(std::marker::PhantomData))
            .map(Loose)
    }
}

impl Shape<'_> for String {
    fn from_str(s: &str) -> Option<Self> {
        Some(s.to_string())
    }
}

impl<'de> Shape<'de> for Cow<'de, str> {
    fn from_str(s: &str) -> Option<Self> {
        Some(Cow::Owned(s.to_string()))
    }
    fn from_borrowed(s: &'de str) -> Option<Self> {
        Some(Cow::Borrowed(s))
    }
}

impl Shape<'_> for f64 {
    fn from_f64(v: f64) -> Option<Self> {
        Some(v)
    }
}

/// A field present and `null` is as good as absent; present and of
/// another type spoils the metric.
#[derive(Default)]
pub(crate) enum Field<T> {
    /// Not given.
    #[default]
    Absent,
    /// Given as `null`.
    Null,
    /// Given, of another type.
    Bad,
    /// Given, of its type.
    Is(T),
}

impl<T> Field<T> {
    /// What an optional field holds: absent and null are `None`, a value
    /// of the wrong type spoils the metric (`Err`).
    fn optional(self) -> Result<Option<T>, ()> {
        match self {
            Field::Absent | Field::Null => Ok(None),
            Field::Bad => Err(()),
            Field::Is(v) => Ok(Some(v)),
        }
    }
}

/// A value for a [`Field`]: null, a `T`, or something else.
struct FieldValue<T>(Field<T>);

impl<'de, T: Shape<'de>> Deserialize<'de> for FieldValue<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Shape<'de>> Visitor<'de> for V<T> {
            type Value = Field<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Field::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Field::Null)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Field::Bad)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(T::from_f64(v as f64).map_or(Field::Bad, Field::Is))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(T::from_f64(v as f64).map_or(Field::Bad, Field::Is))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(T::from_f64(v).map_or(Field::Bad, Field::Is))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(T::from_str(v).map_or(Field::Bad, Field::Is))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(T::from_borrowed(v).map_or(Field::Bad, Field::Is))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Ok(T::from_seq(seq)?.map_or(Field::Bad, Field::Is))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Ok(T::from_map(map)?.map_or(Field::Bad, Field::Is))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
            .map(FieldValue)
    }
}

/// A pair of GPUs, `["gpu0", "gpu1"]`.
pub(crate) struct Pair<'a>(pub(crate) Cow<'a, str>, pub(crate) Cow<'a, str>);

impl<'de> Shape<'de> for Pair<'de> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        let a = seq
            .next_element::<Loose<Cow<'de, str>>>()?
            .and_then(|l| l.0);
        let b = seq
            .next_element::<Loose<Cow<'de, str>>>()?
            .and_then(|l| l.0);
        let extra = seq.next_element::<IgnoredAny>()?.is_some();
        skip_seq(seq)?;
        Ok(match (a, b, extra) {
            (Some(a), Some(b), false) => Some(Pair(a, b)),
            _ => None,
        })
    }
}

/// A metric's kind by its name.
pub(crate) struct Kind(pub(crate) MetricKind);

impl Shape<'_> for Kind {
    fn from_str(s: &str) -> Option<Self> {
        let d: de::value::StrDeserializer<'_, de::value::Error> = s.into_deserializer();
        MetricKind::deserialize(d).ok().map(Kind)
    }
}

/// An object's string values (keys and values); values of other types are
/// left out.
struct Strings(BTreeMap<String, String>);

impl<'de> Shape<'de> for Strings {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            put(&mut out, key, map.next_value::<Loose<String>>()?.0);
        }
        Ok(Some(Strings(out)))
    }
}

/// Puts an object's `key` into `map` as a JSON tree of its text values
/// would hold it: its text `value`, or out when it is of another type
/// (a later text value of a key replaces an earlier one; a later odd
/// one leaves the key out).
pub(crate) fn put<K: Ord, V>(map: &mut BTreeMap<K, V>, key: K, value: Option<V>) {
    match value {
        Some(v) => {
            map.insert(key, v);
        }
        None => {
            map.remove(&key);
        }
    }
}

/// An object's string values; values of other types are left out. A value
/// that is not an object is an error, as a map of any values would make it.
pub(crate) fn strings_of<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            Ok(Strings::from_map(map)?.map(|s| s.0).unwrap_or_default())
        }
    }
    d.deserialize_map(V)
}

/// Each scope's string versions: a scope that is not an object, or a
/// version that is not text, is left out, the others kept; a value that is
/// not an object is none.
pub(crate) fn versions_of<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, D::Error> {
    struct Scopes(BTreeMap<String, BTreeMap<String, String>>);
    impl<'de> Shape<'de> for Scopes {
        fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(scope) = map.next_key::<String>()? {
                put(
                    &mut out,
                    scope,
                    map.next_value::<Loose<Strings>>()?.0.map(|kv| kv.0),
                );
            }
            Ok(Some(Scopes(out)))
        }
    }
    Ok(Loose::<Scopes>::deserialize(d)?
        .0
        .map(|s| s.0)
        .unwrap_or_default())
}

/// The keys of a scope entry.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ScopeKey {
    Scope,
    FirstFailingLayer,
    Properties,
    #[serde(other)]
    Other,
}

impl<'de> Shape<'de> for crate::document::ScopeEntry {
    /// An entry with a text label, a text (or null) first failing layer and
    /// an object of properties (its text values), as a derived reader
    /// takes one from a tree; any other shape is no entry.
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        // A key given twice: the last one counts, as in a JSON tree.
        let (mut scope, mut first, mut properties) = (Field::Absent, Field::Absent, None);
        while let Some(key) = map.next_key::<ScopeKey>()? {
            match key {
                ScopeKey::Scope => scope = map.next_value::<FieldValue<String>>()?.0,
                ScopeKey::FirstFailingLayer => first = map.next_value::<FieldValue<String>>()?.0,
                ScopeKey::Properties => {
                    properties = Some(map.next_value::<Loose<Strings>>()?.0.map(|s| s.0));
                }
                ScopeKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(
            scope_entry(scope, first, properties).map(
                |(scope, first_failing_layer, properties)| crate::document::ScopeEntry {
                    scope,
                    first_failing_layer,
                    properties,
                },
            ),
        )
    }
}

/// A scope entry from its fields as read: a text label, a text (or null)
/// first failing layer, and properties that are absent (`None`) or an
/// object (`Some(Some(..))`); any other shape is no entry.
pub(crate) fn scope_entry<S, P: Default>(
    scope: Field<S>,
    first: Field<S>,
    properties: Option<Option<P>>,
) -> Option<(S, Option<S>, P)> {
    let Field::Is(scope) = scope else {
        return None;
    };
    let first_failing_layer = first.optional().ok()?;
    let properties = match properties {
        None => P::default(),
        Some(Some(p)) => p,
        Some(None) => return None,
    };
    Some((scope, first_failing_layer, properties))
}

/// The scope entries of a report that have an entry's shape, the others
/// left out; a value that is not a list is none.
pub(crate) fn scopes_of<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<crate::document::ScopeEntry>, D::Error> {
    struct Entries(Vec<crate::document::ScopeEntry>);
    impl<'de> Shape<'de> for Entries {
        fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
            let mut out = Vec::new();
            while let Some(Loose(e)) = seq.next_element::<Loose<crate::document::ScopeEntry>>()? {
                out.extend(e);
            }
            Ok(Some(Entries(out)))
        }
    }
    Ok(Loose::<Entries>::deserialize(d)?
        .0
        .map(|e| e.0)
        .unwrap_or_default())
}

/// The fields of a metric as they were read, before they are judged.
#[derive(Default)]
pub(crate) struct MetricFields<'a> {
    pub(crate) name: Field<Cow<'a, str>>,
    pub(crate) value: Field<f64>,
    pub(crate) unit: Field<Cow<'a, str>>,
    pub(crate) kind: Field<Kind>,
    pub(crate) between: Field<Pair<'a>>,
}

impl<'a> MetricFields<'a> {
    /// The metric, when its fields have a metric's shape: a name and a
    /// number, a text unit (none when absent), a known kind and a pair
    /// when they are given.
    pub(crate) fn metric(self) -> Option<SavedMetric<'a>> {
        let (Field::Is(name), Field::Is(value)) = (self.name, self.value) else {
            return None;
        };
        let unit = match self.unit {
            Field::Absent => Cow::Borrowed(""),
            Field::Is(u) => u,
            Field::Null | Field::Bad => return None,
        };
        Some(SavedMetric {
            name,
            value,
            unit,
            kind: self.kind.optional().ok()?.map(|k| k.0),
            between: self.between.optional().ok()?.map(|p| (p.0, p.1)),
        })
    }
}

/// The keys of a metric the fleet reads.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Key {
    Name,
    Value,
    Unit,
    Kind,
    Between,
    #[serde(other)]
    Other,
}

impl<'de> Shape<'de> for MetricFields<'de> {
    /// A metric written as a list, its fields in order (as a derived
    /// reader takes a struct): at least a name and a value, at most every
    /// field.
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        let mut m = MetricFields::default();
        // Each field in turn; the list ending there gives `$short`.
        macro_rules! next {
            ($field:ident, $t:ty, $short:expr) => {
                match seq.next_element::<FieldValue<$t>>()? {
                    Some(v) => m.$field = v.0,
                    None => return Ok($short),
                }
            };
        }
        next!(name, Cow<'de, str>, None);
        next!(value, f64, None);
        next!(unit, Cow<'de, str>, Some(m));
        next!(kind, Kind, Some(m));
        next!(between, Pair<'de>, Some(m));
        let extra = seq.next_element::<IgnoredAny>()?.is_some();
        skip_seq(seq)?;
        Ok((!extra).then_some(m))
    }

    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut m = MetricFields::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Name => m.name = map.next_value::<FieldValue<Cow<'de, str>>>()?.0,
                Key::Value => m.value = map.next_value::<FieldValue<f64>>()?.0,
                Key::Unit => m.unit = map.next_value::<FieldValue<Cow<'de, str>>>()?.0,
                Key::Kind => m.kind = map.next_value::<FieldValue<Kind>>()?.0,
                Key::Between => m.between = map.next_value::<FieldValue<Pair<'de>>>()?.0,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Deserialize)]
    struct Holder<'a> {
        #[serde(borrow, default, deserialize_with = "metrics_of")]
        metrics: Vec<SavedMetric<'a>>,
    }

    fn read(json: &str) -> Vec<SavedMetric<'_>> {
        serde_json::from_str::<Holder<'_>>(json).unwrap().metrics
    }

    #[test]
    fn metrics_of_a_metric_shape_are_kept_and_odd_ones_left_out() {
        let got = read(
            r#"{"metrics": [
                {"name": "gemm_tflops.fp16", "value": 719.5, "unit": "TFLOP/s", "kind": "throughput", "floor": 607},
                {"name": "null_reading", "value": null, "unit": "GB/s"},
                {"name": "p2p_gbps.gpu0>gpu1", "value": 48, "kind": "throughput", "between": ["gpu0", "gpu1"]},
                {"name": "odd_kind", "value": 1, "kind": "sideways"},
                {"name": "odd_pair", "value": 1, "between": ["gpu0"]},
                {"name": "no_unit", "value": 2, "kind": null, "spread": {"min": 1, "max": [2, {"x": 3}]}},
                {"name": 7, "value": 1},
                "not a metric", 3, null, [1, 2],
                ["listed", 4, "GB/s", "throughput"], ["too_long", 1, "", null, null, 6]
            ]}"#,
        );
        let names: Vec<&str> = got.iter().map(|m| m.name.as_ref()).collect();
        // A list in a metric's field order reads as a derived reader takes it.
        assert_eq!(
            names,
            [
                "gemm_tflops.fp16",
                "p2p_gbps.gpu0>gpu1",
                "no_unit",
                "listed"
            ]
        );
        assert_eq!(got[0].kind, Some(MetricKind::Throughput));
        assert_eq!(got[0].unit, "TFLOP/s");
        assert_eq!(got[1].between, Some(("gpu0".into(), "gpu1".into())));
        assert_eq!(got[1].value, 48.0);
        assert_eq!((got[2].unit.as_ref(), got[2].kind), ("", None));
    }

    #[test]
    fn metrics_that_are_not_a_list_are_none() {
        for odd in [
            r#"{"metrics": null}"#,
            r#"{"metrics": {"a": [1]}}"#,
            r#"{"metrics": "x"}"#,
            "{}",
        ] {
            assert_eq!(read(odd), Vec::new(), "{odd}");
        }
    }

    /// The same metrics as `document::each` keeps, from a JSON tree.
    fn by_tree(v: &serde_json::Value) -> Vec<SavedMetric<'static>> {
        #[derive(Deserialize)]
        struct Tree {
            name: String,
            value: f64,
            #[serde(default)]
            unit: String,
            #[serde(default)]
            kind: Option<MetricKind>,
            #[serde(default)]
            between: Option<(String, String)>,
        }
        match v {
            serde_json::Value::Array(items) => items
                .iter()
                .filter_map(|i| serde_json::from_value::<Tree>(i.clone()).ok())
                .map(|t| SavedMetric {
                    name: t.name.into(),
                    value: t.value,
                    unit: t.unit.into(),
                    kind: t.kind,
                    between: t.between.map(|(a, b)| (a.into(), b.into())),
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn value() -> impl Strategy<Value = serde_json::Value> {
        crate::test_support::strategies::json_value(
            &["throughput", "counter", "reading", "gpu0", "x"],
            &["name", "value", "unit", "kind", "between"],
        )
    }

    #[derive(Deserialize)]
    struct Scopes {
        #[serde(default, deserialize_with = "scopes_of")]
        scopes: Vec<crate::document::ScopeEntry>,
    }

    #[derive(Deserialize)]
    struct ScopesByTree {
        #[serde(default, deserialize_with = "crate::document::each")]
        scopes: Vec<crate::document::ScopeEntry>,
    }

    #[test]
    fn scope_entries_of_an_entry_shape_are_kept_and_odd_ones_left_out() {
        let text = r#"{"scopes": [
            {"scope": "gpu0", "properties": {"pci_address": "0000:05:00.0", "n": 1}},
            {"properties": {}}, 3, null, [1],
            {"scope": "gpu1", "first_failing_layer": 7},
            {"scope": "gpu2", "first_failing_layer": null, "x": [1, {"y": 2}]},
            {"scope": "gpu3", "properties": "odd"},
            {"scope": "gpu4", "scope": "gpu5"}
        ]}"#;
        let got = serde_json::from_str::<Scopes>(text).unwrap().scopes;
        let tree = serde_json::from_str::<ScopesByTree>(text).unwrap().scopes;
        assert_eq!(got, tree);
        let labels: Vec<&str> = got.iter().map(|e| e.scope.as_str()).collect();
        assert_eq!(labels, ["gpu0", "gpu2", "gpu5"]);
        assert_eq!(got[0].properties.len(), 1);
    }

    proptest! {
        /// Whatever the list holds, the streaming reader keeps what the
        /// tree-building one keeps, and never fails the document.
        #[test]
        fn reads_as_the_tree_does(metrics in value()) {
            let doc = serde_json::json!({ "metrics": metrics });
            // Both from the same text: serde_json's float parsing does not
            // give back every f64 it printed.
            let text = doc.to_string();
            let tree: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(read(&text), by_tree(&tree["metrics"]));
        }
    }
}
