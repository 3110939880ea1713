//! hip: the HIP runtime on each GPU. Every check runs in the scope's worker.

pub mod burnin;
pub(crate) mod device;
pub mod memtest;
pub mod p2p;
pub mod stream;

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{combine, end, isolated, judge_floor, judge_round_trip};
use crate::stack;
use device::{HipDevice, Matched, find_device, hip_fail, load_module};
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_rocm::hip::{
    DeviceBuffer, HipError, HostBuffer, Module, Rtc, Stream, TimedCopy, format_version, sys,
};
use std::time::Duration;
use std::time::Instant;

const NEEDS_DEVICE: &[&str] = &["hip::device"];

/// The hip layer's checks: the runtime's, then the extended tier's
/// peer-to-peer copies and memory test.
pub fn checks() -> Vec<Check<NodeContext>> {
    let mut checks = vec![
        isolated(
            "hip::runtime",
            stack::HIP,
            ScopeKind::Node,
            &[],
            30,
            "the HIP runtime library loads and reports its version",
            runtime,
        ),
        isolated(
            "hip::device_count",
            stack::HIP,
            ScopeKind::Node,
            &["hip::runtime"],
            60,
            "HIP sees as many devices as KFD has GPU nodes",
            device_count,
        )
        // hipInit creates a context on every device.
        .typically(Duration::from_millis(1000)),
        isolated(
            "hip::device",
            stack::HIP,
            ScopeKind::PerGpu,
            &["hip::device_count"],
            30,
            "the GPU is a HIP device with the expected attributes (multiprocessors, warp size)",
            device,
        ),
        isolated(
            "hip::memcpy",
            stack::HIP,
            ScopeKind::PerGpu,
            NEEDS_DEVICE,
            60,
            "hipMalloc/hipMemcpy round trip is intact (bandwidth as metrics)",
            memcpy,
        )
        // a 16 MiB round trip.
        .typically(Duration::from_millis(300)),
        isolated(
            "hip::module_load",
            stack::HIP,
            ScopeKind::PerGpu,
            NEEDS_DEVICE,
            60,
            "rocgate's code object loads with hipModuleLoadData",
            module_load,
        ),
        isolated(
            "hip::vector_add",
            stack::HIP,
            ScopeKind::PerGpu,
            &["hip::module_load", "hip::memcpy"],
            60,
            "a vector add launched with hipModuleLaunchKernel computes the right sums",
            vector_add,
        ),
        isolated(
            "hip::hiprtc",
            stack::HIP,
            ScopeKind::PerGpu,
            NEEDS_DEVICE,
            180,
            "hiprtc compiles a kernel for the GPU, and it runs correctly",
            hiprtc,
        )
        // hiprtc compiles a kernel through comgr.
        .typically(Duration::from_millis(1500)),
        Check {
            tier: Tier::Extended,
            gates: false,
            ..isolated(
                "hip::bandwidth",
                stack::HIP,
                ScopeKind::PerGpu,
                &["hip::memcpy"],
                120,
                "host<->device copy bandwidth over pinned memory meets the floors",
                bandwidth,
            )
            // timed 256 MiB copies each way.
            .typically(Duration::from_millis(1500))
        },
    ];
    checks.extend(p2p::checks());
    checks.extend(memtest::checks());
    checks.extend(stream::checks());
    checks.extend(burnin::checks());
    checks
}

fn runtime(ctx: &NodeContext, _: Scope) -> Outcome {
    let hip = ctx.runtime.hip()?;
    let path = hip.path().display().to_string();
    let mut v = Verdict::pass(String::new()).with_fact("hip_library", path.clone());
    let runtime = match hip.runtime_version() {
        Ok(r) => {
            v = v.with_fact("hip_runtime_version", format_version(r));
            format!("HIP {} ({r})", format_version(r))
        }
        Err(e) => format!("runtime version unknown: {e}"),
    };
    // The driver version needs a device on some releases; report what it says.
    let driver = match hip.driver_version() {
        Ok(d) => {
            v = v.with_fact("hip_driver_version", d.to_string());
            format!("driver {d}")
        }
        Err(e) => format!("driver version unknown: {e}"),
    };
    v.message = format!("loaded {path}: {runtime}, {driver}");
    Ok(v)
}

fn device_count(ctx: &NodeContext, _: Scope) -> Outcome {
    let (_, n) = ctx.runtime.hip_ready()?;
    let kfd = ctx.facts.gpus.iter().filter(|g| g.kfd.is_some()).count();
    if usize::try_from(n).unwrap_or(0) != kfd {
        return end(Verdict::found(codes::HIP_DEVICE_MISMATCH.finding_next(format!("HIP sees {n} devices but KFD has {kfd} GPU nodes"), "unset HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES if set; otherwise compare with the hsa layer's agent count and check render node permissions"))
        .with_count("hip_devices", f64::from(n), "count"));
    }
    Ok(Verdict::pass(format!("{n} HIP devices")).with_count("hip_devices", f64::from(n), "count"))
}

