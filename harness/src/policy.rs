//! A site's policy over a run: which checks it covers (`--only`,
//! `--skip`) and which findings it has decided to accept (waivers).
//!
//! Both are resolved by the front end (from flags and the config file)
//! into the plain matchers here, so the engine applies them without
//! knowing where they came from: a check excluded by the selection is
//! skipped as not configured, never silently absent; a waived result is
//! still reported, with its reason, but blocks nothing and fails nothing.

use crate::check::Check;
use crate::model::{Layer, Scope};
use crate::result::CheckResult;
use crate::verdict::{SkipReason, Status};
use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

/// One way of naming checks: a check id (`hip::memtest`), a glob over
/// check ids (`hip::*`, `*::memtest`) or a layer's name (`rccl`).
#[derive(Clone, Debug)]
pub struct CheckPattern {
    text: String,
    matcher: PatternKind,
}

#[derive(Clone, Debug)]
enum PatternKind {
    Layer(String),
    Ids(GlobMatcher),
}

impl CheckPattern {
    /// `text` as a pattern over the checks of `registry`; an error names
    /// what it matches nothing of, and where to look.
    pub fn parse<C>(text: &str, registry: &[Check<C>]) -> Result<CheckPattern, String> {
        let text = text.trim();
        let layers: Vec<Layer> = {
            let mut l: Vec<Layer> = registry.iter().map(|c| c.layer).collect();
            l.sort();
            l.dedup();
            l
        };
        let matcher = if layers.iter().any(|l| l.as_str() == text) {
            PatternKind::Layer(text.to_string())
        } else if text.contains("::") || text.contains(['*', '?', '[']) {
            let glob = Glob::new(text)
                .map_err(|e| format!("'{text}' is not a check pattern: {e}"))?
                .compile_matcher();
            PatternKind::Ids(glob)
        } else {
            let names: Vec<&str> = layers.iter().map(|l| l.as_str()).collect();
            return Err(format!(
                "'{text}' is neither a layer ({}) nor a check id such as hip::memtest or a glob such as 'hip::*'; `rocgate list` shows the checks",
                names.join(", ")
            ));
        };
        let pattern = CheckPattern {
            text: text.to_string(),
            matcher,
        };
        if !registry.iter().any(|c| pattern.matches(c.id, c.layer)) {
            return Err(format!(
                "'{text}' matches no check; `rocgate list --tier extended` shows every check id"
            ));
        }
        Ok(pattern)
    }

