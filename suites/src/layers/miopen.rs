//! miopen: forward convolutions on each GPU against a CPU direct
//! convolution, and the writable databases MIOpen needs.

use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::layers::hip::device::{HipDevice, find_device};
use crate::layers::support::{LibraryName, check, end, isolated};
use crate::reference::{self, ConvShape, Dtype};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use rocgate_rocm::hip::{DeviceBuffer, HipError};
use rocgate_rocm::miopen::{DataType, MiopenError, MiopenHandle};
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Time limit of each isolated miopen check, in seconds: the first find
/// compiles kernels; give it time.
const TIMEOUT_S: u64 = 300;

/// The miopen layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        Check {
            tier: Tier::Standard,
            gates: false,
            ..check(
                "miopen::databases",
                stack::MIOPEN,
                ScopeKind::Node,
                "MIOpen's user database and kernel cache directories are writable",
                databases,
            )
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "miopen::runtime",
                stack::MIOPEN,
                ScopeKind::Node,
                &[],
                TIMEOUT_S,
                "MIOpen loads and reports its version",
                |ctx, _| LIBRARY.loaded(&**ctx.runtime.miopen()?),
            )
            // libMIOpen loads.
            .typically(Duration::from_millis(1000))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "miopen::handle",
                stack::MIOPEN,
                ScopeKind::PerGpu,
                &["miopen::runtime"],
                TIMEOUT_S,
                "a MIOpen handle can be created on the GPU",
                handle,
            )
            // a handle and its stream.
            .typically(Duration::from_millis(500))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "miopen::conv_fp32",
                stack::MIOPEN,
                ScopeKind::PerGpu,
                &["miopen::handle"],
                TIMEOUT_S,
                "an fp32 NCHW forward convolution matches a CPU direct convolution",
                conv_fp32,
            )
            // a convolution, its kernel found or compiled.
            .typically(Duration::from_millis(3000))
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "miopen::conv_fp16",
                stack::MIOPEN,
                ScopeKind::PerGpu,
                &["miopen::handle"],
                TIMEOUT_S,
                "an fp16 NCHW forward convolution matches a CPU direct convolution",
                conv_fp16,
            )
            // a convolution, its kernel found or compiled.
            .typically(Duration::from_millis(3000))
        },
    ]
}

/// Where MIOpen keeps its user performance database and its kernel cache.
fn database_dirs() -> Vec<(&'static str, Result<PathBuf, String>)> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let dir = |var: &'static str, default: &str| -> Result<PathBuf, String> {
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(v) => Ok(PathBuf::from(v)),
            None => home
                .as_ref()
                .map(|h| h.join(default))
                .ok_or_else(|| format!("neither {var} nor HOME is set")),
        }
    };
    vec![
        (
            "MIOPEN_USER_DB_PATH",
            dir("MIOPEN_USER_DB_PATH", ".config/miopen"),
        ),
        (
            "MIOPEN_CUSTOM_CACHE_DIR",
            dir("MIOPEN_CUSTOM_CACHE_DIR", ".cache/miopen"),
        ),
    ]
}

fn databases(ctx: &NodeContext, _: Scope) -> Outcome {
    if !ctx.facts.sysroot.is_live() {
        return Err(Verdict::not_applicable(
            "MIOpen's directories are checked on the live node, not in a --sysroot capture",
        ));
    }
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (var, dir) in database_dirs() {
        let dir = match dir {
            Ok(d) => d,
            Err(why) => {
                bad.push(format!("{var}: {why}"));
                continue;
            }
        };
        let probe = dir.join(format!(".rocgate-write-test-{}", std::process::id()));
        match std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&probe, b"x"))
            .and_then(|()| std::fs::remove_file(&probe))
        {
            Ok(()) => ok.push(format!("{} ({var})", dir.display())),
            Err(e) => bad.push(format!("{} ({var}): {e}", dir.display())),
        }
    }
    if !bad.is_empty() {
        return end(Verdict::found(codes::MIOPEN_DB_NOT_WRITABLE.finding_next(format!("MIOpen cannot write its databases: {}", bad.join("; ")), "point MIOPEN_USER_DB_PATH and MIOPEN_CUSTOM_CACHE_DIR at a writable directory (in CI: one in the workspace), or fix HOME; read-only databases make MIOpen re-tune or fail every run")));
    }
    Ok(Verdict::pass(format!("writable: {}", ok.join(", "))))
}

/// How MIOpen is named in reports and reinstalled.
const LIBRARY: LibraryName = LibraryName::new(
    "MIOpen",
    "miopen",
    "miopen-hip",
    codes::MIOPEN_LIBRARY_MISSING,
);

fn next_step() -> &'static str {
    "check that MIOpen matches the installed ROCm release and supports this gfx target; with MIOPEN_ENABLE_LOGGING=1 MIOpen names the failing solver; read `dmesg | grep -i amdgpu`"
}

/// A failed MIOpen call as a failure with `code`.
fn miopen_fail(code: Code, e: &MiopenError) -> Verdict {
    Verdict::found(code.finding_next(e.to_string(), next_step()))
}

/// A failed HIP call around a convolution: its memory or its synchronisation.
fn memory_failed(e: HipError) -> Verdict {
    Verdict::found(codes::MIOPEN_MEMORY_FAILED.finding(e.to_string()))
}

/// A MIOpen handle, created on the device `find_device` made current.
fn miopen_handle(ctx: &NodeContext) -> Result<MiopenHandle, Verdict> {
    let lib = ctx.runtime.miopen()?;
    MiopenHandle::new(lib).map_err(|e| miopen_fail(codes::MIOPEN_HANDLE_FAILED, &e))
}

