//! The JSON run report (schema_version 1) as one set of types: what
//! `rocgate run --json` writes ([`crate::json`]) and what every reader of a
//! saved report takes back (`fleet report`, `compare`).
//!
//! The writer fills every field. A reader asks only for what it judges by
//! ([`Document::results`] and [`Document::passed`]); every other field that
//! is missing or of another type reads as empty, so a report written oddly
//! where a reader does not look (a `null` reading in a metric the fleet
//! never reads) still has its results read. Results and the decision are
//! type parameters: the writer's are the run's own [`CheckResult`]s, each
//! reader's the part of a result it judges.

use crate::result::CheckResult;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON results layout; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// A run report: its verdict, the node and each scope's identity, the
/// component versions, and every result.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
#[serde(bound(deserialize = "R: Deserialize<'de>, D: Deserialize<'de>"))]
pub struct Document<R = CheckResult, D = serde_json::Value> {
    /// [`SCHEMA_VERSION`] (readers check it first:
    /// [`crate::saved_report::check_schema`]).
    #[serde(default, deserialize_with = "lenient")]
    #[schemars(extend("const" = SCHEMA_VERSION))]
    pub schema_version: u32,
    /// The producer and its version (`rocgate 0.1.0`).
    #[serde(default, deserialize_with = "lenient")]
    pub tool: String,
    /// The tier run (`quick`, `standard`, `extended`).
    #[serde(default, deserialize_with = "lenient")]
    pub tier: String,
    /// When the run started (RFC 3339).
    #[serde(default, deserialize_with = "lenient")]
    pub started_at: String,
    /// How long it took, in milliseconds.
    #[serde(default, deserialize_with = "lenient")]
    pub duration_ms: f64,
    /// Why the run stopped early, if it did.
    #[serde(default)]
    pub interrupted: Option<String>,
    /// Whether the run passed (as its exit code judges).
    pub passed: bool,
    /// `--strict`: a check that could not look fails the run.
    #[serde(default)]
    pub strict: bool,
    /// `warn` under `--fail-on warn`, else `fail`.
    #[serde(default)]
    pub fail_on: Option<String>,
    /// What the run means for those who act on it (exit code, health,
    /// drain), as the front end decided it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub decision: Option<D>,
    /// The lowest layer with a fault.
    #[serde(default)]
    pub first_failing_layer: Option<String>,
    /// How many results have each status.
    #[serde(default, deserialize_with = "lenient")]
    pub summary: BTreeMap<String, usize>,
    /// How many skipped results were skipped for each reason.
    #[serde(default, deserialize_with = "lenient")]
    pub skipped_by_reason: BTreeMap<String, usize>,
    /// Test ids of the checks that could not look.
    #[serde(default, deserialize_with = "lenient")]
    pub unverified: Vec<String>,
    /// Test ids of the checks that warned.
    #[serde(default, deserialize_with = "lenient")]
    pub warnings: Vec<String>,
    /// Test ids of the results a waiver covers.
    #[serde(default, deserialize_with = "lenient")]
    pub waived: Vec<String>,
    /// The node's properties (host name, sysroot, kernel, driver).
    #[serde(default, deserialize_with = "crate::loose::strings_of")]
    pub node: BTreeMap<String, String>,
    /// Each scope's component versions (`node`, `gpu0`, ...).
    #[serde(default, deserialize_with = "crate::loose::versions_of")]
    pub versions: BTreeMap<String, BTreeMap<String, String>>,
    /// Each scope with its identity (an entry of another shape is left
    /// out, the others kept).
    #[serde(default, deserialize_with = "crate::loose::scopes_of")]
    pub scopes: Vec<ScopeEntry>,
    /// Every result, in run order.
    pub results: Vec<R>,
}

/// One scope of a run (`node`, `gpu3`) and what identifies it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct ScopeEntry {
    /// Its label in this run (`gpu3`): an index, which names another GPU
    /// in another run when KFD numbers them differently.
    pub scope: String,
    /// Its lowest layer with a fault.
    #[serde(default)]
    pub first_failing_layer: Option<String>,
    /// What the suites learned of it: its identity (PCI address, serial)
    /// among them, whose names the suites give ([`IdentityKeys`]).
    #[serde(default, deserialize_with = "crate::loose::strings_of")]
    pub properties: BTreeMap<String, String>,
}

/// The names of the properties that say who a node and its GPUs are, as
/// the suites write them: the engine matches GPUs across runs and labels
/// series by them without knowing what they mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentityKeys {
    /// The node property holding the node's name (`hostname`).
    pub host: &'static str,
    /// The scope property holding a GPU's bus address (`pci_address`),
    /// which stays when another GPU goes.
    pub address: &'static str,
    /// The scope property holding a GPU's serial (`unique_id`), for GPUs
    /// whose address is unknown.
    pub serial: &'static str,
}

impl ScopeEntry {
    /// Its property `key`, when it has one.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }
}

/// `T`, or its default when the value is of another shape: a field no
/// reader judges by never costs a report its reading.
pub(crate) fn lenient<'de, T, De>(d: De) -> Result<T, De::Error>
where
    T: DeserializeOwned + Default,
    De: Deserializer<'de>,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// The elements of a list that are of `T`'s shape; the others (and a value
/// that is not a list) are left out: one odd entry never costs a reader the
/// rest.
pub(crate) fn each<'de, T, De>(d: De) -> Result<Vec<T>, De::Error>
where
    T: DeserializeOwned,
    De: Deserializer<'de>,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(match v {
        serde_json::Value::Array(items) => items
            .into_iter()
            .filter_map(|i| serde_json::from_value(i).ok())
            .collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_no_reader_judges_by_read_as_empty_when_written_oddly() {
        let doc: Document<serde_json::Value> = serde_json::from_value(json!({
            "schema_version": 1, "passed": true, "duration_ms": null, "summary": [1],
            "node": {"hostname": "n1", "cores": 64},
            "versions": {"node": {"rocm": 6}},
            "scopes": [{"scope": "gpu0", "properties": {"pci_address": "0000:05:00.0", "n": 1}}, {"properties": {}}, 3],
            "results": [{"id": "x"}],
        }))
        .unwrap();
        assert_eq!(doc.duration_ms, 0.0);
        assert!(doc.summary.is_empty());
        assert!(doc.versions["node"].is_empty());
        assert_eq!(doc.node, BTreeMap::from([("hostname".into(), "n1".into())]));
        assert_eq!(doc.scopes[0].get("pci_address"), Some("0000:05:00.0"));
        assert_eq!(doc.scopes[0].properties.len(), 1);
        assert_eq!(doc.scopes.len(), 1, "entries without a label are left out");
        // What readers judge by is required.
        assert!(
            serde_json::from_value::<Document<crate::SavedResult>>(json!({"results": []})).is_err()
        );
    }
}
