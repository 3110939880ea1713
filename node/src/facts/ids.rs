//! What the numbers mean: PCI device ids and gfx target versions.

/// One known AMD GPU: PCI device id, product name and gfx target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownDevice {
    /// PCI device id.
    pub device_id: u16,
    /// Marketing name.
    pub product: &'static str,
    /// The gfx target of its compute units.
    pub gfx_target: &'static str,
}

const fn dev(device_id: u16, product: &'static str, gfx_target: &'static str) -> KnownDevice {
    KnownDevice {
        device_id,
        product,
        gfx_target,
    }
}

/// AMD GPUs rocgate knows by PCI device id. Used for product names and, on
/// kernels without `gfx_target_version`, for the gfx target.
pub const KNOWN_DEVICES: &[KnownDevice] = &[
    dev(0x6860, "AMD Instinct MI25", "gfx900"),
    dev(0x687f, "AMD Radeon RX Vega 56/64", "gfx900"),
    dev(0x66a1, "AMD Instinct MI50/MI60", "gfx906"),
    dev(0x66af, "AMD Radeon VII", "gfx906"),
    dev(0x738c, "AMD Instinct MI100", "gfx908"),
    dev(0x740f, "AMD Instinct MI210", "gfx90a"),
    dev(0x740c, "AMD Instinct MI250/MI250X", "gfx90a"),
    dev(0x7408, "AMD Instinct MI250X", "gfx90a"),
    dev(0x74a0, "AMD Instinct MI300A", "gfx942"),
    dev(0x74a1, "AMD Instinct MI300X", "gfx942"),
    dev(0x74a2, "AMD Instinct MI308X", "gfx942"),
    dev(0x74a5, "AMD Instinct MI325X", "gfx942"),
    dev(0x74b5, "AMD Instinct MI300X VF", "gfx942"),
    // libdrm's amdgpu.ids and RVS's gpu_util.cpp: 75A0 MI350X (air
    // cooled), 75A3 MI355X (liquid cooled), 75B0/75B3 their VFs.
    dev(0x75a0, "AMD Instinct MI350X", "gfx950"),
    dev(0x75a3, "AMD Instinct MI355X", "gfx950"),
    dev(0x75b0, "AMD Instinct MI350X VF", "gfx950"),
    dev(0x75b3, "AMD Instinct MI355X VF", "gfx950"),
    dev(0x73bf, "AMD Radeon RX 6800/6900 XT", "gfx1030"),
    dev(0x744c, "AMD Radeon RX 7900 XT/XTX", "gfx1100"),
    dev(0x7550, "AMD Radeon RX 9070", "gfx1201"),
];

/// Accelerator complex dies (XCDs) of the partitionable GPUs: an MI300X in
/// CPX mode has one partition per XCD, 8 (as an MI325X, MI350X or MI355X);
/// an MI308X 4; an MI300A 6 (AMD's
/// MI300 and MI350 series compute partitioning guides).
pub fn xcds(device_id: u16) -> Option<u64> {
    match device_id {
        0x74a1 | 0x74a5 | 0x75a0 | 0x75a3 => Some(8),
        0x74a0 => Some(6),
        0x74a2 => Some(4),
        _ => None,
    }
}

/// Partitions a compute partition mode gives a GPU of `xcds` XCDs
/// (`current_compute_partition`: SPX 1, DPX 2, TPX 3, QPX 4, CPX one per
/// XCD).
pub fn partitions_in_mode(mode: &str, xcds: u64) -> Option<u64> {
    match mode.trim().to_ascii_uppercase().as_str() {
        "SPX" => Some(1),
        "DPX" => Some(2),
        "TPX" => Some(3),
        "QPX" => Some(4),
        "CPX" => Some(xcds),
        _ => None,
    }
}

/// Looks a PCI device id up in [`KNOWN_DEVICES`].
pub fn known_device(device_id: u16) -> Option<&'static KnownDevice> {
    KNOWN_DEVICES.iter().find(|d| d.device_id == device_id)
}

/// The gfx target name of a KFD `gfx_target_version`
/// (major*10000 + minor*100 + stepping): 90402 is `gfx942`, 90010 `gfx90a`.
/// `None` for 0 (a CPU node) or a value whose minor or stepping does not fit
/// one hex digit.
pub fn gfx_target_name(version: u64) -> Option<String> {
    let (major, minor, stepping) = (version / 10000, (version / 100) % 100, version % 100);
    if major == 0 || major > 99 || minor > 15 || stepping > 15 {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{stepping:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_names_from_versions() {
        for (v, name) in [
            (90402, "gfx942"),
            (90010, "gfx90a"),
            (90008, "gfx908"),
            (90500, "gfx950"),
            (110000, "gfx1100"),
            (120001, "gfx1201"),
            (90000, "gfx900"),
        ] {
            assert_eq!(gfx_target_name(v).as_deref(), Some(name), "{v}");
        }
        assert_eq!(gfx_target_name(0), None);
        assert_eq!(gfx_target_name(91600), None);
        assert_eq!(gfx_target_name(u64::MAX), None);
        assert_eq!(gfx_target_name(1_000_000), None);
    }

    #[test]
    fn device_table_has_unique_ids() {
        let mut ids: Vec<u16> = KNOWN_DEVICES.iter().map(|d| d.device_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), KNOWN_DEVICES.len());
        assert_eq!(known_device(0x74a1).map(|d| d.gfx_target), Some("gfx942"));
    }
}