/// What `hipDeviceAttributeMultiprocessorCount` should say for a GPU whose
/// KFD node has `cus` compute units, and why, given the environment.
///
/// clr reports ROCr's cooperative CU count (ROCclr `rocdevice.cpp`,
/// HSA_AMD_AGENT_INFO_COOPERATIVE_COMPUTE_UNIT_COUNT), halved on gfx10 and
/// later in WGP mode, which is the default (GPU_ENABLE_WGP_MODE, clr
/// `utils/flags.hpp`): an RX 7900 XTX with 96 CUs reports 48. ROCr lowers
/// the cooperative count when HSA_COOP_CU_COUNT=1 (to 0 for a GPU with an
/// HSA_CU_MASK; to `(CUs & ~7) - 8` on gfx90a), so with either variable
/// set only an upper bound is known.
pub(crate) fn expected_multiprocessors(
    cus: u64,
    gfx_major: Option<u32>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (std::ops::RangeInclusive<u64>, String) {
    let wgp = gfx_major.is_some_and(|m| m >= 10)
        && !matches!(env("GPU_ENABLE_WGP_MODE").as_deref(), Some("0" | "false"));
    let (top, unit) = if wgp {
        (
            cus / 2,
            format!(
                "{} work-group processors (WGP mode: {cus} CUs / 2)",
                cus / 2
            ),
        )
    } else {
        (cus, format!("{cus} CUs"))
    };
    let lowered: Vec<&str> = ["HSA_CU_MASK", "HSA_COOP_CU_COUNT"]
        .into_iter()
        .filter(|v| env(v).is_some())
        .collect();
    if lowered.is_empty() {
        (top..=top, unit)
    } else {
        (
            0..=top,
            format!("at most {unit}, as {} is set", lowered.join(" and ")),
        )
    }
}

fn device(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice {
        gpu,
        hip,
        index: d,
        matched,
    } = find_device(ctx, scope)?;
    let attr = |a| {
        hip.attribute(a, d).map_err(|e| {
            hip_fail(
                codes::HIP_DEVICE_FAILED,
                &e,
                "HIP cannot read this device's attributes: check `rocminfo`",
            )
        })
    };
    let (cus, warp, threads) = (
        attr(sys::ATTR_MULTIPROCESSOR_COUNT),
        attr(sys::ATTR_WARP_SIZE),
        attr(sys::ATTR_MAX_THREADS_PER_BLOCK),
    );
    let (cus, warp, threads) = (cus?, warp?, threads?);
    let name = hip
        .device_name(d)
        .unwrap_or_else(|e| format!("(name unknown: {e})"));
    let mut expectation = String::new();
    if let Some(kfd_cus) = gpu.compute_units() {
        let env = |v: &str| std::env::var(v).ok();
        let (range, expected) = expected_multiprocessors(kfd_cus, gpu.gfx_major(), &env);
        if !u64::try_from(cus).is_ok_and(|c| range.contains(&c)) {
            return end(Verdict::found(codes::HIP_DEVICE_MISMATCH.finding_next(format!(
                    "HIP device {d} ({}) reports {cus} multiprocessors; for KFD's {kfd_cus} CUs HIP should report {expected}",
                    gpu.pci_address
                ), "HIP and the kernel driver disagree about the GPU: check the ROCm and amdgpu versions are a supported pair, and whether HSA_CU_MASK, HSA_COOP_CU_COUNT or GPU_ENABLE_WGP_MODE are set"))
            .with_count("multiprocessors", f64::from(cus), "count"));
        }
        expectation = format!(" (expected {expected})");
    }
    let how = match matched {
        Matched::Exactly => String::new(),
        Matched::ByPartition => {
            " (found by its place among its device's partitions: this HIP prints them all as function 0)".to_string()
        }
    };
    Ok(Verdict::pass(format!(
        "HIP device {d}{how}: {name}, {cus} multiprocessors{expectation}, warp {warp}, {threads} threads/block"
    ))
    .with_count("multiprocessors", f64::from(cus), "count"))
}

/// Enough to see a broken DMA path and a rough bandwidth; floors need the
/// longer transfers of the extended tier.
const COPY_BYTES: usize = 16 << 20;

fn memcpy(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice { hip, .. } = find_device(ctx, scope)?;
    let next = "read `dmesg | grep -i -e amdgpu -e aer`; a failing copy usually means a GPU or PCIe fault: reset the GPU and rerun";
    let fail = |e: HipError| hip_fail(codes::HIP_MEMCPY_FAILED, &e, next);
    let mut host = HostBuffer::new(hip, COPY_BYTES).map_err(fail)?;
    for (i, w) in host.words().iter_mut().enumerate() {
        *w = (i as u32).wrapping_mul(2_654_435_761);
    }
    let expected = host.words().to_vec();
    let dev = DeviceBuffer::new(hip, COPY_BYTES).map_err(fail)?;
    let t = Instant::now();
    dev.upload(host.bytes()).map_err(fail)?;
    let h2d = t.elapsed();
    host.bytes().fill(0);
    let t = Instant::now();
    dev.download(host.bytes()).map_err(fail)?;
    let d2h = t.elapsed();
    judge_round_trip(
        codes::HIP_MEMCPY_CORRUPT,
        "hipMemcpy round trip",
        &expected,
        host.words(),
        (h2d, d2h),
    )
}

/// The embedded code object loaded as a module, or the skip verdict.
fn module_load(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice { gpu, hip, .. } = find_device(ctx, scope)?;
    let module = load_module(gpu, hip)?;
    for k in rocgate_kernels::KERNELS {
        module.function(k).map_err(|e| {
            hip_fail(
                codes::HIP_MODULE_LOAD_FAILED,
                &e,
                "the module loaded but lacks a kernel: report this with `rocgate inventory --json`",
            )
        })?;
    }
    Ok(Verdict::pass(format!(
        "loaded {} for {}",
        rocgate_kernels::KERNELS.join(", "),
        gpu.gfx_target.as_deref().unwrap_or("?")
    )))
}

/// Launches the embedded `vector_add` kernel over 2^20 floats and checks
/// every sum on the host: a wrong answer is a GPU fault, not a pass.
fn vector_add(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice { gpu, hip, .. } = find_device(ctx, scope)?;
    let module = load_module(gpu, hip)?;
    const N: usize = 1 << 20;
    let launch_next = "the kernel did not run: read `dmesg | grep -i -e amdgpu -e 'page fault'`; a GPU that fails launches needs a reset (<reset>)";
    let fail = |e: HipError| hip_fail(codes::HIP_LAUNCH_FAILED, &e, launch_next);
    let f = module.function("vector_add").map_err(fail)?;
    let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..N).map(|i| 2.0 * i as f32).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (da, db, dc) = (
        DeviceBuffer::new(hip, N * 4).map_err(fail)?,
        DeviceBuffer::new(hip, N * 4).map_err(fail)?,
        DeviceBuffer::new(hip, N * 4).map_err(fail)?,
    );
    da.upload(&bytes(&a)).map_err(fail)?;
    db.upload(&bytes(&b)).map_err(fail)?;
    dc.upload(&vec![0xFF; N * 4]).map_err(fail)?;
    let t = Instant::now();
    hip.launch_vector_add(f, &da, &db, &dc, N as u32)
        .map_err(fail)?;
    hip.synchronize().map_err(fail)?;
    let elapsed = t.elapsed();
    let mut out = vec![0u8; N * 4];
    dc.download(&mut out).map_err(fail)?;
    let c: Vec<f32> = out
        .chunks_exact(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let wrong: Vec<usize> = (0..N).filter(|&i| c[i] != 3.0 * i as f32).collect();
    if let Some(&i) = wrong.first() {
        return end(Verdict::found(codes::HIP_KERNEL_WRONG.finding(format!(
            "vector_add ran but {} of {N} sums are wrong; first at index {i}: got {}, expected {}",
            wrong.len(),
            c[i],
            3.0 * i as f32
        ))));
    }
    Ok(Verdict::pass(format!(
        "vector_add over {N} floats verified in {:.2} ms",
        elapsed.as_secs_f64() * 1e3
    ))
    .with_duration_ms("vector_add_ms", elapsed.as_secs_f64() * 1e3))
}

/// The kernel hiprtc compiles: scales a vector in place.
const RTC_SOURCE: &str = r#"extern "C" __global__ void rtc_scale(float* x, float s, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * s;
}
"#;

