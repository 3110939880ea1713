//! The vocabulary of a run: layers, tiers and scopes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A layer of the stack under test. The engine knows a layer only by its
/// name, which reports print, and its rank, which orders it: a check at a
/// higher rank depends on every gating check at a lower one. The suites
/// define the layers (for rocgate, `rocgate_suites::stack`), so the engine
/// plans, gates and reports any stack the same way.
///
/// Layers compare by rank first, so sorting them, or taking the least of
/// them, goes bottom-up.
///
/// A layer [beside](Layer::beside) the stack (the network cards next to
/// the GPUs) is ranked with the others, so a report still names the stack's
/// own first failing layer before it, but neither waits for the stack's
/// layers nor holds them up: a GPU driver that did not load says nothing of
/// a NIC's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Layer {
    // Field order matters: the derived `Ord` compares the rank first.
    rank: u8,
    name: &'static str,
    beside: bool,
}

impl Layer {
    /// The layer called `name` (as test ids and reports spell it: `kfd`) at
    /// position `rank` of its stack, counted from the bottom.
    pub const fn new(name: &'static str, rank: u8) -> Self {
        Layer {
            rank,
            name,
            beside: false,
        }
    }

    /// A layer called `name` at `rank` that stands beside the stack rather
    /// than on it: implicit gating ties none of its checks to another
    /// layer's, either way (explicit dependencies still hold).
    pub const fn beside(name: &'static str, rank: u8) -> Self {
        Layer {
            rank,
            name,
            beside: true,
        }
    }

    /// Whether the layer stands beside the stack ([`Layer::beside`]).
    pub const fn is_beside(self) -> bool {
        self.beside
    }

    /// The layer's id as used in test ids and reports (`kfd`).
    pub const fn as_str(self) -> &'static str {
        self.name
    }

    /// The layer's position in its stack, counted from the bottom.
    pub const fn rank(self) -> u8 {
        self.rank
    }

    /// The layer of `layers` called `name`: how a name read from text (a
    /// saved report) becomes a layer again, since text carries no rank.
    pub fn named(name: &str, layers: &[Layer]) -> Result<Layer, UnknownLayer> {
        layers
            .iter()
            .copied()
            .find(|l| l.name == name)
            .ok_or_else(|| UnknownLayer {
                name: name.to_string(),
                known: layers.iter().map(|l| l.name).collect::<Vec<_>>().join(", "),
            })
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Reports carry a layer as its name alone; reading one back takes the
/// stack's layers ([`Layer::named`]), so `Layer` has no `Deserialize`.
impl Serialize for Layer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

/// A layer in a report: its name (the stack says which names there are).
impl schemars::JsonSchema for Layer {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Layer".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[a-z][a-z0-9_]*$",
            "description": "The layer's name (`pci`, `kfd`, `hip`)."
        })
    }
}

/// A layer name that is not one of the stack's layers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown layer '{name}'; known layers: {known}")]
pub struct UnknownLayer {
    /// The name as written.
    pub name: String,
    /// The stack's layer names, bottom-up, comma-separated.
    pub known: String,
}

/// How deep a run goes. Each tier includes the checks of the tiers below it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Files only: sysfs, RAS counters, thermals, the kernel log, versions
    /// and system settings. No vendor library is loaded, no worker started
    /// and no device opened, so it is safe on a node whose GPUs run jobs.
    Passive,
    /// Seconds: the node layers up to a HIP smoke test.
    #[default]
    Quick,
    /// Adds library correctness, small collectives and bandwidth.
    Standard,
    /// Adds performance floors and stress.
    Extended,
    /// Adds sustained load for a chosen duration (minutes to days): every
    /// GPU loaded at once while its telemetry is sampled, and its results
    /// compared iteration by iteration and across GPUs.
    Burnin,
}

impl Tier {
    /// Every tier, shallowest first.
    pub const ALL: [Tier; 5] = [
        Tier::Passive,
        Tier::Quick,
        Tier::Standard,
        Tier::Extended,
        Tier::Burnin,
    ];

    /// The tier's name (`quick`).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Passive => "passive",
            Tier::Quick => "quick",
            Tier::Standard => "standard",
            Tier::Extended => "extended",
            Tier::Burnin => "burnin",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "passive" => Ok(Tier::Passive),
            "quick" => Ok(Tier::Quick),
            "standard" => Ok(Tier::Standard),
            "extended" => Ok(Tier::Extended),
            "burnin" => Ok(Tier::Burnin),
            other => Err(format!(
                "unknown tier '{other}'; use passive, quick, standard, extended or burnin"
            )),
        }
    }
}

/// Where a check declares it runs: once for the node, or once per GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// Once per node.
    Node,
    /// Once per selected GPU (a partition counts as one GPU).
    PerGpu,
}

