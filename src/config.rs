//! A site's policy in one file: `--config FILE`, else `ROCGATE_CONFIG`,
//! else `/etc/rocgate/rocgate.toml` when it exists. It holds what flags
//! hold (tier, expected GPUs, thresholds, matrix, timeouts, `fail_on`,
//! `strict`, the checks selected) and the site's waivers. A flag given on
//! the command line wins over the file; the file wins over the defaults.
//! Errors name the file and the line.

use chrono::NaiveDate;
use rocgate_harness::{Check, CheckPattern, Scope, Selection, Tier, Waiver, WaiverNote, Waivers};
use rocgate_node::facts::gpus::Gpu;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// Where the file is looked for when neither `--config` nor
/// `ROCGATE_CONFIG` names one.
pub const DEFAULT_PATH: &str = "/etc/rocgate/rocgate.toml";

/// What makes a run fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    /// Failures, timeouts and crashes (the default): warnings pass.
    #[default]
    Fail,
    /// Warnings too.
    Warn,
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    schema_version: Option<u32>,
    tier: Option<Spanned<String>>,
    expect_gpus: Option<usize>,
    thresholds: Option<PathBuf>,
    matrix: Option<PathBuf>,
    fail_on: Option<FailOn>,
    strict: Option<bool>,
    timeout_scale: Option<f64>,
    #[serde(default)]
    timeouts: BTreeMap<String, Spanned<f64>>,
    #[serde(default)]
    only: Vec<Spanned<String>>,
    #[serde(default)]
    skip: Vec<Spanned<String>>,
    #[serde(default)]
    health: HealthFile,
    #[serde(default)]
    waive: Vec<Spanned<WaiveEntry>>,
    #[serde(default)]
    fleet: FleetFile,
}

/// `[fleet]`: how `rocgate fleet` judges drift and outliers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    #[serde(default)]
    mixed: Vec<String>,
    outlier_mads: Option<f64>,
    outlier_shortfall: Option<f64>,
}

/// `[health]`: what `rocgate health` does differently.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthFile {
    tier: Option<Spanned<String>>,
    budget: Option<f64>,
    check_timeout: Option<f64>,
}

/// One `[[waive]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaiveEntry {
    code: Option<Spanned<String>>,
    check: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    gpu: Option<Spanned<GpuNames>>,
    reason: Option<String>,
    expires: Option<Spanned<DateText>>,
}

/// One GPU or several: `gpu = "gpu3"`, `gpu = ["0000:65:00.0", "gpu4"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum GpuNames {
    One(String),
    Many(Vec<String>),
}

/// A date as TOML writes one (`2027-01-01`) or as a string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DateText {
    Date(toml::value::Datetime),
    Text(String),
}

/// A loaded policy file.
#[derive(Debug, Default)]
pub struct Config {
    /// Where it was read from (empty: no file).
    pub path: String,
    text: String,
    file: File,
}

/// The file `--config` names, else `ROCGATE_CONFIG` (empty: none), else
/// [`DEFAULT_PATH`] when it exists.
pub fn locate(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    match std::env::var_os("ROCGATE_CONFIG") {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(PathBuf::from(DEFAULT_PATH)).filter(|p| p.exists()),
    }
}

