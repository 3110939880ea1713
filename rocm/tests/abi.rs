//! The bindings checked against the real ROCm headers and libraries.
//!
//! A C probe, generated from the crate's own tables (every constant it
//! declares by C name, every struct size and field offset), is compiled
//! against the HSA and HIP headers (Debian's `libhsa-runtime-dev` and
//! `libamdhip64-dev`, ROCm 5.2.3; or `ROCGATE_ROCM_INCLUDE=/opt/rocm/include`
//! for an installed release) and its output compared with the Rust values.
//! Every symbol the bindings look up must be exported by the real
//! `libhsa-runtime64.so.1` and `libamdhip64.so.5` (read as ELF, not loaded).
//!
//! Without the headers or libraries the trials are ignored with the reason;
//! on CI (`CI=true`, which `ci/test` sets) that is a failure.

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use object::{Object, ObjectSymbol};
use rocgate_fixtures::hostile::system_library;
use rocgate_rocm::{hip, hsa};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        Trial::ignorable_test("hsa_enums_and_layouts_match_hsa_h", hsa_headers),
        Trial::ignorable_test("hip_enums_match_hip_runtime_api_h", hip_headers),
        Trial::ignorable_test(
            "hsa_symbols_are_exported_by_libhsa_runtime64_so_1",
            hsa_symbols,
        ),
        Trial::ignorable_test("hip_symbols_are_exported_by_libamdhip64", hip_symbols),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// Ignores a trial whose prerequisite is missing, unless required.
fn missing(what: &str) -> Result<Completion, Failed> {
    let why = format!("{what} (ci/test installs Debian's ROCm 5.2.3 headers and runtime)");
    if matches!(std::env::var("CI").as_deref(), Ok("true" | "1")) {
        Err(format!("CI=true but {why}").into())
    } else {
        Ok(Completion::ignored_with(why))
    }
}

/// The include directory holding `header` (`hsa/hsa.h`).
fn include_dir(header: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("ROCGATE_ROCM_INCLUDE")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.extend(["/usr/include", "/opt/rocm/include"].map(PathBuf::from));
    dirs.into_iter().find(|d| d.join(header).is_file())
}

