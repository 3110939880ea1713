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
//! A block may be counted by both names: a 2026 series returns ACA GPUs to
//! `<block>_err_count` while kernels in between keep `aca_<block>` beside
//! it, and both print the same counters of the same block. They are one
//! block, never summed: each counter keeps the greater of the two values
//! ([`merge_blocks`]), so a file that lags cannot hide an error and the
//! same error is not counted twice.
//!
//! A GPU without RAS (consumer GPUs, RAS disabled) has no `ras/` directory.
//! These are read by the checks, under their timeouts, not at discovery.

use crate::{ReadError, Sysroot};

/// The most of `gpu_vram_bad_pages` read: 1 MiB. The driver keeps retired
/// pages in an EEPROM table of 256 KiB with 24-byte records
/// (amdgpu_ras_eeprom.c, `RAS_TBL_SIZE_BYTES`, `RAS_TABLE_RECORD_SIZE`:
/// about 10,900 records), each printed in 28 bytes, so a list longer than
/// this is not what the driver prints; its count is unknown.
pub const BAD_PAGES_LIMIT: u64 = 1 << 20;

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
    /// Counters the file gives more than once, which the driver never
    /// prints (`ue` twice): the greatest value of each is kept, so that a
    /// later `ue: 0` cannot hide a `ue: 5`; the file is still garbled.
    pub repeated: Vec<String>,
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

/// A `gpu_vram_bad_pages` that is there but could not be read whole: the
/// records it did give are a lower bound, not the count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadPagesUnread {
    /// Why, naming the file.
    pub why: String,
    /// The well-formed records that were read.
    pub valid: usize,
}

/// What a GPU's `ras/` directory says. Each file is its own fact: one that
/// cannot be read leaves the others standing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ras {
    /// Per block, in file-name order: the counter files that read.
    pub blocks: Vec<BlockCount>,
    /// Retired (or to-be-retired) VRAM pages; `None` when the file is absent
    /// (a GPU whose VRAM has no ECC, or an old kernel) or unreadable (then
    /// [`Ras::bad_pages_unread`] says why).
    pub bad_pages: Option<Vec<BadPage>>,
    /// Why `gpu_vram_bad_pages`, which is there, could not be read whole.
    pub bad_pages_unread: Option<BadPagesUnread>,
    /// The feature mask, when readable (no check depends on it).
    pub features: Option<u64>,
    /// Counter files that were there but could not be read or were not in
    /// the driver's format, each naming the file and why.
    pub malformed: Vec<String>,
}

impl Ras {
    /// Blocks with uncorrectable errors.
    pub fn uncorrectable(&self) -> impl Iterator<Item = &BlockCount> {
        self.blocks.iter().filter(|b| b.ue > 0)
    }

    /// All uncorrectable errors, saturating at `u64::MAX` (counts near the
    /// limit must not wrap to a clean 0).
    pub fn total_ue(&self) -> u64 {
        self.blocks
            .iter()
            .fold(0, |sum, b| sum.saturating_add(b.ue))
    }

    /// All correctable errors, saturating like [`Ras::total_ue`].
    pub fn total_ce(&self) -> u64 {
        self.blocks
            .iter()
            .fold(0, |sum, b| sum.saturating_add(b.ce))
    }
}

/// Reads the RAS directory of the GPU at PCI `address`; `None` when the GPU
/// has none. Only a directory that cannot be listed is an error: a file in
/// it that does not read is noted in [`Ras::malformed`] (counters) or
/// [`Ras::bad_pages_unread`], and the other files are still read, apart
/// from after a file that did not answer (a wedged device: the rest would
/// each wait the deadline too).
pub fn read(sysroot: &Sysroot, address: &str) -> Result<Option<Ras>, ReadError> {
    let dir = format!("/sys/bus/pci/devices/{address}/ras");
    let Some(names) = sysroot.list_dir_if_present(&dir)? else {
        return Ok(None);
    };
    let mut ras = Ras::default();
    for (i, name) in names.iter().enumerate() {
        let path = format!("{dir}/{name}");
        let block = name
            .strip_suffix("_err_count")
            .or_else(|| name.strip_prefix("aca_"));
        let timed_out = if let Some(block) = block {
            match sysroot.read_text(&path) {
                Ok(text) => {
                    match parse_count(block, &text) {
                        Ok(count) => {
                            if !count.repeated.is_empty() {
                                ras.malformed.push(format!(
                                    "{path}: {} (the driver prints each once; the greatest is taken)",
                                    count.repeated.join(", ")
                                ));
                            }
                            ras.blocks.push(count);
                        }
                        Err(why) => ras.malformed.push(format!("{path}: {why}")),
                    }
                    false
                }
                Err(e) => {
                    ras.malformed.push(e.to_string());
                    e.is_timeout()
                }
            }
        } else if name == "gpu_vram_bad_pages" {
            match read_bad_pages(sysroot, &path) {
                Ok(pages) => {
                    ras.bad_pages = Some(pages);
                    false
                }
                Err((unread, timed_out)) => {
                    ras.bad_pages_unread = Some(unread);
                    timed_out
                }
            }
        } else if name == "features" {
            match sysroot.read_text(&path) {
                Ok(text) => {
                    ras.features = parse_features(&text);
                    false
                }
                Err(e) => e.is_timeout(),
            }
        } else {
            false
        };
        if timed_out {
            let rest: Vec<&str> = names[i + 1..].iter().map(String::as_str).collect();
            if !rest.is_empty() {
                ras.malformed.push(format!(
                    "{dir}: not read after a file that did not answer: {}",
                    rest.join(", ")
                ));
            }
            break;
        }
    }
    ras.blocks = merge_blocks(std::mem::take(&mut ras.blocks));
    Ok(Some(ras))
}

