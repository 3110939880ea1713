//! Which amdgpu driver release a node runs, read wherever the node keeps it,
//! most exact first:
//! 1. dpkg's record of the amdgpu-dkms package (its version encodes the
//!    release: `1:6.8.5.60200-...` is 6.2.0, `1:6.16.6.30200000-...` 30.20.0);
//! 2. rpm's, on a live RPM host (`rpm -q amdgpu-dkms`, bounded in time);
//! 3. the DKMS tree's build of the loaded module (`/var/lib/dkms/amdgpu/
//!    6.8.5-2009582.24.04`): the build number names one release;
//! 4. the loaded module's version alone (`/sys/module/amdgpu/version`,
//!    visible in containers too): the releases that shipped that module.
//!
//! Steps 3 and 4 use [`DriverRow`]s, the `[[driver]]` rows of the
//! compatibility matrix (module version, releases with their build numbers,
//! source), which the caller passes in.

use crate::Sysroot;
use crate::facts::NodeFacts;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// An amdgpu DKMS module version and the driver releases that shipped it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct DriverRow {
    /// The module version (`/sys/module/amdgpu/version`): `6.8.5`.
    pub module: String,
    /// `(release, build number)` of each release that shipped it:
    /// `["6.2.0", "2009582"]`.
    pub releases: Vec<(String, String)>,
    /// Where the row comes from.
    pub source: String,
}

/// What is known of the driver release: the release resolved from what the
/// node keeps, or the candidates, or why neither.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverResolution {
    /// One release (`6.2.0`, `30.20.1`), and how it was read.
    Exact {
        /// The release.
        release: String,
        /// Where it was read.
        source: String,
    },
    /// One of several releases that shipped the loaded module.
    OneOf {
        /// The candidates.
        releases: Vec<String>,
        /// How they were found.
        source: String,
    },
    /// Not known, and why.
    Unknown(String),
}

impl DriverResolution {
    /// The release(s) for reports: `6.2.0`, or `30.20.0 or 30.20.1`.
    pub fn describe(&self) -> Option<String> {
        match self {
            DriverResolution::Exact { release, .. } => Some(release.clone()),
            DriverResolution::OneOf { releases, .. } => Some(releases.join(" or ")),
            DriverResolution::Unknown(_) => None,
        }
    }
}

/// The driver release of the node's loaded amdgpu.
pub fn read(facts: &NodeFacts, table: &[DriverRow]) -> DriverResolution {
    let Some(module) = facts.amdgpu.version.clone() else {
        if let Some(e) = &facts.amdgpu.version_error {
            return DriverResolution::Unknown(format!(
                "the amdgpu module's version could not be read: {e}"
            ));
        }
        return DriverResolution::Unknown(match facts.amdgpu.inbox_srcversion() {
            Some(s) => format!(
                "the kernel's own amdgpu (srcversion {s}) is loaded: the matrix lists AMD's driver releases, and an inbox driver is none of them"
            ),
            None => "no amdgpu module is loaded".to_string(),
        });
    };
    if let Some((release, package)) = amdgpu_dkms_release(&facts.sysroot) {
        if package_module(&package).is_none_or(|m| m == module) {
            return DriverResolution::Exact {
                release,
                source: format!("amdgpu-dkms package {package} (dpkg)"),
            };
        }
    }
    if facts.sysroot.is_live() {
        if let Some(package) = rpm_version("amdgpu-dkms") {
            if let Some(release) = driver_release_of(&package) {
                return DriverResolution::Exact {
                    release,
                    source: format!("amdgpu-dkms package {package} (rpm)"),
                };
            }
        }
    }
    let row = table.iter().find(|r| r.module == module);
    // The DKMS tree: `6.8.5-2009582.24.04` for the loaded module.
    for registered in &facts.dkms.registered {
        let Some((m, build)) = registered.split_once('-') else {
            continue;
        };
        let build = build.split('.').next().unwrap_or(build);
        if m != module {
            continue;
        }
        if let Some((release, _)) = row.and_then(|r| r.releases.iter().find(|(_, b)| b == build)) {
            return DriverResolution::Exact {
                release: release.clone(),
                source: format!(
                    "DKMS build amdgpu/{registered}, the {release} build per the matrix's driver rows"
                ),
            };
        }
    }
    match row {
        Some(r) => DriverResolution::OneOf {
            releases: r.releases.iter().map(|(rel, _)| rel.clone()).collect(),
            source: format!(
                "amdgpu module {module}, which those releases shipped per the matrix's driver rows"
            ),
        },
        None => DriverResolution::Unknown(format!(
            "amdgpu module {module} is loaded, and no package record, DKMS build or matrix [[driver]] row names its release"
        )),
    }
}