fn hiprtc(ctx: &NodeContext, scope: Scope) -> Outcome {
    let HipDevice { gpu, hip, .. } = find_device(ctx, scope)?;
    let Some(target) = gpu.gfx_target.clone() else {
        return Err(Verdict::unverifiable(
            "gfx target unknown (see kfd.gfx_target)",
        ));
    };
    let rtc = Rtc::open(&ctx.runtime.search, hip.path())
        .map_err(|e| crate::runtime::missing_library(codes::HIPRTC_LIBRARY_MISSING, &e))?;
    const N: usize = 4096;
    let t = Instant::now();
    let code = rtc.compile(RTC_SOURCE, "rocgate_rtc.hip", &[&format!("--gpu-architecture={target}")]).map_err(|e| {
        hip_fail(
            codes::HIPRTC_FAILED,
            &e,
            "the runtime compiler failed: check that its device libraries (amdgcn bitcode) and comgr are installed for this ROCm release",
        )
    })?;
    let compile = t.elapsed();
    let fail = |e: HipError| {
        hip_fail(
            codes::HIPRTC_FAILED,
            &e,
            "hiprtc's code object did not run: compare with hip.vector_add on this GPU",
        )
    };
    let module = Module::load(hip, &code).map_err(fail)?;
    let f = module.function("rtc_scale").map_err(fail)?;
    let x: Vec<u8> = (0..N).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let dx = DeviceBuffer::new(hip, N * 4).map_err(fail)?;
    dx.upload(&x).map_err(fail)?;
    hip.launch_scale(f, &dx, 3.0, N as u32).map_err(fail)?;
    hip.synchronize().map_err(fail)?;
    let mut out = vec![0u8; N * 4];
    dx.download(&mut out).map_err(fail)?;
    let bad = out
        .chunks_exact(4)
        .enumerate()
        .find(|(i, w)| f32::from_le_bytes([w[0], w[1], w[2], w[3]]) != 3.0 * *i as f32);
    if let Some((i, _)) = bad {
        return end(Verdict::found(codes::HIPRTC_WRONG.finding(format!(
            "the hiprtc-compiled kernel ran but element {i} is wrong"
        ))));
    }
    Ok(Verdict::pass(format!(
        "compiled for {target} in {:.0} ms with {}, ran and verified",
        compile.as_secs_f64() * 1e3,
        rtc.path().display()
    ))
    .with_duration_ms("hiprtc_compile_ms", compile.as_secs_f64() * 1e3))
}

