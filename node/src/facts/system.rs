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

/// The IOMMU mode of the GPU at `address`. A group link that leads
/// nowhere, or a group whose `type` is empty (the kernel always prints one,
/// drivers/iommu/iommu.c `iommu_group_show_type`), is an error naming the
/// file, not an IOMMU that is off.
pub fn iommu_mode(sysroot: &Sysroot, address: &str) -> Result<IommuMode, ReadError> {
    let group = format!("/sys/bus/pci/devices/{address}/iommu_group");
    if !sysroot.exists(&group) {
        // Only no entry at all is no group; a link to nothing is damage.
        return match sysroot.link_target(&group) {
            Ok(Some(target)) => Err(ReadError::malformed(
                &group,
                format!(
                    "a link to {}, which does not exist (a damaged capture?)",
                    target.display()
                ),
            )),
            _ => Ok(IommuMode::Off),
        };
    }
    let path = format!("{group}/type");
    let kind = sysroot.read_text(&path)?;
    Ok(match kind.trim_end_matches('\0').trim() {
        "" => {
            return Err(ReadError::malformed(
                &path,
                "empty: the kernel prints a type",
            ));
        }
        "identity" => IommuMode::Passthrough,
        other => IommuMode::Translated(other.to_string()),
    })
}

/// Where the kernel says whether it balances NUMA memory.
pub const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";

/// Where the kernel says how it uses transparent huge pages.
pub const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// `/proc/sys/kernel/numa_balancing` (0 off, 1 on, 2 memory tiering, a
/// bitmask since Linux 6.0: kernel/sched/fair.c, `sysctl_numa_balancing_mode`
/// printed as an integer), or `None` on a kernel without it; anything but
/// an unsigned integer is an error naming the file.
pub fn numa_balancing(sysroot: &Sysroot) -> Result<Option<String>, ReadError> {
    let Some(text) = sysroot.read_opt(NUMA_BALANCING)? else {
        return Ok(None);
    };
    let value = text.trim_end_matches('\0').trim();
    if value.parse::<u32>().is_err() {
        return Err(ReadError::malformed(
            NUMA_BALANCING,
            format!("{value:?} is not the integer the kernel prints"),
        ));
    }
    Ok(Some(value.to_string()))
}

/// The transparent-huge-page mode in force (`always`, `madvise`, `never`):
/// the bracketed word of the `enabled` file; `None` when absent, an error
/// naming the file when it has no bracketed choice (mm/huge_memory.c
/// always brackets the one in force).
pub fn transparent_hugepages(sysroot: &Sysroot) -> Result<Option<String>, ReadError> {
    let Some(text) = sysroot.read_opt(THP_ENABLED)? else {
        return Ok(None);
    };
    selected(&text).map(Some).ok_or_else(|| {
        ReadError::malformed(
            THP_ENABLED,
            format!(
                "{:?} has no bracketed choice, which the kernel always gives",
                text.chars().take(60).collect::<String>()
            ),
        )
    })
}

/// How many CPUs (or, where the CPUs cannot be counted, cpufreq policies)
/// run each frequency governor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Governors {
    /// Governor name to how many.
    pub counts: BTreeMap<String, usize>,
    /// What is counted: `CPUs`, or `cpufreq policies` when a policy does
    /// not say which CPUs it covers.
    pub unit: &'static str,
}

