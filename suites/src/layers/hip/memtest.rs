//! hip, extended tier: a device-memory test over a share of each GPU's VRAM
//! (`[memtest] vram_share` in the thresholds): rocgate's kernels write
//! address-in-address and walking-ones patterns and read them back on the
//! GPU, so a faulty cell, data bit or address line shows as the addresses
//! that read back wrong and the bits that differ.
//!
//! Its rate is the bytes the kernels moved (each pass writes the region and
//! reads it back) over the time they ran on the GPU's clock (HIP events
//! around each chunk's two kernels: the host's synchronising and reading
//! back of the error records is not the memory's time). A rate no such GPU
//! can reach ([`crate::memory_peaks`]) is refused with the reason, never
//! reported as a measurement.

use super::device::{HipDevice, find_device, hip_fail, load_module};
use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{isolated, list, size_text};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_rocm::hip::{DeviceBuffer, GpuTimer, Hip, HipError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The largest buffer one pass covers: the kernels index words with 32 bits.
const CHUNK_BYTES: usize = 1 << 30;
/// Failing words each pass records (all are counted).
const CAPACITY: u32 = 64;
/// Failing addresses a report lists.
const LISTED: usize = 32;

/// The memory test.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![Check {
        tier: Tier::Extended,
        ..isolated(
            "hip::memtest",
            stack::HIP,
            ScopeKind::PerGpu,
            &["hip::vector_add"],
            600,
            "a share of the GPU's VRAM holds walking-ones and address-in-address patterns",
            memtest,
        )
        // two patterns over vram_share (10%) of 192 GB of HBM, 1 GiB at a time.
        .typically(Duration::from_millis(8000))
    }]
}

/// The passes, as (mode, seed): address in address twice (the second seed
/// flips most bits of the first), then a walking one at every bit position.
fn passes() -> impl Iterator<Item = (u32, u32)> {
    [(0, 0), (0, 0x9E37_79B9)]
        .into_iter()
        .chain((0..32).map(|bit| (1, bit)))
}

/// Addresses that read back wrong, with every bit seen to differ.
type Failing = BTreeMap<u64, u32>;