fn handle(ctx: &NodeContext, scope: Scope) -> Outcome {
    find_device(ctx, scope)?;
    miopen_handle(ctx)?;
    Ok(Verdict::pass("created a MIOpen handle"))
}

/// The convolution checked: a small ResNet-like 3x3 layer.
pub const SHAPE: ConvShape = ConvShape {
    n: 2,
    c: 8,
    h: 16,
    w: 16,
    k: 16,
    r: 3,
    pad: 1,
    stride: 1,
};

fn conv(ctx: &NodeContext, scope: Scope, dt: Dtype) -> Outcome {
    let HipDevice { hip, .. } = find_device(ctx, scope)?;
    let handle = miopen_handle(ctx)?;
    let s = SHAPE;
    let (oh, ow) = s.out_hw();
    let (x, w) = s.inputs();
    let dx = DeviceBuffer::new(hip, x.len() * dt.size()).map_err(memory_failed)?;
    let dw = DeviceBuffer::new(hip, w.len() * dt.size()).map_err(memory_failed)?;
    let y_len = s.n * s.k * oh * ow;
    let dy = DeviceBuffer::new(hip, y_len * dt.size()).map_err(memory_failed)?;
    dx.upload(&dt.encode(&x)).map_err(memory_failed)?;
    dw.upload(&dt.encode(&w)).map_err(memory_failed)?;
    dy.upload(&vec![0xFF; y_len * dt.size()])
        .map_err(memory_failed)?;
    let ty = if dt == Dtype::F16 {
        DataType::Half
    } else {
        DataType::Float
    };
    let t = Instant::now();
    let run = handle
        .conv_forward(
            ty,
            [s.n, s.c, s.h, s.w],
            [s.k, s.c, s.r, s.r],
            s.pad,
            s.stride,
            &dx,
            &dw,
            &dy,
            |len| DeviceBuffer::new(hip, len).map_err(|e| e.to_string()),
        )
        .map_err(|e| miopen_fail(codes::MIOPEN_CONV_FAILED, &e))?;
    hip.synchronize().map_err(memory_failed)?;
    let elapsed = t.elapsed();
    let mut bytes = vec![0u8; y_len * dt.size()];
    dy.download(&mut bytes).map_err(memory_failed)?;
    let got = dt.decode(&bytes);
    let want = reference::conv2d(s);
    let (err, at) = reference::max_relative_error(&got, &want);
    let tol = match dt {
        Dtype::F16 => ctx.thresholds.tolerance.fp16,
        _ => ctx.thresholds.tolerance.fp32,
    };
    if err.is_nan() || err > tol {
        return end(Verdict::found(codes::MIOPEN_CONV_WRONG.finding(format!(
                "{} convolution (algorithm {}): relative error {err:.2e} exceeds {tol:.0e} at output element {at}: got {}, expected {}",
                dt.name(),
                run.algo,
                got.get(at).copied().unwrap_or(f64::NAN),
                want[at]
            ))));
    }
    Ok(Verdict::pass(format!(
        "{} conv {}x{}x{}x{} * {}x{}x3x3 matches the CPU reference (algorithm {}, {:.2} ms with find)",
        dt.name(),
        s.n,
        s.c,
        s.h,
        s.w,
        s.k,
        s.c,
        run.algo,
        elapsed.as_secs_f64() * 1e3
    ))
    .with_duration_ms(&format!("conv_{}_ms", dt.name()), elapsed.as_secs_f64() * 1e3))
}

fn conv_fp32(ctx: &NodeContext, scope: Scope) -> Outcome {
    conv(ctx, scope, Dtype::F32)
}

fn conv_fp16(ctx: &NodeContext, scope: Scope) -> Outcome {
    conv(ctx, scope, Dtype::F16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::node;
    use rocgate_harness::SkipReason;

    #[test]
    fn every_miopen_check_skips_without_the_runtime() {
        node("mi300x-8").assert_skip_without_runtime(&checks());
    }

    #[test]
    fn the_databases_are_not_probed_in_a_capture() {
        // Probing would write to this machine's HOME, not the node's.
        let n = node("mi300x-8");
        let v = n.skips(databases, Scope::Node, SkipReason::NotApplicable);
        assert!(v.message.contains("--sysroot capture"), "{}", v.message);
    }

    #[test]
    fn the_database_check_is_a_file_check_and_the_convolutions_need_the_handle() {
        let all = checks();
        let databases = all.iter().find(|c| c.id == "miopen::databases").unwrap();
        assert!(!databases.isolated, "it calls no library");
        for conv in all.iter().filter(|c| c.id.starts_with("miopen::conv")) {
            assert!(
                conv.isolated && conv.deps.contains(&"miopen::handle"),
                "{}",
                conv.id
            );
        }
    }

    #[test]
    fn a_failure_to_allocate_is_a_hip_memory_finding_naming_the_call() {
        let v = memory_failed(HipError::Code {
            call: "hipMalloc",
            code: 2,
            name: "hipErrorOutOfMemory".into(),
            text: "out of memory".into(),
        });
        let f = v.finding.expect("a finding");
        assert_eq!(f.code, codes::MIOPEN_MEMORY_FAILED.code);
        assert!(
            f.message
                .contains("hipMalloc failed: hipErrorOutOfMemory (2)"),
            "{}",
            f.message
        );
    }
}
