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

/// A PCIe link speed as sysfs prints it (`32.0 GT/s PCIe`, `2.5 GT/s PCIe`;
/// before Linux 5.x `8 GT/s`, and `Unknown` for a speed the kernel has no
/// name for: drivers/pci/pci-sysfs.c `current_link_speed_show` with
/// `pci_speed_string`), in megatransfers per second. `None` for anything
/// else. Never panics.
pub fn parse_link_speed(text: &str) -> Option<u32> {
    let mut words = text.trim_end_matches('\0').split_whitespace();
    let number = words.next()?;
    if !words.next()?.starts_with("GT/s") {
        return None;
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty()
        || whole.len() > 3
        || fraction.len() > 3
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let whole: u32 = whole.parse().ok()?;
    // Pad the fraction to thousandths: "2.5" is 2500 MT/s.
    let thousandths: u32 = format!("{fraction:0<3}").parse().ok()?;
    Some(whole * 1000 + thousandths)
}

/// The PCIe generation that runs at `mts` megatransfers per second
/// (Gen1 2.5 GT/s .. Gen6 64 GT/s), if it is one.
pub fn pcie_generation(mts: u32) -> Option<u8> {
    match mts {
        2500 => Some(1),
        5000 => Some(2),
        8000 => Some(3),
        16000 => Some(4),
        32000 => Some(5),
        64000 => Some(6),
        _ => None,
    }
}

/// The physical PCIe link a GPU reaches the host through, and what both of
/// its ends say about it.
///
/// On MI300-class GPUs (MI300X, MI300A, MI325X, MI350) the GPU function sits
/// behind a switch inside the package: an upstream port `1022:1500`, a
/// downstream port `1002:1501`, then the GPU. The GPU's own link (to
/// `1002:1501`) is virtual and always reads x16 at the top speed; the link
/// that trains in the slot is the one of the internal upstream port. amdgpu
/// itself skips "switches internal to dGPU" the same way: in
/// `amdgpu_device_partner_bandwidth` / `amdgpu_device_find_parent`
/// (drivers/gpu/drm/amd/amdgpu/amdgpu_device.c) it walks up past every
/// bridge whose vendor is ATI (0x1002). Navi cards (`1002:1478` upstream,
/// `1002:1479` downstream) are walked the same way; a GPU without one
/// (MI210, MI250) is judged on its own link.
#[derive(Clone, Debug, Default)]
pub struct PhysicalLink {
    /// The function on the GPU's side of the link, whose attributes are
    /// read: the GPU itself, or the upstream port of its internal switch.
    pub device: String,
    /// That function's `vendor:device`, when it is not the GPU.
    pub device_ids: Option<(u16, u16)>,
    /// The port at the other end (a root port or a switch's downstream
    /// port), if the function is not on its root bus.
    pub partner: Option<String>,
    /// The GPU's internal bridges walked past, nearest the GPU first.
    pub internal: Vec<String>,
    /// The trained width (`current_link_width` of `device`: the Link Status
    /// register, which both ends of a link report alike).
    pub current_width: Option<u32>,
    /// The widest the link can train: the narrower of both ends'
    /// `max_link_width` (Link Capabilities), when the partner's is known.
    pub max_width: Option<u32>,
    /// The trained speed as sysfs prints it.
    pub current_speed: Option<String>,
    /// The fastest the link can train: the slower of both ends'
    /// `max_link_speed` text.
    pub max_speed: Option<String>,
    /// The partner's own maximum width and speed, when lower than the
    /// device's (the slot, not the GPU, limits the link).
    pub slot_limit: Option<String>,
    /// Link files that exist but could not be read.
    pub unread: Vec<ReadError>,
}

impl PhysicalLink {
    /// Whether the link is not the GPU function's own.
    pub fn through_internal_switch(&self) -> bool {
        !self.internal.is_empty()
    }
}

/// The `vendor` and `device` ids of the PCI function at `address`.
pub fn function_ids(root: &Sysroot, address: &str) -> Result<(u16, u16), ReadError> {
    let hex = |file: &str| -> Result<u16, ReadError> {
        let host = format!("{PCI_DEVICES}/{address}/{file}");
        let text = root.read_text(&host)?;
        parse_hex(&text)
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| {
                ReadError::malformed(
                    host.as_str(),
                    format!("'{}' is not a 16-bit hex id", text.trim()),
                )
            })
    };
    Ok((hex("vendor")?, hex("device")?))
}

/// The physical link of the GPU function at `address`, found as amdgpu
/// finds it (see [`PhysicalLink`]). `Err` when the bridges above it cannot
/// be told apart (a path or a vendor id that cannot be read).
pub fn physical_link(root: &Sysroot, address: &str) -> Result<PhysicalLink, ReadError> {
    physical_link_past(root, address, AMD_VENDOR)
}

