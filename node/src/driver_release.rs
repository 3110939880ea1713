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

/// What is known of the driver release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverRelease {
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

impl DriverRelease {
    /// The release(s) for reports: `6.2.0`, or `30.20.0 or 30.20.1`.
    pub fn describe(&self) -> Option<String> {
        match self {
            DriverRelease::Exact { release, .. } => Some(release.clone()),
            DriverRelease::OneOf { releases, .. } => Some(releases.join(" or ")),
            DriverRelease::Unknown(_) => None,
        }
    }
}

/// The driver release of the node's loaded amdgpu.
pub fn read(facts: &NodeFacts, table: &[DriverRow]) -> DriverRelease {
    let Some(module) = facts.amdgpu.version.clone() else {
        if let Some(e) = &facts.amdgpu.version_error {
            return DriverRelease::Unknown(format!(
                "the amdgpu module's version could not be read: {e}"
            ));
        }
        return DriverRelease::Unknown(match facts.amdgpu.inbox_srcversion() {
            Some(s) => format!(
                "the kernel's own amdgpu (srcversion {s}) is loaded: the matrix lists AMD's driver releases, and an inbox driver is none of them"
            ),
            None => "no amdgpu module is loaded".to_string(),
        });
    };
    if let Some((release, package)) = crate::versions::amdgpu_dkms_release(&facts.sysroot) {
        if package_module(&package).is_none_or(|m| m == module) {
            return DriverRelease::Exact {
                release,
                source: format!("amdgpu-dkms package {package} (dpkg)"),
            };
        }
    }
    if facts.sysroot.is_live() {
        if let Some(package) = rpm_version("amdgpu-dkms") {
            if let Some(release) = crate::versions::driver_release_of(&package) {
                return DriverRelease::Exact {
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
            return DriverRelease::Exact {
                release: release.clone(),
                source: format!(
                    "DKMS build amdgpu/{registered}, the {release} build per the matrix's driver rows"
                ),
            };
        }
    }
    match row {
        Some(r) => DriverRelease::OneOf {
            releases: r.releases.iter().map(|(rel, _)| rel.clone()).collect(),
            source: format!(
                "amdgpu module {module}, which those releases shipped per the matrix's driver rows"
            ),
        },
        None => DriverRelease::Unknown(format!(
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

/// `rpm -q amdgpu-dkms` on the live host, within two seconds; `None` when
/// rpm is absent, slow or knows no such package.
fn rpm_version(package: &str) -> Option<String> {
    use wait_timeout::ChildExt;
    let mut child = std::process::Command::new("rpm")
        .args(["-q", "--qf", "%{VERSION}-%{RELEASE}", package])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let status = match child.wait_timeout(Duration::from_secs(2)) {
        Ok(Some(s)) => s,
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
    };
    if !status.success() {
        return None;
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let out = out.trim().to_string();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
