//! Performance floors and numeric tolerances: a TOML file the user owns
//! (`suites/thresholds.toml` is built in; `--thresholds FILE` replaces it).

use crate::config_file::{self, ConfigError};
use rocgate_node::facts::gpus::Gpu;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The built-in file.
pub const BUILTIN: &str = include_str!("../thresholds.toml");

/// Relative tolerances per data type, each above 0 and below 1: `nan` would
/// let a wrong result pass, a negative one fail a right one, and 1 or more
/// accept almost anything.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tolerances {
    /// fp64.
    #[serde(deserialize_with = "tolerance")]
    pub fp64: f64,
    /// fp32.
    #[serde(deserialize_with = "tolerance")]
    pub fp32: f64,
    /// fp16.
    #[serde(deserialize_with = "tolerance")]
    pub fp16: f64,
    /// bf16.
    #[serde(deserialize_with = "tolerance")]
    pub bf16: f64,
}

// Checked while deserialising, so the TOML error names the line and column.
fn tolerance<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "a tolerance must be a relative error above 0 and below 1 (e.g. 1e-5), not {v}"
        )))
    }
}

fn margin<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "a margin must be a fraction from 0 to below 1 (0.05 = 5%), not {v}"
        )))
    }
}

fn optional_margin<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    margin(d).map(Some)
}

fn floor_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "a floor must be a finite number of at least 0, not {v}"
        )))
    }
}

/// One floor: a value for one metric on one kind of GPU, with its source.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Floor {
    /// gfx target or product name.
    pub gpu: String,
    /// Metric name (`gemm_tflops.bf16`).
    pub metric: String,
    /// The floor.
    #[serde(deserialize_with = "floor_value")]
    pub value: f64,
    /// Allowed shortfall (fraction); the file's default when absent.
    #[serde(
        default,
        deserialize_with = "optional_margin",
        skip_serializing_if = "Option::is_none"
    )]
    pub margin: Option<f64>,
    /// The compute partition mode the value is for (`SPX` whole GPU, the
    /// default; `DPX`, `QPX`, `CPX`): a CPX partition of an MI300X is never
    /// judged against a whole GPU's figure.
    #[serde(default = "whole_gpu")]
    pub partition: String,
    /// How the figure was measured (sizes, data type, loop), so a reader can
    /// tell like from unlike.
    #[serde(default)]
    pub workload: Option<String>,
    /// Where the value comes from.
    pub source: String,
}

/// The extended tier's device-memory test.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Memtest {
    /// The share of each GPU's VRAM written and read back (0.1 = 10%).
    #[serde(deserialize_with = "vram_share")]
    pub vram_share: f64,
}

impl Default for Memtest {
    fn default() -> Self {
        Memtest { vram_share: 0.1 }
    }
}

/// What the burn-in tier holds each GPU's telemetry to while it is loaded.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Burnin {
    /// The graphics clock counts as collapsed below this share of its
    /// highest DPM level.
    #[serde(deserialize_with = "share")]
    pub clock_floor: f64,
    /// The share of the loaded time the clock may sit collapsed before the
    /// GPU fails (`gpu-clocks-collapsed`).
    #[serde(deserialize_with = "share")]
    pub throttle_share: f64,
    /// How close (degrees Celsius) a sensor may come to its critical limit
    /// before the GPU is warned of (`gpu-near-thermal-limit`).
    pub thermal_margin_c: f64,
    /// The band the median power under load must sit in, as shares of the
    /// power cap: below it the GPU never reached full load, above it the
    /// cap does not hold (`gpu-power-out-of-band`).
    pub power_band: [f64; 2],
    /// Seconds at the start in which clocks and power ramp up, not judged.
    pub warmup_s: f64,
}

impl Default for Burnin {
    fn default() -> Self {
        Burnin {
            clock_floor: 0.5,
            throttle_share: 0.05,
            thermal_margin_c: 5.0,
            power_band: [0.5, 1.05],
            warmup_s: 5.0,
        }
    }
}

fn share<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "{v} is not a share: give a number from 0 to 1"
        )))
    }
}

/// The least `vram_share` taken (0.0001%): below it a share says nothing a
/// GPU could test (1e-10 of 192 GiB is 20 bytes), and the memory test
/// covers at least 1 MiB whatever the share.
pub const MIN_VRAM_SHARE: f64 = 1e-6;
/// The most (0.9): above it the allocation competes with the runtime's own
/// reservations.
pub const MAX_VRAM_SHARE: f64 = 0.9;

fn vram_share<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (MIN_VRAM_SHARE..=MAX_VRAM_SHARE).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "vram_share must be a fraction from {MIN_VRAM_SHARE:e} to {MAX_VRAM_SHARE} (0.1 = 10%), not {}",
            share_text(v)
        )))
    }
}

