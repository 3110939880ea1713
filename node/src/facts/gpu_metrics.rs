//! What amdgpu's binary `gpu_metrics` table
//! (`/sys/bus/pci/devices/<address>/gpu_metrics`) says of why a GPU is held
//! back: the SMU's throttlers.
//!
//! The table (amdgpu `kgd_pp_interface.h`, structs naturally aligned)
//! starts with a header: u16 `structure_size`, u8 `format_revision`, u8
//! `content_revision`. Every field the driver does not fill reads all ones
//! (`smu_cmn_init_soft_gpu_metrics` sets the table to 0xff first). What
//! each version carries of throttling:
//! - v1.3 (MI200, `aldebaran_ppt.c`): u64 `indep_throttle_status` at byte
//!   112, the throttlers active now as `SMU_THROTTLER_*` bits
//!   (`amdgpu_smu.h`): power 0-7 (PPT0-3, SPL, FPPT, SPPT), current 16-23
//!   (TDC, EDC, APCC), temperature 32-47 (GPU, core, memory, edge, hotspot,
//!   SoC, VRs, liquid, VRHOT, PROCHOT), 56 PPM, 57 FIT;
//! - v1.4 and v1.5 (MI300, `smu_v13_0_6_ppt.c` until 2024): u32
//!   `throttle_status`, written as 0 ("not reported through metrics"):
//!   nothing to read;
//! - v1.6 (u32 `accumulation_counter` at 32, then the residencies of
//!   PROCHOT, PPT, socket thermal, VR thermal and HBM thermal at 36-52) and
//!   v1.7/v1.8 (the same at 40, then 44-60), from MI300's SMU 13.0.6 and
//!   MI350's 13.0.12: accumulators that grow while each throttler holds, so
//!   the share of a span a throttler held is its growth over the
//!   accumulation counter's (amd-smi's violation status, ROCm 6.3: "used
//!   for all throttled calculations"; PVIOL from PPT, TVIOL from socket
//!   thermal).

use crate::{ReadError, Sysroot};

/// The largest table read (v1.8 is 3872 bytes; the attribute is at most
/// a page).
const LIMIT: u64 = 8192;

/// What one read of the table says of throttling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Throttle {
    /// The throttlers active now, as `SMU_THROTTLER_*` bits (v1.3).
    Active(u64),
    /// Accumulators of the time each throttler held (v1.6-v1.8).
    Residency(Residency),
    /// The table is of this version and says nothing of throttling.
    NotReported(u8, u8),
}

/// The SMU's throttle residency accumulators, in its accumulation units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Residency {
    /// Grows steadily: the span the others are shares of.
    pub counter: u64,
    /// PROCHOT asserted (a processor or board over temperature).
    pub prochot: u64,
    /// Package power tracking: the power cap holding the clock.
    pub ppt: u64,
    /// Socket thermal limit.
    pub socket_thermal: u64,
    /// Voltage regulator thermal limit.
    pub vr_thermal: u64,
    /// HBM thermal limit.
    pub hbm_thermal: u64,
}

impl Residency {
    /// The share of the span from `earlier` to `self` that a thermal
    /// throttler (PROCHOT, socket, VR or HBM thermal: the most of them)
    /// and the power cap held; `None` when the counter did not grow.
    pub fn shares_since(&self, earlier: &Residency) -> Option<(f64, f64)> {
        let span = self
            .counter
            .checked_sub(earlier.counter)
            .filter(|&d| d > 0)? as f64;
        let grew = |now: u64, then: u64| now.saturating_sub(then) as f64 / span;
        let thermal = [
            grew(self.prochot, earlier.prochot),
            grew(self.socket_thermal, earlier.socket_thermal),
            grew(self.vr_thermal, earlier.vr_thermal),
            grew(self.hbm_thermal, earlier.hbm_thermal),
        ]
        .into_iter()
        .fold(0.0, f64::max);
        Some((thermal.min(1.0), grew(self.ppt, earlier.ppt).min(1.0)))
    }
}

/// `SMU_THROTTLER_*` bits of temperature limits (32-47).
pub const THERMAL_BITS: u64 = 0xffff << 32;
/// `SMU_THROTTLER_*` bits of power and current limits (0-23).
pub const POWER_BITS: u64 = 0x00ff_ffff;

/// Reads the GPU's table; `Ok(None)` when it has none.
pub fn read(sysroot: &Sysroot, address: &str) -> Result<Option<Throttle>, ReadError> {
    let path = format!("/sys/bus/pci/devices/{address}/gpu_metrics");
    let bytes = match sysroot.read_bytes(&path, LIMIT) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    parse(&bytes)
        .map(Some)
        .map_err(|why| ReadError::malformed(&path, why))
}

