//! What a run produced: one result per check instance, plus the identity of
//! each scope.

use crate::model::{Layer, Scope, Tier};
use crate::verdict::{Finding, Metric, SkipReason, Status};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// The outcome of one check instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Test id: `<scope>.<layer>.<name>`.
    pub id: String,
    /// The check's id: `<layer>::<name>`.
    pub check: String,
    /// The layer.
    pub layer: Layer,
    /// Node or GPU.
    pub scope: Scope,
    /// The outcome.
    pub status: Status,
    /// One line for humans.
    pub message: String,
    /// The diagnosis, for failures.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub finding: Option<Finding>,
    /// For skipped results: why the check did not look.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub skip_reason: Option<SkipReason>,
    /// Whether the check is advisory (it does not gate the layers above):
    /// its failure is reported after the failures that stop the stack.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub advisory: bool,
    /// For blocked results: the test id of the failed check at the root.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub blocked_by: Option<String>,
    /// Wall time of the check.
    #[serde(
        rename = "duration_ms",
        serialize_with = "as_millis",
        deserialize_with = "from_millis"
    )]
    pub duration: Duration,
    /// Captured evidence, cleaned and bounded.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub output: String,
    /// Measured values.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub metrics: Vec<Metric>,
    /// Facts the check learned (library paths, versions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub facts: BTreeMap<String, String>,
}

impl CheckResult {
    /// The check's name without its layer.
    pub fn name(&self) -> &str {
        self.check
            .split_once("::")
            .map_or(self.check.as_str(), |(_, n)| n)
    }
}

fn as_millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    // Microsecond resolution: node checks take well under a millisecond.
    s.serialize_f64((d.as_secs_f64() * 1e6).round() / 1e3)
}

fn from_millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let ms = f64::deserialize(d)?;
    Duration::try_from_secs_f64(ms / 1e3).map_err(serde::de::Error::custom)
}

/// Identity of one scope (a GPU's PCI address, gfx target, serial...), carried
/// into reports as properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScopeInfo {
    /// Ordered `(name, value)` pairs.
    pub properties: Vec<(String, String)>,
}

impl ScopeInfo {
    /// Adds a property.
    pub fn push(&mut self, name: &str, value: impl Into<String>) {
        self.properties.push((name.to_string(), value.into()));
    }

    /// The value of a property.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Everything one run produced.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The tier that was planned.
    pub tier: Tier,
    /// When the run started.
    pub started_at: chrono::DateTime<chrono::Local>,
    /// Wall time of the whole run.
    pub duration: Duration,
    /// Results in plan order.
    pub results: Vec<CheckResult>,
    /// Identity of the node (index 0 of this list is not special; keyed by scope).
    pub scopes: Vec<(Scope, ScopeInfo)>,
    /// Set when the run was cut short, with the reason (`SIGINT`).
    pub interrupted: Option<String>,
    /// `--strict`: a check that could not verify fails the run.
    pub strict: bool,
}

impl RunReport {
    /// Every scope present in the results, node first.
    pub fn scope_list(&self) -> Vec<Scope> {
        let mut scopes: Vec<Scope> = self.results.iter().map(|r| r.scope).collect();
        scopes.extend(self.scopes.iter().map(|(s, _)| *s));
        scopes.sort();
        scopes.dedup();
        scopes
    }

    /// Properties of a scope: its identity, then the facts its checks learned.
    pub fn scope_info(&self, scope: Scope) -> ScopeInfo {
        let mut info = self
            .scopes
            .iter()
            .find(|(s, _)| *s == scope)
            .map(|(_, i)| i.clone())
            .unwrap_or_default();
        for r in self.results.iter().filter(|r| r.scope == scope) {
            for (k, v) in &r.facts {
                if info.get(k).is_none() {
                    info.push(k, v.clone());
                }
            }
        }
        info
    }

    /// The lowest layer with a fault that stops the stack in `scope` (or
    /// across all scopes if `None`); with only advisory faults, the lowest
    /// of those.
    pub fn first_failing_layer(&self, scope: Option<Scope>) -> Option<Layer> {
        let faults = || {
            self.results
                .iter()
                .filter(move |r| r.status.is_fault() && scope.is_none_or(|s| r.scope == s))
        };
        faults()
            .filter(|r| !r.advisory)
            .map(|r| r.layer)
            .min()
            .or_else(|| faults().map(|r| r.layer).min())
    }

    /// How many results have each status.
    pub fn count(&self, status: Status) -> usize {
        self.results.iter().filter(|r| r.status == status).count()
    }

    /// How many skipped results have `reason`.
    pub fn count_skipped(&self, reason: SkipReason) -> usize {
        self.results
            .iter()
            .filter(|r| r.status == Status::Skipped && r.skip_reason == Some(reason))
            .count()
    }

    /// The checks that could not verify what they check.
    pub fn unverified(&self) -> Vec<&CheckResult> {
        self.results
            .iter()
            .filter(|r| {
                r.status == Status::Skipped && r.skip_reason == Some(SkipReason::Unverifiable)
            })
            .collect()
    }

    /// Whether the run passes: complete, every result passed or was
    /// skipped, and under `--strict` none was skipped for want of a look.
    pub fn all_passed(&self) -> bool {
        self.interrupted.is_none()
            && self
                .results
                .iter()
                .all(|r| matches!(r.status, Status::Pass | Status::Skipped))
            && (!self.strict || self.unverified().is_empty())
    }
}