/// A share as a person reads it: `0.1`, and `1e-300` rather than three
/// hundred zeros.
pub fn share_text(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e6).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// How much a throughput may fall between two runs before `rocgate
/// compare` calls it a regression (when the fall also exceeds both runs'
/// spread): a default, and values per metric family (the name before the
/// first `.`, `gemm_tflops` of `gemm_tflops.fp16`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    /// For families without their own.
    #[serde(deserialize_with = "drop_tolerance")]
    pub tolerance: f64,
    /// Per family.
    #[serde(default, deserialize_with = "families")]
    pub families: BTreeMap<String, f64>,
}

impl Default for Compare {
    fn default() -> Self {
        Compare {
            tolerance: 0.05,
            families: BTreeMap::new(),
        }
    }
}

/// The throughput families the suites measure, which `[compare.families]`
/// may name: a name outside them would tune nothing.
pub const FAMILIES: [&str; 5] = [
    "gemm_tflops",
    "h2d_gbps",
    "d2h_gbps",
    "p2p_gbps",
    "allreduce_busbw_gbps",
];

// A fall of 1 (100%) or more would never count.
fn drop_tolerance<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "a compare tolerance must be a fraction from 0 to below 1 (0.05 = 5%), not {v}"
        )))
    }
}

/// A family's tolerance, checked as it is read so an error names its line.
struct DropTolerance(f64);

impl<'de> Deserialize<'de> for DropTolerance {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        drop_tolerance(d).map(DropTolerance)
    }
}

fn families<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    let raw = BTreeMap::<String, DropTolerance>::deserialize(d)?;
    if let Some(unknown) = raw.keys().find(|k| !FAMILIES.contains(&k.as_str())) {
        return Err(serde::de::Error::custom(format!(
            "[compare.families] names '{unknown}', which no check measures; known families: {}",
            FAMILIES.join(", ")
        )));
    }
    Ok(raw.into_iter().map(|(k, v)| (k, v.0)).collect())
}

fn whole_gpu() -> String {
    "SPX".to_string()
}

/// The whole file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// Layout version (1).
    pub schema_version: u32,
    /// Default margin.
    #[serde(deserialize_with = "margin")]
    pub margin: f64,
    /// Tolerances.
    pub tolerance: Tolerances,
    /// Floors, first match wins.
    #[serde(default, rename = "floor")]
    pub floors: Vec<Floor>,
    /// How much the extended tier's device-memory test covers.
    #[serde(default)]
    pub memtest: Memtest,
    /// What the burn-in holds telemetry to.
    #[serde(default)]
    pub burnin: Burnin,
    /// What `rocgate compare` tolerates, per metric family.
    #[serde(default)]
    pub compare: Compare,
    /// Where the thresholds came from (for messages).
    #[serde(skip)]
    pub origin: String,
}

/// Metrics a floor may name.
pub const METRICS: [&str; 11] = [
    "gemm_tflops.fp32",
    "gemm_tflops.fp64",
    "gemm_tflops.fp16",
    "gemm_tflops.bf16",
    "h2d_gbps",
    "d2h_gbps",
    "allreduce_busbw_gbps",
    "p2p_gbps.xgmi",
    "p2p_gbps.pcie",
    "hbm_gbps.copy",
    "hbm_gbps.triad",
];

impl Thresholds {
    /// Parses `text`; errors name `origin` and the line.
    pub fn parse(text: &str, origin: &str) -> Result<Thresholds, ConfigError> {
        let mut t: Thresholds =
            config_file::parse_v1(text, origin, |t: &Thresholds| t.schema_version)?;
        for (i, f) in t.floors.iter().enumerate() {
            if !METRICS.contains(&f.metric.as_str()) {
                return Err(ConfigError(format!(
                    "failed to parse {origin}: floor {} names metric '{}'; known metrics: {}",
                    i + 1,
                    f.metric,
                    METRICS.join(", ")
                )));
            }
            if !["SPX", "DPX", "TPX", "QPX", "CPX"]
                .iter()
                .any(|m| m.eq_ignore_ascii_case(&f.partition))
            {
                return Err(ConfigError(format!(
                    "failed to parse {origin}: floor {} ({}) names partition '{}'; known modes: SPX, DPX, TPX, QPX, CPX",
                    i + 1,
                    f.metric,
                    f.partition
                )));
            }
        }
        let b = &t.burnin;
        let [low, high] = b.power_band;
        let valid = low.is_finite()
            && high.is_finite()
            && (0.0..high).contains(&low)
            && b.thermal_margin_c.is_finite()
            && b.thermal_margin_c >= 0.0
            && b.warmup_s.is_finite()
            && b.warmup_s >= 0.0;
        if !valid {
            return Err(ConfigError(format!(
                "failed to parse {origin}: [burnin] needs power_band = [low, high] with 0 <= low < high, and thermal_margin_c and warmup_s of 0 or more (got power_band = [{low}, {high}], thermal_margin_c = {}, warmup_s = {})",
                b.thermal_margin_c, b.warmup_s
            )));
        }
        t.origin = origin.to_string();
        Ok(t)
    }

