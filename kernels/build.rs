//! Compiles device/kernels.cl into one AMDGPU code object per target when an
//! AMDGPU-capable clang is found, and generates the table that embeds them.
//! Without such a compiler the build still succeeds with no code objects;
//! the checks that dispatch kernels then skip with that reason.

// Cargo always sets OUT_DIR and CARGO_MANIFEST_DIR, and a build script that
// cannot write its output has nothing better to do than stop.
#![allow(clippy::expect_used)]

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Targets rocgate ships kernels for (gfx950 needs LLVM 20 or newer).
const TARGETS: [&str; 8] = [
    "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201",
];
const SOURCE: &str = "device/kernels.cl";

/// Code object v5, pinned: LLVM 21 made v6 the default (llvm-project PR
/// #130963), which ROCr before ROCm 6.3 rejects with
/// HSA_STATUS_ERROR_INVALID_CODE_OBJECT (ROCR-Runtime `loader/executable.cpp`
/// checks the major version; ROCR-Runtime issue #321). v5 loads on ROCm 5.2
/// to 7.x, whichever clang builds it.
const CODE_OBJECT_VERSION: &str = "-mcode-object-version=5";

fn version_major(clang: &Path) -> Option<u32> {
    let out = Command::new(clang).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?;
    let after = line.split("version ").nth(1)?;
    after.split('.').next()?.trim().parse().ok()
}

/// The compiler: `ROCGATE_CLANG`, ROCm's own clang, or a system clang 19+.
fn find_clang() -> Option<(PathBuf, String)> {
    if let Some(c) = env::var_os("ROCGATE_CLANG") {
        let c = PathBuf::from(c);
        return version_major(&c).map(|v| (c.clone(), format!("{} (LLVM {v})", c.display())));
    }
    let rocm = env::var_os("ROCM_PATH").map_or_else(|| PathBuf::from("/opt/rocm"), PathBuf::from);
    let rocm_clang = rocm.join("llvm/bin/clang");
    if let Some(v) = version_major(&rocm_clang) {
        return Some((
            rocm_clang.clone(),
            format!("{} (LLVM {v})", rocm_clang.display()),
        ));
    }
    for name in ["clang-22", "clang-21", "clang-20", "clang-19", "clang"] {
        let c = PathBuf::from(name);
        if let Some(v) = version_major(&c) {
            if v >= 19 {
                return Some((c, format!("{name} (LLVM {v})")));
            }
        }
    }
    None
}

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    for var in [
        "ROCGATE_CLANG",
        "ROCM_PATH",
        "ROCGATE_NO_KERNELS",
        "PATH",
        "CI",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rustc-check-cfg=cfg(rocgate_kernels_optional_and_absent)");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join(SOURCE);
    let compiler = if env::var_os("ROCGATE_NO_KERNELS").is_some() {
        None
    } else {
        find_clang()
    };

    let mut built = Vec::new();
    let mut skipped = Vec::new();
    match &compiler {
        None => {
            println!(
                "cargo:warning=no AMDGPU-capable clang found (ROCGATE_CLANG, $ROCM_PATH/llvm/bin/clang, clang-19+): building without GPU code objects"
            );
            for t in TARGETS {
                skipped.push((t, "no AMDGPU-capable clang at build time".to_string()));
            }
            // Off CI the code-object test is then ignored with its reason;
            // on CI (`CI=true`, which ci/test sets) it runs and fails, since
            // ci/test installs clang-19.
            let on_ci = matches!(env::var("CI").as_deref(), Ok("true" | "1"));
            if !on_ci {
                println!("cargo:rustc-cfg=rocgate_kernels_optional_and_absent");
            }
        }
        Some((clang, _)) => {
            for target in TARGETS {
                let object = out.join(format!("{target}.hsaco"));
                let result = Command::new(clang)
                    .args([
                        "-x",
                        "cl",
                        "-cl-std=CL2.0",
                        "--target=amdgcn-amd-amdhsa",
                        "-nogpulib",
                        "-O3",
                        CODE_OBJECT_VERSION,
                    ])
                    .arg(format!("-mcpu={target}"))
                    .arg(&source)
                    .arg("-o")
                    .arg(&object)
                    .output();
                match result {
                    Ok(o) if o.status.success() => built.push((target, object)),
                    Ok(o) => {
                        let err = String::from_utf8_lossy(&o.stderr);
                        // One line a person can act on; clang's own words
                        // for anything else.
                        let why = if err.contains("invalid target ID") {
                            format!(
                                "{} does not know this target (gfx950 needs LLVM 20 or newer: build with clang-20+ or ROCm's clang, ROCGATE_CLANG=PATH); its dispatch checks are skipped as unverifiable",
                                clang.file_name().map_or_else(
                                    || clang.display().to_string(),
                                    |n| n.to_string_lossy().into_owned()
                                )
                            )
                        } else {
                            err.lines().next().unwrap_or("failed").to_string()
                        };
                        skipped.push((target, why));
                    }
                    Err(e) => skipped.push((target, e.to_string())),
                }
            }
        }
    }

    let mut code = String::from("// Generated by build.rs.\n\n");
    for (target, path) in &built {
        let _ = writeln!(
            code,
            "static {}: &Aligned<[u8]> = &Aligned(*include_bytes!({:?}));",
            target.to_uppercase(),
            path.display().to_string()
        );
    }
    code.push_str("\n/// Code objects built into this binary, one per gfx target.\npub static CODE_OBJECTS: &[CodeObject] = &[\n");
    for (target, _) in &built {
        let _ = writeln!(
            code,
            "    CodeObject {{ target: {target:?}, bytes: &{}.0 }},",
            target.to_uppercase()
        );
    }
    code.push_str("];\n\n/// Targets without a code object, and why.\npub static SKIPPED_TARGETS: &[(&str, &str)] = &[\n");
    for (target, why) in &skipped {
        let _ = writeln!(code, "    ({target:?}, {why:?}),");
    }
    code.push_str(
        "];\n\n/// The compiler that built the code objects.\npub static COMPILER: Option<&str> = ",
    );
    match &compiler {
        Some((_, label)) => {
            let _ = writeln!(code, "Some({label:?});");
        }
        None => code.push_str("None;\n"),
    }
    std::fs::write(out.join("code_objects.rs"), code).expect("write code_objects.rs");
}
