//! rocblas: GEMMs on each GPU against a CPU reference, and (extended) their
//! throughput against the floors.

use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::layers::hip::device::{HipDevice, find_device};
use crate::layers::support::{LibraryName, combine, end, isolated, judge_floor};
use crate::reference::{self, Dtype};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_rocm::hip::{DeviceBuffer, GpuTimer, Hip, HipError};
use rocgate_rocm::rocblas::{BlasError, BlasHandle, DataType};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time limit of each rocblas check, in seconds.
const TIMEOUT_S: u64 = 120;

/// The rocblas layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rocblas::runtime",
                stack::ROCBLAS,
                ScopeKind::Node,
                &[],
                TIMEOUT_S,
                "rocBLAS loads and reports its version",
                |ctx, _| LIBRARY.loaded(&**ctx.runtime.rocblas()?),
            )
            // librocblas and its Tensile kernel library load.
            .typically(Duration::from_millis(2000))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rocblas::handle",
                stack::ROCBLAS,
                ScopeKind::PerGpu,
                &["rocblas::runtime"],
                TIMEOUT_S,
                "a rocBLAS handle can be created on the GPU",
                handle,
            )
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rocblas::sgemm",
                stack::ROCBLAS,
                ScopeKind::PerGpu,
                &["rocblas::handle"],
                TIMEOUT_S,
                "fp32 GEMM (rocblas_sgemm) matches the CPU reference",
                sgemm,
            )
            // a GEMM checked against the host.
            .typically(Duration::from_millis(500))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rocblas::dgemm",
                stack::ROCBLAS,
                ScopeKind::PerGpu,
                &["rocblas::handle"],
                TIMEOUT_S,
                "fp64 GEMM (rocblas_dgemm) matches the CPU reference",
                dgemm,
            )
            // a GEMM checked against the host.
            .typically(Duration::from_millis(500))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rocblas::hgemm",
                stack::ROCBLAS,
                ScopeKind::PerGpu,
                &["rocblas::handle"],
                TIMEOUT_S,
                "fp16 GEMM (rocblas_gemm_ex, fp32 compute) matches the CPU reference",
                hgemm,
            )
            // a GEMM checked against the host.
            .typically(Duration::from_millis(500))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rocblas::bf16gemm",
                stack::ROCBLAS,
                ScopeKind::PerGpu,
                &["rocblas::handle"],
                TIMEOUT_S,
                "bf16 GEMM (rocblas_gemm_ex, fp32 compute) matches the CPU reference",
                bf16gemm,
            )
            // a GEMM checked against the host.
            .typically(Duration::from_millis(500))
        },
        Check {
            tier: Tier::Extended,
            gates: false,
            ..isolated(
                "rocblas::gemm_throughput",
                stack::ROCBLAS,
                ScopeKind::PerGpu,
                &["rocblas::sgemm"],
                TIMEOUT_S,
                "GEMM TFLOP/s of each data type with a floor meets it",
                gemm_throughput,
            )
            // about 2 s of timed GEMM per data type.
            .typically(Duration::from_millis(8000))
        },
    ]
}

/// How rocBLAS is named in reports and reinstalled.
const LIBRARY: LibraryName = LibraryName::new(
    "rocBLAS",
    "rocblas",
    "rocblas",
    codes::ROCBLAS_LIBRARY_MISSING,
);

/// The next step when rocBLAS has nothing for this GPU.
fn no_kernels_next(gpu: &Gpu) -> String {
    let t = gpu.gfx_target.as_deref().unwrap_or("this GPU's target");
    format!(
        "install a rocBLAS built for {t}: use a ROCm release that supports {t} (see the compatibility matrix), or build rocBLAS with -DAMDGPU_TARGETS={t}"
    )
}