/// One count per block: a block that more than one file counts (`aca_umc`
/// and `umc_err_count`) keeps, per counter, the greater value, never the
/// sum; the two files print the same counters (amdgpu_aca.c
/// `aca_sysfs_read`, amdgpu_ras.c `amdgpu_ras_sysfs_read`). The first
/// file's position is kept.
pub fn merge_blocks(blocks: Vec<BlockCount>) -> Vec<BlockCount> {
    let mut merged: Vec<BlockCount> = Vec::with_capacity(blocks.len());
    for b in blocks {
        match merged.iter_mut().find(|m| m.block == b.block) {
            Some(m) => {
                m.ue = m.ue.max(b.ue);
                m.ce = m.ce.max(b.ce);
                m.de = match (m.de, b.de) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                };
                m.repeated.extend(b.repeated);
            }
            None => merged.push(b),
        }
    }
    merged
}

/// Reads `gpu_vram_bad_pages` at `path`, whole and well formed, or says why
/// not with the records it did give (and whether the file did not answer).
fn read_bad_pages(sysroot: &Sysroot, path: &str) -> Result<Vec<BadPage>, (BadPagesUnread, bool)> {
    let unread = |why: String| (BadPagesUnread { why, valid: 0 }, false);
    let bytes = sysroot.read_bytes(path, BAD_PAGES_LIMIT + 1).map_err(|e| {
        (
            BadPagesUnread {
                why: e.to_string(),
                valid: 0,
            },
            e.is_timeout(),
        )
    })?;
    let cut = bytes.len() as u64 > BAD_PAGES_LIMIT;
    let bytes = &bytes[..bytes.len().min(BAD_PAGES_LIMIT as usize)];
    // Captures are often NUL-padded: the text ends at the first NUL.
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = match std::str::from_utf8(&bytes[..end]) {
        Ok(t) => t,
        // A cut can split nothing here (records are ASCII), so this is
        // garbage, not the limit.
        Err(_) => return Err(unread(format!("{path} is not UTF-8 text"))),
    };
    if cut {
        // The last line may be cut in two: count whole records only.
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        let valid = parse_bad_pages(whole).records.len();
        return Err((
            BadPagesUnread {
                why: format!(
                    "{path} is longer than the 1 MiB rocgate reads of it (the driver's EEPROM table holds about 10,900 records, 28 bytes each): its count is unknown, at least {valid}"
                ),
                valid,
            },
            false,
        ));
    }
    let parsed = parse_bad_pages(text);
    match parsed.garbled {
        None => Ok(parsed.records),
        Some(why) => Err((
            BadPagesUnread {
                why: format!(
                    "{path}: {why} (the driver prints `0x%08x : 0x%08x : %1s`); {} valid records",
                    parsed.records.len()
                ),
                valid: parsed.records.len(),
            },
            false,
        )),
    }
}

