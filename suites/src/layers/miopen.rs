//! miopen: forward convolutions on each GPU against a CPU direct
//! convolution, and the writable databases MIOpen needs.

use super::hip::find_device;
use crate::context::NodeContext;
use crate::findings::codes;
use crate::reference::{self, ConvShape, Dtype};
use rocgate_harness::{Check, Layer, Scope, ScopeKind, Tier, Verdict};
use rocgate_rocm::hip::DeviceBuffer;
use rocgate_rocm::miopen::{DataType, MiopenHandle};
use std::path::PathBuf;
use std::time::Instant;

const fn miopen_check(
    id: &'static str,
    scope: ScopeKind,
    deps: &'static [&'static str],
    summary: &'static str,
    run: fn(&NodeContext, Scope) -> Verdict,
) -> Check<NodeContext> {
    Check {
        tier: Tier::Standard,
        // The first find compiles kernels; give it time.
        ..super::isolated(id, Layer::Miopen, scope, deps, 300, summary, run)
    }
}

/// The miopen layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        Check {
            tier: Tier::Standard,
            gates: false,
            ..super::check(
                "miopen::databases",
                Layer::Miopen,
                ScopeKind::Node,
                "MIOpen's user database and kernel cache directories are writable",
                databases,
            )
        },
        miopen_check(
            "miopen::runtime",
            ScopeKind::Node,
            &[],
            "MIOpen loads and reports its version",
            runtime,
        ),
        miopen_check(
            "miopen::handle",
            ScopeKind::PerGpu,
            &["miopen::runtime"],
            "a MIOpen handle can be created on the GPU",
            handle,
        ),
        miopen_check(
            "miopen::conv_fp32",
            ScopeKind::PerGpu,
            &["miopen::handle"],
            "an fp32 NCHW forward convolution matches a CPU direct convolution",
            conv_fp32,
        ),
        miopen_check(
            "miopen::conv_fp16",
            ScopeKind::PerGpu,
            &["miopen::handle"],
            "an fp16 NCHW forward convolution matches a CPU direct convolution",
            conv_fp16,
        ),
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

fn databases(ctx: &NodeContext, _: Scope) -> Verdict {
    if !ctx.facts.sysroot.is_live() {
        return Verdict::not_applicable(
            "MIOpen's directories are checked on the live node, not in a --sysroot capture",
        );
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
        return Verdict::fail(codes::MIOPEN_DB_NOT_WRITABLE.finding_next(format!("MIOpen cannot write its databases: {}", bad.join("; ")), "point MIOPEN_USER_DB_PATH and MIOPEN_CUSTOM_CACHE_DIR at a writable directory (in CI: one in the workspace), or fix HOME; read-only databases make MIOpen re-tune or fail every run"));
    }
    Verdict::pass(format!("writable: {}", ok.join(", ")))
}

fn runtime(ctx: &NodeContext, _: Scope) -> Verdict {
    let lib = match ctx.runtime.miopen() {
        Ok(l) => l,
        Err(v) => return v,
    };
    let path = lib.path().display().to_string();
    match lib.version() {
        Ok(v) => Verdict::pass(format!("loaded {path}: MIOpen {v}"))
            .with_fact("miopen_library", path)
            .with_fact("miopen_version", v),
        Err(e) => Verdict::fail(codes::MIOPEN_LIBRARY_MISSING.finding_next(
            format!("{path} loaded but does not report its version: {e}"),
            "the MIOpen library is damaged or not MIOpen; reinstall the miopen-hip package",
        )),
    }
}

fn next_step() -> &'static str {
    "check that MIOpen matches the installed ROCm release and supports this gfx target; with MIOPEN_ENABLE_LOGGING=1 MIOpen names the failing solver; read `dmesg | grep -i amdgpu`"
}

fn handle(ctx: &NodeContext, scope: Scope) -> Verdict {
    if let Err(v) = find_device(ctx, scope) {
        return v;
    }
    let lib = match ctx.runtime.miopen() {
        Ok(l) => l,
        Err(v) => return v,
    };
    match MiopenHandle::new(lib) {
        Ok(_) => Verdict::pass("created a MIOpen handle"),
        Err(e) => {
            Verdict::fail(codes::MIOPEN_HANDLE_FAILED.finding_next(e.to_string(), next_step()))
        }
    }
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

fn conv(ctx: &NodeContext, scope: Scope, dt: Dtype) -> Verdict {
    let (_, hip, _) = match find_device(ctx, scope) {
        Ok(x) => x,
        Err(v) => return v,
    };
    let lib = match ctx.runtime.miopen() {
        Ok(l) => l,
        Err(v) => return v,
    };
    let handle = match MiopenHandle::new(lib) {
        Ok(h) => h,
        Err(e) => {
            return Verdict::fail(
                codes::MIOPEN_HANDLE_FAILED.finding_next(e.to_string(), next_step()),
            );
        }
    };
    let s = SHAPE;
    let (oh, ow) = s.out_hw();
    let (x, w) = s.inputs();
    let memory = |e: rocgate_rocm::hip::HipError| {
        Verdict::fail(codes::MIOPEN_MEMORY_FAILED.finding(e.to_string()))
    };
    let result = (|| -> Result<Verdict, Verdict> {
        let dx = DeviceBuffer::new(hip, x.len() * dt.size()).map_err(memory)?;
        let dw = DeviceBuffer::new(hip, w.len() * dt.size()).map_err(memory)?;
        let y_len = s.n * s.k * oh * ow;
        let dy = DeviceBuffer::new(hip, y_len * dt.size()).map_err(memory)?;
        dx.upload(&dt.encode(&x)).map_err(memory)?;
        dw.upload(&dt.encode(&w)).map_err(memory)?;
        dy.upload(&vec![0xFF; y_len * dt.size()]).map_err(memory)?;
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
            .map_err(|e| {
                Verdict::fail(codes::MIOPEN_CONV_FAILED.finding_next(e.to_string(), next_step()))
            })?;
        hip.synchronize().map_err(memory)?;
        let elapsed = t.elapsed();
        let mut bytes = vec![0u8; y_len * dt.size()];
        dy.download(&mut bytes).map_err(memory)?;
        let got = dt.decode(&bytes);
        let want = reference::conv2d(s);
        let (err, at) = reference::max_relative_error(&got, &want);
        let tol = match dt {
            Dtype::F16 => ctx.thresholds.tolerance.fp16,
            _ => ctx.thresholds.tolerance.fp32,
        };
        if err.is_nan() || err > tol {
            return Err(Verdict::fail(codes::MIOPEN_CONV_WRONG.finding(format!(
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
        .with_metric(&format!("conv_{}_ms", dt.name()), elapsed.as_secs_f64() * 1e3, "ms"))
    })();
    match result {
        Ok(v) | Err(v) => v,
    }
}

fn conv_fp32(ctx: &NodeContext, scope: Scope) -> Verdict {
    conv(ctx, scope, Dtype::F32)
}

fn conv_fp16(ctx: &NodeContext, scope: Scope) -> Verdict {
    conv(ctx, scope, Dtype::F16)
}