/// Parses a table: its header, then what its version says of throttling.
pub fn parse(bytes: &[u8]) -> Result<Throttle, String> {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8])))
    };
    let size = u16_at(0).ok_or("shorter than its 4-byte header")?;
    let (format, content) = match (bytes.get(2), bytes.get(3)) {
        (Some(&f), Some(&c)) => (f, c),
        _ => return Err("shorter than its 4-byte header".into()),
    };
    if usize::from(size) > bytes.len() {
        return Err(format!(
            "its header gives {size} bytes, {} were read",
            bytes.len()
        ));
    }
    let residency = |base: usize| -> Option<Throttle> {
        let words: Vec<u32> = (0..6)
            .map(|k| u32_at(base + 4 * k))
            .collect::<Option<_>>()?;
        if words.contains(&u32::MAX) {
            return Some(Throttle::NotReported(format, content));
        }
        let w = |k: usize| u64::from(words[k]);
        Some(Throttle::Residency(Residency {
            counter: w(0),
            prochot: w(1),
            ppt: w(2),
            socket_thermal: w(3),
            vr_thermal: w(4),
            hbm_thermal: w(5),
        }))
    };
    let short = || format!("v{format}.{content} table of {size} bytes is too short for its fields");
    match (format, content) {
        (1, 3) => match u64_at(112).ok_or_else(short)? {
            u64::MAX => Ok(Throttle::NotReported(format, content)),
            bits => Ok(Throttle::Active(bits)),
        },
        (1, 6) => residency(32).ok_or_else(short),
        (1, 7 | 8) => residency(40).ok_or_else(short),
        _ => Ok(Throttle::NotReported(format, content)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A table of `size` bytes of version 1.`content`, every field unfilled,
    /// then `fields` (offset, little-endian bytes) written.
    fn table(content: u8, size: u16, fields: &[(usize, Vec<u8>)]) -> Vec<u8> {
        let mut t = vec![0xffu8; usize::from(size)];
        t[0..2].copy_from_slice(&size.to_le_bytes());
        t[2] = 1;
        t[3] = content;
        for (at, bytes) in fields {
            t[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        t
    }

    #[test]
    fn mi200_s_table_gives_the_throttlers_active_now() {
        // TEMP_HOTSPOT (36) and PPT0 (0).
        let bits: u64 = (1 << 36) | 1;
        let t = table(3, 120, &[(112, bits.to_le_bytes().to_vec())]);
        assert_eq!(parse(&t), Ok(Throttle::Active(bits)));
        assert_ne!(bits & THERMAL_BITS, 0);
        assert_ne!(bits & POWER_BITS, 0);
        // Unfilled: all ones.
        assert_eq!(parse(&table(3, 120, &[])), Ok(Throttle::NotReported(1, 3)));
    }

    #[test]
    fn mi300_s_tables_give_residency_accumulators_or_nothing() {
        let words = |vals: [u32; 6]| {
            vals.iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>()
        };
        let v18 = table(8, 3872, &[(40, words([1000, 0, 600, 50, 0, 0]))]);
        let Ok(Throttle::Residency(then)) = parse(&v18) else {
            panic!("{:?}", parse(&v18))
        };
        let v18 = table(8, 3872, &[(40, words([2000, 0, 1200, 450, 0, 100]))]);
        let Ok(Throttle::Residency(now)) = parse(&v18) else {
            panic!()
        };
        assert_eq!(now.shares_since(&then), Some((0.4, 0.6)));
        assert_eq!(now.shares_since(&now), None, "a counter that did not grow");
        let v16 = table(6, 1664, &[(32, words([5, 1, 2, 3, 4, 5]))]);
        assert!(
            matches!(parse(&v16), Ok(Throttle::Residency(r)) if r.prochot == 1 && r.hbm_thermal == 5)
        );
        // v1.5 writes throttle_status 0: nothing said.
        assert_eq!(
            parse(&table(5, 360, &[(104, vec![0; 4])])),
            Ok(Throttle::NotReported(1, 5))
        );
        assert_eq!(parse(&table(8, 3872, &[])), Ok(Throttle::NotReported(1, 8)));
    }

    #[test]
    fn a_short_or_lying_table_is_an_error() {
        assert!(parse(&[8, 0]).is_err());
        let mut t = table(8, 3872, &[]);
        t.truncate(100);
        assert!(parse(&t).unwrap_err().contains("3872 bytes"));
        assert!(parse(&table(8, 48, &[])).unwrap_err().contains("too short"));
    }

    proptest! {
        #[test]
        fn no_bytes_make_it_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn shares_stay_within_zero_and_one(a in any::<[u32; 6]>(), b in any::<[u32; 6]>()) {
            let r = |w: [u32; 6]| Residency {
                counter: w[0].into(), prochot: w[1].into(), ppt: w[2].into(),
                socket_thermal: w[3].into(), vr_thermal: w[4].into(), hbm_thermal: w[5].into(),
            };
            if let Some((t, p)) = r(b).shares_since(&r(a)) {
                prop_assert!((0.0..=1.0).contains(&t) && (0.0..=1.0).contains(&p));
            }
        }
    }
}