    /// The built-in thresholds. An error is a defect of this build (a test
    /// parses the file), reported rather than replaced by silent defaults.
    pub fn builtin() -> Result<Thresholds, ConfigError> {
        Thresholds::parse(BUILTIN, "built-in thresholds")
    }

    /// Reads a thresholds file.
    pub fn load(path: &Path) -> Result<Thresholds, ConfigError> {
        Thresholds::parse(&config_file::read(path)?, &path.display().to_string())
    }

    /// The floor for `metric` on `gpu` in its partition mode, if the file
    /// has one.
    pub fn floor(&self, gpu: &Gpu, metric: &str) -> Option<&Floor> {
        let mode = gpu.partition_mode().unwrap_or("SPX");
        self.floors.iter().find(|f| {
            f.metric == metric
                && f.partition.eq_ignore_ascii_case(mode)
                && (Some(f.gpu.as_str()) == gpu.gfx_target.as_deref()
                    || Some(f.gpu.as_str()) == gpu.product.as_deref())
        })
    }

    /// Whether `measured` meets `floor`.
    pub fn meets(&self, floor: &Floor, measured: f64) -> bool {
        measured >= self.least(floor)
    }

    /// The least value that meets `floor`: the figure less its margin.
    pub fn least(&self, floor: &Floor) -> f64 {
        floor.value * (1.0 - floor.margin.unwrap_or(self.margin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_burnin_table_that_cannot_judge_is_refused() {
        let with = |table: &str| {
            Thresholds::parse(
                &BUILTIN.replace("power_band = [0.5, 1.05]", table),
                "mine.toml",
            )
        };
        assert!(with("power_band = [0.5, 1.05]").is_ok());
        for bad in [
            "power_band = [1.05, 0.5]",
            "power_band = [-0.1, 1.0]",
            "power_band = [0.5, nan]",
        ] {
            let e = with(bad).unwrap_err().to_string();
            assert!(
                e.contains("mine.toml") && e.contains("power_band"),
                "{bad}: {e}"
            );
        }
        let e = Thresholds::parse(
            &BUILTIN.replace("clock_floor = 0.5", "clock_floor = 2"),
            "m",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not a share"), "{e}");
    }

    #[test]
    fn builtin_file_parses_and_marks_every_source() {
        let t = Thresholds::parse(BUILTIN, "built-in").unwrap();
        assert!(!t.floors.is_empty());
        assert!(t.floors.iter().all(|f| !f.source.trim().is_empty()));
        let bf16 = t
            .floors
            .iter()
            .find(|f| f.metric == "gemm_tflops.bf16")
            .unwrap();
        assert!(t.meets(bf16, 552.0) && !t.meets(bf16, 551.0));
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let e = Thresholds::parse("schema_version = 1\nmargin = \"lots\"\n", "fleet.toml")
            .unwrap_err()
            .0;
        assert!(e.contains("fleet.toml") && e.contains("line 2"), "{e}");
        let bad = "schema_version = 1\nmargin = 0.05\n[tolerance]\nfp64 = 1e-12\nfp32 = 1e-5\nfp16 = 2e-3\nbf16 = 2e-2\n[[floor]]\ngpu = \"gfx942\"\nmetric = \"tflops\"\nvalue = 1\nsource = \"x\"\n";
        assert!(
            Thresholds::parse(bad, "f")
                .unwrap_err()
                .0
                .contains("known metrics")
        );
    }

    #[test]
    fn a_vram_share_outside_its_range_is_refused_in_few_words() {
        let file =
            |share: &str| BUILTIN.replace("vram_share = 0.1\n", &format!("vram_share = {share}\n"));
        let line = BUILTIN
            .lines()
            .position(|l| l.starts_with("vram_share"))
            .unwrap()
            + 1;
        for ok in ["0.1", "0.9", "1e-6", "0.000002"] {
            assert!(Thresholds::parse(&file(ok), "t.toml").is_ok(), "{ok}");
        }
        for (bad, shown) in [
            ("1e-300", "not 1e-300"),
            ("1e-10", "not 1e-10"),
            ("0", "not 0"),
            ("-0.5", "not -0.5"),
            ("0.95", "not 0.95"),
            ("nan", "not NaN"),
            ("inf", "not inf"),
        ] {
            let e = Thresholds::parse(&file(bad), "t.toml").unwrap_err().0;
            assert!(
                e.contains("t.toml") && e.contains(&format!("line {line}")) && e.contains(shown),
                "{bad}: {e}"
            );
            assert!(e.len() < 400, "{e}");
        }
        assert_eq!(share_text(0.1), "0.1");
        assert_eq!(share_text(2e-6), "2e-6");
    }

    #[test]
    fn tolerances_margins_and_floors_out_of_range_name_their_line() {
        let file = |fp32: &str, margin: &str, value: &str, floor_margin: &str| {
            format!(
                "schema_version = 1\nmargin = {margin}\n[tolerance]\nfp64 = 1e-12\nfp32 = {fp32}\nfp16 = 2e-3\nbf16 = 2e-2\n[[floor]]\ngpu = \"gfx942\"\nmetric = \"h2d_gbps\"\nvalue = {value}\nmargin = {floor_margin}\nsource = \"x\"\n"
            )
        };
        assert!(Thresholds::parse(&file("1e-5", "0.05", "45.0", "0.1"), "f").is_ok());
        for (text, line, what) in [
            (file("nan", "0.05", "45.0", "0.1"), 5, "tolerance"),
            (file("-1", "0.05", "45.0", "0.1"), 5, "tolerance"),
            (file("0", "0.05", "45.0", "0.1"), 5, "tolerance"),
            (file("1.5", "0.05", "45.0", "0.1"), 5, "tolerance"),
            (file("1e-5", "nan", "45.0", "0.1"), 2, "margin"),
            (file("1e-5", "1.0", "45.0", "0.1"), 2, "margin"),
            (file("1e-5", "0.05", "inf", "0.1"), 11, "floor"),
            (file("1e-5", "0.05", "-3", "0.1"), 11, "floor"),
            (file("1e-5", "0.05", "45.0", "-0.1"), 12, "margin"),
        ] {
            let e = Thresholds::parse(&text, "fleet.toml").unwrap_err().0;
            assert!(
                e.contains("fleet.toml") && e.contains(&format!("line {line}")) && e.contains(what),
                "{e}"
            );
        }
    }

    #[test]
    fn compare_tolerances_are_per_family_and_errors_name_their_line() {
        let t = Thresholds::builtin().unwrap();
        assert!(
            t.compare
                .families
                .keys()
                .all(|f| FAMILIES.contains(&f.as_str()))
        );
        assert!(
            t.compare.families.contains_key("gemm_tflops"),
            "{:?}",
            t.compare
        );
        let head = "schema_version = 1\nmargin = 0.05\n[tolerance]\nfp64 = 1e-12\nfp32 = 1e-5\nfp16 = 2e-3\nbf16 = 2e-2\n";
        // Without a [compare] table, 5% for every family.
        let plain = Thresholds::parse(head, "f").unwrap();
        assert_eq!(plain.compare, Compare::default());
        let with = |table: &str| Thresholds::parse(&format!("{head}{table}"), "fleet.toml");
        let t = with("[compare]\ntolerance = 0.1\n[compare.families]\np2p_gbps = 0.2\n").unwrap();
        assert_eq!(t.compare.tolerance, 0.1);
        assert_eq!(t.compare.families.get("p2p_gbps"), Some(&0.2));
        for (table, line, what) in [
            ("[compare]\ntolerance = 1.5\n", 9, "compare tolerance"),
            (
                "[compare]\ntolerance = 0.1\n[compare.families]\np2p_gbps = -1\n",
                11,
                "compare tolerance",
            ),
            (
                "[compare]\ntolerance = 0.1\n[compare.families]\ngemm = 0.1\n",
                10,
                "known families",
            ),
            (
                "[compare]\ntolerance = 0.1\nfamily = 3\n",
                10,
                "unknown field",
            ),
        ] {
            let e = with(table).unwrap_err().0;
            assert!(
                e.contains("fleet.toml") && e.contains(&format!("line {line}")) && e.contains(what),
                "{table}: {e}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_compare_table_parses_or_names_its_error(
            default in "[-0-9.e]{1,6}|\"x\"",
            families in proptest::collection::vec(("[a-z_]{1,22}|gemm_tflops|p2p_gbps", "[-0-9.e]{1,6}|nan|true"), 0..4),
        ) {
            let mut text = format!("schema_version = 1\nmargin = 0.05\n[tolerance]\nfp64 = 1e-12\nfp32 = 1e-5\nfp16 = 2e-3\nbf16 = 2e-2\n[compare]\ntolerance = {default}\n[compare.families]\n");
            for (k, v) in &families {
                text.push_str(&format!("{k} = {v}\n"));
            }
            match Thresholds::parse(&text, "f.toml") {
                Ok(t) => prop_assert!(
                    (0.0..1.0).contains(&t.compare.tolerance)
                        && t.compare.families.iter().all(|(k, v)| FAMILIES.contains(&k.as_str()) && (0.0..1.0).contains(v))
                ),
                Err(e) => prop_assert!(e.0.contains("f.toml"), "{}", e),
            }
        }

        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = Thresholds::parse(&s, "f");
        }
    }
}