fn bandwidth(ctx: &NodeContext, scope: Scope) -> Outcome {
    const BYTES: usize = 256 << 20;
    let HipDevice { gpu, hip, .. } = find_device(ctx, scope)?;
    let fail = |e: HipError| hip_fail(codes::HIP_MEMCPY_FAILED, &e, "see hip.memcpy on this GPU");
    let mut host = HostBuffer::new(hip, BYTES).map_err(fail)?;
    let dev = DeviceBuffer::new(hip, BYTES).map_err(fail)?;
    let stream = Stream::new(hip).map_err(fail)?;
    // A warm-up, then three copies each way timed on the GPU's clock (events
    // between back-to-back copies: the host's scheduling is not counted);
    // the best is judged, and the three kept, so a comparison of runs can
    // tell a change from this run's own noise.
    let rates = |copy: &mut TimedCopy<'_>| -> Result<Vec<f64>, Verdict> {
        Ok(stream
            .time_copies(copy, 3)
            .map_err(fail)?
            .iter()
            .map(|d| BYTES as f64 / d.as_secs_f64().max(1e-9) / 1e9)
            .collect())
    };
    let h2d = rates(&mut TimedCopy::Upload {
        to: &dev,
        from: &host,
    })?;
    let d2h = rates(&mut TimedCopy::Download {
        to: &mut host,
        from: &dev,
    })?;
    let best = |rates: &[f64]| rates.iter().copied().fold(0.0, f64::max);
    Ok(combine(
        vec![
            judge_floor(ctx, gpu, "h2d_gbps", best(&h2d), "GB/s").with_samples(&h2d),
            judge_floor(ctx, gpu, "d2h_gbps", best(&d2h), "GB/s").with_samples(&d2h),
        ],
        "no floors",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdna_reports_work_group_processors_unless_wgp_mode_is_off() {
        let none = |_: &str| None;
        assert_eq!(expected_multiprocessors(96, Some(11), &none).0, 48..=48);
        assert_eq!(expected_multiprocessors(304, Some(9), &none).0, 304..=304);
        let wgp_off = |v: &str| (v == "GPU_ENABLE_WGP_MODE").then(|| "0".to_string());
        assert_eq!(expected_multiprocessors(96, Some(11), &wgp_off).0, 96..=96);
        let (range, why) = expected_multiprocessors(96, Some(11), &none);
        assert!(why.contains("WGP mode") && range.contains(&48), "{why}");
    }

    #[test]
    fn a_cu_mask_makes_the_count_an_upper_bound() {
        let masked = |v: &str| (v == "HSA_COOP_CU_COUNT").then(|| "1".to_string());
        let (range, why) = expected_multiprocessors(104, Some(9), &masked);
        assert_eq!(range, 0..=104);
        assert!(why.contains("HSA_COOP_CU_COUNT"), "{why}");
    }
}