/// A failed rocBLAS call. rocblas_status_arch_mismatch (15) is what rocBLAS
/// returns when its own kernels have no code for the GPU (it converts HIP's
/// hipErrorNoBinaryForGpu) or the call does not support the architecture.
/// A rocBLAS without Tensile kernels for the GPU does not return at all: it
/// prints "Cannot read ... TensileLibrary ... for GPU arch" and aborts
/// (rocBLAS `tensile_host.cpp`), which `vendor_messages` explains.
fn blas_fail(gpu: &Gpu, call_code: Code, e: &BlasError) -> Verdict {
    if e.status() == Some(15) {
        return Verdict::found(codes::ROCBLAS_NO_KERNELS_FOR_ARCH.finding_next(format!(
                "rocBLAS has no code for {} in this call (rocblas_status_arch_mismatch: its kernels were not built for the architecture): {e}",
                gpu.gfx_target.as_deref().unwrap_or("this GPU")
            ), no_kernels_next(gpu)));
    }
    Verdict::found(call_code.finding_next(e.to_string(), "read `dmesg | grep -i amdgpu` and run the hip layer's checks on this GPU; check that rocBLAS matches the installed ROCm release"))
}

/// A failed HIP call around a GEMM: its memory or its synchronisation.
fn memory_failed(e: HipError) -> Verdict {
    Verdict::found(codes::ROCBLAS_MEMORY_FAILED.finding(e.to_string()))
}

/// A rocBLAS handle on this GPU's device, made current by `find_device`.
fn blas_handle(ctx: &NodeContext, gpu: &Gpu) -> Result<BlasHandle, Verdict> {
    let blas = ctx.runtime.rocblas()?;
    BlasHandle::new(blas).map_err(|e| blas_fail(gpu, codes::ROCBLAS_HANDLE_FAILED, &e))
}

fn handle(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice { gpu, .. } = find_device(ctx, scope)?;
    blas_handle(ctx, gpu)?;
    Ok(Verdict::pass("created a rocBLAS handle"))
}

/// Whether `gpu` has `dt` GEMMs at all (bf16 needs gfx908 or newer).
fn supports(gpu: &Gpu, dt: Dtype) -> Result<(), String> {
    let t = gpu.gfx_target.as_deref().unwrap_or("");
    if dt == Dtype::Bf16 && matches!(t, "gfx900" | "gfx906" | "gfx1030") {
        return Err(format!("{t} has no bf16 GEMM"));
    }
    Ok(())
}

fn blas_type(dt: Dtype) -> DataType {
    match dt {
        Dtype::F64 => DataType::F64,
        Dtype::F32 => DataType::F32,
        Dtype::F16 => DataType::F16,
        Dtype::Bf16 => DataType::Bf16,
    }
}

/// Runs one `m x n x k` GEMM on the device; returns the result and seconds.
fn run_gemm(
    hip: &Arc<Hip>,
    blas: &BlasHandle,
    gpu: &Gpu,
    dt: Dtype,
    (m, n, k): (usize, usize, usize),
    inputs: Option<(&[f64], &[f64])>,
) -> Result<(Vec<f64>, f64), Verdict> {
    let alloc = |len: usize| DeviceBuffer::new(hip, len * dt.size()).map_err(memory_failed);
    let (a, b, c) = (alloc(m * k)?, alloc(k * n)?, alloc(m * n)?);
    if let Some((ha, hb)) = inputs {
        a.upload(&dt.encode(ha)).map_err(memory_failed)?;
        b.upload(&dt.encode(hb)).map_err(memory_failed)?;
        // NaN bytes, so a GEMM that writes nothing cannot match.
        c.upload(&vec![0xFF; m * n * dt.size()])
            .map_err(memory_failed)?;
    }
    let dims = (m as i32, n as i32, k as i32);
    let t = Instant::now();
    blas.gemm(blas_type(dt), dims, false, &a, &b, &c)
        .map_err(|e| blas_fail(gpu, codes::ROCBLAS_GEMM_FAILED, &e))?;
    hip.synchronize().map_err(memory_failed)?;
    let secs = t.elapsed().as_secs_f64();
    let mut out = Vec::new();
    if inputs.is_some() {
        let mut bytes = vec![0u8; m * n * dt.size()];
        c.download(&mut bytes).map_err(memory_failed)?;
        out = dt.decode(&bytes);
    }
    Ok((out, secs))
}

