//! A GPU's RAS (reliability, availability, serviceability) counters, as
//! amdgpu exposes them under `/sys/bus/pci/devices/<bdf>/ras/`
//! (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c):
//!
//! - `<block>_err_count` per hardware block (`umc`, `gfx`, `sdma`, `mmhub`,
//!   `xgmi_wafl`, ...): `ue: N\nce: N\n` (`amdgpu_ras_sysfs_read`), with a
//!   `de: N` line for deferred errors on kernels that count them (UMC,
//!   2024); `Query currently inaccessible` while the driver cannot query;
//! - on GPUs whose errors go through ACA (MI300 class, MP0 13.0.6/12/14,
//!   bare metal) `aca_<block>` instead (amdgpu_aca.c), always with `ue`,
//!   `ce` and `de`;
//! - `gpu_vram_bad_pages`: one line per retired VRAM page,
//!   `0x%08x : 0x%08x : %1s` = page frame, page size, and `R` (reserved:
//!   retired), `P` (pending: to be retired) or `F` (the reservation failed)
//!   (`amdgpu_ras_sysfs_badpages_read`);
//! - `features`: `feature mask: 0x%x` (the blocks RAS is enabled for).
//!
//! A GPU without RAS (consumer GPUs, RAS disabled) has no `ras/` directory.
//! These are read by the checks, under their timeouts, not at discovery.

use crate::{ReadError, Sysroot};

/// One block's error counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockCount {
    /// The block (`umc`, `xgmi_wafl`), from the file name.
    pub block: String,
    /// Uncorrectable errors.
    pub ue: u64,
    /// Correctable errors.
    pub ce: u64,
    /// Deferred errors, on kernels that count them.
    pub de: Option<u64>,
}

/// How a retired VRAM page stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageState {
    /// Retired: reserved so that nothing uses it (`R`).
    Reserved,
    /// To be retired (`P`).
    Pending,
    /// The driver could not reserve it (`F`).
    Failed,
}

/// One line of `gpu_vram_bad_pages`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadPage {
    /// The page frame number.
    pub page: u64,
    /// Its size in bytes.
    pub size: u64,
    /// How it stands.
    pub state: PageState,
}

/// What a GPU's `ras/` directory says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ras {
    /// Per block, in file-name order.
    pub blocks: Vec<BlockCount>,
    /// Retired (or to-be-retired) VRAM pages; `None` when the file is absent
    /// (a GPU whose VRAM has no ECC, or an old kernel).
    pub bad_pages: Option<Vec<BadPage>>,
    /// The feature mask, when readable.
    pub features: Option<u64>,
    /// Files that were there but not in the format above, with why.
    pub malformed: Vec<String>,
}

impl Ras {
    /// Blocks with uncorrectable errors.
    pub fn uncorrectable(&self) -> impl Iterator<Item = &BlockCount> {
        self.blocks.iter().filter(|b| b.ue > 0)
    }

    /// All uncorrectable errors.
    pub fn total_ue(&self) -> u64 {
        self.blocks.iter().map(|b| b.ue).sum()
    }

    /// All correctable errors.
    pub fn total_ce(&self) -> u64 {
        self.blocks.iter().map(|b| b.ce).sum()
    }
}

/// Reads the RAS directory of the GPU at PCI `address`; `None` when the GPU
/// has none.
pub fn read(sysroot: &Sysroot, address: &str) -> Result<Option<Ras>, ReadError> {
    let dir = format!("/sys/bus/pci/devices/{address}/ras");
    let Some(names) = sysroot.list_dir_if_present(&dir)? else {
        return Ok(None);
    };
    let mut ras = Ras::default();
    for name in &names {
        let path = format!("{dir}/{name}");
        let block = name
            .strip_suffix("_err_count")
            .or_else(|| name.strip_prefix("aca_"));
        if let Some(block) = block {
            let text = sysroot.read_text(&path)?;
            match parse_count(block, &text) {
                Ok(count) => ras.blocks.push(count),
                Err(why) => ras.malformed.push(format!("{path}: {why}")),
            }
        } else if name == "gpu_vram_bad_pages" {
            let text = sysroot.read_text(&path)?;
            match parse_bad_pages(&text) {
                Ok(pages) => ras.bad_pages = Some(pages),
                Err(why) => ras.malformed.push(format!("{path}: {why}")),
            }
        } else if name == "features" {
            let text = sysroot.read_text(&path)?;
            ras.features = parse_features(&text);
        }
    }
    Ok(Some(ras))
}

