//! The compatibility matrix: what AMD supports per ROCm release (GPUs,
//! amdgpu driver releases, operating systems and kernels, firmware bundles),
//! as data the user owns (`suites/compat.toml` built in, `--matrix FILE`).
//! It holds two kinds of rows: a [`RocmRow`] per ROCm release (`[[release]]`)
//! and a [`DriverRow`] per amdgpu module version (`[[driver]]`). The
//! matrix a run is given is the one source of driver rows, for the compat
//! check and the reports' `amdgpu_release` alike. `layers/compat.rs` turns
//! an [`Evaluation`] into the compat layer's verdict.

use crate::config_file::{self, ConfigError};
use crate::findings::codes;
use rocgate_node::NodeFacts;
use rocgate_node::driver_release::{self, DriverResolution, DriverRow};
use rocgate_node::versions;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The built-in matrix.
pub const BUILTIN: &str = include_str!("../compat.toml");

/// One ROCm release's supported combination (a `[[release]]` row). A key
/// it does not know is refused, naming its line: a misspelt
/// `amdgpu_by_gpus` would otherwise leave the row wider than its author
/// meant.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RocmRow {
    /// `6.4.1`.
    pub rocm: String,
    /// gfx targets.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// amdgpu driver releases (`6.4.x`, `30.10`, `30.20.1`).
    #[serde(default)]
    pub amdgpu: Vec<String>,
    /// Per-product driver releases, where published (narrower than `amdgpu`).
    #[serde(default)]
    pub amdgpu_by_gpu: BTreeMap<String, Vec<String>>,
    /// `ubuntu 24.04.3`, `rhel 9.6`.
    #[serde(default)]
    pub os: Vec<String>,
    /// `ubuntu 24.04.3: 6.8 [GA], 6.14 [HWE]`.
    #[serde(default)]
    pub kernels: Vec<String>,
    /// Firmware (PLDM) bundles per product, where published.
    #[serde(default)]
    pub firmware: BTreeMap<String, Vec<String>>,
    /// Where the row comes from.
    pub source: String,
}

/// The matrix file. A top-level key it does not know is refused, naming
/// its line, as the thresholds file refuses one.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Layout version (1).
    pub schema_version: u32,
    /// A row per ROCm release.
    #[serde(rename = "release")]
    pub rocm_rows: Vec<RocmRow>,
    /// Module versions to driver releases, the rows in effect: the file's,
    /// or the built-in ones when the file has none ([`Matrix::parse`] fills
    /// them in, so every reader of this matrix sees the same rows).
    #[serde(rename = "driver", default)]
    pub drivers: Vec<DriverRow>,
    /// Where the matrix came from (for messages).
    #[serde(skip)]
    pub origin: String,
}

/// Where each row's key sits in the file, so that a duplicate or empty key
/// can be named by its line.
#[derive(Deserialize)]
struct KeySpans {
    #[serde(rename = "release", default)]
    releases: Vec<RocmKey>,
    #[serde(rename = "driver", default)]
    drivers: Vec<DriverKey>,
}

#[derive(Deserialize)]
struct RocmKey {
    rocm: toml::Spanned<String>,
}

#[derive(Deserialize)]
struct DriverKey {
    module: toml::Spanned<String>,
}

/// Rejects an empty, malformed or repeated key: with two rows for one
/// release the first would win silently.
fn check_keys<'a>(
    keys: impl Iterator<Item = &'a toml::Spanned<String>>,
    what: &str,
    text: &str,
    origin: &str,
) -> Result<(), String> {
    // Where each line starts, found once: counting the newlines before
    // every key would take time quadratic in the rows.
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |offset: usize| starts.partition_point(|&s| s <= offset);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for key in keys {
        let value = key.get_ref().trim();
        let line = line_of(key.span().start);
        let well_formed = !value.is_empty()
            && value
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !well_formed {
            return Err(format!(
                "failed to parse {origin}: line {line}: {what} {value:?} is not a version such as 6.4.1"
            ));
        }
        if let Some(first) = seen.insert(value, line) {
            return Err(format!(
                "failed to parse {origin}: line {line}: {what} {value} is listed twice (first at line {first}); keep one row for it"
            ));
        }
    }
    Ok(())
}