/// Size of the correctness GEMMs: large enough to use the real kernels,
/// small enough that the CPU reference (once per process) is quick.
pub const CHECK_SIZE: usize = 256;

fn gemm_check(ctx: &NodeContext, scope: Scope, dt: Dtype) -> Outcome {
    let HipDevice { gpu, hip, .. } = find_device(ctx, scope)?;
    supports(gpu, dt).map_err(Verdict::not_applicable)?;
    let blas = blas_handle(ctx, gpu)?;
    let s = CHECK_SIZE;
    let (a, b) = reference::gemm_inputs(s, s, s);
    let (got, secs) = run_gemm(hip, &blas, gpu, dt, (s, s, s), Some((&a, &b)))?;
    let want = reference::gemm(s, s, s);
    let (err, at) = reference::max_relative_error(&got, &want);
    let tol = tolerance(ctx, dt);
    let tflops = 2.0 * (s * s * s) as f64 / secs.max(1e-9) / 1e12;
    if err.is_nan() || err > tol {
        return end(Verdict::found(codes::ROCBLAS_GEMM_WRONG.finding(format!(
                "{} GEMM {s}x{s}x{s}: relative error {err:.2e} exceeds {tol:.0e}; first worst element {at} (row {}, column {}): got {}, expected {}",
                dt.name(),
                at % s,
                at / s,
                got.get(at).copied().unwrap_or(f64::NAN),
                want[at]
            ))));
    }
    Ok(Verdict::pass(format!(
        "{} GEMM {s}x{s}x{s} matches the CPU reference (max relative error {err:.1e})",
        dt.name()
    ))
    // One call at a size launch latency dominates, timed to show, not to
    // compare across runs (rocblas.gemm_throughput measures throughput).
    .with_reading(&format!("gemm_{}_tflops_{s}", dt.name()), tflops, "TFLOP/s"))
}

fn tolerance(ctx: &NodeContext, dt: Dtype) -> f64 {
    let t = &ctx.thresholds.tolerance;
    match dt {
        Dtype::F64 => t.fp64,
        Dtype::F32 => t.fp32,
        Dtype::F16 => t.fp16,
        Dtype::Bf16 => t.bf16,
    }
}

fn sgemm(ctx: &NodeContext, scope: Scope) -> Outcome {
    gemm_check(ctx, scope, Dtype::F32)
}

fn dgemm(ctx: &NodeContext, scope: Scope) -> Outcome {
    gemm_check(ctx, scope, Dtype::F64)
}

fn hgemm(ctx: &NodeContext, scope: Scope) -> Outcome {
    gemm_check(ctx, scope, Dtype::F16)
}

fn bf16gemm(ctx: &NodeContext, scope: Scope) -> Outcome {
    gemm_check(ctx, scope, Dtype::Bf16)
}

/// Size of the throughput GEMMs (large enough to reach peak on an MI300X).
const PERF_SIZE: usize = 8192;

/// How GEMM throughput is measured per data type: the shape of the public
/// figures the built-in floors come from (RVS GST on MI300X times
/// 4864x4096x8192 fp16/bf16 GEMMs with A transposed), initialised inputs, a
/// warm-up, then a timed loop of hot calls synchronised in [`BATCHES`] batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Workload {
    dims: (usize, usize, usize),
    transpose_a: bool,
}

impl Workload {
    fn of(dt: Dtype) -> Workload {
        match dt {
            Dtype::F16 | Dtype::Bf16 => Workload {
                dims: (4864, 4096, 8192),
                transpose_a: true,
            },
            Dtype::F32 | Dtype::F64 => Workload {
                dims: (PERF_SIZE, PERF_SIZE, PERF_SIZE),
                transpose_a: false,
            },
        }
    }

    fn flops(self) -> f64 {
        let (m, n, k) = self.dims;
        2.0 * m as f64 * n as f64 * k as f64
    }

