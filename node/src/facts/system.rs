//! Host settings AMD's Instinct system guides set for GPU nodes, as the
//! kernel exposes them: how the IOMMU maps each GPU
//! (`/sys/bus/pci/devices/<bdf>/iommu_group/type`: `identity` is
//! passthrough, `DMA`/`DMA-FQ` translation; no group, no IOMMU), NUMA
//! balancing (`/proc/sys/kernel/numa_balancing`), transparent huge pages
//! (`/sys/kernel/mm/transparent_hugepage/enabled`, the bracketed choice),
//! each CPU's frequency governor
//! (`/sys/devices/system/cpu/cpu<N>/cpufreq/scaling_governor`, else the
//! policies' `/sys/devices/system/cpu/cpufreq/policy<N>/scaling_governor`).
//! Read by the system layer's checks.

use crate::{ReadError, Sysroot};
use std::collections::BTreeMap;

/// Where the kernel lists the CPUs.
const CPUS: &str = "/sys/devices/system/cpu";

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

/// How many CPUs run each frequency governor (`performance`: 64), or
/// `None` when no CPU exposes cpufreq (a VM, or firmware that keeps the
/// frequency to itself). CPUs come first; the policies are read only when
/// no CPU has a `cpufreq` directory, each counting once.
pub fn cpu_governors(sysroot: &Sysroot) -> Result<Option<BTreeMap<String, usize>>, ReadError> {
    let Some(cpus) = sysroot.list_dir_if_present(CPUS)? else {
        return Ok(None);
    };
    let mut governors = BTreeMap::new();
    let tally = |governors: &mut BTreeMap<String, usize>, file: String| {
        if let Some(text) = sysroot.read_opt(&file)? {
            let name = match text.trim_end_matches('\0').trim() {
                "" => "(empty)".to_string(),
                name => name.to_string(),
            };
            *governors.entry(name).or_insert(0) += 1;
        }
        Ok::<(), ReadError>(())
    };
    for cpu in numbered(&cpus, "cpu") {
        tally(
            &mut governors,
            format!("{CPUS}/{cpu}/cpufreq/scaling_governor"),
        )?;
    }
    if governors.is_empty() {
        let dir = format!("{CPUS}/cpufreq");
        let policies = sysroot.list_dir_if_present(&dir)?.unwrap_or_default();
        for policy in numbered(&policies, "policy") {
            tally(&mut governors, format!("{dir}/{policy}/scaling_governor"))?;
        }
    }
    Ok((!governors.is_empty()).then_some(governors))
}

/// The entries named `prefix` and a number (`cpu12`, not `cpufreq`).
fn numbered<'a>(entries: &'a [String], prefix: &'a str) -> impl Iterator<Item = &'a String> {
    entries.iter().filter(move |e| {
        e.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
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

    #[test]
    fn governors_are_counted_per_cpu_else_per_policy() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        assert_eq!(cpu_governors(&root).unwrap(), None);
        let cpus = dir.path().join("sys/devices/system/cpu");
        for (cpu, governor) in ["performance", "powersave", "powersave"].iter().enumerate() {
            let policy = cpus.join(format!("cpufreq/policy{cpu}"));
            std::fs::create_dir_all(&policy).unwrap();
            std::fs::write(policy.join("scaling_governor"), format!("{governor}\n")).unwrap();
        }
        for cpu in 0..4 {
            std::fs::create_dir_all(cpus.join(format!("cpu{cpu}"))).unwrap();
        }
        let want = Some(
            [("performance".to_string(), 1), ("powersave".to_string(), 2)]
                .into_iter()
                .collect(),
        );
        // Policies alone (no cpu*/cpufreq link) count one each.
        assert_eq!(cpu_governors(&root).unwrap(), want);
        // The CPUs' links to their policies, as the kernel makes them.
        for cpu in 0..3 {
            let link = cpus.join(format!("cpu{cpu}/cpufreq"));
            std::os::unix::fs::symlink(format!("../cpufreq/policy{cpu}"), link).unwrap();
        }
        assert_eq!(cpu_governors(&root).unwrap(), want);
        // No cpufreq anywhere: the firmware keeps the frequency.
        std::fs::remove_dir_all(cpus.join("cpufreq")).unwrap();
        assert_eq!(cpu_governors(&root).unwrap(), None);
    }

    proptest! {
        #[test]
        fn no_choice_file_panics_the_reader(text in "\\PC*") {
            let _ = selected(&text);
        }
    }
}