impl Matrix {
    /// Parses a matrix; errors name `origin` and the line. A matrix without
    /// `[[driver]]` rows gets the built-in ones.
    pub fn parse(text: &str, origin: &str) -> Result<Matrix, ConfigError> {
        let mut m = Matrix::parse_rows(text, origin)?;
        if m.drivers.is_empty() {
            m.drivers = Matrix::builtin()?.drivers;
        }
        Ok(m)
    }

    /// Parses a matrix as written, rows checked, no row filled in.
    fn parse_rows(text: &str, origin: &str) -> Result<Matrix, ConfigError> {
        let mut m: Matrix = config_file::parse_v1(text, origin, |m: &Matrix| m.schema_version)?;
        let spans: KeySpans =
            toml::from_str(text).map_err(|e| format!("failed to parse {origin}: {e}"))?;
        check_keys(
            spans.releases.iter().map(|r| &r.rocm),
            "ROCm release",
            text,
            origin,
        )?;
        check_keys(
            spans.drivers.iter().map(|d| &d.module),
            "amdgpu module",
            text,
            origin,
        )?;
        m.origin = origin.to_string();
        Ok(m)
    }

    /// The built-in matrix.
    pub fn builtin() -> Result<Matrix, ConfigError> {
        Matrix::parse_rows(BUILTIN, "built-in compatibility matrix")
    }

    /// Reads a matrix file.
    pub fn load(path: &Path) -> Result<Matrix, ConfigError> {
        Matrix::parse(&config_file::read(path)?, &path.display().to_string())
    }

    /// The row for a ROCm release (`6.4.1`).
    pub fn rocm_row(&self, rocm: &str) -> Option<&RocmRow> {
        self.rocm_rows.iter().find(|r| r.rocm == rocm)
    }

    /// The oldest and newest releases listed.
    pub fn span(&self) -> String {
        let mut v: Vec<&str> = self.rocm_rows.iter().map(|r| r.rocm.as_str()).collect();
        v.sort_by_key(|s| version_key(s));
        match (v.first(), v.last()) {
            (Some(a), Some(b)) => format!("{a} .. {b}"),
            _ => "no release".into(),
        }
    }
}

fn version_key(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// Whether driver release `have` (`6.4.1`, `30.10.0`) fits pattern `want`
/// (`6.4.x`, `30.10`, `30.20.1`).
pub fn release_matches(want: &str, have: &str) -> bool {
    let want = want.trim();
    if let Some(prefix) = want.strip_suffix(".x").or_else(|| want.strip_suffix(".z")) {
        return have == prefix || have.starts_with(&format!("{prefix}."));
    }
    let norm = |s: &str| {
        let mut v = version_key(s);
        while v.len() < 3 {
            v.push(0);
        }
        v
    };
    norm(want) == norm(have)
}

/// One component checked against the row.
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    /// `amdgpu`, `os`, `kernel`, `gpu gfx942`, `firmware`.
    pub name: String,
    /// What the node has.
    pub have: String,
    /// What the row allows.
    pub want: String,
    /// Whether the row allows what the node has.
    pub verdict: Fit,
}

/// How a component fits its release's row.
#[derive(Clone, Debug, PartialEq)]
pub enum Fit {
    /// The row lists it.
    Supported,
    /// The row does not list it: the finding code.
    Unsupported(crate::findings::Code),
    /// rocgate cannot tell (the driver release is unknown), and why.
    Unknown(String),
}

impl Fit {
    /// Whether the row lists it.
    pub fn is_supported(&self) -> bool {
        *self == Fit::Supported
    }

    /// `ok`, `MISMATCH` or `UNKNOWN`, for tables.
    pub fn label(&self) -> &'static str {
        match self {
            Fit::Supported => "ok",
            Fit::Unsupported(_) => "MISMATCH",
            Fit::Unknown(_) => "UNKNOWN",
        }
    }
}

