//! Where a GPU that is gone from the PCI bus was, so that a drain reason
//! can name its address rather than "the node".
//!
//! A GPU that falls off the bus (a link down, a card that stops
//! answering) leaves traces: the PCIe port of its slot stays, with nothing
//! below it (on MI300-class GPUs the slot port is the one above the switch
//! inside the GPU's package, which goes with the GPU; the GPU sat as many
//! buses below the port's secondary bus as its present siblings do); amdgpu named its address in the kernel log when it probed it
//! at boot; the slot's hot-plug controller logs the link going down
//! (`pciehp_ctrl.c`: `pcieport <port>: pciehp: Slot(%s): Link Down`). The
//! address of the device below a port is `<domain>:<secondary bus>:00.0`,
//! the secondary bus from the port's `secondary_bus_number` (pci-sysfs.c,
//! `%u`).
//!
//! Read only when GPUs are missing: it looks at every PCI function.

use super::acs::bridges_above;
use super::pci::{PCI_DEVICES, PciScan, is_pci_address, parse_hex, physical_link};
use crate::Sysroot;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Component;
use std::sync::LazyLock;

/// A PCI function's vendor and device id.
type Ids = (u64, u64);

/// A port as the GPUs' ports are told apart: its ids and those of the
/// bridge above it.
type Signature = (Ids, Option<Ids>);

/// A place where a GPU was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingGpu {
    /// Its PCI address, when something names it.
    pub address: Option<String>,
    /// What says it was there.
    pub evidence: Vec<String>,
}

/// `amdgpu 0000:a6:00.0: ...`: amdgpu speaking of a device it drove.
static AMDGPU_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\bamdgpu ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):").ok()
});

/// `pcieport 0000:a5:00.0: pciehp: Slot(5): Link Down` (or `Card not
/// present`): pciehp_ctrl.c's messages for a slot that lost its device.
static SLOT_DOWN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"\bpcieport ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): pciehp: Slot\(([^)]*)\): (Link Down|Card not present)",
    )
    .ok()
});

/// Addresses amdgpu named in `lines` that are not GPUs on the bus now. An
/// address whose entry is there but could not be read (`scan.errors`) is
/// not gone: it could not be identified.
pub fn logged_but_gone(lines: &[String], scan: &PciScan) -> Vec<String> {
    let Some(re) = AMDGPU_LINE.as_ref() else {
        return Vec::new();
    };
    let present: BTreeSet<String> = scan.gpus.iter().map(|g| g.address.to_lowercase()).collect();
    let unread = |a: &str| {
        scan.errors
            .iter()
            .any(|e| e.path.to_string_lossy().to_lowercase().contains(a))
    };
    let mut gone: Vec<String> = lines
        .iter()
        .filter_map(|l| re.captures(l))
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_lowercase()))
        .filter(|a| !present.contains(a) && !unread(a))
        .collect();
    gone.sort();
    gone.dedup();
    gone
}

/// The PCI function whose sysfs directory holds `address`'s, if a bridge.
fn parent_of(sysroot: &Sysroot, address: &str) -> Option<String> {
    bridges_above(sysroot, address).ok()?.pop()
}

/// The slot port of a present GPU: the port at the far end of its
/// physical link, above the switch inside the GPU's package if it has one
/// (MI300X: `1022:1500` and `1002:1501`, which vanish with the GPU when it
/// falls off the bus); see [`physical_link`].
fn slot_port_of(sysroot: &Sysroot, address: &str) -> Option<String> {
    physical_link(sysroot, address).ok()?.partner
}

/// The bus number of a `dddd:bb:dd.f` address.
fn bus_of(address: &str) -> Option<u8> {
    let bus = address.get(address.len().checked_sub(7)?..address.len().checked_sub(5)?)?;
    u8::from_str_radix(bus, 16).ok()
}