/// Where one check instance runs: the node, or GPU number N of the inventory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Node-wide.
    Node,
    /// The GPU with this inventory index.
    Gpu(u32),
}

impl Scope {
    /// The scope's label in test ids and report suites (`node`, `gpu3`).
    pub fn label(self) -> String {
        match self {
            Scope::Node => "node".to_string(),
            Scope::Gpu(i) => format!("gpu{i}"),
        }
    }

    /// The GPU index, if this is a GPU scope.
    pub fn gpu(self) -> Option<u32> {
        match self {
            Scope::Node => None,
            Scope::Gpu(i) => Some(i),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Node => f.write_str("node"),
            Scope::Gpu(i) => write!(f, "gpu{i}"),
        }
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// A scope in a report: its label.
impl schemars::JsonSchema for Scope {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Scope".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(node|gpu[0-9]+)$",
            "description": "`node`, or `gpuN` for the GPU of inventory index N."
        })
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read in place: a fleet's reports hold hundreds of scopes each.
        struct Label;
        impl serde::de::Visitor<'_> for Label {
            type Value = Scope;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scope (node, gpu0, gpu1, ...)")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Scope, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Label)
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "node" {
            return Ok(Scope::Node);
        }
        s.strip_prefix("gpu")
            .and_then(|n| n.parse().ok())
            .map(Scope::Gpu)
            .ok_or_else(|| format!("'{s}' is not a scope (node, gpu0, gpu1, ...)"))
    }
}

/// A small stack of the tests' own, so that the engine's tests show it
/// needs no ROCm layer.
#[cfg(test)]
pub(crate) mod test_stack {
    use super::{Layer, Scope, ScopeKind};
    use crate::check::Check;
    use crate::check::Outcome;
    use crate::verdict::Verdict;
    use std::time::Duration;

    /// A quick, gating, in-process check that passes within a second.
    pub fn passing(id: &'static str, layer: Layer, scope: ScopeKind) -> Check<()> {
        Check {
            timeout: Duration::from_secs(1),
            ..timed(id, layer, scope, |_, _| Ok(Verdict::pass("ok")))
        }
    }

    /// A quick, gating, in-process check running `run` with a 300 ms timeout.
    pub fn timed(
        id: &'static str,
        layer: Layer,
        scope: ScopeKind,
        run: fn(&(), Scope) -> Outcome,
    ) -> Check<()> {
        Check::new(id, layer, scope, Duration::from_millis(300), "", run)
    }

    /// The bottom layer.
    pub const A: Layer = Layer::new("a", 0);
    /// Above `a`.
    pub const B: Layer = Layer::new("b", 1);
    /// Above `b`.
    pub const C: Layer = Layer::new("c", 2);
    /// Above `c`.
    pub const D: Layer = Layer::new("d", 3);
    /// The top layer.
    pub const E: Layer = Layer::new("e", 4);
    /// Every layer, bottom-up.
    pub const ALL: &[Layer] = &[A, B, C, D, E];
}

#[cfg(test)]
mod tests {
    use super::test_stack::{A, ALL, B, C, D, E};
    use super::*;

    #[test]
    fn layers_are_ordered_by_rank() {
        assert!(A < B && B < C && C < D && D < E);
        // The rank decides, not the name.
        assert!(Layer::new("z", 0) < Layer::new("a", 1));
        let mut sorted = vec![E, C, A, D, B];
        sorted.sort();
        assert_eq!(sorted, ALL);
        assert_eq!(ALL.iter().min(), Some(&A));
    }

    #[test]
    fn layers_print_and_serialise_as_their_names() {
        assert_eq!(C.to_string(), "c");
        assert_eq!(C.as_str(), "c");
        assert_eq!(C.rank(), 2);
        assert_eq!(serde_json::to_string(&Some(D)).unwrap(), r#""d""#);
    }

    #[test]
    fn names_round_trip() {
        for l in ALL {
            assert_eq!(Layer::named(l.as_str(), ALL), Ok(*l));
        }
        for t in Tier::ALL {
            assert_eq!(t.as_str().parse::<Tier>(), Ok(t));
        }
        assert_eq!("gpu12".parse::<Scope>(), Ok(Scope::Gpu(12)));
        assert_eq!("node".parse::<Scope>(), Ok(Scope::Node));
        assert!("gpux".parse::<Scope>().is_err());
        let unknown = Layer::named("kfd", ALL).unwrap_err();
        assert_eq!(unknown.name, "kfd");
        assert_eq!(
            unknown.to_string(),
            "unknown layer 'kfd'; known layers: a, b, c, d, e"
        );
        assert!(Layer::named("a", &[]).is_err());
    }
}