/// The node's combination against the matrix.
#[derive(Clone, Debug, PartialEq)]
pub enum Evaluation {
    /// No ROCm release found on the node.
    NoRocm,
    /// The release is not in the matrix.
    UnknownRelease {
        /// The node's release.
        rocm: String,
        /// What the matrix covers.
        span: String,
    },
    /// Each component against the release's row.
    Checked {
        /// The release.
        rocm: String,
        /// The row's source.
        source: String,
        /// Components.
        components: Vec<Component>,
    },
}

/// Evaluates the node's versions against `matrix`.
pub fn evaluate(facts: &NodeFacts, matrix: &Matrix) -> Evaluation {
    let Some(rocm) = versions::rocm_release(&facts.sysroot, &facts.rocm_dirs) else {
        return Evaluation::NoRocm;
    };
    let Some(row) = matrix.rocm_row(&rocm) else {
        return Evaluation::UnknownRelease {
            rocm,
            span: matrix.span(),
        };
    };
    let mut components = Vec::new();
    // GPUs.
    let mut targets: Vec<String> = facts
        .gpus
        .iter()
        .filter_map(|g| g.gfx_target.clone())
        .collect();
    targets.sort();
    targets.dedup();
    let unnamed = facts.gpus.iter().filter(|g| g.gfx_target.is_none()).count();
    if unnamed > 0 && !row.gpus.is_empty() {
        components.push(Component {
            name: "gpu".into(),
            have: format!("{unnamed} GPU(s) without a known gfx target"),
            want: row.gpus.join(", "),
            verdict: Fit::Unknown(
                "KFD does not say which gfx target these GPUs are (see the kfd layer)".into(),
            ),
        });
    }
    for t in targets {
        components.push(Component {
            verdict: if row.gpus.contains(&t) {
                Fit::Supported
            } else {
                Fit::Unsupported(codes::COMPAT_GPU_UNSUPPORTED)
            },
            name: format!("gpu {t}"),
            have: t,
            want: row.gpus.join(", "),
        });
    }
    // The amdgpu driver release, read as exactly as the node allows.
    let driver = driver_release::read(facts, &matrix.drivers);
    let products: Vec<&str> = facts
        .gpus
        .iter()
        .filter_map(|g| g.product.as_deref())
        .collect();
    let allowed: Vec<String> = products
        .iter()
        .find_map(|p| row.amdgpu_by_gpu.get(*p).cloned())
        .unwrap_or_else(|| row.amdgpu.clone());
    if !allowed.is_empty() {
        let fits = |r: &str| allowed.iter().any(|w| release_matches(w, r));
        let (have, verdict) = match &driver {
            DriverResolution::Exact { release, source } => (
                format!("{release} (from {source})"),
                if fits(release) {
                    Fit::Supported
                } else {
                    Fit::Unsupported(codes::COMPAT_AMDGPU_UNSUPPORTED)
                },
            ),
            DriverResolution::OneOf { releases, source } => {
                let ok = releases.iter().filter(|r| fits(r)).count();
                (
                    format!("{} (from {source})", releases.join(" or ")),
                    if ok == releases.len() {
                        Fit::Supported
                    } else if ok == 0 {
                        Fit::Unsupported(codes::COMPAT_AMDGPU_UNSUPPORTED)
                    } else {
                        Fit::Unknown(
                            "some of the releases that shipped this module are listed, some not, and the node does not say which it runs".into(),
                        )
                    },
                )
            }
            DriverResolution::Unknown(why) => {
                ("release unknown".to_string(), Fit::Unknown(why.clone()))
            }
        };
        components.push(Component {
            name: "amdgpu".into(),
            have,
            want: allowed.join(" or "),
            verdict,
        });
    }
    // OS and kernel. What cannot be read is said, never left out: a matrix
    // check that skipped the OS must not read as "supported".
    let (os, why) = match versions::host_os(facts) {
        Ok(os) => (Some(os), String::new()),
        Err(why) => (None, why),
    };
    if os.is_none() && !row.os.is_empty() {
        components.push(Component {
            name: "os".into(),
            have: "unknown".into(),
            want: row.os.join(", "),
            verdict: Fit::Unknown(why),
        });
    }
    if os.is_none() && !row.kernels.is_empty() {
        components.push(Component {
            name: "kernel".into(),
            have: facts
                .kernel_release
                .as_ref()
                .map_or_else(|_| "unknown".to_string(), Clone::clone),
            want: row.kernels.join("; "),
            verdict: Fit::Unknown(
                "the kernels a release supports are listed per OS, and the OS is unknown".into(),
            ),
        });
    }
    if let Some(os) = os {
        let short = os.short();
        let entry = row
            .os
            .iter()
            .find(|e| **e == short || e.starts_with(&format!("{short}.")));
        if !row.os.is_empty() {
            components.push(Component {
                name: "os".into(),
                have: os.pretty.clone(),
                want: row.os.join(", "),
                verdict: if entry.is_some() {
                    Fit::Supported
                } else {
                    Fit::Unsupported(codes::COMPAT_OS_UNSUPPORTED)
                },
            });
        }
        let listed = entry.and_then(|entry| {
            row.kernels
                .iter()
                .find_map(|k| k.strip_prefix(&format!("{entry}:")))
        });
        if let (Some(listed), Err(e)) = (listed, &facts.kernel_release) {
            components.push(Component {
                name: "kernel".into(),
                have: "unknown".into(),
                want: listed.trim().to_string(),
                verdict: Fit::Unknown(format!("the running kernel could not be read: {e}")),
            });
        }
        if let Ok(kernel) = &facts.kernel_release {
            if let Some(listed) = listed {
                let mm: String = kernel.split('.').take(2).collect::<Vec<_>>().join(".");
                let ok = listed.split(',').any(|k| {
                    let k = k.trim();
                    let v = k.split_whitespace().next().unwrap_or("");
                    kernel.starts_with(v)
                        || v.split('.').take(2).collect::<Vec<_>>().join(".") == mm
                });
                components.push(Component {
                    name: "kernel".into(),
                    have: kernel.clone(),
                    want: listed.trim().to_string(),
                    verdict: if ok {
                        Fit::Supported
                    } else {
                        Fit::Unsupported(codes::COMPAT_KERNEL_UNSUPPORTED)
                    },
                });
            }
        }
    }
    Evaluation::Checked {
        rocm,
        source: row.source.clone(),
        components,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn builtin_matrix_parses_and_covers_6_0_to_7() {
        let m = Matrix::builtin().unwrap();
        assert!(m.rocm_rows.len() >= 20);
        assert!(m.rocm_row("6.0.0").is_some());
        assert!(m.rocm_rows.iter().all(|r| !r.source.is_empty()));
        assert!(!m.drivers.is_empty(), "the built-in matrix has driver rows");
        assert!(m.span().starts_with("6.0.0"));
    }

    #[test]
    fn the_driver_rows_in_effect_are_the_files_else_the_built_in_ones() {
        let row = "[[release]]\nrocm = \"6.4.1\"\nsource = \"x\"\n";
        let bare = Matrix::parse(&format!("schema_version = 1\n{row}"), "m.toml").unwrap();
        assert_eq!(bare.drivers, Matrix::builtin().unwrap().drivers);
        let own = format!(
            "schema_version = 1\n{row}[[driver]]\nmodule = \"6.16.6\"\nreleases = [[\"30.20.9\", \"2255209\"]]\nsource = \"mine\"\n"
        );
        let own = Matrix::parse(&own, "m.toml").unwrap();
        assert_eq!(
            own.drivers,
            [DriverRow {
                module: "6.16.6".into(),
                releases: vec![("30.20.9".into(), "2255209".into())],
                source: "mine".into(),
            }]
        );
    }

    #[test]
    fn driver_patterns() {
        assert!(release_matches("6.4.x", "6.4.1"));
        assert!(!release_matches("6.4.x", "6.40.1"));
        assert!(release_matches("30.10", "30.10.0"));
        assert!(release_matches("30.20.1", "30.20.1"));
        assert!(!release_matches("30.20.1", "30.20.0"));
    }

    #[test]
    fn errors_name_the_line() {
        let e = Matrix::parse("schema_version = 1\n[[release]]\nrocm = 6\n", "m.toml")
            .unwrap_err()
            .0;
        assert!(e.contains("m.toml") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn a_release_listed_twice_or_empty_is_refused_naming_its_line() {
        let row = |rocm: &str| format!("[[release]]\nrocm = \"{rocm}\"\nsource = \"x\"\n");
        let twice = format!("schema_version = 1\n{}{}", row("6.4.1"), row("6.4.1"));
        let e = Matrix::parse(&twice, "m.toml").unwrap_err().0;
        assert!(
            e.contains("line 6") && e.contains("6.4.1 is listed twice (first at line 3)"),
            "{e}"
        );
        for bad in ["", " ", "six", "6..1"] {
            let text = format!("schema_version = 1\n{}", row(bad));
            let e = Matrix::parse(&text, "m.toml").unwrap_err().0;
            assert!(e.contains("line 3") && e.contains("not a version"), "{e}");
        }
        let module = "schema_version = 1\n[[release]]\nrocm = \"6.4.1\"\nsource = \"x\"\n[[driver]]\nmodule = \"6.12.12\"\nreleases = []\nsource = \"x\"\n[[driver]]\nmodule = \"6.12.12\"\nreleases = []\nsource = \"x\"\n";
        let e = Matrix::parse(module, "m.toml").unwrap_err().0;
        assert!(
            e.contains("line 10") && e.contains("amdgpu module 6.12.12"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_key_is_refused_naming_it_and_its_line() {
        let row = "[[release]]\nrocm = \"6.4.1\"\nsource = \"x\"\n";
        for (text, key, line) in [
            (
                format!("schema_version = 1\nreleses = []\n{row}"),
                "releses",
                2,
            ),
            (
                format!("schema_version = 1\n{row}gpu = [\"gfx942\"]\n"),
                "gpu",
                5,
            ),
        ] {
            let e = Matrix::parse(&text, "m.toml").unwrap_err().0;
            assert!(
                e.contains("m.toml") && e.contains(&format!("line {line}")) && e.contains(key),
                "{e}"
            );
        }
    }

    #[test]
    fn lines_are_named_in_a_large_matrix() {
        let rows: String = (0..5000)
            .map(|i| format!("[[release]]\nrocm = \"6.{i}.0\"\nsource = \"x\"\n"))
            .collect();
        let text =
            format!("schema_version = 1\n{rows}[[release]]\nrocm = \"6.4999.0\"\nsource = \"x\"\n");
        let e = Matrix::parse(&text, "m.toml").unwrap_err().0;
        assert!(
            e.contains("line 15003") && e.contains("(first at line 15000)"),
            "{e}"
        );
    }

    /// `cargo test --release -p rocgate-suites --lib a_matrix_of_100k_rows
    /// -- --ignored --nocapture`: how long 100,000 rows take to parse.
    #[test]
    #[ignore = "a measurement, run by hand in a release build"]
    fn a_matrix_of_100k_rows_parses_in_linear_time() {
        let rows: String = (0..100_000)
            .map(|i| format!("[[release]]\nrocm = \"6.{i}.0\"\ngpus = [\"gfx942\", \"gfx90a\"]\namdgpu = [\"6.4.x\"]\nos = [\"ubuntu 24.04.3\"]\nsource = \"generated row {i}\"\n"))
            .collect();
        let text = format!("schema_version = 1\n{rows}");
        let t = std::time::Instant::now();
        let m = Matrix::parse(&text, "generated").unwrap();
        println!(
            "{} rows ({} bytes) parsed in {:.2} s",
            m.rocm_rows.len(),
            text.len(),
            t.elapsed().as_secs_f64()
        );
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}", a in "[0-9x.]{0,8}", b in "[0-9.]{0,8}") {
            let _ = Matrix::parse(&s, "f");
            let _ = release_matches(&a, &b);
        }
    }
}
