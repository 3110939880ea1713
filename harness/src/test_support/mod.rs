//! What the engine's unit tests share: a result and a run made in one
//! line, text and reports of any content for property tests, and a JUnit
//! reader that checks what a strict consumer would.

pub(crate) mod strategies;
pub(crate) mod xml;

use crate::document::IdentityKeys;
use crate::model::{Layer, Scope, Tier};
use crate::result::{CheckResult, RunReport};
use crate::verdict::{Finding, Status};

/// A result of `status` with test id `id` (`gpu0.b.x`) of the check
/// `layer::x` (the id's last part), that found nothing and said nothing.
pub(crate) fn result(id: &str, layer: Layer, scope: Scope, status: Status) -> CheckResult {
    let name = id.rsplit('.').next().unwrap_or(id);
    CheckResult::new(id.into(), format!("{layer}::{name}"), layer, scope, status)
}

/// A result of the check `layer::x` on `scope` (test id `scope.layer.x`)
/// with a finding of `code`, when given, as serious as its status.
pub(crate) fn coded(scope: Scope, layer: Layer, status: Status, code: Option<&str>) -> CheckResult {
    let mut r = result(
        &format!("{}.{layer}.x", scope.label()),
        layer,
        scope,
        status,
    );
    r.finding = code.map(|c| Finding::new(c, r.status_severity(), "m", "n"));
    r
}

/// A quick run of `results` that started now, took no time and saw no
/// GPU's identity.
pub(crate) fn run(results: Vec<CheckResult>) -> RunReport {
    RunReport::new(Tier::Quick, results)
}

/// What the tests' reports mean by their names: the identity properties
/// as the suites name them; a metric that states no kind is a throughput
/// when its unit is a rate, a counter when it counts `errors`.
pub(crate) const TERMS: crate::compare::Terms = crate::compare::Terms {
    identity: KEYS,
    kind_of_unit: rate_or_count,
};

fn rate_or_count(unit: &str) -> crate::MetricKind {
    match unit {
        "errors" => crate::MetricKind::Counter,
        u if u.ends_with("/s") => crate::MetricKind::Throughput,
        _ => crate::MetricKind::Count,
    }
}

/// The identity properties as the suites name them.
pub(crate) const KEYS: IdentityKeys = IdentityKeys {
    host: "hostname",
    address: "pci_address",
    serial: "unique_id",
};
