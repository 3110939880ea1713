//! PCIe Access Control Services (ACS) on the bridges above each GPU: which
//! bridges lie between a GPU and its root bus (the path its sysfs entry
//! leads to), and what each bridge's ACS Control register says, read from
//! its config space.
//!
//! Sources: Linux `include/uapi/linux/pci_regs.h` (`PCI_EXT_CAP_ID_ACS`
//! 0x0d, `PCI_ACS_CAP` 0x04, `PCI_ACS_CTRL` 0x06, the `PCI_ACS_*` control
//! bits, `PCI_EXT_CAP_NEXT(header)` = `(header >> 20) & 0xffc`);
//! `drivers/pci/pci.c` `pci_find_next_ext_capability` (the list starts at
//! 0x100 and ends at a next offset below it); `drivers/pci/pci-sysfs.c`
//! `config_read` (without CAP_SYS_ADMIN a reader gets the first 64 bytes,
//! 128 for a CardBus bridge).

use super::pci::{PCI_DEVICES, is_pci_address};
use crate::sysroot::ReadErrorKind;
use crate::{ReadError, Sysroot};
use std::path::{Component, Path};

/// The config space of a PCIe function (`PCI_CFG_SPACE_EXP_SIZE`): all a
/// read of `config` needs.
pub const CONFIG_BYTES: u64 = 0x1000;

/// Where the extended capabilities start (`PCI_CFG_SPACE_SIZE`).
const EXTENDED: usize = 0x100;

/// The ACS extended capability's id (`PCI_EXT_CAP_ID_ACS`).
const ACS_ID: u32 = 0x000d;

/// The ACS Capability and Control registers, from the capability's start.
const ACS_CAP: usize = 0x04;
const ACS_CTRL: usize = 0x06;

/// P2P Request Redirect (`PCI_ACS_RR`).
pub const REQUEST_REDIRECT: u16 = 0x0004;
/// P2P Completion Redirect (`PCI_ACS_CR`).
pub const COMPLETION_REDIRECT: u16 = 0x0008;
/// P2P Egress Control (`PCI_ACS_EC`).
pub const EGRESS_CONTROL: u16 = 0x0020;

/// The control bits that send peer-to-peer requests or completions up to
/// the root complex (or block them) instead of across the bridge.
pub const REDIRECTS: u16 = REQUEST_REDIRECT | COMPLETION_REDIRECT | EGRESS_CONTROL;

/// The ACS control bits, named as `lspci -vvv` names them in `ACSCtl:`.
const BITS: [(u16, &str); 7] = [
    (0x0001, "SrcValid"),
    (0x0002, "TransBlk"),
    (REQUEST_REDIRECT, "ReqRedir"),
    (COMPLETION_REDIRECT, "CmpltRedir"),
    (0x0010, "UpstreamFwd"),
    (EGRESS_CONTROL, "EgressCtrl"),
    (0x0040, "DirectTrans"),
];

/// What a bridge's config space says about ACS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acs {
    /// The bytes end before the first extended capability header, so the
    /// ACS capability cannot be looked for: the kernel gave an unprivileged
    /// reader the first 64 bytes, or exposes no extended space (256).
    Hidden {
        /// How many bytes there were.
        bytes: usize,
    },
    /// The extended capability list ends without an ACS capability.
    Absent,
    /// The ACS capability.
    Present {
        /// Its offset in config space.
        offset: usize,
        /// The ACS Capability register (what the bridge can do).
        capability: u16,
        /// The ACS Control register (what is on).
        control: u16,
    },
    /// The capability list cannot be followed: why.
    Broken(String),
}

impl Acs {
    /// The redirecting control bits that are on (0 when there is no ACS).
    pub fn redirects(&self) -> u16 {
        match self {
            Acs::Present { control, .. } => control & REDIRECTS,
            _ => 0,
        }
    }
}

/// The names of the control bits set in `bits` (`ReqRedir`, `CmpltRedir`).
pub fn bit_names(bits: u16) -> Vec<&'static str> {
    BITS.iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// Finds the ACS capability in config space bytes (little-endian), as the
