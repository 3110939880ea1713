//! The number of retired VRAM pages at which amdgpu acts on a GPU, and
//! what it then does. amdgpu keeps the count in `bad_page_cnt_threshold`,
//! set once at init from the `bad_page_threshold` module parameter
//! (amdgpu_ras.c, `amdgpu_ras_validate_threshold`, kernels and ROCm DKMS
//! builds since "drm/amdgpu: Update usage for bad page threshold", January
//! 2025):
//!
//! - `-1` (the default): a fixed count from the VRAM reserved for retired
//!   pages, `(reserved_pages_in_bytes >> 21) << 4`, where
//!   `amdgpu_ras_init_reserved_vram_size` reserves 16 MiB on MP0 13.0.2,
//!   13.0.6 and 13.0.12 (MI210/MI250, MI300X) and 32 MiB on 13.0.14: 128 and
//!   256 pages; other GPUs reserve nothing and have no such count;
//! - `-2`: one page per 100 MiB of VRAM (`RAS_BAD_PAGE_COVER`), at most the
//!   EEPROM's record count;
//! - `0`: no page retirement;
//! - a positive value: that count, at most the EEPROM's record count.
//!
//! Past the count (`ras_num_bad_pages > bad_page_cnt_threshold`,
//! amdgpu_ras_eeprom.c `amdgpu_ras_eeprom_update_header`) the driver
//! prints "Saved bad pages %d reaches threshold value %d"; only for a
//! positive (user) threshold does it mark the EEPROM table bad and the GPU
//! for RMA (`is_rma`, and at the next load
//! `amdgpu_ras_eeprom_check_err_threshold` keeps it from running); for -1
//! and -2 it asks for AMD's Service Action Guide and keeps running. Kernels
//! before the 2025 change derived -1 like -2; rocgate judges by the newer,
//! lower count, the one at which today's driver asks for service.
//!
//! When root can read debugfs, `/sys/kernel/debug/dri/<N>/ras/
//! bad_page_cnt_threshold` (`debugfs_create_u32` in
//! `amdgpu_ras_debugfs_create_ctrl_node`) is the driver's own count, and is
//! taken over any derivation.

use crate::Sysroot;

/// An IP block's version as ip_discovery gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Revision.
    pub revision: u32,
}

impl std::fmt::Display for IpVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.revision)
    }
}

const fn v(major: u32, minor: u32, revision: u32) -> IpVersion {
    IpVersion {
        major,
        minor,
        revision,
    }
}

/// Where the MP0 version came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mp0Source {
    /// `ip_discovery/die/0/MP0/0/{major,minor,revision}` (amdgpu_discovery.c).
    IpDiscovery,
    /// The PCI device id, on a kernel or capture without ip_discovery.
    DeviceId,
}

/// The MP0 (PSP) version of the products whose default count rocgate
/// knows, by PCI device id: only a fallback for when ip_discovery is not
/// there to read.
pub fn mp0_of_device(device_id: u16) -> Option<IpVersion> {
    Some(match device_id {
        // MI210, MI250/MI250X (Aldebaran).
        0x740f | 0x740c | 0x7408 => v(13, 0, 2),
        // MI300A, MI300X (Aqua Vanjaram).
        0x74a0 | 0x74a1 => v(13, 0, 6),
        // MI350X.
        0x75a0 => v(13, 0, 14),
        _ => return None,
    })
}

/// Whether amdgpu itself turns page retirement off on this product:
/// `amdgpu_ras_check_supported` sets `amdgpu_bad_page_threshold = 0` on an
/// "app APU" with UMC 12.0.0 ("bad page feature is not applicable to
/// specific app platform"), the MI300A. The module parameter then reads 0
/// in /sys/module/amdgpu/parameters (it is that variable,
/// `module_param_named` in amdgpu_drv.c) although nobody set it.
pub fn driver_disables_retirement(device_id: Option<u16>) -> bool {
    device_id == Some(0x74a0)
}

/// The RAS EEPROM's record count (amdgpu_ras_eeprom.c,
/// `RAS_MAX_RECORD_COUNT_V2_1`: 256 KiB less a 20-byte header and 256 bytes
/// of RAS info, in 24-byte records); version-1 tables hold 10 more.
pub const EEPROM_MAX_RECORDS: u64 = (256 * 1024 - 20 - 256) / 24;

/// Bytes of VRAM per page of the -2 formula (amdgpu_ras.c,
/// `RAS_BAD_PAGE_COVER`: "typical ECC bad page rate is 1 bad page per
/// 100MB VRAM").
pub const BAD_PAGE_COVER: u64 = 100 << 20;

/// The driver's count and what it does past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threshold {
    /// Retired pages past which the driver acts.
    pub pages: u64,
    /// How the count was found, for messages.
    pub how: String,
    /// Whether the driver marks the GPU bad past it (a user threshold);
    /// otherwise it only warns and asks for AMD's Service Action Guide.
    pub marks_bad: bool,
}

/// What is known of a GPU's threshold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Known {
    /// The count.
    Threshold(Threshold),
    /// Page retirement is off (`bad_page_threshold=0`).
    Off,
    /// Not known, and why.
    Unknown(String),
}

