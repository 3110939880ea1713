//! hip, extended tier: device-memory (HBM) bandwidth, as BabelStream
//! measures it: rocgate's `stream_copy` (c = a) and `triad` (a = b + s * c)
//! over float arrays far larger than the GPU's last-level cache, each
//! launch timed on the GPU's clock, judged against the floors of the GPU's
//! SKU (`hbm_gbps.copy`, `hbm_gbps.triad`). The arrays are also the
//! burn-in's memory load ([`Arrays`]).

use super::device::{HipDevice, find_device, hip_fail, load_module};
use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{combine, end, isolated, judge_floor, size_text};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_rocm::hip::{DeviceBuffer, Function, GpuTimer, Hip, HipError};
use std::sync::Arc;
use std::time::Duration;

/// The largest array: 2 GiB of floats (2^29, within the kernels' 32-bit
/// count), eight times an MI300X's 256 MB Infinity Cache.
const ARRAY_BYTES: usize = 2 << 30;
/// Launches timed per kernel, after [`WARMUPS`] untimed ones.
const TIMED: usize = 20;
const WARMUPS: usize = 2;
/// The triad's scalar: with every input 0x40404040 (3.0039215 as a float),
/// b + 0.5 * c is exact whether or not the GPU fuses the multiply-add, so
/// the result can be checked bit for bit.
const SCALAR: f32 = 0.5;
const FILL: u8 = 0x40;
/// Words at the start of each result checked against the CPU's.
const CHECKED_WORDS: usize = 1024;

/// The HBM bandwidth check.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![Check {
        tier: Tier::Extended,
        gates: false,
        ..isolated(
            "hip::hbm_bandwidth",
            stack::HIP,
            ScopeKind::PerGpu,
            &["hip::vector_add"],
            180,
            "device-memory bandwidth (stream copy and triad over arrays far past the cache) meets the SKU's floors",
            hbm_bandwidth,
        )
        // 44 launches over 2 GiB arrays at ~4 TB/s, plus filling 6 GiB.
        .typically(Duration::from_millis(1500))
    }]
}

/// Three device arrays of `n` floats each: the stream kernels' operands.
pub(crate) struct Arrays {
    pub a: DeviceBuffer,
    pub b: DeviceBuffer,
    pub c: DeviceBuffer,
    pub n: u32,
}

impl Arrays {
    /// Arrays of up to [`ARRAY_BYTES`] each, at most a sixteenth of the
    /// GPU's `total` memory each; a and b filled with 0x40 bytes, c with 0.
    pub(crate) fn new(hip: &Arc<Hip>, total: usize) -> Result<Arrays, HipError> {
        let bytes = ARRAY_BYTES.min(total / 16).max(4096) & !3;
        let n = u32::try_from(bytes / 4).unwrap_or(u32::MAX);
        let arrays = Arrays {
            a: DeviceBuffer::new(hip, bytes)?,
            b: DeviceBuffer::new(hip, bytes)?,
            c: DeviceBuffer::new(hip, bytes)?,
            n,
        };
        arrays.a.fill(FILL)?;
        arrays.b.fill(FILL)?;
        arrays.c.fill(0)?;
        Ok(arrays)
    }

    /// The bytes of one array.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.n) * 4
    }

    /// One triad (a = b + s * c).
    pub(crate) fn triad(&self, hip: &Hip, f: Function<'_>) -> Result<(), HipError> {
        hip.launch_triad(f, [&self.a, &self.b, &self.c], SCALAR, self.n)
    }

    /// The first [`CHECKED_WORDS`] words of the triad's result (a), and
    /// the bits each should hold once a copy (c = a) has run before the
    /// triads: b + 0.5c, which differs from the fill a starts with.
    pub(crate) fn triad_head(&self) -> Result<(Vec<u8>, u32), HipError> {
        let mut raw = vec![0u8; (CHECKED_WORDS * 4).min(self.a.len())];
        self.a.download(&mut raw)?;
        let input = f32::from_bits(u32::from_ne_bytes([FILL; 4]));
        Ok((raw, (input + SCALAR * input).to_bits()))
    }

    /// One copy (c = a).
    pub(crate) fn copy(&self, hip: &Hip, f: Function<'_>) -> Result<(), HipError> {
        hip.launch_stream_copy(f, &self.a, &self.c, self.n)
    }
}

/// `hipErrorOutOfMemory` (hip_runtime_api.h): the GPU has no room, which
/// another process holding its memory explains.
const OUT_OF_MEMORY: i32 = 2;

/// An allocation or fill that failed: out of memory is a GPU rocgate could
/// not load (unverifiable, naming who may hold it); any other error is the
/// GPU's, a failure with the next step `next`.
pub(crate) fn no_memory(e: HipError, next: &str) -> Verdict {
    if e.code() == Some(OUT_OF_MEMORY) {
        return Verdict::unverifiable(format!(
            "no VRAM for the stream arrays: {e} (another process may hold the GPU's memory; `amd-smi process`)"
        ));
    }
    hip_fail(codes::HIP_LAUNCH_FAILED, &e, next)
}