/// Parses one `<block>_err_count` file.
pub fn parse_count(block: &str, text: &str) -> Result<BlockCount, String> {
    let mut count = BlockCount {
        block: block.to_string(),
        ue: 0,
        ce: 0,
        de: None,
    };
    let (mut ue, mut ce) = (false, false);
    for line in text.trim_end_matches('\0').lines().map(str::trim) {
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("line {line:?} is not `key: count`"))?;
        let n: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("{:?} is not a count", value.trim()))?;
        match key.trim() {
            "ue" => (count.ue, ue) = (n, true),
            "ce" => (count.ce, ce) = (n, true),
            "de" => count.de = Some(n),
            // A counter this reader does not know is left alone.
            _ => {}
        }
    }
    if ue && ce {
        Ok(count)
    } else {
        Err("no `ue:` and `ce:` lines".into())
    }
}

/// Parses `gpu_vram_bad_pages`.
pub fn parse_bad_pages(text: &str) -> Result<Vec<BadPage>, String> {
    let hex = |s: &str| {
        let s = s.trim();
        s.strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("{s:?} is not a hex number"))
    };
    text.trim_end_matches('\0')
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut parts = line.split(':');
            let (Some(page), Some(size), Some(flag), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("line {line:?} is not `page : size : flag`"));
            };
            let state = match flag.trim() {
                "R" => PageState::Reserved,
                "P" => PageState::Pending,
                "F" => PageState::Failed,
                other => return Err(format!("flag {other:?} is not R, P or F")),
            };
            Ok(BadPage {
                page: hex(page)?,
                size: hex(size)?,
                state,
            })
        })
        .collect()
}

/// Parses `features` (`feature mask: 0x...`).
pub fn parse_features(text: &str) -> Option<u64> {
    let value = text.trim_end_matches('\0').trim().split_once(':')?.1.trim();
    u64::from_str_radix(value.strip_prefix("0x")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_read_as_the_driver_prints_them() {
        let c = parse_count("umc", "ue: 2\nce: 31\n").unwrap();
        assert_eq!((c.ue, c.ce, c.de), (2, 31, None));
        let d = parse_count("gfx", "ue: 0\nce: 0\nde: 4\n").unwrap();
        assert_eq!(d.de, Some(4));
        assert!(parse_count("umc", "ue: x\nce: 1\n").is_err());
        assert!(parse_count("umc", "").is_err());
    }

    #[test]
    fn bad_pages_read_as_the_driver_prints_them() {
        let pages =
            parse_bad_pages("0x00012345 : 0x00001000 : R\n0x00054321 : 0x00001000 : P\n").unwrap();
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0].page, 0x12345);
        assert_eq!(pages[1].state, PageState::Pending);
        assert!(parse_bad_pages("").unwrap().is_empty());
        assert!(parse_bad_pages("0x1 : 0x1000 : X\n").is_err());
        assert_eq!(parse_features("feature mask: 0x3fbb\n"), Some(0x3fbb));
    }

    proptest! {
        #[test]
        fn no_input_panics_the_parsers(text in "\\PC*") {
            let _ = parse_count("umc", &text);
            let _ = parse_bad_pages(&text);
            let _ = parse_features(&text);
        }

        #[test]
        fn printed_counts_read_back(ue in any::<u64>(), ce in any::<u64>()) {
            let c = parse_count("umc", &format!("ue: {ue}\nce: {ce}\n")).unwrap();
            prop_assert_eq!((c.ue, c.ce), (ue, ce));
        }
    }
}
