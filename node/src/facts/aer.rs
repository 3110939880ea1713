//! PCIe Advanced Error Reporting counters of a PCI function, and amdgpu's
//! PCIe replay count.
//!
//! Sources: Linux `drivers/pci/pcie/aer.c`, the `aer_stats_dev_attr` macro
//! (4.19 and later): `aer_dev_correctable`, `aer_dev_nonfatal` and
//! `aer_dev_fatal` print `"%s %llu\n"` for each error the kernel names
//! (`RxErr 0`, `BadTLP 3`), `"<array>_bit[%d] %llu\n"` for a set bit it
//! does not name, then `"TOTAL_ERR_COR %llu\n"` (`TOTAL_ERR_NONFATAL`,
//! `TOTAL_ERR_FATAL`); the attributes exist only for a function with an AER
//! capability on a kernel built with `CONFIG_PCIEAER` and not booted with
//! `pci=noaer` (`aer_stats_attrs_are_visible`). amdgpu's `pcie_replay_count`
//! (`amdgpu_device_get_pcie_replay_count`, amdgpu_device.c) prints the
//! ASIC's replay counter as `"%llu\n"` on dGPUs whose ASIC reads it.
//! Captures of these files are often NUL-padded to the page size.

use super::pci::PCI_DEVICES;
use crate::{ReadError, Sysroot};

/// One of the three AER classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Corrected by the link (replayed TLPs, receiver errors).
    Correctable,
    /// Uncorrectable but not fatal to the link (completion timeouts,
    /// unsupported requests, poisoned TLPs).
    NonFatal,
    /// Uncorrectable and fatal: the link is reset to recover.
    Fatal,
}

impl Class {
    /// All three, mildest first.
    pub const ALL: [Class; 3] = [Class::Correctable, Class::NonFatal, Class::Fatal];

    /// The sysfs attribute that counts this class.
    pub fn attribute(self) -> &'static str {
        match self {
            Class::Correctable => "aer_dev_correctable",
            Class::NonFatal => "aer_dev_nonfatal",
            Class::Fatal => "aer_dev_fatal",
        }
    }

    /// How reports name it: the metric's suffix and the prose word.
    pub fn name(self) -> &'static str {
        match self {
            Class::Correctable => "correctable",
            Class::NonFatal => "nonfatal",
            Class::Fatal => "fatal",
        }
    }

    fn total_key(self) -> &'static str {
        match self {
            Class::Correctable => "TOTAL_ERR_COR",
            Class::NonFatal => "TOTAL_ERR_NONFATAL",
            Class::Fatal => "TOTAL_ERR_FATAL",
        }
    }
}

/// What one `aer_dev_*` attribute counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassCount {
    /// The `TOTAL_ERR_*` line.
    pub total: u64,
    /// The errors counted, by the kernel's name, those above zero only.
    pub errors: Vec<(String, u64)>,
}

/// Parses an `aer_dev_*` attribute of `class`; `Err` says what is not as
/// the kernel prints it (no total line, a count that is no number).
pub fn parse(class: Class, text: &str) -> Result<ClassCount, String> {
    let mut count = ClassCount::default();
    let mut total = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.rsplit_once(' ') else {
            return Err(format!("{line:?} is not `NAME COUNT`"));
        };
        let value: u64 = value
            .parse()
            .map_err(|_| format!("{value:?} in {line:?} is not a count"))?;
        if name == class.total_key() {
            total = Some(value);
        } else if value > 0 {
            count.errors.push((name.trim().to_string(), value));
        }
    }
    count.total = total.ok_or_else(|| format!("no {} line", class.total_key()))?;
    Ok(count)
}

/// The AER counters of one PCI function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionAer {
    /// The function's PCI address.
    pub address: String,
    /// Each class the function exposes, mildest first; a function without
    /// AER counters has none.
    pub classes: Vec<(Class, ClassCount)>,
}

impl FunctionAer {
    /// The total of `class`, when the function counts it.
    pub fn total(&self, class: Class) -> Option<u64> {
        self.classes
            .iter()
            .find(|(c, _)| *c == class)
            .map(|(_, n)| n.total)
    }
}

/// Reads the AER counters of the function at `address`: `Ok` with no
/// classes when it exposes none; `Err` when a file is there but cannot be
/// read or is not as the kernel prints it.
pub fn read(sysroot: &Sysroot, address: &str) -> Result<FunctionAer, ReadError> {
    let mut aer = FunctionAer {
        address: address.to_string(),
        classes: Vec::new(),
    };
    for class in Class::ALL {
        let path = format!("{PCI_DEVICES}/{address}/{}", class.attribute());
        let Some(text) = sysroot.read_opt(&path)? else {
            continue;
        };
        let count = parse(class, &text).map_err(|why| ReadError::malformed(&path, why))?;
        aer.classes.push((class, count));
    }
    Ok(aer)
}

/// amdgpu's PCIe replay count of the GPU at `address`; `None` when the
/// driver exposes none (APUs, ASICs that cannot read it).
pub fn replay_count(sysroot: &Sysroot, address: &str) -> Result<Option<u64>, ReadError> {
    let path = format!("{PCI_DEVICES}/{address}/pcie_replay_count");
    let Some(text) = sysroot.read_opt(&path)? else {
        return Ok(None);
    };
    text.parse()
        .map(Some)
        .map_err(|_| ReadError::malformed(&path, format!("{text:?} is not a count")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_the_total_and_the_named_errors_above_zero() {
        let text = "RxErr 0\nBadTLP 3\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\ndev_cor_errs_bit[6] 2\nTOTAL_ERR_COR 6\n";
        let got = parse(Class::Correctable, text).unwrap();
        assert_eq!(got.total, 6);
        assert_eq!(
            got.errors,
            [
                ("BadTLP".to_string(), 3),
                ("BadDLLP".to_string(), 1),
                ("dev_cor_errs_bit[6]".to_string(), 2)
            ]
        );
    }

    #[test]
    fn a_file_without_its_total_or_with_a_word_for_a_count_is_malformed() {
        assert!(parse(Class::Fatal, "DLP 0\n").is_err());
        assert!(parse(Class::Fatal, "TOTAL_ERR_COR 0\n").is_err());
        assert!(parse(Class::Fatal, "DLP many\nTOTAL_ERR_FATAL 0\n").is_err());
        assert!(parse(Class::Fatal, "garbage\n").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            for class in Class::ALL {
                let _ = parse(class, &s);
            }
        }
    }
}
