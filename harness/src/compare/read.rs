//! What `compare` reads of a saved report: the report [`Document`], each
//! result as far as a comparison looks at it. Every field is read
//! leniently (one of another type reads as empty, an odd metric is left
//! out), so a report written oddly where a comparison does not look is
//! still compared, and what it does look at is named in its message.

use crate::document::{Document, each, lenient};
use crate::verdict::{MetricKind, Spread};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A run report as `compare` reads it.
pub type Report = Document<Compared>;

/// The part of a result a comparison reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Compared {
    /// Its test id (`gpu3.hip.memcpy`); a result without one is not
    /// compared.
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    /// Its scope label (`gpu3`); else the id's first part.
    #[serde(default, deserialize_with = "lenient")]
    pub scope: Option<String>,
    /// Its check (`hip.memcpy`); else the id after the scope.
    #[serde(default, deserialize_with = "lenient")]
    pub check: Option<String>,
    /// `pass`, `fail`, `blocked`, ...
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
    /// What it said.
    #[serde(default, deserialize_with = "lenient")]
    pub message: String,
    /// The check whose failure blocked it.
    #[serde(default, deserialize_with = "lenient")]
    pub blocked_by: Option<String>,
    /// The facts it read, by name (their values are not compared: the
    /// versions are, which the report lists apart).
    #[serde(default, deserialize_with = "lenient")]
    pub facts: BTreeMap<String, serde_json::Value>,
    /// What it measured.
    #[serde(default, deserialize_with = "each")]
    pub metrics: Vec<ComparedMetric>,
}

impl Compared {
    /// Its status, `?` when it has none.
    pub fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("?")
    }
}

/// The part of a metric a comparison reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ComparedMetric {
    /// Its name (`gemm_tflops.fp16`).
    pub name: String,
    /// None: written with no value (`null`, as older rocgate wrote NaN).
    #[serde(default, deserialize_with = "lenient")]
    pub value: Option<f64>,
    /// Its unit.
    #[serde(default, deserialize_with = "lenient")]
    pub unit: String,
    /// The kind it states (None in reports older than kinds).
    #[serde(default, deserialize_with = "lenient")]
    pub kind: Option<MetricKind>,
    /// Its repetitions' spread.
    #[serde(default, deserialize_with = "lenient")]
    pub spread: Option<Spread>,
    /// The pair of scopes it was measured between.
    #[serde(default, deserialize_with = "lenient")]
    pub between: Option<(String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn odd_fields_read_as_empty_and_odd_metrics_are_left_out() {
        let r: Compared = serde_json::from_value(json!({
            "id": "gpu0.x", "status": 3, "facts": [1],
            "metrics": [
                {"name": "a", "value": "1", "kind": "nonsense", "between": ["gpu0"]},
                {"value": 2.0},
                7,
                {"name": "b", "value": 2.0, "unit": "GB/s", "kind": "throughput"}
            ]
        }))
        .unwrap();
        assert_eq!(r.id.as_deref(), Some("gpu0.x"));
        assert_eq!(r.status(), "?");
        assert!(r.facts.is_empty());
        let names: Vec<&str> = r.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            (r.metrics[0].value, r.metrics[0].kind, &r.metrics[0].between),
            (None, None, &None)
        );
        assert_eq!(r.metrics[1].kind, Some(MetricKind::Throughput));
    }
}