/// Parses one `<block>_err_count` file. A counter given twice keeps its
/// greatest value and is named in [`BlockCount::repeated`].
pub fn parse_count(block: &str, text: &str) -> Result<BlockCount, String> {
    let mut count = BlockCount {
        block: block.to_string(),
        ue: 0,
        ce: 0,
        de: None,
        repeated: Vec::new(),
    };
    let (mut ue, mut ce) = (None::<u64>, None::<u64>);
    for line in text.trim_end_matches('\0').lines().map(str::trim) {
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("line {:?} is not `key: count`", short(line)))?;
        let n: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("{:?} is not a count", short(value.trim())))?;
        let key = key.trim();
        let slot = match key {
            "ue" => &mut ue,
            "ce" => &mut ce,
            "de" => &mut count.de,
            // A counter this reader does not know is left alone.
            _ => continue,
        };
        if let Some(before) = *slot {
            count
                .repeated
                .push(format!("`{key}` is given twice ({before}, then {n})"));
        }
        *slot = Some(slot.map_or(n, |before| before.max(n)));
    }
    match (ue, ce) {
        (Some(ue), Some(ce)) => {
            (count.ue, count.ce) = (ue, ce);
            Ok(count)
        }
        _ => Err("no `ue:` and `ce:` lines".into()),
    }
}

/// `gpu_vram_bad_pages` parsed: the well-formed records, and the first line
/// that is not one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedBadPages {
    /// The well-formed records, in file order.
    pub records: Vec<BadPage>,
    /// The first line that is no record: which and why.
    pub garbled: Option<String>,
}

/// Parses `gpu_vram_bad_pages`: every line a record, else the first that
/// is not is named (`line 3: ...`) and the rest still counted.
pub fn parse_bad_pages(text: &str) -> ParsedBadPages {
    let hex = |s: &str| {
        let s = s.trim();
        s.strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("{:?} is not a hex number", short(s)))
    };
    let record = |line: &str| {
        let mut parts = line.split(':');
        let (Some(page), Some(size), Some(flag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{:?} is not `page : size : flag`", short(line)));
        };
        let state = match flag.trim() {
            "R" => PageState::Reserved,
            "P" => PageState::Pending,
            "F" => PageState::Failed,
            other => return Err(format!("flag {:?} is not R, P or F", short(other))),
        };
        Ok(BadPage {
            page: hex(page)?,
            size: hex(size)?,
            state,
        })
    };
    let mut parsed = ParsedBadPages::default();
    for (i, line) in text.trim_end_matches('\0').lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match record(line) {
            Ok(r) => parsed.records.push(r),
            Err(why) if parsed.garbled.is_none() => {
                parsed.garbled = Some(format!("line {}: {why}", i + 1));
            }
            Err(_) => {}
        }
    }
    parsed
}