/// The module version a package version carries (`1:6.8.5.60200-...` ->
/// `6.8.5`).
fn package_module(package: &str) -> Option<String> {
    let upstream = package.split_once(':').map_or(package, |(_, v)| v);
    let parts: Vec<&str> = upstream.split('-').next()?.split('.').take(3).collect();
    (parts.len() == 3).then(|| parts.join("."))
}

/// The driver release of the installed amdgpu-dkms package, from dpkg's
/// status: `1:6.8.5.60200-2009582.24.04` is release 6.2.0 (the fourth field
/// encodes it as major, minor and patch in two digits each after the first).
pub fn amdgpu_dkms_release(root: &Sysroot) -> Option<(String, String)> {
    let bytes = root.read_bytes("/var/lib/dpkg/status", 64 << 20).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let stanza = text
        .split("\n\n")
        .find(|s| s.lines().any(|l| l.trim() == "Package: amdgpu-dkms"))?;
    let version = stanza
        .lines()
        .find_map(|l| l.strip_prefix("Version:"))?
        .trim()
        .to_string();
    Some((driver_release_of(&version)?, version))
}

/// The driver release encoded in an amdgpu-dkms package version.
pub fn driver_release_of(package_version: &str) -> Option<String> {
    let upstream = package_version
        .split_once(':')
        .map_or(package_version, |(_, v)| v);
    let upstream = upstream.split('-').next()?;
    let code = upstream.split('.').nth(3)?;
    if code.len() < 5 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // 60200 -> 6.2.0; 30100000 -> 30.10.0 (major takes the digits the
    // minor and patch pairs leave).
    let (major, rest) = if code.len() == 5 {
        code.split_at(1)
    } else {
        code.split_at(2)
    };
    let minor: u32 = rest.get(..2)?.parse().ok()?;
    let patch: u32 = rest.get(2..4)?.parse().ok()?;
    Some(format!("{}.{minor}.{patch}", major.parse::<u32>().ok()?))
}

/// How long `rpm -q` may take: it reads a local database, so anything
/// slower is a wedged or locked database, not worth a run's time.
const RPM_DEADLINE: Duration = Duration::from_secs(2);

/// `rpm -q amdgpu-dkms` on the live host, within [`RPM_DEADLINE`]; `None`
/// when rpm is absent, slow or knows no such package (the other records are
/// then read instead, so the reason is not kept).
fn rpm_version(package: &str) -> Option<String> {
    let mut rpm = std::process::Command::new("rpm");
    rpm.args(["-q", "--qf", "%{VERSION}-%{RELEASE}", package]);
    let done = crate::subprocess::run(&mut rpm, RPM_DEADLINE, 4096).ok()?;
    if !done.status.success() {
        return None;
    }
    let out = done.stdout_text().trim().to_string();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_versions_encode_their_release() {
        // 60200 is 6.2.0, 30100000 is 30.10.0; a bare module version
        // encodes none.
        for (package, release) in [
            ("1:6.8.5.60200-2009582.24.04", Some("6.2.0")),
            ("1:6.12.12.60401-2164967.24.04", Some("6.4.1")),
            ("1:6.14.14.30100000-2193512.24.04", Some("30.10.0")),
            ("6.16.6", None),
        ] {
            assert_eq!(driver_release_of(package).as_deref(), release, "{package}");
        }
    }

    proptest::proptest! {
        #[test]
        fn package_versions_never_panic(s in "\\PC{0,200}") {
            let _ = driver_release_of(&s);
            let _ = package_module(&s);
        }
    }

    #[test]
    fn package_versions_carry_their_module() {
        for (package, module) in [
            ("1:6.8.5.60200-2009582.24.04", Some("6.8.5")),
            ("6.16.6.30200000-2238411.el9", Some("6.16.6")),
            ("garbage", None),
        ] {
            assert_eq!(package_module(package).as_deref(), module, "{package}");
        }
    }
}
