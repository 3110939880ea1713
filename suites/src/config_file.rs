//! The TOML files users hand rocgate (`--thresholds`, `--matrix`): read,
//! parsed and refused by layout version, with errors that name the file
//! (and, from the parser, the line).

use serde::de::DeserializeOwned;
use std::path::Path;

/// A thresholds or matrix file (or the built-in one) that cannot be used:
/// not read, not TOML of its layout, or holding a row rocgate refuses. The
/// message names the file, the line where the parser gives one, and what
/// to change; its own type, so a caller knows the kind without reading the
/// text (rocgate exits 2 on it, as on any usage error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl From<String> for ConfigError {
    fn from(message: String) -> ConfigError {
        ConfigError(message)
    }
}

/// The file at `path` as text; an error names it.
pub fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("failed to read {}: {e}", path.display()))
}

/// `text` parsed as a `T` whose layout version (`schema_version` of the
/// parsed value) must be 1; errors name `origin`.
pub fn parse_v1<T: DeserializeOwned>(
    text: &str,
    origin: &str,
    schema_version: impl Fn(&T) -> u32,
) -> Result<T, String> {
    let parsed: T = toml::from_str(text).map_err(|e| format!("failed to parse {origin}: {e}"))?;
    match schema_version(&parsed) {
        1 => Ok(parsed),
        v => Err(format!(
            "failed to parse {origin}: schema_version {v} is not supported (1 is)"
        )),
    }
}