    /// Whether the check `id` of `layer` is one this pattern names.
    pub fn matches(&self, id: &str, layer: Layer) -> bool {
        match &self.matcher {
            PatternKind::Layer(name) => layer.as_str() == name,
            PatternKind::Ids(glob) => glob.is_match(id),
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Which checks a run covers: every check unless `only` names some, less
/// those `skip` names.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// When not empty, only checks one of these names run.
    pub only: Vec<CheckPattern>,
    /// Checks these name do not run.
    pub skip: Vec<CheckPattern>,
    /// Where the selection came from, for the skip message (`--only`, or
    /// the config file's path).
    pub origin: String,
}

impl Selection {
    /// Why the check `id` of `layer` is left out of the run, if it is.
    pub fn excludes(&self, id: &str, layer: Layer) -> Option<String> {
        let list = |ps: &[CheckPattern]| {
            ps.iter()
                .map(CheckPattern::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let origin = if self.origin.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.origin)
        };
        if !self.only.is_empty() && !self.only.iter().any(|p| p.matches(id, layer)) {
            return Some(format!(
                "not selected: only {} run{origin}",
                list(&self.only)
            ));
        }
        self.skip
            .iter()
            .find(|p| p.matches(id, layer))
            .map(|p| format!("not selected: skipped by '{}'{origin}", p.as_str()))
    }

    /// Whether the selection leaves anything out at all.
    pub fn is_everything(&self) -> bool {
        self.only.is_empty() && self.skip.is_empty()
    }
}

/// What a report says of the waiver that matched a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct WaiverNote {
    /// Why the site accepts it (required in the config file).
    pub reason: String,
    /// The date the waiver stops applying (`YYYY-MM-DD`), if it has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires: Option<String>,
    /// Whether that date has come: the waiver no longer applies, and the
    /// result counts as if it had none.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub expired: bool,
    /// Where the waiver is written (`/etc/rocgate/rocgate.toml:12`).
    pub source: String,
}

/// One waiver: what it matches, and its note.
#[derive(Clone, Debug)]
pub struct Waiver {
    /// The finding code it accepts, if it names one.
    pub code: Option<String>,
    /// The checks it accepts, if it names them.
    pub checks: Option<CheckPattern>,
    /// The scopes it applies in (the GPUs it names); all when `None`.
    pub scopes: Option<Vec<Scope>>,
    /// What reports say of it.
    pub note: WaiverNote,
}

impl Waiver {
    /// Whether this waiver speaks of `r`: a result that found something
    /// (a failure, warning, timeout or crash) or could not look, of the
    /// code and checks and in the scopes the waiver names.
    pub fn matches(&self, r: &CheckResult) -> bool {
        let waivable = r.status.has_finding()
            || (r.status == Status::Skipped && r.skip_reason == Some(SkipReason::Unverifiable));
        let code = self
            .code
            .as_deref()
            .is_none_or(|c| r.finding.as_ref().is_some_and(|f| f.code == c));
        let check = self
            .checks
            .as_ref()
            .is_none_or(|p| p.matches(&r.check, r.layer));
        let scope = self.scopes.as_ref().is_none_or(|s| s.contains(&r.scope));
        waivable && code && check && scope
    }
}

/// A site's waivers, in the order written: the first that applies wins,
/// and an expired one is reported only when no other applies.
#[derive(Clone, Debug, Default)]
pub struct Waivers(pub Vec<Waiver>);

impl Waivers {
    /// Notes on `r` the waiver that covers it, else an expired one that
    /// would have.
    pub fn apply(&self, r: &mut CheckResult) {
        let matching = || self.0.iter().filter(|w| w.matches(r));
        let chosen = matching()
            .find(|w| !w.note.expired)
            .or_else(|| matching().next());
        r.waiver = chosen.map(|w| w.note.clone());
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScopeKind;
    use crate::model::test_stack::{A, B, passing};
    use crate::verdict::{Finding, Severity};

    fn registry() -> Vec<Check<()>> {
        vec![
            passing("a::one", A, ScopeKind::Node),
            passing("a::two", A, ScopeKind::PerGpu),
            passing("b::three", B, ScopeKind::PerGpu),
        ]
    }

    #[test]
    fn patterns_name_layers_ids_and_globs_and_refuse_what_matches_nothing() {
        let reg = registry();
        let layer = CheckPattern::parse("a", &reg).unwrap();
        assert!(layer.matches("a::one", A) && !layer.matches("b::three", B));
        let glob = CheckPattern::parse("*::t*", &reg).unwrap();
        assert!(glob.matches("a::two", A) && glob.matches("b::three", B));
        assert!(!glob.matches("a::one", A));
        let id = CheckPattern::parse("b::three", &reg).unwrap();
        assert!(id.matches("b::three", B));
        let e = CheckPattern::parse("c", &reg).unwrap_err();
        assert!(e.contains("neither a layer (a, b)"), "{e}");
        let e = CheckPattern::parse("b::four", &reg).unwrap_err();
        assert!(e.contains("matches no check"), "{e}");
        assert!(CheckPattern::parse("a::[", &reg).is_err());
    }

    #[test]
    fn a_selection_says_why_it_leaves_a_check_out() {
        let reg = registry();
        let sel = Selection {
            only: vec![CheckPattern::parse("a", &reg).unwrap()],
            skip: vec![CheckPattern::parse("a::two", &reg).unwrap()],
            origin: "--only".into(),
        };
        assert_eq!(sel.excludes("a::one", A), None);
        assert_eq!(
            sel.excludes("a::two", A).as_deref(),
            Some("not selected: skipped by 'a::two' (--only)")
        );
        assert_eq!(
            sel.excludes("b::three", B).as_deref(),
            Some("not selected: only a run (--only)")
        );
        assert!(Selection::default().is_everything());
    }

    fn found(code: &str, status: Status, scope: Scope) -> CheckResult {
        let mut r = CheckResult::new("t".into(), "a::one".into(), A, scope, status);
        r.finding = Some(Finding::new(code, Severity::Warn, "m", "n"));
        r
    }

    fn note(reason: &str, expired: bool) -> WaiverNote {
        WaiverNote {
            reason: reason.into(),
            expires: None,
            expired,
            source: "f:1".into(),
        }
    }

    #[test]
    fn waivers_match_code_check_and_scope_and_prefer_one_in_force() {
        let reg = registry();
        let waivers = Waivers(vec![
            Waiver {
                code: Some("numa".into()),
                checks: None,
                scopes: None,
                note: note("old", true),
            },
            Waiver {
                code: Some("numa".into()),
                checks: Some(CheckPattern::parse("a::*", &reg).unwrap()),
                scopes: Some(vec![Scope::Gpu(3)]),
                note: note("gpu3 only", false),
            },
        ]);
        let mut r = found("numa", Status::Warn, Scope::Gpu(3));
        waivers.apply(&mut r);
        assert_eq!(
            r.waiver.as_ref().map(|w| w.reason.as_str()),
            Some("gpu3 only")
        );
        assert!(r.waived());
        // Elsewhere only the expired waiver matches: noted, not applied.
        let mut other = found("numa", Status::Warn, Scope::Gpu(1));
        waivers.apply(&mut other);
        assert!(other.waiver.as_ref().is_some_and(|w| w.expired));
        assert!(!other.waived());
        // Another code, or a pass, is never waived.
        let mut pass = found("numa", Status::Pass, Scope::Gpu(3));
        waivers.apply(&mut pass);
        assert_eq!(pass.waiver, None);
        let mut code = found("thp", Status::Warn, Scope::Gpu(3));
        waivers.apply(&mut code);
        assert_eq!(code.waiver, None);
    }
}