const NEXT: &str = "the stream kernels did not run: read `dmesg | grep -i -e amdgpu -e 'page fault'` and the RAS counters; a GPU that fails launches needs a reset (<reset>)";

fn hbm_bandwidth(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice {
        gpu, hip, index, ..
    } = find_device(ctx, scope)?;
    let module = load_module(gpu, hip)?;
    let fail = |e: HipError| hip_fail(codes::HIP_LAUNCH_FAILED, &e, NEXT);
    let copy = module.function("stream_copy").map_err(fail)?;
    let triad = module.function("triad").map_err(fail)?;
    let total = hip.total_mem(index).map_err(fail)?;
    let arrays = Arrays::new(hip, total).map_err(|e| no_memory(e, NEXT))?;
    // c = a first (c was 0, so a copy that did not run shows), then
    // a = b + s * c over what the copy wrote.
    let copy_secs = timed(hip, || arrays.copy(hip, copy)).map_err(fail)?;
    let input = f32::from_bits(u32::from_ne_bytes([FILL; 4]));
    verify(&arrays.c, input, "stream_copy")?;
    let triad_secs = timed(hip, || arrays.triad(hip, triad)).map_err(fail)?;
    verify(&arrays.a, input + SCALAR * input, "triad")?;
    let peak = crate::memory_peaks::peak(gpu);
    let arrays_text = format!("3 arrays of {}", size_text(arrays.bytes()));
    let parts = [
        ("hbm_gbps.copy", 8u64, &copy_secs),
        ("hbm_gbps.triad", 12, &triad_secs),
    ]
    .into_iter()
    .map(|(metric, per_element, secs)| {
        let bytes = u64::from(arrays.n) * per_element;
        let rates: Vec<f64> = secs.iter().map(|s| bytes as f64 / s / 1e9).collect();
        let best = rates.iter().copied().fold(f64::NAN, f64::max);
        if let Some(why) = crate::memory_peaks::impossible(best, arrays.bytes(), peak) {
            return Verdict::unverifiable(format!("{metric} not reported: {why}"));
        }
        let mut v = judge_floor(ctx, gpu, metric, best, "GB/s").with_samples(&rates);
        v.message = format!("{}: {}", kernel_of(metric), v.message);
        v
    })
    .collect();
    let mut v = combine(parts, "no stream kernel ran");
    v.message = format!("{} ({arrays_text}, best of {TIMED})", v.message);
    if v.finding.is_some() {
        return end(v);
    }
    Ok(v)
}

fn kernel_of(metric: &str) -> &'static str {
    if metric.ends_with("copy") {
        "copy"
    } else {
        "triad"
    }
}

/// Each of [`TIMED`] launches of `launch` on the GPU's clock, in seconds,
/// after [`WARMUPS`] untimed ones.
fn timed(hip: &Arc<Hip>, launch: impl Fn() -> Result<(), HipError>) -> Result<Vec<f64>, HipError> {
    for _ in 0..WARMUPS {
        launch()?;
    }
    hip.synchronize()?;
    let mut secs = Vec::with_capacity(TIMED);
    for _ in 0..TIMED {
        let timer = GpuTimer::start(hip)?;
        launch()?;
        let d = timer.stop()?;
        if d > Duration::ZERO {
            secs.push(d.as_secs_f64());
        }
    }
    hip.synchronize()?;
    if secs.is_empty() {
        return Err(HipError::Invalid {
            call: "hipEventElapsedTime",
            reason: "every timed launch took no time on the GPU's clock".into(),
        });
    }
    Ok(secs)
}

/// Checks that the first [`CHECKED_WORDS`] floats of `buf` are `want`,
/// bit for bit.
fn verify(buf: &DeviceBuffer, want: f32, kernel: &str) -> Result<(), Verdict> {
    let mut raw = vec![0u8; (CHECKED_WORDS * 4).min(buf.len())];
    buf.download(&mut raw)
        .map_err(|e| hip_fail(codes::HIP_LAUNCH_FAILED, &e, NEXT))?;
    let wrong: Vec<usize> = raw
        .chunks_exact(4)
        .enumerate()
        .filter(|(_, w)| f32::from_ne_bytes([w[0], w[1], w[2], w[3]]).to_bits() != want.to_bits())
        .map(|(i, _)| i)
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    end(Verdict::found(codes::HIP_KERNEL_WRONG.finding(format!(
        "{kernel} left {} of the first {} words wrong (first at word {}; each should hold {want})",
        wrong.len(),
        raw.len() / 4,
        wrong[0]
    ))))
}
