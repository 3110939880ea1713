//! AMD GPUs on the PCI bus (`/sys/bus/pci/devices`).

use crate::{ReadError, Sysroot};

/// Host path of the PCI device list.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// AMD's PCI vendor id.
pub const AMD_VENDOR: u16 = 0x1002;

/// One AMD GPU function on the bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciDevice {
    /// `dddd:bb:dd.f`.
    pub address: String,
    /// PCI device id.
    pub device_id: u16,
    /// 24-bit class code (0x030000 VGA, 0x038000 display, 0x120000 accelerator).
    pub class: u32,
    /// Name of the bound driver (`amdgpu`, `vfio-pci`), if any.
    pub driver: Option<String>,
    /// Negotiated link width, when exposed.
    pub current_link_width: Option<u32>,
    /// Maximum link width, when exposed.
    pub max_link_width: Option<u32>,
    /// Negotiated link speed text (`32.0 GT/s PCIe`).
    pub current_link_speed: Option<String>,
    /// Maximum link speed text.
    pub max_link_speed: Option<String>,
    /// Link files that exist but could not be read (a link width that did
    /// not answer is not one the device does not expose).
    pub unread: Vec<ReadError>,
}

impl PciDevice {
    /// Host path of the device's sysfs directory.
    pub fn sysfs_dir(&self) -> String {
        format!("{PCI_DEVICES}/{}", self.address)
    }
}

/// The result of scanning the bus: AMD GPUs, and devices whose identity files
/// could not be read (so a damaged entry is reported, not ignored).
#[derive(Clone, Debug, Default)]
pub struct PciScan {
    /// AMD GPU functions, sorted by address.
    pub gpus: Vec<PciDevice>,
    /// Entries that could not be read.
    pub errors: Vec<ReadError>,
    /// How many PCI functions were looked at.
    pub devices_seen: usize,
}

impl PciScan {
    /// The GPU function at `address`.
    pub fn by_address(&self, address: &str) -> Option<&PciDevice> {
        self.gpus.iter().find(|d| d.address == address)
    }
}

/// Whether a class code is a display controller or processing accelerator.
pub fn is_gpu_class(class: u32) -> bool {
    matches!(class >> 8, 0x0300 | 0x0302 | 0x0380 | 0x1200)
}

/// Parses a `0x`-prefixed hex sysfs value.
pub fn parse_hex(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// Whether `s` looks like a PCI address `dddd:bb:dd.f`.
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 12
        && s.is_ascii()
        && b[b.len() - 2] == b'.'
        && b[b.len() - 5] == b':'
        && b[b.len() - 8] == b':'
        && s.bytes().filter(|c| c.is_ascii_hexdigit()).count() == b.len() - 3
}

/// Scans the bus for AMD GPUs. `Err` only when the device list itself is
/// unreadable.
pub fn scan(root: &Sysroot) -> Result<PciScan, ReadError> {
    let mut scan = PciScan::default();
    for address in root.list_dir(PCI_DEVICES)? {
        if !is_pci_address(&address) {
            continue;
        }
        scan.devices_seen += 1;
        let dir = format!("{PCI_DEVICES}/{address}");
        let hex = |file: &str| -> Result<u64, ReadError> {
            let host = format!("{dir}/{file}");
            let text = root.read_text(&host)?;
            parse_hex(&text).ok_or_else(|| {
                ReadError::malformed(host.as_str(), format!("'{text}' is not a hex number"))
            })
        };
        let vendor = match hex("vendor") {
            Ok(v) => v,
            Err(e) => {
                scan.errors.push(e);
                continue;
            }
        };
        if vendor != u64::from(AMD_VENDOR) {
            continue;
        }
        let (class, device) = match (hex("class"), hex("device")) {
            (Ok(c), Ok(d)) => (c, d),
            (Err(e), _) | (_, Err(e)) => {
                scan.errors.push(e);
                continue;
            }
        };
        let (Ok(class), Ok(device_id)) = (u32::try_from(class), u16::try_from(device)) else {
            scan.errors.push(ReadError::malformed(
                dir.as_str(),
                "class or device id out of range",
            ));
            continue;
        };
        if !is_gpu_class(class) {
            continue;
        }
        let mut unread = Vec::new();
        let mut text = |file: &str| match root.read_opt(&format!("{dir}/{file}")) {
            Ok(t) => t.filter(|t| !t.is_empty()),
            Err(e) => {
                unread.push(e);
                None
            }
        };
        let current_link_width = text("current_link_width").and_then(|t| t.parse().ok());
        let max_link_width = text("max_link_width").and_then(|t| t.parse().ok());
        let current_link_speed = text("current_link_speed");
        let max_link_speed = text("max_link_speed");
        let driver = match root.link_name(&format!("{dir}/driver")) {
            Ok(d) => d,
            Err(e) => {
                scan.errors.push(e);
                None
            }
        };
        scan.gpus.push(PciDevice {
            driver,
            current_link_width,
            max_link_width,
            current_link_speed,
            max_link_speed,
            unread,
            address,
            device_id,
            class,
        });
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn recognises_addresses_classes_and_hex() {
        assert!(is_pci_address("0000:05:00.0"));
        assert!(is_pci_address("10000:c7:1f.7"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:05:00"));
        assert!(is_gpu_class(0x030000));
        assert!(is_gpu_class(0x038000));
        assert!(is_gpu_class(0x120000));
        assert!(!is_gpu_class(0x040300));
        assert_eq!(parse_hex("0x1002\n"), Some(0x1002));
        assert_eq!(parse_hex("0x"), None);
        assert_eq!(parse_hex("zz"), None);
    }

    proptest! {
        #[test]
        fn hex_and_address_parsers_never_panic(s in "\\PC{0,40}") {
            let _ = parse_hex(&s);
            let _ = is_pci_address(&s);
        }
    }
}
