//! The fastest a GPU's memory can move data, per model, from the vendor's
//! published specifications: what a measured memory rate is checked
//! against, so a rate no such GPU can reach (a runtime's broken event
//! timing, a test that did less work than it counted) is refused instead
//! of reported.
//!
//! Peaks, not floors: no healthy GPU is expected to reach them, and they
//! never judge a GPU. A rate above twice the peak is impossible, whatever
//! the clocks or the kernel.

use rocgate_node::facts::gpus::Gpu;

/// One model's memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryPeak {
    /// Product name as rocgate's PCI id table prints it, or a gfx target
    /// (then the fastest model of that target).
    pub gpu: &'static str,
    /// Peak device-memory (HBM or GDDR) bandwidth of one HIP device, GB/s.
    pub gbps: f64,
    /// The last-level cache (Infinity Cache, else L2) of one HIP device, in
    /// bytes: a region that fits may be served from it, faster than from
    /// memory, so only a larger one is held to [`MemoryPeak::gbps`].
    pub cache_bytes: u64,
    /// Where the figures come from.
    pub source: &'static str,
}

const MIB: u64 = 1 << 20;

/// The models rocgate knows, product names first, then gfx targets (each
/// the fastest of its target, so a GPU known only by its target is held to
/// no lower a peak than its fastest sibling's).
const PEAKS: &[MemoryPeak] = &[
    MemoryPeak {
        gpu: "AMD Instinct MI300X",
        gbps: 5300.0,
        cache_bytes: 256 * MIB,
        source: "AMD Instinct MI300X data sheet: 5.3 TB/s HBM3, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "AMD Instinct MI300X VF",
        gbps: 5300.0,
        cache_bytes: 256 * MIB,
        source: "AMD Instinct MI300X data sheet: 5.3 TB/s HBM3, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "AMD Instinct MI300A",
        gbps: 5300.0,
        cache_bytes: 256 * MIB,
        source: "AMD Instinct MI300A data sheet: 5.3 TB/s HBM3, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "AMD Instinct MI325X",
        gbps: 6000.0,
        cache_bytes: 256 * MIB,
        source: "AMD Instinct MI325X data sheet: 6 TB/s HBM3E, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "gfx942",
        gbps: 6000.0,
        cache_bytes: 256 * MIB,
        source: "the fastest gfx942 model, AMD Instinct MI325X: 6 TB/s HBM3E, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "AMD Instinct MI350X",
        gbps: 8000.0,
        cache_bytes: 256 * MIB,
        source: "AMD Instinct MI350X data sheet: 8 TB/s HBM3E, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "gfx950",
        gbps: 8000.0,
        cache_bytes: 256 * MIB,
        source: "AMD Instinct MI350X / MI355X data sheets: 8 TB/s HBM3E, 256 MB Infinity Cache",
    },
    MemoryPeak {
        gpu: "AMD Instinct MI210",
        gbps: 1638.4,
        cache_bytes: 8 * MIB,
        source: "AMD Instinct MI210 data sheet: 1.6 TB/s HBM2e, 8 MB L2",
    },
    // Each of an MI250/MI250X's two GCDs is its own HIP device, with half
    // the package's 3.2 TB/s.
    MemoryPeak {
        gpu: "gfx90a",
        gbps: 1638.4,
        cache_bytes: 8 * MIB,
        source: "AMD Instinct MI210 / MI250X data sheets: 1.6 TB/s HBM2e per GCD (MI250X: 3.2 TB/s for its two), 8 MB L2",
    },
    MemoryPeak {
        gpu: "gfx908",
        gbps: 1228.8,
        cache_bytes: 8 * MIB,
        source: "AMD Instinct MI100 data sheet: 1.23 TB/s HBM2, 8 MB L2",
    },
];

/// The peak for `gpu`: its product's row, else its gfx target's; `None`
/// for a model rocgate has no figures for.
pub fn peak(gpu: &Gpu) -> Option<&'static MemoryPeak> {
    peak_of(gpu.product.as_deref(), gpu.gfx_target.as_deref())
}

/// The peak for a GPU named `product` with target `gfx`, as [`peak`].
fn peak_of(product: Option<&str>, gfx: Option<&str>) -> Option<&'static MemoryPeak> {
    let by = |name: Option<&str>| name.and_then(|n| PEAKS.iter().find(|p| p.gpu == n));
    by(product).or_else(|| by(gfx))
}

/// How many times its peak a measured rate may be before it is refused:
/// clocks above nominal and rounding never double a memory's bandwidth.
pub const CEILING_FACTOR: f64 = 2.0;

/// Why a memory rate of `gbps` over a region of `bytes` cannot be right on
/// a GPU with `peak`, or `None` when it can: not a positive finite number,
/// or above [`CEILING_FACTOR`] times the peak over a region larger than the
/// GPU's last-level cache (a region that fits may be served from the
/// cache, whose rate no data sheet states as a bound).
pub fn impossible(gbps: f64, bytes: u64, peak: Option<&MemoryPeak>) -> Option<String> {
    if !gbps.is_finite() || gbps <= 0.0 {
        return Some(format!("the timing gave {gbps} GB/s"));
    }
    let p = peak?;
    let ceiling = p.gbps * CEILING_FACTOR;
    (bytes > p.cache_bytes && gbps > ceiling).then(|| {
        format!(
            "{gbps:.0} GB/s is more than {CEILING_FACTOR:.0}x the {:.0} GB/s peak of {} ({}), so the GPU's timing is wrong",
            p.gbps, p.gpu, p.source
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_product_wins_over_its_target_and_an_unknown_gpu_has_no_peak() {
        let mi300x = peak_of(Some("AMD Instinct MI300X"), Some("gfx942"));
        assert_eq!(mi300x.unwrap().gbps, 5300.0);
        assert_eq!(peak_of(None, Some("gfx942")).unwrap().gbps, 6000.0);
        assert!(peak_of(Some("AMD Radeon RX 9070"), Some("gfx1201")).is_none());
        assert!(PEAKS.iter().all(|p| p.gbps > 0.0 && !p.source.is_empty()));
    }

    #[test]
    fn only_a_rate_past_twice_the_peak_over_more_than_the_cache_is_impossible() {
        let p = PEAKS[0];
        let big = 19 << 30;
        assert_eq!(impossible(4000.0, big, Some(&p)), None);
        assert_eq!(impossible(10_600.0, big, Some(&p)), None);
        let why = impossible(4_652_052.0, big, Some(&p)).unwrap();
        assert!(
            why.contains("5300 GB/s peak of AMD Instinct MI300X"),
            "{why}"
        );
        // A region inside the 256 MB Infinity Cache may go faster.
        assert_eq!(impossible(50_000.0, 20 << 20, Some(&p)), None);
        // No peak known: only a rate that is no number is refused.
        assert_eq!(impossible(50_000.0, big, None), None);
        for junk in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            assert!(impossible(junk, big, None).is_some(), "{junk}");
        }
    }
}