fn memtest(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice {
        gpu, hip, index, ..
    } = find_device(ctx, scope)?;
    let module = load_module(gpu, hip)?;
    let next = "the memory test's kernels did not run: read `dmesg | grep -i -e amdgpu -e 'page fault'` and the RAS counters; a GPU that fails launches needs a reset (<reset>)";
    let fail = |e: HipError| hip_fail(codes::HIP_LAUNCH_FAILED, &e, next);
    let write = module.function("memtest_write").map_err(fail)?;
    let check = module.function("memtest_check").map_err(fail)?;
    let share = ctx.thresholds.memtest.vram_share;
    let total = hip.total_mem(index).map_err(fail)?;
    let (target, raised) = target_bytes(total, share);
    let (chunks, short) = allocate(hip, target)?;
    let short = format!("{raised}{short}");
    let covered: usize = chunks.iter().map(|c| c.len()).sum();
    if covered == 0 {
        // Nothing written is nothing verified: a pass here would not have looked.
        return Err(Verdict::unverifiable(format!(
            "no VRAM to test: HIP reports {total} bytes of device memory, {} of which is less than a word",
            crate::thresholds::share_text(share)
        )));
    }
    let errors = DeviceBuffer::new(hip, (1 + 2 * CAPACITY as usize) * 4).map_err(fail)?;
    let mut failing = Failing::new();
    let mut wrong_reads = 0u64;
    // The kernels' time on the GPU's clock, per pass (see `GpuClock`).
    let mut clock = GpuClock::default();
    let mut pass_secs = Vec::new();
    for pattern in passes() {
        let mut pass = Duration::ZERO;
        for chunk in &chunks {
            let n = u32::try_from(chunk.len() / 4).unwrap_or(u32::MAX);
            errors.fill(0).map_err(fail)?;
            let timer = clock.start(hip);
            hip.launch_memtest_write(write, chunk, pattern, n)
                .map_err(fail)?;
            hip.launch_memtest_check(check, chunk, pattern, n, &errors, CAPACITY)
                .map_err(fail)?;
            pass += clock.stop(timer);
            hip.synchronize().map_err(fail)?;
            let mut raw = vec![0u8; errors.len()];
            errors.download(&mut raw).map_err(fail)?;
            wrong_reads += record(&raw, chunk.ptr() as u64, &mut failing);
        }
        pass_secs.push(pass.as_secs_f64());
    }
    let secs: f64 = pass_secs.iter().sum();
    let gib = covered as f64 / f64::from(1u32 << 30);
    let percent = covered as f64 / total.max(1) as f64 * 100.0;
    let what = format!(
        "{} ({} of {} VRAM{short}) in {} passes",
        size_text(covered as u64),
        match (format!("{percent:.0}%"), format!("{percent:.2}%")) {
            (whole, _) if percent >= 1.0 => whole,
            (_, shown) if shown != "0.00%" => shown,
            _ => "under 0.01%".to_string(),
        },
        size_text(total as u64),
        passes().count()
    );
    // Each pass writes every word of the region and reads it back.
    let moved = covered as f64 * 2.0;
    let gbps = moved * passes().count() as f64 / secs / 1e9;
    let per_pass: Vec<f64> = pass_secs.iter().map(|s| moved / s / 1e9).collect();
    // The working set of one write and its check is one chunk: a chunk that
    // fits in the GPU's cache may be served from it.
    let largest = chunks.iter().map(|c| c.len() as u64).max().unwrap_or(0);
    let refused = match clock.untimed {
        Some(why) => Some(format!("rate not measured: {why}")),
        None => crate::memory_peaks::impossible(gbps, largest, crate::memory_peaks::peak(gpu))
            .map(|why| format!("rate not reported: {why}")),
    };
    // The test's share of VRAM is the user's to change and its chunks are
    // timed one by one: a reading to show (with its passes' spread), not a
    // bandwidth to compare across runs; and only a rate that can be right.
    let rate_text = match &refused {
        Some(why) => why.clone(),
        None => format!("{gbps:.0} GB/s"),
    };
    let measured = |v: Verdict| {
        let v = v.with_count("memtest_gib", gib, "GiB");
        if refused.is_some() {
            return v;
        }
        v.with_reading("memtest_gbps", gbps, "GB/s")
            .with_samples(&per_pass)
    };
    if wrong_reads > 0 {
        return Err(
            measured(Verdict::found(codes::VRAM_TEST_FAILED.finding(format!(
                "{wrong_reads} words read back wrong over {what}, at {} address{}: {}",
                failing.len(),
                if failing.len() == 1 { "" } else { "es" },
                list(&described(&failing), 4)
            ))))
            .with_output(described(&failing).join("\n")),
        );
    }
    Ok(measured(Verdict::pass(format!(
        "{what} read back intact (walking ones, address in address), {rate_text}"
    ))))
}

/// The memory test's kernels timed on the GPU's clock, chunk by chunk. The
/// first event call that fails, or a time that is no time, stops the timing
/// and says why: the test goes on, its rate is not given.
#[derive(Default)]
struct GpuClock {
    untimed: Option<String>,
}

impl GpuClock {
    /// A timer started before a chunk's kernels, unless timing stopped.
    fn start(&mut self, hip: &Arc<Hip>) -> Option<GpuTimer> {
        if self.untimed.is_some() {
            return None;
        }
        GpuTimer::start(hip)
            .map_err(|e| self.untimed = Some(e.to_string()))
            .ok()
    }

    /// The GPU time since `timer` started; zero when there is no timer, or
    /// it failed (which stops the timing).
    fn stop(&mut self, timer: Option<GpuTimer>) -> Duration {
        match timer.map(GpuTimer::stop) {
            Some(Ok(d)) if d > Duration::ZERO => d,
            Some(Ok(d)) => {
                self.untimed = Some(format!("HIP's events timed the kernels at {d:?}"));
                Duration::ZERO
            }
            Some(Err(e)) => {
                self.untimed = Some(e.to_string());
                Duration::ZERO
            }
            None => Duration::ZERO,
        }
    }
}

/// The least the test covers (when the GPU has it): a smaller share would
/// test a few words and call the GPU's memory intact.
const MIN_TEST_BYTES: usize = 1 << 20;