/// kernel walks the extended capability list. Never panics: a list that
/// leads past the bytes, loops or reads as all ones is `Broken`.
pub fn parse(config: &[u8]) -> Acs {
    let word = |at: usize| {
        config
            .get(at..at.checked_add(2)?)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let dword = |at: usize| {
        config
            .get(at..at.checked_add(4)?)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if config.len() < EXTENDED + 4 {
        return Acs::Hidden {
            bytes: config.len(),
        };
    }
    // Next offsets are masked to 0xffc, so a dword index below 0x400
    // names every header the walk can reach.
    let mut visited = [false; 0x400];
    let mut at = EXTENDED;
    loop {
        let Some(header) = dword(at) else {
            return Acs::Broken(format!(
                "the capability list leads to {at:#x}, past the {} bytes read",
                config.len()
            ));
        };
        if header == u32::MAX {
            return Acs::Broken(format!(
                "the capability header at {at:#x} reads as all ones (the device did not answer)"
            ));
        }
        if header & 0xffff == ACS_ID {
            return match (word(at + ACS_CAP), word(at + ACS_CTRL)) {
                (Some(capability), Some(control)) => Acs::Present {
                    offset: at,
                    capability,
                    control,
                },
                _ => Acs::Broken(format!(
                    "the ACS capability at {at:#x} ends past the {} bytes read",
                    config.len()
                )),
            };
        }
        visited[at / 4] = true;
        let next = ((header >> 20) & 0xffc) as usize;
        // 0 ends the list; the kernel stops at any offset below 0x100.
        if next < EXTENDED {
            return Acs::Absent;
        }
        if visited[next / 4] {
            return Acs::Broken(format!("the capability list loops back to {next:#x}"));
        }
        at = next;
    }
}

/// Whether a path component is a root bus (`pci0000:00`, `pci10000:e0`).
fn is_root_bus(part: &str) -> bool {
    part.strip_prefix("pci")
        .and_then(|r| r.split_once(':'))
        .is_some_and(|(domain, bus)| {
            !domain.is_empty()
                && bus.len() == 2
                && domain.len() <= 8
                && (domain.bytes().chain(bus.bytes())).all(|c| c.is_ascii_hexdigit())
        })
}

/// The bridges in a device's sysfs path: the PCI addresses between its
/// last root bus and the device itself (`address`), nearest the root
/// first. Empty when the path does not end at `address` below a root bus.
pub fn bridges_in(path: &Path, address: &str) -> Vec<String> {
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let Some(root) = parts.iter().rposition(|p| is_root_bus(p)) else {
        return Vec::new();
    };
    match parts[root + 1..].split_last() {
        Some((last, above)) if last == address && above.iter().all(|b| is_pci_address(b)) => {
            above.to_vec()
        }
        _ => Vec::new(),
    }
}

/// The root bus in a device's sysfs path (`pci0000:00`): its root
/// complex, the last one on the path.
pub fn root_bus_in(path: &Path) -> Option<String> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .rfind(|p| is_root_bus(p))
        .map(str::to_string)
}

/// Where the `/sys/bus/pci/devices` entry of the function at `address`
/// leads (a link into `/sys/devices/pci<domain>:<bus>/...`); `None` when
/// the entry is no link, whose path to the root is unknown.
pub fn device_path(
    sysroot: &Sysroot,
    address: &str,
) -> Result<Option<std::path::PathBuf>, ReadError> {
    match sysroot.link_target(&format!("{PCI_DEVICES}/{address}")) {
        // A directory rather than a link: the path to the root is unknown.
        Err(e) if matches!(e.kind, ReadErrorKind::Malformed(_)) => Ok(None),
        other => other,
    }
}

/// The bridges above the PCI function at `address`, nearest the root
/// first, from where its `/sys/bus/pci/devices` entry leads. Empty when
/// the entry is no link.
pub fn bridges_above(sysroot: &Sysroot, address: &str) -> Result<Vec<String>, ReadError> {
    Ok(device_path(sysroot, address)?
        .map(|target| bridges_in(&target, address))
        .unwrap_or_default())
}

/// The ACS of the bridge at `address`, from its `config` file.
pub fn read(sysroot: &Sysroot, address: &str) -> Result<Acs, ReadError> {
    let config = sysroot.read_bytes(&format!("{PCI_DEVICES}/{address}/config"), CONFIG_BYTES)?;
    Ok(parse(&config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn put(config: &mut [u8], at: usize, bytes: &[u8]) {
        config[at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn header(id: u32, version: u32, next: u32) -> [u8; 4] {
        (id | version << 16 | next << 20).to_le_bytes()
    }

    /// A switch downstream port as `lspci -xxxx` shows one: AER at 0x100,
    /// Secondary PCIe at 0x148, ACS at 0x168 (Capability 0x005f, Control
    /// `control`).
    fn downstream_port(control: u16) -> Vec<u8> {
        let mut c = vec![0u8; CONFIG_BYTES as usize];
        put(&mut c, 0x00, &[0x00, 0x10, 0x30, 0xc0]);
        put(&mut c, 0x08, &[0x00, 0x00, 0x04, 0x06]);
        c[0x0e] = 0x01;
        put(&mut c, 0x100, &header(0x0001, 2, 0x148));
        put(&mut c, 0x148, &header(0x0019, 1, 0x168));
        put(&mut c, 0x168, &header(0x000d, 1, 0));
        put(&mut c, 0x16c, &0x005fu16.to_le_bytes());
        put(&mut c, 0x16e, &control.to_le_bytes());
        c
    }

    #[test]
    fn the_acs_control_register_is_found_down_the_capability_list() {
        let on = parse(&downstream_port(0x001d));
        assert_eq!(
            on,
            Acs::Present {
                offset: 0x168,
                capability: 0x005f,
                control: 0x001d
            }
        );
        assert_eq!(on.redirects(), REQUEST_REDIRECT | COMPLETION_REDIRECT);
        assert_eq!(
            bit_names(on.redirects()),
            ["ReqRedir", "CmpltRedir"],
            "lspci's names"
        );
        assert_eq!(parse(&downstream_port(0)).redirects(), 0);
        assert_eq!(
            bit_names(0x7f).len(),
            7,
            "every control bit of pci_regs.h has a name"
        );
    }

    #[test]
    fn a_list_without_acs_ends_and_a_short_read_hides_it() {
        let mut c = downstream_port(0x000c);
        put(&mut c, 0x148, &header(0x0019, 1, 0));
        assert_eq!(parse(&c), Acs::Absent);
        // No extended capabilities at all.
        assert_eq!(parse(&[0u8; 0x1000]), Acs::Absent);
        // What sysfs gives a reader without CAP_SYS_ADMIN, and a function
        // without extended config space.
        let full = downstream_port(0x000c);
        assert_eq!(parse(&full[..64]), Acs::Hidden { bytes: 64 });
        assert_eq!(parse(&full[..256]), Acs::Hidden { bytes: 256 });
        // A next offset below 0x100 ends the list, as in the kernel.
        put(&mut c, 0x148, &header(0x0019, 1, 0x40));
        assert_eq!(parse(&c), Acs::Absent);
    }

    #[test]
    fn a_damaged_list_is_broken_not_absent() {
        let mut looped = downstream_port(0);
        put(&mut looped, 0x148, &header(0x0019, 1, 0x100));
        assert!(matches!(parse(&looped), Acs::Broken(why) if why.contains("loops")));
        let truncated = &downstream_port(0)[..0x150];
        assert!(matches!(parse(truncated), Acs::Broken(why) if why.contains("past")));
        let acs_cut = &downstream_port(0)[..0x16d];
        assert!(matches!(parse(acs_cut), Acs::Broken(_)));
        let mut gone = vec![0u8; 0x1000];
        put(&mut gone, 0x100, &[0xff; 4]);
        assert!(matches!(parse(&gone), Acs::Broken(why) if why.contains("all ones")));
    }

    #[test]
    fn the_bridges_are_the_addresses_between_the_root_bus_and_the_gpu() {
        let path = Path::new(
            "../../../devices/pci0000:00/0000:00:01.1/0000:03:00.0/0000:04:00.0/0000:05:00.0",
        );
        assert_eq!(
            bridges_in(path, "0000:05:00.0"),
            ["0000:00:01.1", "0000:03:00.0", "0000:04:00.0"]
        );
        assert!(
            bridges_in(
                Path::new("../../../devices/pci0000:00/0000:05:00.0"),
                "0000:05:00.0"
            )
            .is_empty()
        );
        // A link that leads elsewhere names no bridge.
        assert!(bridges_in(path, "0000:06:00.0").is_empty());
        assert!(bridges_in(Path::new("/somewhere/0000:05:00.0"), "0000:05:00.0").is_empty());
        // Below a VMD domain, the bridges since its root bus.
        let vmd = Path::new(
            "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0",
        );
        assert_eq!(bridges_in(vmd, "10000:e1:00.0"), ["10000:e0:06.0"]);
    }

    proptest! {
        #[test]
        fn no_config_bytes_panic_the_parser(bytes in proptest::collection::vec(any::<u8>(), 0..0x1100)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn no_capability_chain_panics_the_parser(
            links in proptest::collection::vec((any::<u16>(), 0u32..0x1000), 0..24),
            len in 0x100usize..0x1000,
        ) {
            // Headers laid where earlier ones point, so the walk goes deep.
            let mut c = vec![0u8; len];
            let mut at = 0x100usize;
            for (id, next) in links {
                if at + 4 > c.len() {
                    break;
                }
                c[at..at + 4].copy_from_slice(&(u32::from(id) | next << 20).to_le_bytes());
                at = (next & 0xffc) as usize;
            }
            let _ = parse(&c);
        }

        #[test]
        fn no_link_target_panics_the_path_reader(path in "\\PC{0,80}", address in "\\PC{0,14}") {
            let _ = bridges_in(Path::new(&path), &address);
        }
    }
}
