//! One sample of a GPU's telemetry, as a burn-in reads it about once a
//! second while the GPU is under load: its hwmon temperatures and power
//! ([`super::hwmon`]), its current graphics and memory clocks, its RAS and
//! AER counters and amdgpu's PCIe replay count, and whether the GPU is still
//! on the bus and in KFD's topology.
//!
//! The clocks come from amdgpu's DPM tables (`pp_dpm_sclk`, `pp_dpm_mclk`,
//! amdgpu_pm.c `amdgpu_get_pp_dpm_clock` through the SMU's print_clk_levels):
//! one line per level, `"%d: %uMhz %s\n"` with `*` after the level in use
//! (`0: 500Mhz *` on an RX 6900 XT at idle). SMU 13.0.6 (MI300 series) prints
//! fine-grained clocks as the minimum, the current clock when it lies
//! between, and the maximum, and a deep-sleep clock as `S: 19Mhz *`
//! (smu_v13_0_6_ppt.c, `smu_v13_0_6_print_clks`). The maximum of the table is
//! what the GPU may reach; the starred line is where it is.

use super::gpu_metrics::{self, Throttle};
use super::hwmon::{self, Temperature};
use super::{aer, ras};
use crate::{ReadError, Sysroot};

/// A DPM clock: where it is and the most it may reach.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock {
    /// The level in use, MHz.
    pub current_mhz: f64,
    /// The highest level of the table, MHz.
    pub max_mhz: f64,
}

/// Reads a `pp_dpm_*` table: the starred level and the highest. `Err` says
/// why the text is not such a table (no level, none starred, a level that
/// is not `<n>: <N>Mhz`).
pub fn parse_dpm(text: &str) -> Result<Clock, String> {
    let mut current = None;
    let mut max: Option<f64> = None;
    for line in text.trim_end_matches('\0').lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some((level, rest)) = line.split_once(':') else {
            return Err(format!("line {line:?} is not `<level>: <N>Mhz`"));
        };
        let level = level.trim();
        if level != "S" && level.parse::<u32>().is_err() {
            return Err(format!("level {level:?} is neither a number nor S"));
        }
        let rest = rest.trim();
        let starred = rest.ends_with('*');
        let value = rest.trim_end_matches('*').trim();
        let mhz = value
            .strip_suffix("Mhz")
            .or_else(|| value.strip_suffix("MHz"))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .map(f64::from)
            .ok_or_else(|| format!("level {level} holds {value:?}, not <N>Mhz"))?;
        max = Some(max.map_or(mhz, |m| m.max(mhz)));
        if starred {
            current = Some(mhz);
        }
    }
    let max_mhz = max.ok_or("no level")?;
    let current_mhz = current.ok_or("no level is starred as the one in use")?;
    Ok(Clock {
        current_mhz,
        max_mhz,
    })
}

/// One look at a GPU. Every part is its own reading: `None` where the GPU
/// does not expose it or it did not read, and [`Sample::unread`] says which
/// files were there and did not read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// The GPU's PCI device directory is there.
    pub on_bus: bool,
    /// A KFD topology node holds its `gpu_id` (`None`: not asked, or the
    /// topology could not be listed).
    pub in_kfd: Option<bool>,
    /// Temperatures, with their limits.
    pub temperatures: Vec<Temperature>,
    /// Power drawn, W.
    pub power_w: Option<f64>,
    /// The power cap in force, W.
    pub power_cap_w: Option<f64>,
    /// The graphics clock.
    pub sclk: Option<Clock>,
    /// The memory clock.
    pub mclk: Option<Clock>,
    /// What the SMU's `gpu_metrics` table says of throttling, where the
    /// GPU has one.
    pub throttle: Option<Throttle>,
    /// RAS counters summed over blocks: (uncorrectable, correctable).
    pub ras: Option<(u64, u64)>,
    /// The GPU function's AER totals: (correctable, non-fatal, fatal).
    pub aer: Option<(u64, u64, u64)>,
    /// amdgpu's PCIe replay count.
    pub replays: Option<u64>,
    /// Files that were there and did not read, each with why.
    pub unread: Vec<String>,
}

