//! The amdgpu kernel module and the running kernel.

use crate::{ReadError, Sysroot};

/// What `/sys/module/amdgpu` and `/proc/modules` say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmdgpuModule {
    /// Contents of `/sys/module/amdgpu/initstate` (`live`), if present.
    pub initstate: Option<String>,
    /// DKMS build version (`/sys/module/amdgpu/version`); the inbox driver has none.
    pub version: Option<String>,
    /// `srcversion`, present for every module build.
    pub srcversion: Option<String>,
    /// The `/proc/modules` line for amdgpu: `Some(true)` listed, `Some(false)`
    /// not listed, `None` when /proc/modules is unreadable.
    pub in_proc_modules: Option<bool>,
    /// A read error on the module's files, other than absence.
    pub error: Option<ReadError>,
    /// Why `version` could not be read, when it exists but did not read:
    /// then the driver is not known to be the inbox one.
    pub version_error: Option<ReadError>,
}

impl AmdgpuModule {
    /// Whether the module is loaded and finished initialising.
    pub fn is_live(&self) -> bool {
        self.initstate.as_deref() == Some("live")
    }

    /// The srcversion of an inbox driver: one with no DKMS version file. A
    /// version file that exists but could not be read says nothing.
    pub fn inbox_srcversion(&self) -> Option<&str> {
        match (&self.version, &self.version_error) {
            (None, None) => self.srcversion.as_deref(),
            _ => None,
        }
    }
}

/// Reads the amdgpu module's state.
pub fn read_amdgpu(root: &Sysroot) -> AmdgpuModule {
    let (version, version_error) = match root.read_opt("/sys/module/amdgpu/version") {
        Ok(v) => (v.filter(|t| !t.is_empty()), None),
        Err(e) => (None, Some(e)),
    };
    let mut error = version_error.clone();
    let mut opt = |host: &str| match root.read_opt(host) {
        Ok(v) => v.filter(|t| !t.is_empty()),
        Err(e) => {
            error.get_or_insert(e);
            None
        }
    };
    let initstate = opt("/sys/module/amdgpu/initstate");
    let srcversion = opt("/sys/module/amdgpu/srcversion");
    let in_proc_modules = root.read_text("/proc/modules").ok().map(|t| {
        t.lines()
            .any(|l| l.split_whitespace().next() == Some("amdgpu"))
    });
    AmdgpuModule {
        initstate,
        version,
        srcversion,
        in_proc_modules,
        error,
        version_error,
    }
}

/// The running kernel's release (`/proc/sys/kernel/osrelease`).
pub fn kernel_release(root: &Sysroot) -> Result<String, ReadError> {
    let text = root.read_text("/proc/sys/kernel/osrelease")?;
    if text.is_empty() || text.contains(char::is_whitespace) {
        return Err(ReadError::malformed(
            "/proc/sys/kernel/osrelease",
            format!("'{text}' is not a kernel release"),
        ));
    }
    Ok(text)
}
