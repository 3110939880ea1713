//! A GPU's temperatures and power from its hwmon device
//! (`/sys/bus/pci/devices/<bdf>/hwmon/hwmonN/`, amdgpu_pm.c and the kernel's
//! Documentation/gpu/amdgpu/thermal.rst): `temp{1,2,3}_input` in
//! millidegrees Celsius labelled `edge`, `junction` and `mem`
//! (`temp*_label`), with `temp*_crit` and `temp*_emergency` limits;
//! `power1_average` (older GPUs) or `power1_input` (MI300 series, newer
//! kernels) in microwatts, and `power1_cap` the limit in force. An APU or a
//! GPU without a sensor simply lacks the file.

use crate::sysroot::ReadErrorKind;
use crate::{ReadError, Sysroot};

/// One temperature sensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Temperature {
    /// Its label (`edge`, `junction`, `mem`), or `temp<N>` without one.
    pub label: String,
    /// Degrees Celsius.
    pub celsius: f64,
    /// The critical limit, when the driver exposes one.
    pub crit: Option<f64>,
    /// The emergency limit (the GPU shuts down), when exposed.
    pub emergency: Option<f64>,
}

/// What the GPU's hwmon device says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hwmon {
    /// The hwmon directory read.
    pub dir: String,
    /// Temperatures, by sensor number.
    pub temperatures: Vec<Temperature>,
    /// Power drawn, in watts, and the file it came from.
    pub power: Option<(f64, &'static str)>,
    /// The power cap in force, in watts.
    pub power_cap: Option<f64>,
    /// Files that are there but hold no reading amdgpu prints (`nan`,
    /// `inf`, a number past what the kernel's type holds, bytes that are
    /// not text), each naming the file and what it held: a failing sensor
    /// or a damaged capture, never a value to judge or report.
    pub garbled: Vec<String>,
}

/// What a hwmon file holds, and so how it must read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// A temperature reading: amdgpu_pm.c prints an `int` of millidegrees
    /// Celsius (`amdgpu_hwmon_show_temp`: `"%d\n"`); none is below absolute
    /// zero.
    Temperature,
    /// A temperature limit (`temp*_crit`, `temp*_emergency`), also `%d`;
    /// 0 or below is no limit: what a driver without one leaves, and what
    /// an MI300 shows under SR-IOV or with PMFW older than 85.69, whose SMU
    /// lacks the CTF_LIMIT capability (smu_v13_0_6_ppt.c,
    /// `smu_v13_0_6_get_thermal_temperature_range` leaves the range at 0),
    /// so that amdgpu_pm.c's `amdgpu_hwmon_show_temp_thresh` and
    /// `amdgpu_hwmon_show_temp_emergency` print 0.
    TemperatureLimit,
    /// Power or a power cap: an `unsigned int` of microwatts
    /// (`amdgpu_hwmon_get_power`, `amdgpu_hwmon_show_power_cap_generic`);
    /// a cap of 0 is none.
    Power,
}

/// The value of one hwmon file as `quantity`, in its file's unit (milli-
/// degrees, microwatts): `Ok(None)` for no value (a limit of 0), `Err`
/// saying why when the text is not what amdgpu prints. Only integers in
/// the kernel type's range read, so the result is always finite.
pub fn parse(text: &str, quantity: Quantity) -> Result<Option<f64>, String> {
    let t = text.trim_end_matches('\0').trim();
    let shown = if t.chars().count() > 24 {
        format!("{}...", t.chars().take(24).collect::<String>())
    } else {
        t.to_string()
    };
    let value = match quantity {
        Quantity::Temperature | Quantity::TemperatureLimit => t.parse::<i32>().map(f64::from),
        Quantity::Power => t.parse::<u32>().map(f64::from),
    }
    .map_err(|_| {
        let kind = match quantity {
            Quantity::Power => "unsigned 32-bit integer of microwatts",
            _ => "32-bit integer of millidegrees",
        };
        format!("holds {shown:?}, not the {kind} amdgpu prints")
    })?;
    Ok(match quantity {
        Quantity::Temperature if value < -273_150.0 => {
            return Err(format!(
                "holds {shown:?}: below absolute zero, not a reading"
            ));
        }
        Quantity::Temperature => Some(value),
        Quantity::TemperatureLimit | Quantity::Power if value <= 0.0 => None,
        _ => Some(value),
    })
}

