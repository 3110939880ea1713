//! The vocabulary of a run: layers, tiers and scopes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A layer of the ROCm stack, ordered bottom-up: a check at a higher layer
/// depends on every gating check below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// Silicon on the PCI bus.
    Pci,
    /// Microcode loaded by amdgpu at probe.
    Firmware,
    /// The DRM kernel driver.
    Amdgpu,
    /// The compute kernel driver (amdkfd) and its topology.
    Kfd,
    /// Whether the node's versions (firmware, driver, kernel, OS, ROCm) are a
    /// supported combination.
    Compat,
    /// The ROCr/HSA runtime.
    Hsa,
    /// The HIP runtime.
    Hip,
    /// rocBLAS.
    Rocblas,
    /// MIOpen.
    Miopen,
    /// RCCL collectives.
    Rccl,
}

impl Layer {
    /// Every layer, bottom-up.
    pub const ALL: [Layer; 10] = [
        Layer::Pci,
        Layer::Firmware,
        Layer::Amdgpu,
        Layer::Kfd,
        Layer::Compat,
        Layer::Hsa,
        Layer::Hip,
        Layer::Rocblas,
        Layer::Miopen,
        Layer::Rccl,
    ];

    /// The layer's id as used in test ids and reports (`kfd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Pci => "pci",
            Layer::Firmware => "firmware",
            Layer::Amdgpu => "amdgpu",
            Layer::Kfd => "kfd",
            Layer::Compat => "compat",
            Layer::Hsa => "hsa",
            Layer::Hip => "hip",
            Layer::Rocblas => "rocblas",
            Layer::Miopen => "miopen",
            Layer::Rccl => "rccl",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Layer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layer::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<_> = Layer::ALL.iter().map(|l| l.as_str()).collect();
                format!("unknown layer '{s}'; known layers: {}", known.join(", "))
            })
    }
}

/// How deep a run goes. Each tier includes the checks of the tiers below it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Seconds: the node layers up to a HIP smoke test.
    #[default]
    Quick,
    /// Adds library correctness, small collectives and bandwidth.
    Standard,
    /// Adds performance floors and stress.
    Extended,
}

impl Tier {
    /// The tier's name (`quick`).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Quick => "quick",
            Tier::Standard => "standard",
            Tier::Extended => "extended",
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
            "quick" => Ok(Tier::Quick),
            "standard" => Ok(Tier::Standard),
            "extended" => Ok(Tier::Extended),
            other => Err(format!(
                "unknown tier '{other}'; use quick, standard or extended"
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

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_ordered_bottom_up() {
        assert!(Layer::Pci < Layer::Firmware);
        assert!(Layer::Amdgpu < Layer::Kfd);
        assert!(Layer::Kfd < Layer::Compat && Layer::Compat < Layer::Hsa);
        assert!(Layer::Rocblas < Layer::Rccl);
        let mut sorted = Layer::ALL;
        sorted.sort();
        assert_eq!(sorted, Layer::ALL);
    }

    #[test]
    fn names_round_trip() {
        for l in Layer::ALL {
            assert_eq!(l.as_str().parse::<Layer>(), Ok(l));
        }
        for t in [Tier::Quick, Tier::Standard, Tier::Extended] {
            assert_eq!(t.as_str().parse::<Tier>(), Ok(t));
        }
        assert_eq!("gpu12".parse::<Scope>(), Ok(Scope::Gpu(12)));
        assert_eq!("node".parse::<Scope>(), Ok(Scope::Node));
        assert!("gpux".parse::<Scope>().is_err());
        assert!(
            "bogus"
                .parse::<Layer>()
                .unwrap_err()
                .contains("known layers")
        );
    }
}
