//! The declaration of a check: static metadata plus the function that runs it.

use crate::model::{Layer, Scope, ScopeKind, Tier};
use crate::verdict::Verdict;
use std::time::Duration;

/// What running a check gives: `Ok` is the verdict reached at its last step;
/// `Err` is a verdict that ended the check early (a failure or skip found
/// before its last step), so a check can stop at any step with `?`. Both are
/// reported alike.
pub type Outcome = Result<Verdict, Verdict>;

/// One named test of a layer. `C` is the context the suites hand the engine
/// (for rocgate: the node's facts and the run's options).
pub struct Check<C> {
    /// `layer::name`, e.g. `kfd::topology_node`; stable across releases.
    pub id: &'static str,
    /// The layer the check belongs to.
    pub layer: Layer,
    /// Node-wide or per GPU.
    pub scope: ScopeKind,
    /// The lowest tier that runs it.
    pub tier: Tier,
    /// Ids of checks that must pass (or skip) before this one runs, beyond the
    /// implicit layer gating. A node-wide dependency of a per-GPU check is the
    /// node instance; a per-GPU dependency is the same GPU's instance.
    pub deps: &'static [&'static str],
    /// Whether a failure blocks the layers above it.
    pub gates: bool,
    /// Longest time the check may take before it is reported `timeout`.
    pub timeout: Duration,
    /// How long it usually takes on a healthy GPU of the largest kind the
    /// suites know (an MI300X), estimated from its own work: what progress
    /// counts its time left by, and `list --tiers` sums. An estimate, not
    /// a limit.
    pub typical: Duration,
    /// Run in the scope's worker process (it calls vendor libraries that may
    /// hang or crash), not in rocgate's own process.
    pub isolated: bool,
    /// It runs for as long as the run asks (a burn-in's `--duration`,
    /// [`crate::ExecOptions::sustain`]) on top of its own `timeout` and
    /// `typical`, which then cover only what it does around that time.
    pub sustained: bool,
    /// One line: what the check verifies.
    pub summary: &'static str,
    /// Runs the check for one scope.
    pub run: fn(&C, Scope) -> Outcome,
}

impl<C> Check<C> {
    /// A quick-tier, gating check of `layer` that runs in-process within
    /// `timeout` and has no explicit dependencies; change the rest with
    /// struct update syntax (`Check { deps, ..Check::new(...) }`).
    pub const fn new(
        id: &'static str,
        layer: Layer,
        scope: ScopeKind,
        timeout: Duration,
        summary: &'static str,
        run: fn(&C, Scope) -> Outcome,
    ) -> Self {
        Check {
            id,
            layer,
            scope,
            tier: Tier::Quick,
            deps: &[],
            gates: true,
            timeout,
            typical: Duration::from_millis(10),
            isolated: false,
            sustained: false,
            summary,
            run,
        }
    }

    /// The same check, usually taking `typical` ([`Check::typical`]):
    /// `isolated(...).typically(Duration::from_secs(3))`.
    pub const fn typically(self, typical: Duration) -> Self {
        Check { typical, ..self }
    }

    /// The check's name without its layer (`topology_node`).
    pub fn name(&self) -> &'static str {
        self.id.split_once("::").map_or(self.id, |(_, name)| name)
    }

    /// The test id of this check in `scope` (`gpu3.kfd.topology_node`).
    pub fn test_id(&self, scope: Scope) -> String {
        format!("{}.{}.{}", scope.label(), self.layer, self.name())
    }
}

impl<C> Clone for Check<C> {
    fn clone(&self) -> Self {
        Check { ..*self }
    }
}

impl<C> std::fmt::Debug for Check<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("id", &self.id)
            .field("layer", &self.layer)
            .field("scope", &self.scope)
            .field("tier", &self.tier)
            .finish_non_exhaustive()
    }
}