/// How many CPUs run each frequency governor (`performance`: 64), or
/// `None` when no CPU exposes cpufreq (a VM, or firmware that keeps the
/// frequency to itself). CPUs come first; the policies are read only when
/// no CPU has a `cpufreq` directory, each counting the CPUs it covers
/// (`affected_cpus`: drivers/cpufreq/cpufreq.c `show_cpus`, numbers
/// separated by spaces), since one policy may govern many CPUs.
pub fn cpu_governors(sysroot: &Sysroot) -> Result<Option<Governors>, ReadError> {
    let Some(cpus) = sysroot.list_dir_if_present(CPUS)? else {
        return Ok(None);
    };
    let mut counts = BTreeMap::new();
    let governor = |file: String| -> Result<Option<String>, ReadError> {
        Ok(sysroot
            .read_opt(&file)?
            .map(|text| match text.trim_end_matches('\0').trim() {
                "" => "(empty)".to_string(),
                name => name.to_string(),
            }))
    };
    for cpu in numbered(&cpus, "cpu") {
        if let Some(name) = governor(format!("{CPUS}/{cpu}/cpufreq/scaling_governor"))? {
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    if !counts.is_empty() {
        return Ok(Some(Governors {
            counts,
            unit: "CPUs",
        }));
    }
    let dir = format!("{CPUS}/cpufreq");
    let policies = sysroot.list_dir_if_present(&dir)?.unwrap_or_default();
    let mut by_policy = Vec::new();
    for policy in numbered(&policies, "policy") {
        if let Some(name) = governor(format!("{dir}/{policy}/scaling_governor"))? {
            let covered = sysroot
                .read_opt(&format!("{dir}/{policy}/affected_cpus"))
                .ok()
                .flatten()
                .and_then(|t| cpu_count(&t));
            by_policy.push((name, covered));
        }
    }
    if by_policy.is_empty() {
        return Ok(None);
    }
    let every_known = by_policy.iter().all(|(_, n)| n.is_some());
    for (name, covered) in by_policy {
        let n = if every_known { covered.unwrap_or(1) } else { 1 };
        *counts.entry(name).or_insert(0) += n;
    }
    Ok(Some(Governors {
        counts,
        unit: if every_known {
            "CPUs"
        } else {
            "cpufreq policies"
        },
    }))
}

/// How many CPUs a cpufreq `affected_cpus` lists; `None` unless it is
/// one or more CPU numbers.
pub fn cpu_count(text: &str) -> Option<usize> {
    let numbers: Vec<&str> = text.split_whitespace().collect();
    (!numbers.is_empty() && numbers.iter().all(|n| n.parse::<u32>().is_ok()))
        .then_some(numbers.len())
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
    fn empty_or_unbracketed_settings_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        let write = |host: &str, text: &str| {
            let p = dir.path().join(host.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        assert_eq!(numa_balancing(&root).unwrap(), None);
        assert_eq!(transparent_hugepages(&root).unwrap(), None);
        write(NUMA_BALANCING, "\n");
        write(THP_ENABLED, "always madvise never\n");
        let e = numa_balancing(&root).unwrap_err();
        assert!(e.to_string().contains("numa_balancing"), "{e}");
        let e = transparent_hugepages(&root).unwrap_err();
        assert!(e.to_string().contains("bracketed"), "{e}");
        write(NUMA_BALANCING, "2\n");
        assert_eq!(numa_balancing(&root).unwrap().as_deref(), Some("2"));
        let dev = "/sys/bus/pci/devices/0000:05:00.0";
        std::fs::create_dir_all(dir.path().join(&dev[1..])).unwrap();
        assert_eq!(iommu_mode(&root, "0000:05:00.0").unwrap(), IommuMode::Off);
        std::os::unix::fs::symlink(
            "../../../../kernel/iommu_groups/9",
            dir.path().join(&dev[1..]).join("iommu_group"),
        )
        .unwrap();
        let e = iommu_mode(&root, "0000:05:00.0").unwrap_err();
        assert!(e.to_string().contains("iommu_group"), "{e}");
        write("/sys/kernel/iommu_groups/9/type", "\n");
        let e = iommu_mode(&root, "0000:05:00.0").unwrap_err();
        assert!(e.to_string().contains("iommu_group/type"), "{e}");
        assert_eq!(cpu_count("0 1 2 3\n"), Some(4));
        assert_eq!(cpu_count(""), None);
        assert_eq!(cpu_count("0 x"), None);
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
        let counts: BTreeMap<String, usize> =
            [("performance".to_string(), 1), ("powersave".to_string(), 2)]
                .into_iter()
                .collect();
        let want = Some(Governors {
            counts: counts.clone(),
            unit: "CPUs",
        });
        // Policies alone (no cpu*/cpufreq link) that do not say their CPUs
        // count one each, as policies.
        assert_eq!(
            cpu_governors(&root).unwrap(),
            Some(Governors {
                counts,
                unit: "cpufreq policies"
            })
        );
        // Saying them, they count their CPUs: policy0 covers cpu0 and cpu3.
        for (cpu, covered) in ["0 3", "1", "2"].iter().enumerate() {
            let policy = cpus.join(format!("cpufreq/policy{cpu}"));
            std::fs::write(policy.join("affected_cpus"), format!("{covered}\n")).unwrap();
        }
        assert_eq!(
            cpu_governors(&root).unwrap().unwrap().counts["performance"],
            2
        );
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
            let _ = cpu_count(&text);
        }
    }
}