    fn describe(self, dt: Dtype, calls: usize) -> String {
        let (m, n, k) = self.dims;
        format!(
            "{m}x{n}x{k} {}{}, {WARMUP_CALLS} warm-up then {calls} hot calls in {BATCHES} batches",
            dt.name(),
            if self.transpose_a {
                " with A transposed"
            } else {
                ""
            }
        )
    }
}

/// Calls before timing, and the most timed calls (RVS GST's count).
const WARMUP_CALLS: usize = 3;
const MAX_HOT_CALLS: usize = 1000;
/// The timed loop is synchronised in this many equal batches, each a sample
/// of the rate: their spread is what a comparison of runs weighs a change
/// against. A synchronise per batch of hundreds of calls costs the GPU one
/// drained queue per batch, far below a percent.
const BATCHES: usize = 5;
/// The timed loop's length per data type, when the check has time for it.
const LOOP_TIME: Duration = Duration::from_secs(2);

/// `dt`'s throughput measured with its workload.
struct Measured {
    /// TFLOP/s over the whole timed loop.
    tflops: f64,
    /// TFLOP/s of each batch of the loop.
    batches: Vec<f64>,
    /// How it was measured.
    how: String,
}

/// Measures `dt`'s throughput with its workload.
fn measure(hip: &Arc<Hip>, blas: &BlasHandle, gpu: &Gpu, dt: Dtype) -> Result<Measured, Verdict> {
    let w = Workload::of(dt);
    let (m, n, k) = w.dims;
    let alloc = |len: usize| DeviceBuffer::new(hip, len * dt.size()).map_err(memory_failed);
    let (a, b, c) = (alloc(m * k)?, alloc(k * n)?, alloc(m * n)?);
    // Finite, non-zero inputs (0x3C bytes: 1.06 in fp16, 0.0115 in fp32):
    // zero matrices run faster and cooler than real ones on some GPUs.
    for buf in [&a, &b] {
        buf.fill(0x3C).map_err(memory_failed)?;
    }
    let dims = (m as i32, n as i32, k as i32);
    let call = || {
        blas.gemm(blas_type(dt), dims, w.transpose_a, &a, &b, &c)
            .map_err(|e| blas_fail(gpu, codes::ROCBLAS_GEMM_FAILED, &e))
    };
    let t = Instant::now();
    for _ in 0..WARMUP_CALLS {
        call()?;
    }
    hip.synchronize().map_err(memory_failed)?;
    let per_call = t.elapsed().as_secs_f64() / WARMUP_CALLS as f64;
    let budget = rocgate_harness::deadline::wait_budget(Duration::from_secs(5), LOOP_TIME * 8)
        .min(LOOP_TIME);
    let calls = ((budget.as_secs_f64() / per_call.max(1e-9)) as usize).clamp(10, MAX_HOT_CALLS);
    let per_batch = calls.div_ceil(BATCHES);
    let (mut batches, mut total) = (Vec::new(), 0.0);
    let mut clock = BatchClock::default();
    let mut done = 0;
    while done < calls {
        let n = per_batch.min(calls - done);
        let secs = clock
            .time(hip, || (0..n).try_for_each(|_| call()))?
            .max(1e-9);
        batches.push(w.flops() * n as f64 / secs / 1e12);
        total += secs;
        done += n;
    }
    Ok(Measured {
        tflops: w.flops() * calls as f64 / total.max(1e-9) / 1e12,
        batches,
        how: format!("{}, {}", w.describe(dt, calls), clock.describe()),
    })
}

/// Times the batches of GEMMs on the GPU's clock: HIP events recorded on
/// the current device's null stream before and after each batch. That is
/// the stream rocBLAS launches the GEMMs on: a handle's stream is the null
/// stream until rocblas_set_stream (rocBLAS `handle.hpp`,
/// `_rocblas_handle::stream`), which rocgate never calls, and a stream runs
/// its work in order, so the events bracket exactly the batch's kernels
/// (clr `hipEventRecord`, `hip_event.cpp`). A loaded host's late wake-ups
/// and descheduling are then not counted as the GPU's time. The first event
/// call that fails, or a time that is no time, moves this and every later
/// batch to the host's clock, and the measurement says so.
#[derive(Default)]
struct BatchClock {
    /// Why the batches are timed on the host's clock, once they are.
    host_because: Option<String>,
}

