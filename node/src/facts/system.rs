//! Host settings AMD's Instinct system guides set for GPU nodes, as the
//! kernel exposes them: how the IOMMU maps each GPU
//! (`/sys/bus/pci/devices/<bdf>/iommu_group/type`: `identity` is
//! passthrough, `DMA`/`DMA-FQ` translation; no group, no IOMMU), NUMA
//! balancing (`/proc/sys/kernel/numa_balancing`), transparent huge pages
//! (`/sys/kernel/mm/transparent_hugepage/enabled`, the bracketed choice).
//! Read by the system layer's checks.

use crate::{ReadError, Sysroot};

/// How the IOMMU translates one GPU's DMA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IommuMode {
    /// No IOMMU group: the IOMMU is off or absent.
    Off,
    /// `identity`: passthrough (`iommu=pt`).
    Passthrough,
    /// Translated (`DMA`, `DMA-FQ`, or another type, as written).
    Translated(String),
}

/// The IOMMU mode of the GPU at `address`.
pub fn iommu_mode(sysroot: &Sysroot, address: &str) -> Result<IommuMode, ReadError> {
    let group = format!("/sys/bus/pci/devices/{address}/iommu_group");
    if !sysroot.exists(&group) {
        return Ok(IommuMode::Off);
    }
    let kind = sysroot.read_text(&format!("{group}/type"))?;
    Ok(match kind.trim_end_matches('\0').trim() {
        "identity" => IommuMode::Passthrough,
        other => IommuMode::Translated(other.to_string()),
    })
}

/// `/proc/sys/kernel/numa_balancing` (0 off, 1 on, 2 memory tiering), or
/// `None` on a kernel without it.
pub fn numa_balancing(sysroot: &Sysroot) -> Result<Option<String>, ReadError> {
    Ok(sysroot
        .read_opt("/proc/sys/kernel/numa_balancing")?
        .map(|t| t.trim_end_matches('\0').trim().to_string()))
}

/// The transparent-huge-page mode in force (`always`, `madvise`, `never`):
/// the bracketed word of the `enabled` file; `None` when absent.
pub fn transparent_hugepages(sysroot: &Sysroot) -> Result<Option<String>, ReadError> {
    Ok(sysroot
        .read_opt("/sys/kernel/mm/transparent_hugepage/enabled")?
        .and_then(|t| selected(&t)))
}

/// The bracketed choice of a sysfs choice file (`always [madvise] never`).
pub fn selected(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let len = text[start..].find(']')?;
    Some(text[start..start + len].to_string()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_bracketed_choice_is_the_one_in_force() {
        assert_eq!(
            selected("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            selected("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(selected("always madvise never"), None);
        assert_eq!(selected("[]"), None);
    }

    proptest! {
        #[test]
        fn no_choice_file_panics_the_reader(text in "\\PC*") {
            let _ = selected(&text);
        }
    }
}