impl Sample {
    /// The look in a few words, for progress lines: the hottest sensor,
    /// the power, the graphics clock; `off the bus` for a GPU that left;
    /// `None` when nothing read.
    pub fn brief(&self) -> Option<String> {
        if !self.on_bus {
            return Some("off the bus".into());
        }
        let mut parts = Vec::new();
        if let Some(t) = self
            .temperatures
            .iter()
            .max_by(|a, b| a.celsius.total_cmp(&b.celsius))
        {
            parts.push(format!("{} {:.0} °C", t.label, t.celsius));
        }
        if let Some(w) = self.power_w {
            parts.push(format!("{w:.0} W"));
        }
        if let Some(c) = self.sclk {
            parts.push(format!("sclk {:.0} MHz", c.current_mhz));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Samples the GPU at PCI `address`, and whether KFD still lists its
/// `gpu_id` when given. Never fails: a GPU that left the bus reads as
/// `on_bus: false`, and a file that did not read is named in
/// [`Sample::unread`].
pub fn sample(sysroot: &Sysroot, address: &str, gpu_id: Option<u64>) -> Sample {
    let dir = format!("/sys/bus/pci/devices/{address}");
    let mut s = Sample {
        on_bus: sysroot.path(&dir).exists(),
        in_kfd: gpu_id.and_then(|id| kfd_lists(sysroot, id)),
        ..Sample::default()
    };
    if !s.on_bus {
        return s;
    }
    let mut note = |what: &str, e: &ReadError| s.unread.push(format!("{what}: {e}"));
    let mut found = Sample::default();
    match hwmon::read(sysroot, address) {
        Ok(Some(h)) => {
            found.temperatures = h.temperatures;
            found.power_w = h.power.map(|(w, _)| w);
            found.power_cap_w = h.power_cap;
        }
        Ok(None) => {}
        Err(e) => note("hwmon", &e),
    }
    for (file, slot) in [
        ("pp_dpm_sclk", &mut found.sclk),
        ("pp_dpm_mclk", &mut found.mclk),
    ] {
        let path = format!("{dir}/{file}");
        match sysroot.read_opt(&path) {
            Ok(Some(text)) => match parse_dpm(&text) {
                Ok(c) => *slot = Some(c),
                Err(why) => note(file, &ReadError::malformed(&path, why)),
            },
            Ok(None) => {}
            Err(e) => note(file, &e),
        }
    }
    // A total over some of the blocks is no total: a counter that does not
    // read (EINVAL while a reset holds the GPU's reset lock, as after an
    // uncorrectable error) would make the sum dip and hide what grew.
    let mut ras_unread = Vec::new();
    match ras::read(sysroot, address) {
        Ok(Some(r)) if !r.blocks.is_empty() && r.malformed.is_empty() => {
            found.ras = Some((r.total_ue(), r.total_ce()));
        }
        Ok(Some(r)) => ras_unread.extend(r.malformed.iter().map(|m| format!("ras: {m}"))),
        Ok(None) => {}
        Err(e) => note("ras", &e),
    }
    match aer::read(sysroot, address) {
        Ok(a) if !a.classes.is_empty() => {
            let t = |c| a.total(c).unwrap_or(0);
            found.aer = Some((
                t(aer::Class::Correctable),
                t(aer::Class::NonFatal),
                t(aer::Class::Fatal),
            ));
        }
        Ok(_) => {}
        Err(e) => note("aer", &e),
    }
    match gpu_metrics::read(sysroot, address) {
        Ok(t) => found.throttle = t,
        Err(e) => note("gpu_metrics", &e),
    }
    match aer::replay_count(sysroot, address) {
        Ok(r) => found.replays = r,
        Err(e) => note("pcie_replay_count", &e),
    }
    let mut unread = s.unread;
    unread.extend(ras_unread);
    Sample {
        on_bus: s.on_bus,
        in_kfd: s.in_kfd,
        unread,
        ..found
    }
}

/// Whether a KFD topology node holds `gpu_id`: by its id, not its node
/// number, since KFD renumbers the nodes above a device that leaves
/// (`kfd_topology_remove_device`, amdkfd/kfd_topology.c). `None` when the
/// topology cannot be listed.
fn kfd_lists(sysroot: &Sysroot, gpu_id: u64) -> Option<bool> {
    let nodes = "/sys/class/kfd/kfd/topology/nodes";
    let names = sysroot.list_dir_if_present(nodes).ok()??;
    Some(names.iter().any(|n| {
        sysroot
            .read_opt(&format!("{nodes}/{n}/gpu_id"))
            .ok()
            .flatten()
            .and_then(|t| t.trim().parse::<u64>().ok())
            == Some(gpu_id)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_brief_look_names_the_hottest_sensor_the_power_and_the_clock() {
        let t = |label: &str, celsius| crate::facts::hwmon::Temperature {
            label: label.into(),
            celsius,
            crit: Some(100.0),
            emergency: None,
        };
        let s = Sample {
            on_bus: true,
            temperatures: vec![t("edge", 50.0), t("junction", 76.4), t("mem", 70.0)],
            power_w: Some(690.2),
            sclk: Some(Clock {
                current_mhz: 1995.0,
                max_mhz: 2100.0,
            }),
            ..Sample::default()
        };
        assert_eq!(
            s.brief().as_deref(),
            Some("junction 76 °C, 690 W, sclk 1995 MHz")
        );
        assert_eq!(Sample::default().brief().as_deref(), Some("off the bus"));
        let blank = Sample {
            on_bus: true,
            ..Sample::default()
        };
        assert_eq!(blank.brief(), None);
    }

    #[test]
    fn a_dpm_table_gives_the_level_in_use_and_the_highest() {
        assert_eq!(
            parse_dpm("0: 500Mhz *\n1: 2660Mhz \n"),
            Ok(Clock {
                current_mhz: 500.0,
                max_mhz: 2660.0
            })
        );
        // SMU 13.0.6: minimum, current between, maximum; deep sleep as S.
        assert_eq!(
            parse_dpm("0: 500Mhz\n1: 1432Mhz *\n2: 2100Mhz\n")
                .unwrap()
                .current_mhz,
            1432.0
        );
        assert_eq!(
            parse_dpm("S: 19Mhz *\n0: 500Mhz\n1: 2100Mhz\n"),
            Ok(Clock {
                current_mhz: 19.0,
                max_mhz: 2100.0
            })
        );
    }

    #[test]
    fn a_table_that_is_not_one_is_refused_with_why() {
        assert!(parse_dpm("").unwrap_err().contains("no level"));
        assert!(parse_dpm("0: 500Mhz\n").unwrap_err().contains("starred"));
        assert!(
            parse_dpm("0: fastMhz *")
                .unwrap_err()
                .contains("not <N>Mhz")
        );
        assert!(parse_dpm("x: 5Mhz *").unwrap_err().contains("neither"));
        assert!(parse_dpm("garbage").is_err());
    }

    proptest! {
        #[test]
        fn no_text_panics_the_dpm_reader(text in "\\PC{0,80}|([0-9S]: [0-9]{1,5}Mhz ?\\*?\n){0,5}") {
            if let Ok(c) = parse_dpm(&text) {
                prop_assert!(c.current_mhz <= c.max_mhz);
            }
        }
    }
}
