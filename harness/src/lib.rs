//! The rocgate engine.
//!
//! It knows nothing about ROCm: it plans checks over scopes (the node and each
//! GPU), runs them with gating and timeouts, and writes reports. The suites
//! crate supplies the checks, the context they read and the layers they
//! belong to: a [`Layer`] is a name and a rank, and the rank alone orders
//! gating, diagnoses and reports.

pub mod atomic;
pub mod check;
pub mod compare;
pub mod deadline;
pub mod doctor;
pub mod document;
pub mod exec;
pub mod fleet;
pub mod isolate;
pub mod json;
pub mod junit;
mod loose;
pub mod markdown;
pub mod model;
pub mod output;
pub mod pair_grid;
pub mod plan;
pub mod policy;
pub mod prom;
pub mod result;
pub mod saved_report;
pub mod signal;
#[cfg(test)]
mod test_support;
pub mod verdict;

pub use check::{Check, Outcome};
pub use exec::{Event, ExecOptions, execute};
pub use model::{Layer, Scope, ScopeKind, Tier, UnknownLayer};
pub use plan::{Plan, PlanError, plan};
pub use policy::{CheckPattern, Selection, Waiver, WaiverNote, Waivers};
pub use result::{CheckResult, RunReport, SavedResult, ScopeInfo};
pub use verdict::{
    Finding, Metric, MetricKind, Series, Severity, SkipReason, Spread, Status, Verdict,
};