impl Config {
    /// The policy at [`locate`]'s path, or none.
    pub fn find(flag: Option<&Path>) -> Result<Config, String> {
        match locate(flag) {
            Some(p) => Config::load(&p),
            None => Ok(Config::default()),
        }
    }

    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "failed to read the rocgate config {}: {e} (--config, ROCGATE_CONFIG or {DEFAULT_PATH})",
                path.display()
            )
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// `text` as the config file `origin`.
    pub fn parse(text: &str, origin: &str) -> Result<Config, String> {
        let file: File =
            toml::from_str(text).map_err(|e| format!("failed to parse {origin}: {e}"))?;
        let config = Config {
            path: origin.to_string(),
            text: text.to_string(),
            file,
        };
        if let Some(v) = config.file.schema_version.filter(|&v| v != 1) {
            return Err(format!(
                "{origin}: schema_version {v} is not supported (1 is)"
            ));
        }
        for (tier, _) in [config.file.tier.as_ref(), config.file.health.tier.as_ref()]
            .into_iter()
            .flatten()
            .map(|t| (t, ()))
        {
            config.tier_of(tier)?;
        }
        if let Some(s) = config
            .file
            .timeout_scale
            .filter(|s| !(0.01..=1000.0).contains(s))
        {
            return Err(format!(
                "{origin}: timeout_scale {s} is out of range: use a factor from 0.01 to 1000"
            ));
        }
        if let Some(k) = config
            .file
            .fleet
            .outlier_mads
            .filter(|k| !(k.is_finite() && *k > 0.0))
        {
            return Err(format!(
                "{origin}: fleet.outlier_mads {k} is not a positive number: give e.g. 4"
            ));
        }
        if let Some(s) = config
            .file
            .fleet
            .outlier_shortfall
            .filter(|s| !(0.0..1.0).contains(s))
        {
            return Err(format!(
                "{origin}: fleet.outlier_shortfall {s} is not a share from 0 to below 1: give e.g. 0.05"
            ));
        }
        for (which, v) in [
            ("health.budget", config.file.health.budget),
            ("health.check_timeout", config.file.health.check_timeout),
        ] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && (1.0..=86_400.0).contains(v))) {
                return Err(format!(
                    "{origin}: {which} {v} is out of range: use 1 to 86400 seconds"
                ));
            }
        }
        for w in &config.file.waive {
            let e = w.get_ref();
            if e.code.is_none() && e.check.is_none() {
                return Err(config.at(
                    w.span(),
                    "a [[waive]] names no `code` and no `check`: say which findings it accepts",
                ));
            }
            if e.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                return Err(config.at(
                    w.span(),
                    "a [[waive]] has no `reason`: say why the site accepts it",
                ));
            }
            if let Some(d) = &e.expires {
                config.date(d)?;
            }
        }
        Ok(config)
    }

    /// `what`, prefixed with the file and the line `span` starts on.
    fn at(&self, span: std::ops::Range<usize>, what: &str) -> String {
        let line = self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1;
        format!("{}:{line}: {what}", self.path)
    }

    fn tier_of(&self, t: &Spanned<String>) -> Result<Tier, String> {
        t.get_ref()
            .parse::<Tier>()
            .map_err(|e| self.at(t.span(), &e))
    }

    fn date(&self, d: &Spanned<DateText>) -> Result<NaiveDate, String> {
        let text = match d.get_ref() {
            DateText::Date(dt) => dt.to_string(),
            DateText::Text(s) => s.clone(),
        };
        NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").map_err(|_| {
            self.at(
                d.span(),
                &format!("expires = {text:?} is not a date: write it as 2027-01-31"),
            )
        })
    }

    /// Whether a file was read.
    pub fn is_present(&self) -> bool {
        !self.path.is_empty()
    }

    /// The tier for `run`, `doctor` and `list`.
    pub fn tier(&self) -> Option<Tier> {
        self.file.tier.as_ref().and_then(|t| self.tier_of(t).ok())
    }

    /// The tier for `health`: `[health] tier`, else `tier`.
    pub fn health_tier(&self) -> Option<Tier> {
        self.file
            .health
            .tier
            .as_ref()
            .and_then(|t| self.tier_of(t).ok())
            .or_else(|| self.tier())
    }

    /// `[health] budget`.
    pub fn health_budget(&self) -> Option<f64> {
        self.file.health.budget
    }

    /// `[health] check_timeout`.
    pub fn health_check_timeout(&self) -> Option<f64> {
        self.file.health.check_timeout
    }

    /// `expect_gpus`.
    pub fn expect_gpus(&self) -> Option<usize> {
        self.file.expect_gpus
    }

    /// `fail_on`.
    pub fn fail_on(&self) -> Option<FailOn> {
        self.file.fail_on
    }

    /// `strict`.
    pub fn strict(&self) -> Option<bool> {
        self.file.strict
    }

    /// `timeout_scale`.
    pub fn timeout_scale(&self) -> Option<f64> {
        self.file.timeout_scale
    }

    /// `[fleet] mixed`: the components the site expects mixed.
    pub fn fleet_mixed(&self) -> &[String] {
        &self.file.fleet.mixed
    }

    /// `[fleet] outlier_mads` and `outlier_shortfall`.
    pub fn fleet_outliers(&self) -> (Option<f64>, Option<f64>) {
        (
            self.file.fleet.outlier_mads,
            self.file.fleet.outlier_shortfall,
        )
    }

    /// `thresholds`, relative to the file's directory.
    pub fn thresholds(&self) -> Option<PathBuf> {
        self.file.thresholds.as_deref().map(|p| self.beside(p))
    }

    /// `matrix`, relative to the file's directory.
    pub fn matrix(&self) -> Option<PathBuf> {
        self.file.matrix.as_deref().map(|p| self.beside(p))
    }

    fn beside(&self, p: &Path) -> PathBuf {
        match Path::new(&self.path).parent() {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// `[timeouts]` as `--timeout CHECK=SECONDS` entries (a flag for the
    /// same check wins, being later).
    pub fn timeout_entries(&self) -> Vec<String> {
        self.file
            .timeouts
            .iter()
            .map(|(k, v)| format!("{k}={}", v.get_ref()))
            .collect()
    }

    /// The checks the run covers: `--only`/`--skip` when given (each list
    /// replaces the file's), else the file's `only`/`skip`.
    pub fn selection<C>(
        &self,
        only: &[String],
        skip: &[String],
        registry: &[Check<C>],
    ) -> Result<Selection, String> {
        // One list: the flag's when given (it replaces the file's), else the
        // file's; with where it came from, for the skip message.
        let list = |flag: &str, given: &[String], written: &[Spanned<String>]| {
            let parsed: Result<Vec<CheckPattern>, String> = if given.is_empty() {
                written
                    .iter()
                    .map(|s| {
                        CheckPattern::parse(s.get_ref(), registry)
                            .map_err(|e| self.at(s.span(), &e))
                    })
                    .collect()
            } else {
                given
                    .iter()
                    .flat_map(|s| s.split(','))
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| CheckPattern::parse(s, registry).map_err(|e| format!("{flag} {e}")))
                    .collect()
            };
            let origin = if given.is_empty() {
                format!("the config's `{}` in {}", &flag[2..], self.path)
            } else {
                flag.to_string()
            };
            parsed.map(|p| (p, origin))
        };
        let (only, only_origin) = list("--only", only, &self.file.only)?;
        let (skip, skip_origin) = list("--skip", skip, &self.file.skip)?;
        let origin = match (only.is_empty(), skip.is_empty()) {
            (false, true) => only_origin,
            (true, false) => skip_origin,
            (false, false) => format!("{only_origin} and {skip_origin}"),
            (true, true) => String::new(),
        };
        Ok(Selection { only, skip, origin })
    }

    /// The waivers that apply to the node `node_name` with `gpus`, as of
    /// `today`: those whose `node` glob does not match are left out; an
    /// expired one is kept, marked, so reports say it no longer applies.
    pub fn waivers<C>(
        &self,
        registry: &[Check<C>],
        node_name: &str,
        gpus: &[Gpu],
        today: NaiveDate,
    ) -> Result<Waivers, String> {
        let mut out = Vec::new();
        for w in &self.file.waive {
            let e = w.get_ref();
            let line = self.at(w.span(), "").trim_end_matches(": ").to_string();
            if let Some(glob) = &e.node {
                let m = globset::Glob::new(glob.get_ref())
                    .map_err(|x| {
                        self.at(glob.span(), &format!("node = {:?}: {x}", glob.get_ref()))
                    })?
                    .compile_matcher();
                if !m.is_match(node_name) {
                    continue;
                }
            }
            let checks = e
                .check
                .as_ref()
                .map(|c| {
                    CheckPattern::parse(c.get_ref(), registry)
                        .map_err(|x| self.at(c.span(), &format!("check = {x}")))
                })
                .transpose()?;
            if let Some(code) = &e.code {
                if rocgate_suites::findings::lookup(code.get_ref()).is_none() {
                    return Err(self.at(
                        code.span(),
                        &format!(
                            "code = {:?} is not a finding code; `rocgate codes` lists them",
                            code.get_ref()
                        ),
                    ));
                }
            }
            let scopes = e.gpu.as_ref().map(|g| self.scopes(g, gpus)).transpose()?;
            let expires = e.expires.as_ref().map(|d| self.date(d)).transpose()?;
            out.push(Waiver {
                code: e.code.as_ref().map(|c| c.get_ref().clone()),
                checks,
                scopes,
                note: WaiverNote {
                    reason: e.reason.clone().unwrap_or_default(),
                    expires: expires.map(|d| d.format("%Y-%m-%d").to_string()),
                    expired: expires.is_some_and(|d| today >= d),
                    source: line,
                },
            });
        }
        Ok(Waivers(out))
    }

    /// The GPU scopes `names` speak of: `gpuN`, or a PCI address (every
    /// partition of that device). A name that matches no GPU of this node
    /// waives nothing here, which is not an error (one file serves many
    /// nodes); a name that is neither is.
    fn scopes(&self, names: &Spanned<GpuNames>, gpus: &[Gpu]) -> Result<Vec<Scope>, String> {
        let list = match names.get_ref() {
            GpuNames::One(s) => vec![s.clone()],
            GpuNames::Many(v) => v.clone(),
        };
        let mut out = Vec::new();
        for name in list {
            let name = name.trim();
            if let Some(i) = name.strip_prefix("gpu").and_then(|n| n.parse::<u32>().ok()) {
                out.push(Scope::Gpu(i));
                continue;
            }
            if !name.contains(':') {
                return Err(self.at(
                    names.span(),
                    &format!(
                        "gpu = {name:?} is neither gpuN nor a PCI address such as 0000:65:00.0"
                    ),
                ));
            }
            let wanted = name.to_ascii_lowercase();
            out.extend(
                gpus.iter()
                    .filter(|g| {
                        let a = g.pci_address.to_ascii_lowercase();
                        a == wanted || a.ends_with(&format!(":{wanted}")) || a.starts_with(&wanted)
                    })
                    .map(|g| Scope::Gpu(g.index)),
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Vec<Check<rocgate_suites::NodeContext>> {
        rocgate_suites::registry()
    }

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 6, 1).unwrap()
    }

    #[test]
    fn a_full_file_reads_and_resolves() {
        let c = Config::parse(
            r#"
tier = "standard"
expect_gpus = 8
fail_on = "warn"
strict = true
thresholds = "floors.toml"
skip = ["system::cpu_governor"]

[timeouts]
"rccl::allreduce" = 600

[health]
tier = "passive"
budget = 40

[[waive]]
code = "numa-balancing-enabled"
reason = "the scheduler pins memory itself"
expires = 2027-01-01

[[waive]]
check = "system::*"
node = "gpu-b*"
reason = "rack B is being retuned"
expires = "2026-01-01"
"#,
            "/etc/rocgate/rocgate.toml",
        )
        .unwrap();
        assert_eq!(c.tier(), Some(Tier::Standard));
        assert_eq!(c.health_tier(), Some(Tier::Passive));
        assert_eq!(c.health_budget(), Some(40.0));
        assert_eq!(c.fail_on(), Some(FailOn::Warn));
        assert_eq!(
            c.thresholds(),
            Some(PathBuf::from("/etc/rocgate/floors.toml"))
        );
        assert_eq!(c.timeout_entries(), ["rccl::allreduce=600"]);
        let reg = registry();
        let sel = c.selection(&[], &[], &reg).unwrap();
        assert_eq!(sel.skip.len(), 1);
        assert!(
            sel.origin.contains("/etc/rocgate/rocgate.toml"),
            "{}",
            sel.origin
        );
        // A flag list replaces the file's.
        let sel = c.selection(&["rccl".into()], &[], &reg).unwrap();
        assert_eq!(sel.only.len(), 1);
        // The second waiver applies only to gpu-b nodes, and has expired.
        let w = c.waivers(&reg, "gpu-a01", &[], today()).unwrap();
        assert_eq!(w.0.len(), 1);
        assert!(!w.0[0].note.expired);
        assert_eq!(w.0[0].note.source, "/etc/rocgate/rocgate.toml:16");
        let w = c.waivers(&reg, "gpu-b07", &[], today()).unwrap();
        assert_eq!(w.0.len(), 2);
        assert!(w.0[1].note.expired);
        assert_eq!(w.0[1].note.expires.as_deref(), Some("2026-01-01"));
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let cases = [
            ("tier = \"deep\"\n", "f.toml:1: unknown tier 'deep'"),
            (
                "[[waive]]\ncode = \"x\"\n",
                "f.toml:1: a [[waive]] has no `reason`",
            ),
            (
                "\n[[waive]]\nreason = \"r\"\n",
                "f.toml:2: a [[waive]] names no `code`",
            ),
            (
                "[[waive]]\ncode = \"thp-disabled\"\nreason = \"r\"\nexpires = \"soon\"\n",
                "f.toml:4: expires = \"soon\" is not a date",
            ),
            ("colour = 1\n", "failed to parse f.toml"),
            ("tier = [\n", "failed to parse f.toml"),
            ("schema_version = 2\n", "schema_version 2 is not supported"),
            ("timeout_scale = 0\n", "timeout_scale 0 is out of range"),
        ];
        for (text, want) in cases {
            let e = Config::parse(text, "f.toml").unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let reg = registry();
        let bad_code =
            Config::parse("[[waive]]\ncode = \"no-such\"\nreason = \"r\"\n", "f.toml").unwrap();
        let e = bad_code.waivers(&reg, "n", &[], today()).unwrap_err();
        assert!(e.starts_with("f.toml:2: code = \"no-such\""), "{e}");
        let bad_check = Config::parse("skip = [\"hip::memtset\"]\n", "f.toml").unwrap();
        let e = bad_check.selection(&[], &[], &reg).unwrap_err();
        assert!(
            e.starts_with("f.toml:1: 'hip::memtset' matches no check"),
            "{e}"
        );
        let e = Config::default()
            .selection(&["nope".into()], &[], &reg)
            .unwrap_err();
        assert!(e.starts_with("--only 'nope' is neither a layer"), "{e}");
    }

    #[test]
    fn any_text_is_an_error_or_a_config_never_a_panic() {
        for text in [
            "",
            "\u{0}",
            "[[waive]]\n[[waive]]",
            "waive = 3",
            "tier = 1",
            "only = \"x\"",
        ] {
            let _ = Config::parse(text, "f");
        }
    }
}