/// The places where the GPUs missing from the bus were: ports of the kind
/// the present GPUs sit below that have nothing below them, and addresses
/// amdgpu logged this boot that are gone, with what the kernel log says of
/// their slots. `log` is the current boot's kernel log, when readable.
pub fn locate(sysroot: &Sysroot, scan: &PciScan, log: Option<&[String]>) -> Vec<MissingGpu> {
    let mut found: BTreeMap<String, MissingGpu> = BTreeMap::new();
    let ids = |address: &str| -> Option<(u64, u64, u64)> {
        let hex = |f: &str| {
            sysroot
                .read_text(&format!("{PCI_DEVICES}/{address}/{f}"))
                .ok()
                .and_then(|t| parse_hex(&t))
        };
        Some((hex("vendor")?, hex("device")?, hex("class")?))
    };
    // The ports the present GPUs hang off, by their ids and those of the
    // bridge above them (a switch's upstream and downstream ports share
    // ids; only a downstream port sits below an upstream one).
    let signature = |port: &str| -> Option<Signature> {
        let (v, d, _) = ids(port)?;
        let above = parent_of(sysroot, port)
            .and_then(|p| ids(&p))
            .map(|(v, d, _)| (v, d));
        Some(((v, d), above))
    };
    let secondary = |port: &str| {
        sysroot
            .read_text(&format!("{PCI_DEVICES}/{port}/secondary_bus_number"))
            .ok()
            .and_then(|t| t.trim().parse::<u8>().ok())
    };
    // For each kind of slot port, how many buses below its secondary bus
    // the present GPUs sit (0 for a GPU in the slot itself, 2 behind an
    // MI300X's internal switch): where a missing GPU of that slot was.
    let mut slot_ids: BTreeMap<Signature, u8> = BTreeMap::new();
    for g in &scan.gpus {
        let Some(port) = slot_port_of(sysroot, &g.address) else {
            continue;
        };
        let Some(sig) = signature(&port) else {
            continue;
        };
        let depth = match (bus_of(&g.address), secondary(&port)) {
            (Some(bus), Some(first)) => bus.saturating_sub(first),
            _ => 0,
        };
        slot_ids.entry(sig).or_insert(depth);
    }
    let all: Vec<String> = sysroot
        .list_dir(PCI_DEVICES)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| is_pci_address(a))
        .collect();
    // Which functions have a function below them.
    let mut parents: BTreeSet<String> = BTreeSet::new();
    for a in &all {
        if let Ok(Some(target)) = sysroot.link_target(&format!("{PCI_DEVICES}/{a}")) {
            let parts: Vec<String> = target
                .components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect();
            if let [.., parent, last] = parts.as_slice() {
                if last == a && is_pci_address(parent) {
                    parents.insert(parent.clone());
                }
            }
        }
    }
    if !slot_ids.is_empty() {
        for port in all.iter().filter(|a| !parents.contains(*a)) {
            let Some((v, d, class)) = ids(port) else {
                continue;
            };
            // A PCI-to-PCI bridge (class 0x0604xx) of the kind GPUs sit below.
            let Some(depth) = signature(port).and_then(|s| slot_ids.get(&s).copied()) else {
                continue;
            };
            if class >> 8 != 0x0604 {
                continue;
            }
            let below = secondary(port)
                .and_then(|bus| bus.checked_add(depth))
                .map(|bus| format!("{}:{bus:02x}:00.0", &port[..4]));
            let key = below.clone().unwrap_or_else(|| format!("below {port}"));
            found.insert(
                key,
                MissingGpu {
                    address: below,
                    evidence: vec![format!(
                        "its PCIe port {port} ({v:04x}:{d:04x}) has no device below it"
                    )],
                },
            );
        }
    }
    if let Some(lines) = log {
        for gone in logged_but_gone(lines, scan) {
            let entry = found.entry(gone.clone()).or_insert_with(|| MissingGpu {
                address: Some(gone.clone()),
                evidence: Vec::new(),
            });
            entry
                .evidence
                .push("amdgpu drove it earlier this boot (kernel log)".to_string());
        }
        if let Some(re) = SLOT_DOWN.as_ref() {
            for c in lines.iter().filter_map(|l| re.captures(l)) {
                let (Some(port), Some(slot), Some(what)) = (c.get(1), c.get(2), c.get(3)) else {
                    continue;
                };
                let port = port.as_str().to_lowercase();
                let said = format!("slot {} of port {port}: {}", slot.as_str(), what.as_str());
                // The slot's device is the one whose port this is.
                let parent_matches = |m: &MissingGpu| {
                    m.evidence.iter().any(|e| e.contains(&port))
                        || m.address
                            .as_deref()
                            .and_then(|a| parent_of(sysroot, a))
                            .as_deref()
                            == Some(port.as_str())
                };
                if let Some(m) = found.values_mut().find(|m| parent_matches(m)) {
                    if !m.evidence.contains(&said) {
                        m.evidence.push(said);
                    }
                }
            }
        }
    }
    found.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_amdgpu_logged_that_are_gone_are_named_once() {
        let scan = PciScan {
            gpus: vec![super::super::pci::PciDevice {
                address: "0000:05:00.0".into(),
                device_id: 0x74a1,
                class: 0x120000,
                driver: None,
                current_link_width: None,
                max_link_width: None,
                current_link_speed: None,
                max_link_speed: None,
                unread: Vec::new(),
            }],
            ..PciScan::default()
        };
        let lines: Vec<String> = [
            "[ 5.1] amdgpu 0000:05:00.0: amdgpu: Fetched VBIOS from IFWI",
            "[ 5.2] amdgpu 0000:A6:00.0: amdgpu: Fetched VBIOS from IFWI",
            "[ 7.0] amdgpu 0000:a6:00.0: amdgpu: SE 32",
            "amdgpu: something without an address",
            "\u{0}\u{ffff} amdgpu 0000:zz:00.0:",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(logged_but_gone(&lines, &scan), ["0000:a6:00.0"]);
    }

    #[test]
    fn a_bus_number_is_read_from_an_address() {
        assert_eq!(bus_of("0000:a6:00.0"), Some(0xa6));
        assert_eq!(bus_of("10000:e1:00.0"), Some(0xe1));
        assert_eq!(bus_of("zz"), None);
        assert_eq!(bus_of("0000:g1:00.0"), None);
    }
}