/// What the threshold is derived from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// The `bad_page_threshold` module parameter.
    pub parameter: Option<i64>,
    /// The GPU's MP0 version and where it came from.
    pub mp0: Option<(IpVersion, Mp0Source)>,
    /// The GPU's VRAM in bytes.
    pub vram_bytes: Option<u64>,
    /// debugfs `ras/bad_page_cnt_threshold`, when readable.
    pub debugfs: Option<u64>,
}

/// The threshold `inputs` give, by the rules of the module doc.
pub fn derive(inputs: &Inputs) -> Known {
    let from_debugfs = |marks_bad: bool, what: &str| {
        inputs.debugfs.map(|pages| {
            Known::Threshold(Threshold {
                pages,
                how: format!("{what}: the driver's count {pages}, read from debugfs ras/bad_page_cnt_threshold"),
                marks_bad,
            })
        })
    };
    let Some(parameter) = inputs.parameter else {
        return from_debugfs(false, "bad_page_threshold unreadable").unwrap_or_else(|| {
            Known::Unknown(
                "amdgpu's bad_page_threshold parameter is unreadable, so the driver's threshold is unknown"
                    .into(),
            )
        });
    };
    match parameter {
        0 => Known::Off,
        p if p > 0 => from_debugfs(true, &format!("bad_page_threshold={p}")).unwrap_or_else(|| {
            let pages = (p as u64).min(EEPROM_MAX_RECORDS);
            Known::Threshold(Threshold {
                pages,
                how: format!("bad_page_threshold={p}"),
                marks_bad: true,
            })
        }),
        -1 => from_debugfs(false, "bad_page_threshold=-1").unwrap_or_else(|| {
            let Some((mp0, source)) = inputs.mp0 else {
                return Known::Unknown(
                    "bad_page_threshold=-1: the driver's default depends on the GPU's MP0 version, which neither ip_discovery nor the PCI device id gives".into(),
                );
            };
            let pages = match (mp0.major, mp0.minor, mp0.revision) {
                (13, 0, 2 | 6 | 12) => 128,
                (13, 0, 14) => 256,
                _ => {
                    return Known::Unknown(format!(
                        "bad_page_threshold=-1: the driver reserves no VRAM for retired pages on MP0 {mp0}, so its default is no fixed count"
                    ));
                }
            };
            let from = match source {
                Mp0Source::IpDiscovery => "ip_discovery",
                Mp0Source::DeviceId => "its PCI device id, the kernel shows no ip_discovery",
            };
            Known::Threshold(Threshold {
                pages,
                how: format!(
                    "bad_page_threshold=-1: the driver's default of {pages} pages on MP0 {mp0} (from {from})"
                ),
                marks_bad: false,
            })
        }),
        -2 => from_debugfs(false, "bad_page_threshold=-2").unwrap_or_else(|| {
            match inputs.vram_bytes.filter(|&b| b > 0) {
                Some(bytes) => {
                    let pages = (bytes / BAD_PAGE_COVER).min(EEPROM_MAX_RECORDS);
                    Known::Threshold(Threshold {
                        pages,
                        how: format!(
                            "bad_page_threshold=-2: one page per 100 MiB of its {} GiB of VRAM, {pages} pages",
                            bytes >> 30
                        ),
                        marks_bad: false,
                    })
                }
                None => Known::Unknown(
                    "bad_page_threshold=-2: the threshold follows the VRAM size, which is unknown".into(),
                ),
            }
        }),
        p => Known::Unknown(format!(
            "bad_page_threshold={p} is no value amdgpu documents (-2, -1, 0 or a count)"
        )),
    }
}

/// A non-negative integer file, `None` when absent, unreadable (debugfs
/// below root) or not a number.
fn number(sysroot: &Sysroot, path: &str) -> Option<u64> {
    sysroot
        .read_opt(path)
        .ok()
        .flatten()
        .and_then(|t| t.trim_end_matches('\0').trim().parse().ok())
}

/// The MP0 version of the GPU at `address` from ip_discovery, else from
/// `device_id`.
pub fn mp0_version(
    sysroot: &Sysroot,
    address: &str,
    device_id: Option<u16>,
) -> Option<(IpVersion, Mp0Source)> {
    let dir = format!("/sys/bus/pci/devices/{address}/ip_discovery/die/0/MP0/0");
    let part =
        |name: &str| number(sysroot, &format!("{dir}/{name}")).and_then(|n| u32::try_from(n).ok());
    if let (Some(major), Some(minor), Some(revision)) =
        (part("major"), part("minor"), part("revision"))
    {
        return Some((v(major, minor, revision), Mp0Source::IpDiscovery));
    }
    device_id
        .and_then(mp0_of_device)
        .map(|m| (m, Mp0Source::DeviceId))
}