/// At most 40 characters of `s`, for messages.
fn short(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
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
        let parsed = parse_bad_pages("0x00012345 : 0x00001000 : R\n0x00054321 : 0x00001000 : P\n");
        assert_eq!(parsed.garbled, None);
        let pages = parsed.records;
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0].page, 0x12345);
        assert_eq!(pages[1].state, PageState::Pending);
        assert_eq!(parse_bad_pages(""), ParsedBadPages::default());
        assert!(parse_bad_pages("0x1 : 0x1000 : X\n").garbled.is_some());
        assert_eq!(parse_features("feature mask: 0x3fbb\n"), Some(0x3fbb));
    }

    #[test]
    fn a_garbled_line_is_named_and_the_records_around_it_counted() {
        let p =
            parse_bad_pages("0x1 : 0x1000 : R\nnot a record\n\n0x2 : 0x1000 : F\n0x3 : x : R\n");
        assert_eq!(p.records.len(), 2);
        assert_eq!(
            p.garbled.as_deref(),
            Some("line 2: \"not a record\" is not `page : size : flag`")
        );
    }

    #[test]
    fn a_repeated_counter_keeps_its_greatest_value_and_is_named() {
        let c = parse_count("umc", "ue: 5\nce: 0\nue: 0\n").unwrap();
        assert_eq!(c.ue, 5);
        assert_eq!(c.repeated, ["`ue` is given twice (5, then 0)"]);
        let c = parse_count("umc", "ue: 0\nce: 1\nce: 7\n").unwrap();
        assert_eq!((c.ue, c.ce), (0, 7));
    }

    #[test]
    fn totals_saturate() {
        let block = |ue| BlockCount {
            block: "umc".into(),
            ue,
            ce: ue,
            de: None,
            repeated: Vec::new(),
        };
        let ras = Ras {
            blocks: vec![block(u64::MAX), block(1)],
            ..Ras::default()
        };
        assert_eq!(ras.total_ue(), u64::MAX);
        assert_eq!(ras.total_ce(), u64::MAX);
    }

    #[test]
    fn each_file_is_its_own_fact() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        let ras = dir.path().join("sys/bus/pci/devices/0000:05:00.0/ras");
        std::fs::create_dir_all(ras.join("features")).unwrap();
        std::fs::write(ras.join("aca_umc"), "ue: 5\nce: 0\nde: 0\n").unwrap();
        std::fs::write(ras.join("aca_gfx"), [0xff, 0xfe]).unwrap();
        std::os::unix::fs::symlink("gone", ras.join("gpu_vram_bad_pages")).unwrap();
        let got = read(&root, "0000:05:00.0").unwrap().unwrap();
        assert_eq!(got.total_ue(), 5);
        assert_eq!(got.features, None);
        assert_eq!(got.bad_pages, None);
        let unread = got.bad_pages_unread.unwrap();
        assert!(unread.why.contains("gpu_vram_bad_pages"), "{}", unread.why);
        assert_eq!(got.malformed.len(), 1, "{:?}", got.malformed);
        assert!(got.malformed[0].contains("aca_gfx"), "{:?}", got.malformed);
        // A list past the limit is cut, not read as a shorter one.
        let line = "0x00012345 : 0x00001000 : R\n";
        std::fs::remove_file(ras.join("gpu_vram_bad_pages")).unwrap();
        std::fs::write(ras.join("gpu_vram_bad_pages"), line.repeat(40_000)).unwrap();
        let got = read(&root, "0000:05:00.0").unwrap().unwrap();
        let unread = got.bad_pages_unread.unwrap();
        assert_eq!(unread.valid, (BAD_PAGES_LIMIT as usize) / line.len());
        assert!(unread.why.contains("1 MiB"), "{}", unread.why);
    }

    #[test]
    fn a_block_counted_by_both_names_is_one_block_with_the_greater_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        let ras = dir.path().join("sys/bus/pci/devices/0000:05:00.0/ras");
        std::fs::create_dir_all(&ras).unwrap();
        std::fs::write(ras.join("aca_umc"), "ue: 2\nce: 7\nde: 1\n").unwrap();
        std::fs::write(ras.join("umc_err_count"), "ue: 2\nce: 9\n").unwrap();
        std::fs::write(ras.join("aca_gfx"), "ue: 0\nce: 0\nde: 0\n").unwrap();
        let got = read(&root, "0000:05:00.0").unwrap().unwrap();
        assert_eq!(got.blocks.len(), 2, "{:?}", got.blocks);
        assert_eq!(got.total_ue(), 2);
        assert_eq!(got.total_ce(), 9);
        let umc = got.blocks.iter().find(|b| b.block == "umc").unwrap();
        assert_eq!(umc.de, Some(1));
    }

    proptest! {
        #[test]
        fn merged_blocks_are_unique_and_never_below_any_file(
            counts in proptest::collection::vec((0..3usize, any::<u32>(), any::<u32>()), 0..8)
        ) {
            let names = ["umc", "gfx", "sdma"];
            let blocks: Vec<BlockCount> = counts.iter().map(|&(n, ue, ce)| BlockCount {
                block: names[n].into(), ue: ue.into(), ce: ce.into(), de: None, repeated: Vec::new(),
            }).collect();
            let merged = merge_blocks(blocks.clone());
            for b in &blocks {
                let m: Vec<_> = merged.iter().filter(|m| m.block == b.block).collect();
                prop_assert_eq!(m.len(), 1);
                prop_assert!(m[0].ue >= b.ue && m[0].ce >= b.ce);
            }
            let max_ue = blocks.iter().map(|b| b.ue).max().unwrap_or(0);
            prop_assert!(merged.iter().all(|m| m.ue <= max_ue));
        }

        #[test]
        fn no_input_panics_the_parsers(text in "\\PC*") {
            let _ = parse_count("umc", &text);
            let _ = parse_bad_pages(&text);
            let _ = parse_features(&text);
        }

        #[test]
        fn no_lines_panic_the_parsers(lines in proptest::collection::vec(
            "(ue|ce|de|0x[0-9a-f]{0,20}|[RPF]| |:|[0-9]{1,22}|\\PC{0,3})*", 0..12)) {
            let text = lines.join("\n");
            let _ = parse_count("umc", &text);
            let p = parse_bad_pages(&text);
            prop_assert!(p.records.len() <= lines.len());
        }

        #[test]
        fn printed_counts_read_back(ue in any::<u64>(), ce in any::<u64>()) {
            let c = parse_count("umc", &format!("ue: {ue}\nce: {ce}\n")).unwrap();
            prop_assert_eq!((c.ue, c.ce), (ue, ce));
        }
    }
}
