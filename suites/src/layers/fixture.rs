//! Nodes for the checks' unit tests: a fixture scenario written to a
//! temporary sysroot and opened in-process, as `rocgate run --sysroot` opens
//! it, so a check runs on it without a worker or a report.

use super::support::Run;
use crate::context::{NodeContext, RunOptions};
use crate::findings::Code;
use crate::thresholds::Thresholds;
use rocgate_harness::{Check, Scope, ScopeKind, SkipReason, Status, Verdict};
use rocgate_node::Sysroot;
use std::path::Path;

/// A fixture node opened for checking.
pub(crate) struct Node {
    /// What the checks read.
    pub ctx: NodeContext,
    /// Some facts are read on first use, so the sysroot outlives them.
    _dir: tempfile::TempDir,
}

/// The fixture `scenario`, opened with the default options.
pub(crate) fn node(scenario: &str) -> Node {
    node_with(scenario, RunOptions::default())
}

/// The fixture `scenario`, opened with `options`.
pub(super) fn node_with(scenario: &str, options: RunOptions) -> Node {
    node_changed_with(scenario, options, |_| {})
}

/// The fixture `scenario` with its written tree changed by `change`
/// (given the sysroot directory), opened with the default options.
pub(super) fn node_changed(scenario: &str, change: impl FnOnce(&Path)) -> Node {
    node_changed_with(scenario, RunOptions::default(), change)
}

/// The fixture `scenario` with its tree changed by `change`, opened
/// with `options`.
pub(super) fn node_changed_with(
    scenario: &str,
    options: RunOptions,
    change: impl FnOnce(&Path),
) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    let fixture = rocgate_fixtures::scenario(scenario).unwrap();
    fixture.spec.write(&root).unwrap();
    change(&root);
    let ctx = NodeContext::open(Sysroot::at(&root), options, None).unwrap();
    Node { ctx, _dir: dir }
}

/// Thresholds with the file-wide `margin`, the usual tolerances and the
/// TOML tables `floors`, as a test's thresholds file would hold them.
pub(super) fn thresholds(margin: f64, floors: &str) -> Thresholds {
    let text = format!(
        "schema_version = 1\nmargin = {margin}\n\n[tolerance]\nfp64 = 1e-12\nfp32 = 1e-5\nfp16 = 2e-3\nbf16 = 1.6e-2\n\n{floors}"
    );
    Thresholds::parse(&text, "test floors").unwrap()
}

impl Node {
    /// The scope of the GPU at PCI address `address`.
    pub fn gpu(&self, address: &str) -> Scope {
        let gpu = self
            .ctx
            .facts
            .gpus
            .iter()
            .find(|g| g.pci_address == address);
        Scope::Gpu(gpu.unwrap().index)
    }

    /// Every GPU's scope.
    pub fn gpus(&self) -> Vec<Scope> {
        self.ctx
            .facts
            .gpus
            .iter()
            .map(|g| Scope::Gpu(g.index))
            .collect()
    }

    /// What `check` reports for `scope`, whichever step ended it.
    pub fn verdict(&self, check: Run, scope: Scope) -> Verdict {
        check(&self.ctx, scope).unwrap_or_else(|v| v)
    }

    /// What `check` reports for `scope`, asserted to be a pass.
    pub fn passes(&self, check: Run, scope: Scope) -> Verdict {
        let v = self.verdict(check, scope);
        assert_eq!(v.status, Status::Pass, "{scope}: {}", v.message);
        v
    }

    /// What `check` reports for `scope`, asserted to be a skip for `reason`.
    pub fn skips(&self, check: Run, scope: Scope, reason: SkipReason) -> Verdict {
        let v = self.verdict(check, scope);
        assert_eq!(v.skip_reason, Some(reason), "{scope}: {}", v.message);
        v
    }

    /// Asserts that every check of `checks` (a layer's registry) that
    /// calls a vendor library skips on each of its scopes, with a reason
    /// and a message, when this node's runtime layers cannot run: a
    /// check that could not call its library never passes and never
    /// fails. The library's own checks say that the runtime is off.
    pub fn assert_skip_without_runtime(&self, checks: &[Check<NodeContext>]) {
        let off = self.ctx.runtime.disabled.as_ref().map(|(kind, _)| *kind);
        assert!(off.is_some(), "this node's runtime layers run");
        let mut said_off = false;
        for check in checks.iter().filter(|c| c.isolated) {
            let scopes = match check.scope {
                ScopeKind::Node => vec![Scope::Node],
                ScopeKind::PerGpu => self.gpus(),
            };
            for scope in scopes {
                let v = self.verdict(check.run, scope);
                let id = check.id;
                assert_eq!(v.status, Status::Skipped, "{id} on {scope}: {}", v.message);
                assert!(v.skip_reason.is_some() && !v.message.is_empty(), "{id}");
                said_off |= v.skip_reason == off && v.message.contains("runtime layers");
            }
        }
        assert!(said_off, "no check said that the runtime layers are off");
    }

    /// Asserts that each of `checks` passes on every GPU.
    pub fn assert_pass_on_every_gpu(&self, checks: &[Run]) {
        for scope in self.gpus() {
            for check in checks {
                self.passes(*check, scope);
            }
        }
    }
}

/// What `check` reports for `scope` of the fixture `scenario`, asserted
/// to be a failure with `want`'s code.
pub(super) fn fails_with(scenario: &str, check: Run, scope: Scope, want: Code) -> Verdict {
    let v = node(scenario).verdict(check, scope);
    assert_eq!(code(&v), Some(want.code), "{}", v.message);
    v
}

/// As [`fails_with`], and the failure's message says `says`.
pub(super) fn fails_saying(scenario: &str, check: Run, scope: Scope, want: Code, says: &str) {
    let v = fails_with(scenario, check, scope, want);
    assert!(v.message.contains(says), "{scenario}: {}", v.message);
}

/// Asserts that `v` failed with `want`'s code and that its message says
/// `says`.
pub(super) fn assert_found(v: &Verdict, want: Code, says: &str) {
    assert_eq!(code(v), Some(want.code), "{}", v.message);
    assert!(v.message.contains(says), "{}", v.message);
}

/// Asserts that `v` failed with `want`'s code and that its message begins
/// with `start`.
pub(super) fn assert_found_first(v: &Verdict, want: Code, start: &str) {
    assert_eq!(code(v), Some(want.code), "{}", v.message);
    assert!(v.message.starts_with(start), "{}", v.message);
}

/// The verdict's next step, if it failed.
pub(super) fn next_step(v: &Verdict) -> String {
    v.finding
        .as_ref()
        .map(|f| f.next_step.clone())
        .unwrap_or_default()
}

/// The verdict's finding code, if it failed.
pub(super) fn code(v: &Verdict) -> Option<&str> {
    v.finding.as_ref().map(|f| f.code.as_str())
}