/// Reads what the threshold of the GPU at `address` (DRM card `card`,
/// PCI `device_id`) is derived from. `kfd_vram` is the VRAM KFD gives,
/// used when the device has no `mem_info_vram_total`.
pub fn inputs(
    sysroot: &Sysroot,
    address: &str,
    card: Option<u32>,
    device_id: Option<u16>,
    kfd_vram: Option<u64>,
) -> Inputs {
    let parameter = sysroot
        .read_opt("/sys/module/amdgpu/parameters/bad_page_threshold")
        .ok()
        .flatten()
        .and_then(|t| t.trim().parse().ok());
    // debugfs names the device by its DRM minor, and newer kernels also by
    // its PCI address (drm_debugfs.c makes the minor a link to it).
    let mut debugfs = None;
    for dir in card
        .map(|c| c.to_string())
        .into_iter()
        .chain([address.to_string()])
    {
        debugfs = number(
            sysroot,
            &format!("/sys/kernel/debug/dri/{dir}/ras/bad_page_cnt_threshold"),
        );
        if debugfs.is_some() {
            break;
        }
    }
    // amdgpu_vram_mgr.c, `amdgpu_mem_info_vram_total_show`: the VRAM size in
    // bytes (`real_vram_size`).
    let vram_bytes = number(
        sysroot,
        &format!("/sys/bus/pci/devices/{address}/mem_info_vram_total"),
    )
    .or(kfd_vram);
    Inputs {
        parameter,
        mp0: mp0_version(sysroot, address, device_id),
        vram_bytes,
        debugfs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn with(parameter: i64, mp0: Option<IpVersion>) -> Inputs {
        Inputs {
            parameter: Some(parameter),
            mp0: mp0.map(|m| (m, Mp0Source::IpDiscovery)),
            vram_bytes: Some(192 << 30),
            debugfs: None,
        }
    }

    fn pages(k: &Known) -> Option<u64> {
        match k {
            Known::Threshold(t) => Some(t.pages),
            _ => None,
        }
    }

    #[test]
    fn the_default_is_a_fixed_count_per_mp0_version() {
        for (mp0, want) in [
            (v(13, 0, 2), Some(128)),
            (v(13, 0, 6), Some(128)),
            (v(13, 0, 12), Some(128)),
            (v(13, 0, 14), Some(256)),
            (v(11, 0, 4), None),
        ] {
            assert_eq!(pages(&derive(&with(-1, Some(mp0)))), want, "{mp0}");
        }
        assert!(matches!(derive(&with(-1, None)), Known::Unknown(_)));
        let Known::Threshold(t) = derive(&with(-1, Some(v(13, 0, 6)))) else {
            panic!()
        };
        assert!(!t.marks_bad);
    }

    #[test]
    fn minus_two_follows_the_vram_and_a_user_count_marks_the_gpu_bad() {
        // 192 GiB / 100 MiB.
        assert_eq!(pages(&derive(&with(-2, None))), Some(1966));
        let mut huge = with(-2, None);
        huge.vram_bytes = Some(u64::MAX);
        assert_eq!(pages(&derive(&huge)), Some(EEPROM_MAX_RECORDS));
        let Known::Threshold(t) = derive(&with(512, None)) else {
            panic!()
        };
        assert_eq!((t.pages, t.marks_bad), (512, true));
        assert_eq!(derive(&with(0, None)), Known::Off);
        assert!(matches!(derive(&with(-7, None)), Known::Unknown(_)));
    }

    #[test]
    fn debugfs_is_the_drivers_own_count() {
        let mut i = with(-1, Some(v(13, 0, 6)));
        i.debugfs = Some(40);
        assert_eq!(pages(&derive(&i)), Some(40));
        i.parameter = None;
        assert_eq!(pages(&derive(&i)), Some(40));
    }

    #[test]
    fn the_mp0_version_is_read_from_ip_discovery_else_the_device_id() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        let mp0 = dir
            .path()
            .join("sys/bus/pci/devices/0000:05:00.0/ip_discovery/die/0/MP0/0");
        std::fs::create_dir_all(&mp0).unwrap();
        for (f, n) in [("major", "13\n"), ("minor", "0\n"), ("revision", "14\n")] {
            std::fs::write(mp0.join(f), n).unwrap();
        }
        assert_eq!(
            mp0_version(&root, "0000:05:00.0", Some(0x74a1)),
            Some((v(13, 0, 14), Mp0Source::IpDiscovery))
        );
        assert_eq!(
            mp0_version(&root, "0000:06:00.0", Some(0x74a1)),
            Some((v(13, 0, 6), Mp0Source::DeviceId))
        );
        assert_eq!(mp0_version(&root, "0000:06:00.0", Some(0x744c)), None);
    }

    proptest! {
        #[test]
        fn any_inputs_derive_without_panicking(
            parameter in proptest::option::of(any::<i64>()),
            major in any::<u32>(), minor in any::<u32>(), revision in any::<u32>(),
            vram in proptest::option::of(any::<u64>()),
            debugfs in proptest::option::of(any::<u64>()),
        ) {
            let k = derive(&Inputs {
                parameter,
                mp0: Some((v(major, minor, revision), Mp0Source::IpDiscovery)),
                vram_bytes: vram,
                debugfs,
            });
            if let (Known::Threshold(t), None) = (&k, debugfs) {
                prop_assert!(t.pages <= EEPROM_MAX_RECORDS);
            }
        }
    }
}