/// The bytes to test of `total` at `share`: at least [`MIN_TEST_BYTES`]
/// (all of `total` when it is less), and a note when the share was raised.
fn target_bytes(total: usize, share: f64) -> (usize, &'static str) {
    let wanted = (total as f64 * share) as usize;
    if wanted < MIN_TEST_BYTES && total > wanted {
        (
            MIN_TEST_BYTES.min(total),
            ", raised to the 1 MiB the test covers at least",
        )
    } else {
        (wanted, "")
    }
}

/// Buffers covering `target` bytes in chunks; when the GPU runs out of
/// free memory part-way, what was allocated, and a note that says so.
fn allocate(hip: &Arc<Hip>, target: usize) -> Result<(Vec<DeviceBuffer>, String), Verdict> {
    let mut chunks: Vec<DeviceBuffer> = Vec::new();
    let mut covered = 0;
    while covered < target {
        let len = (target - covered).min(CHUNK_BYTES) & !3;
        if len == 0 {
            break;
        }
        match DeviceBuffer::new(hip, len) {
            Ok(b) => {
                covered += len;
                chunks.push(b);
            }
            Err(e) if chunks.is_empty() => {
                return Err(Verdict::unverifiable(format!(
                    "no VRAM to test: {e} (another process may hold the GPU's memory; `amd-smi process`)"
                )));
            }
            Err(_) => {
                return Ok((chunks, ", all the GPU had free".into()));
            }
        }
    }
    Ok((chunks, String::new()))
}

/// Adds the failing words `memtest_check` recorded in `raw` (its count,
/// then (word index, differing bits) pairs) for the chunk at device
/// address `base`; returns the count.
fn record(raw: &[u8], base: u64, failing: &mut Failing) -> u64 {
    let words: Vec<u32> = raw
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let count = words.first().copied().unwrap_or(0);
    let pairs = words.get(1..).unwrap_or_default().chunks_exact(2);
    for pair in pairs.take(count.min(CAPACITY) as usize) {
        let address = base.wrapping_add(u64::from(pair[0]) * 4);
        *failing.entry(address).or_insert(0) |= pair[1];
    }
    u64::from(count)
}

/// Each failing address with the bits that differed there.
fn described(failing: &Failing) -> Vec<String> {
    failing
        .iter()
        .take(LISTED)
        .map(|(address, bits)| {
            let which: Vec<String> = (0..32)
                .filter(|b| bits & (1 << b) != 0)
                .map(|b| b.to_string())
                .collect();
            format!("0x{address:x} (bit {})", which.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_check_buffer_becomes_addresses_with_their_bits() {
        let mut raw = Vec::new();
        for w in [2u32, 5, 0x20, 9, 0x21, 77, 77] {
            raw.extend(w.to_le_bytes());
        }
        let mut failing = Failing::new();
        assert_eq!(record(&raw, 0x1000, &mut failing), 2);
        assert_eq!(failing.len(), 2, "only the recorded pairs");
        assert_eq!(described(&failing), ["0x1014 (bit 5)", "0x1024 (bit 0, 5)"]);
        assert_eq!(passes().count(), 34);
    }

    #[test]
    fn a_tiny_share_is_raised_to_a_mebibyte_and_sizes_read_as_sizes() {
        let gib = 1usize << 30;
        assert_eq!(target_bytes(192 * gib, 0.1), ((192 * gib) / 10, ""));
        let (bytes, note) = target_bytes(192 * gib, 1e-6);
        assert_eq!(bytes, 1 << 20);
        assert!(note.contains("raised"));
        assert_eq!(
            target_bytes(4096, 0.1).0,
            4096,
            "never more than the GPU has"
        );
        assert_eq!(size_text(192 * gib as u64), "192 GiB");
        assert_eq!(size_text((192 * gib / 10) as u64), "19.20 GiB");
        assert_eq!(size_text(1 << 20), "1 MiB");
        assert_eq!(size_text(20), "20 bytes");
    }

    proptest! {
        #[test]
        fn any_check_buffer_is_read_without_panicking(raw in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut failing = Failing::new();
            let _ = record(&raw, u64::MAX - 3, &mut failing);
            let _ = described(&failing);
        }
    }
}