/// Compiles and runs a C program; returns its `NAME VALUE` lines.
fn probe(source: &str, include: &Path) -> Result<BTreeMap<String, i64>, Failed> {
    let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let c = dir.path().join("probe.c");
    let exe = dir.path().join("probe");
    std::fs::write(&c, source).map_err(|e| format!("writing {}: {e}", c.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-D__HIP_PLATFORM_AMD__")
        .arg("-I")
        .arg(include)
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("failed to run {cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the probe does not compile against {} (a constant or field the bindings name is not in the headers):\n{}",
            include.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| format!("failed to run the probe: {e}"))?;
    let text = String::from_utf8_lossy(&run.stdout);
    Ok(text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect())
}

/// A C probe that prints named values, and what the bindings expect of them.
struct Probe {
    source: String,
    expected: Vec<(String, i64)>,
}

impl Probe {
    /// A probe including `headers`.
    fn new(headers: &[&str]) -> Probe {
        let mut source = String::from("#include <stdio.h>\n#include <stddef.h>\n");
        for h in headers {
            let _ = writeln!(source, "#include <{h}>");
        }
        source.push_str("int main(void) {\n");
        Probe {
            source,
            expected: Vec::new(),
        }
    }

    fn print(&mut self, key: &str, expr: &str, expected: i64) {
        let _ = writeln!(
            self.source,
            "  printf(\"%s %lld\\n\", \"{key}\", (long long)({expr}));"
        );
        self.expected.push((key.to_string(), expected));
    }

    /// An enum value or macro by its C name.
    fn value(&mut self, name: &str, expected: i64) {
        self.print(name, name, expected);
    }

    /// A struct's size (`field` = "sizeof") or a field's offset.
    fn layout(&mut self, ty: &str, field: &str, bytes: usize) {
        let expr = if field == "sizeof" {
            format!("sizeof({ty})")
        } else {
            format!("offsetof({ty}, {field})")
        };
        self.print(
            &format!("{ty}.{field}"),
            &expr,
            i64::try_from(bytes).unwrap_or(-1),
        );
    }

    /// Compiles and runs the probe against `include`; lists every value
    /// that differs from the bindings'.
    fn check(mut self, include: &Path, label: &str) -> Result<Completion, Failed> {
        self.source.push_str("  return 0;\n}\n");
        let got = probe(&self.source, include)?;
        let wrong: Vec<String> = self
            .expected
            .iter()
            .filter(|(k, v)| got.get(k) != Some(v))
            .map(|(k, v)| {
                format!(
                    "{k}: rocgate has {v}, {}/{label} has {:?}",
                    include.display(),
                    got.get(k)
                )
            })
            .collect();
        if wrong.is_empty() {
            Ok(Completion::Completed)
        } else {
            Err(wrong.join("\n").into())
        }
    }
}

fn hsa_headers() -> Result<Completion, Failed> {
    let Some(include) = include_dir("hsa/hsa.h") else {
        return missing("hsa/hsa.h is not installed");
    };
    let mut p = Probe::new(&["hsa/hsa.h", "hsa/hsa_ext_amd.h"]);
    for (name, value) in hsa::sys::CONSTANTS {
        p.value(name, *value);
    }
    for (value, name) in hsa::status::STATUS_NAMES {
        if hsa::status::NEWER_THAN_5_2.contains(name) && !has_symbol(&include, name) {
            continue;
        }
        p.value(name, i64::from(*value));
    }
    for (ty, field, bytes) in hsa::sys::LAYOUTS {
        p.layout(ty, field, *bytes);
    }
    p.check(&include, "hsa")
}

/// Whether a newer header than 5.2.3 declares `name` (checked with ROCm's
/// own headers via ROCGATE_ROCM_INCLUDE).
fn has_symbol(include: &Path, name: &str) -> bool {
    ["hsa/hsa.h", "hsa/hsa_ext_amd.h"]
        .iter()
        .any(|h| std::fs::read_to_string(include.join(h)).is_ok_and(|t| t.contains(name)))
}

fn hip_headers() -> Result<Completion, Failed> {
    let Some(include) = include_dir("hip/hip_runtime_api.h") else {
        return missing("hip/hip_runtime_api.h is not installed");
    };
    let mut p = Probe::new(&["hip/hip_runtime_api.h"]);
    for (name, value) in hip::sys::CONSTANTS {
        p.value(name, *value);
    }
    for (value, name) in hip::ERROR_NAMES {
        p.value(name, i64::from(*value));
    }
    p.check(&include, "hip")
}

/// Every name in `symbols` that `lib` does not export.
fn unexported(lib: &Path, symbols: &[&str]) -> Result<Vec<String>, Failed> {
    let bytes = std::fs::read(lib).map_err(|e| format!("reading {}: {e}", lib.display()))?;
    let file = object::File::parse(&*bytes)
        .map_err(|e| format!("{} is not an ELF library: {e}", lib.display()))?;
    let exported: std::collections::BTreeSet<&str> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name().ok())
        .map(|n| n.split('@').next().unwrap_or(n))
        .collect();
    Ok(symbols
        .iter()
        .filter(|s| !exported.contains(*s))
        .map(|s| (*s).to_string())
        .collect())
}

fn check_exports(sonames: &[&str], symbols: &[&str]) -> Result<Completion, Failed> {
    let Some(lib) = system_library(sonames) else {
        return missing(&format!("none of {} is installed", sonames.join(", ")));
    };
    let gone = unexported(&lib, symbols)?;
    if gone.is_empty() {
        Ok(Completion::Completed)
    } else {
        Err(format!("{} does not export: {}", lib.display(), gone.join(", ")).into())
    }
}

fn hsa_symbols() -> Result<Completion, Failed> {
    check_exports(&["libhsa-runtime64.so.1"], hsa::sys::Table::SYMBOLS)
}

fn hip_symbols() -> Result<Completion, Failed> {
    // ROCm 5's HIP runtime carries hiprtc too (ROCm 6 also ships libhiprtc,
    // ROCm 7 only libhiprtc).
    let sonames = ["libamdhip64.so.5"];
    let mut all: Vec<&str> = hip::sys::Table::SYMBOLS.to_vec();
    all.extend_from_slice(hip::sys::RtcTable::SYMBOLS);
    check_exports(&sonames, &all)
}