impl BatchClock {
    /// Runs `batch` (queueing GEMMs), waits for the GPU to finish them,
    /// and returns the seconds they took.
    fn time(
        &mut self,
        hip: &Arc<Hip>,
        batch: impl FnOnce() -> Result<(), Verdict>,
    ) -> Result<f64, Verdict> {
        let timer = match self.host_because {
            Some(_) => None,
            None => GpuTimer::start(hip)
                .map_err(|e| self.host_because = Some(e.to_string()))
                .ok(),
        };
        let t = Instant::now();
        batch()?;
        let gpu = timer.map(GpuTimer::stop);
        hip.synchronize().map_err(memory_failed)?;
        let wall = t.elapsed().as_secs_f64();
        Ok(match gpu {
            Some(Ok(d)) if d > Duration::ZERO => d.as_secs_f64(),
            Some(Ok(d)) => {
                self.host_because = Some(format!("HIP's events timed a batch at {d:?}"));
                wall
            }
            Some(Err(e)) => {
                self.host_because = Some(e.to_string());
                wall
            }
            None => wall,
        })
    }

    /// Which clock timed the batches, and why when it was the host's.
    fn describe(&self) -> String {
        match &self.host_because {
            None => "timed on the GPU's clock (HIP events)".to_string(),
            Some(why) => format!(
                "timed on the host's clock, since HIP's events could not time them ({why}): the host's delays count as the GPU's"
            ),
        }
    }
}

fn gemm_throughput(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice { gpu, hip, .. } = find_device(ctx, scope)?;
    let blas = blas_handle(ctx, gpu)?;
    let mut verdicts = Vec::new();
    for dt in [Dtype::F64, Dtype::F32, Dtype::F16, Dtype::Bf16] {
        let metric = format!("gemm_tflops.{}", dt.name());
        if supports(gpu, dt).is_err() || ctx.thresholds.floor(gpu, &metric).is_none() {
            continue;
        }
        let m = measure(hip, &blas, gpu, dt)?;
        let mut v = judge_floor(ctx, gpu, &metric, m.tflops, "TFLOP/s").with_samples(&m.batches);
        v.message = format!("{}; measured {}", v.message, m.how);
        verdicts.push(v);
    }
    Ok(combine(
        verdicts,
        "no GEMM data type of this GPU has a floor in the thresholds for its partition mode",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{code, node};

    fn gpu_of(target: &str) -> Gpu {
        let mut gpu = node("mi300x-8").ctx.facts.gpus[0].clone();
        gpu.gfx_target = Some(target.to_string());
        gpu
    }

    #[test]
    fn bf16_gemm_is_skipped_only_where_the_gpu_has_none() {
        assert!(supports(&gpu_of("gfx906"), Dtype::Bf16).is_err());
        assert!(supports(&gpu_of("gfx942"), Dtype::Bf16).is_ok());
        assert!(supports(&gpu_of("gfx906"), Dtype::F32).is_ok());
    }

    #[test]
    fn an_architecture_mismatch_names_the_missing_kernels_and_the_target() {
        let gpu = gpu_of("gfx1201");
        let status = |status| BlasError::Status {
            call: "rocblas_sgemm",
            status,
            name: "rocblas_status_x".into(),
        };
        let v = blas_fail(&gpu, codes::ROCBLAS_GEMM_FAILED, &status(15));
        assert_eq!(code(&v), Some(codes::ROCBLAS_NO_KERNELS_FOR_ARCH.code));
        let next = v.finding.map(|f| f.next_step).unwrap_or_default();
        assert!(next.contains("-DAMDGPU_TARGETS=gfx1201"), "{next}");
        let v = blas_fail(&gpu, codes::ROCBLAS_GEMM_FAILED, &status(3));
        assert_eq!(code(&v), Some(codes::ROCBLAS_GEMM_FAILED.code));
    }
}
