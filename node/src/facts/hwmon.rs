//! A GPU's temperatures and power from its hwmon device
//! (`/sys/bus/pci/devices/<bdf>/hwmon/hwmonN/`, amdgpu_pm.c and the kernel's
//! Documentation/gpu/amdgpu/thermal.rst): `temp{1,2,3}_input` in
//! millidegrees Celsius labelled `edge`, `junction` and `mem`
//! (`temp*_label`), with `temp*_crit` and `temp*_emergency` limits;
//! `power1_average` (older GPUs) or `power1_input` (MI300 series, newer
//! kernels) in microwatts, and `power1_cap` the limit in force. An APU or a
//! GPU without a sensor simply lacks the file.

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
}

/// Reads the hwmon device of the GPU at PCI `address`; `None` when it has
/// none.
pub fn read(sysroot: &Sysroot, address: &str) -> Result<Option<Hwmon>, ReadError> {
    let base = format!("/sys/bus/pci/devices/{address}/hwmon");
    let entries = sysroot.list_dir_if_present(&base)?.unwrap_or_default();
    let Some(name) = entries.into_iter().find(|n| n.starts_with("hwmon")) else {
        return Ok(None);
    };
    let dir = format!("{base}/{name}");
    // A missing file is a sensor the GPU lacks, and so is one the driver
    // refuses to read (EOPNOTSUPP: power1_average on an MI300); only a read
    // that does not answer is an error.
    let number = |file: &str| -> Result<Option<f64>, ReadError> {
        match sysroot.read_opt(&format!("{dir}/{file}")) {
            Ok(text) => Ok(text.and_then(|t| t.trim_end_matches('\0').trim().parse::<f64>().ok())),
            Err(e) if e.is_timeout() => Err(e),
            Err(_) => Ok(None),
        }
    };
    let mut temperatures = Vec::new();
    for n in 1..=3 {
        let Some(milli) = number(&format!("temp{n}_input"))? else {
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
            crit: number(&format!("temp{n}_crit"))?.map(|m| m / 1000.0),
            emergency: number(&format!("temp{n}_emergency"))?.map(|m| m / 1000.0),
        });
    }
    let power = match number("power1_average")? {
        Some(uw) => Some((uw / 1e6, "power1_average")),
        None => number("power1_input")?.map(|uw| (uw / 1e6, "power1_input")),
    };
    let power_cap = number("power1_cap")?.map(|uw| uw / 1e6);
    Ok(Some(Hwmon {
        dir,
        temperatures,
        power,
        power_cap,
    }))
}