/// The physical link of the function at `address`, walking past the
/// bridges of `vendor` above it as a device's own package switch (AMD's
/// for an MI300-class GPU; NVIDIA's inside a ConnectX-8 or BlueField-3).
pub fn physical_link_past(
    root: &Sysroot,
    address: &str,
    vendor: u16,
) -> Result<PhysicalLink, ReadError> {
    // Nearest the root first.
    let chain = super::acs::bridges_above(root, address)?;
    let mut at = chain.len();
    let mut internal = Vec::new();
    let partner = loop {
        let Some(parent) = at.checked_sub(1).and_then(|i| chain.get(i)) else {
            break None;
        };
        if function_ids(root, parent)?.0 != vendor {
            break Some(parent.clone());
        }
        // A bridge of the device's own vendor above is a downstream port
        // of its package's switch: the switch's upstream port, above it, holds the link
        // that leaves the package (a downstream port has no link to its
        // upstream port: they share the switch's internal bus).
        internal.push(parent.clone());
        at = at.saturating_sub(if at >= 2 { 2 } else { 1 });
    };
    let device = chain
        .get(at)
        .cloned()
        .unwrap_or_else(|| address.to_string());
    let device_ids = if device == address {
        None
    } else {
        Some(function_ids(root, &device)?)
    };
    let mut unread = Vec::new();
    let mut text =
        |dir: &str, file: &str| match root.read_opt(&format!("{PCI_DEVICES}/{dir}/{file}")) {
            Ok(t) => t
                .map(|t| t.trim_end_matches('\0').trim().to_string())
                .filter(|t| !t.is_empty()),
            Err(e) => {
                unread.push(e);
                None
            }
        };
    let width = |t: Option<String>| t.and_then(|t| t.parse::<u32>().ok());
    let current_width = width(text(&device, "current_link_width"));
    let device_max_width = width(text(&device, "max_link_width"));
    let current_speed = text(&device, "current_link_speed");
    let device_max_speed = text(&device, "max_link_speed");
    let (partner_max_width, partner_max_speed) = match &partner {
        Some(p) => (width(text(p, "max_link_width")), text(p, "max_link_speed")),
        None => (None, None),
    };
    // The link trains to what both ends can do: the narrower and slower of
    // the two Link Capabilities.
    let max_width = match (device_max_width, partner_max_width) {
        (Some(d), Some(p)) => Some(d.min(p)),
        (d, p) => d.or(p),
    };
    let speed_of = |t: &Option<String>| t.as_deref().and_then(parse_link_speed);
    let max_speed = match (speed_of(&device_max_speed), speed_of(&partner_max_speed)) {
        (Some(d), Some(p)) if p < d => partner_max_speed.clone(),
        (None, Some(_)) => partner_max_speed.clone(),
        _ => device_max_speed.clone(),
    };
    let mut limits = Vec::new();
    if let (Some(d), Some(p)) = (device_max_width, partner_max_width) {
        if p < d {
            limits.push(format!("x{p}"));
        }
    }
    if let (Some(d), Some(p)) = (speed_of(&device_max_speed), speed_of(&partner_max_speed)) {
        if p < d {
            limits.push(partner_max_speed.clone().unwrap_or_default());
        }
    }
    let slot_limit = (!limits.is_empty()).then(|| limits.join(", "));
    Ok(PhysicalLink {
        device,
        device_ids,
        partner,
        internal,
        current_width,
        max_width,
        current_speed,
        max_speed,
        slot_limit,
        unread,
    })
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

    #[test]
    fn link_speeds_read_as_sysfs_prints_them() {
        assert_eq!(parse_link_speed("32.0 GT/s PCIe\n"), Some(32000));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe"), Some(2500));
        assert_eq!(parse_link_speed("8 GT/s"), Some(8000));
        assert_eq!(parse_link_speed("16.0 GT/s PCIe\0"), Some(16000));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("Unknown speed"), None);
        assert_eq!(parse_link_speed(""), None);
        assert_eq!(parse_link_speed("-2.5 GT/s"), None);
        assert_eq!(parse_link_speed("2.5.1 GT/s"), None);
        assert_eq!(parse_link_speed("99999 GT/s"), None);
        assert_eq!(pcie_generation(2500), Some(1));
        assert_eq!(pcie_generation(32000), Some(5));
        assert_eq!(pcie_generation(1), None);
    }

    /// Writes scenario `name` and opens it.
    fn written(name: &str) -> (tempfile::TempDir, Sysroot) {
        let dir = tempfile::tempdir().unwrap();
        rocgate_fixtures::scenario(name)
            .unwrap()
            .spec
            .write(dir.path())
            .unwrap();
        let root = Sysroot::at(dir.path());
        (dir, root)
    }

    #[test]
    fn the_link_behind_an_internal_switch_is_its_upstream_ports() {
        let (_dir, root) = written("pcie-link-degraded");
        let link = physical_link(&root, "0000:26:00.0").unwrap();
        assert_eq!(link.device, "0000:24:00.0");
        assert_eq!(link.device_ids, Some((0x1022, 0x1500)));
        assert_eq!(link.partner.as_deref(), Some("0000:20:01.1"));
        assert_eq!(link.internal, ["0000:25:00.0"]);
        assert!(link.through_internal_switch());
        assert_eq!((link.current_width, link.max_width), (Some(8), Some(16)));
        assert_eq!(link.slot_limit, None);
        // A GPU on its root bus is its own link, with no partner.
        let (_dir, root) = written("mi210-8-two-hives");
        let link = physical_link(&root, "0000:63:00.0").unwrap();
        assert_eq!(link.device, "0000:63:00.0");
        assert_eq!(link.partner, None);
        assert!(!link.through_internal_switch());
        assert_eq!(link.max_speed.as_deref(), Some("16.0 GT/s PCIe"));
    }

    proptest! {
        #[test]
        fn link_speed_parser_never_panics_and_reads_back_what_it_printed(s in "\\PC{0,40}", whole in 0u32..1000, tenth in 0u32..10) {
            let _ = parse_link_speed(&s);
            prop_assert_eq!(
                parse_link_speed(&format!("{whole}.{tenth} GT/s PCIe")),
                Some(whole * 1000 + tenth * 100)
            );
        }

        #[test]
        fn hex_and_address_parsers_never_panic(s in "\\PC{0,40}") {
            let _ = parse_hex(&s);
            let _ = is_pci_address(&s);
        }
    }
}