/// Reads the hwmon device of the GPU at PCI `address`; `None` when it has
/// none. A file that does not read as amdgpu prints it is left out and
/// named in [`Hwmon::garbled`].
pub fn read(sysroot: &Sysroot, address: &str) -> Result<Option<Hwmon>, ReadError> {
    let base = format!("/sys/bus/pci/devices/{address}/hwmon");
    let entries = sysroot.list_dir_if_present(&base)?.unwrap_or_default();
    let Some(name) = entries.into_iter().find(|n| n.starts_with("hwmon")) else {
        return Ok(None);
    };
    let dir = format!("{base}/{name}");
    let mut garbled = Vec::new();
    // A missing file is a sensor the GPU lacks, and so is one the driver
    // refuses to read (EOPNOTSUPP: power1_average on an MI300); a read that
    // does not answer is an error, and bytes that are not text are garbled.
    let mut number = |file: &str, quantity: Quantity| -> Result<Option<f64>, ReadError> {
        let path = format!("{dir}/{file}");
        let text = match sysroot.read_opt(&path) {
            Ok(Some(text)) => text,
            Ok(None) => return Ok(None),
            Err(e) if e.is_timeout() => return Err(e),
            Err(e) if e.kind == ReadErrorKind::NotUtf8 => {
                garbled.push(format!("{path} holds bytes that are not text"));
                return Ok(None);
            }
            Err(_) => return Ok(None),
        };
        match parse(&text, quantity) {
            Ok(v) => Ok(v),
            Err(why) => {
                garbled.push(format!("{path} {why}"));
                Ok(None)
            }
        }
    };
    let mut temperatures = Vec::new();
    for n in 1..=3 {
        let Some(milli) = number(&format!("temp{n}_input"), Quantity::Temperature)? else {
            continue;
        };
        let label = sysroot
            .read_opt(&format!("{dir}/temp{n}_label"))
            .ok()
            .flatten()
            .map(|l| l.trim_end_matches('\0').trim().to_string())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| format!("temp{n}"));
        temperatures.push(Temperature {
            label,
            celsius: milli / 1000.0,
            crit: number(&format!("temp{n}_crit"), Quantity::TemperatureLimit)?.map(|m| m / 1000.0),
            emergency: number(&format!("temp{n}_emergency"), Quantity::TemperatureLimit)?
                .map(|m| m / 1000.0),
        });
    }
    let power = match number("power1_average", Quantity::Power)? {
        Some(uw) => Some((uw / 1e6, "power1_average")),
        None => number("power1_input", Quantity::Power)?.map(|uw| (uw / 1e6, "power1_input")),
    };
    let power_cap = number("power1_cap", Quantity::Power)?.map(|uw| uw / 1e6);
    Ok(Some(Hwmon {
        dir,
        temperatures,
        power,
        power_cap,
        garbled,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn readings_read_as_amdgpu_prints_them() {
        assert_eq!(parse("38000\n", Quantity::Temperature), Ok(Some(38000.0)));
        assert_eq!(parse("-5000", Quantity::Temperature), Ok(Some(-5000.0)));
        assert_eq!(parse("550000000\0\0", Quantity::Power), Ok(Some(55e7)));
        // No limit, no cap.
        assert_eq!(parse("0", Quantity::TemperatureLimit), Ok(None));
        assert_eq!(parse("-1000", Quantity::TemperatureLimit), Ok(None));
        assert_eq!(parse("0", Quantity::Power), Ok(None));
    }

    #[test]
    fn garbage_is_named_never_read_as_a_number() {
        for text in [
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e300",
            "38.5",
            "",
            "99999999999999",
        ] {
            for q in [
                Quantity::Temperature,
                Quantity::TemperatureLimit,
                Quantity::Power,
            ] {
                let e = parse(text, q).unwrap_err();
                assert!(e.contains("amdgpu prints"), "{text}: {e}");
            }
        }
        assert!(parse("-300000", Quantity::Temperature).is_err());
        assert!(parse("-1", Quantity::Power).is_err());
    }

    #[test]
    fn garbled_files_are_named_and_the_rest_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        let hw = dir
            .path()
            .join("sys/bus/pci/devices/0000:05:00.0/hwmon/hwmon3");
        std::fs::create_dir_all(&hw).unwrap();
        std::fs::write(hw.join("temp1_input"), "nan\n").unwrap();
        std::fs::write(hw.join("temp2_input"), "41000\n").unwrap();
        std::fs::write(hw.join("temp2_crit"), "0\n").unwrap();
        std::fs::write(hw.join("temp3_input"), [0xff, 0x31]).unwrap();
        std::fs::write(hw.join("power1_input"), "inf\n").unwrap();
        let got = read(&root, "0000:05:00.0").unwrap().unwrap();
        assert_eq!(got.temperatures.len(), 1);
        assert_eq!(got.temperatures[0].celsius, 41.0);
        assert_eq!(got.temperatures[0].crit, None);
        assert_eq!(got.power, None);
        assert_eq!(got.garbled.len(), 3, "{:?}", got.garbled);
        for (g, file) in got
            .garbled
            .iter()
            .zip(["temp1_input", "temp3_input", "power1_input"])
        {
            assert!(g.contains(file), "{g}");
        }
    }

    proptest! {
        #[test]
        fn whatever_reads_is_finite(text in "\\PC*", q in 0..3usize) {
            let q = [Quantity::Temperature, Quantity::TemperatureLimit, Quantity::Power][q];
            if let Ok(Some(v)) = parse(&text, q) {
                prop_assert!(v.is_finite());
            }
        }
    }
}
