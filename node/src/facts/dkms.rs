//! Out-of-tree (DKMS) amdgpu builds installed per kernel.

use crate::Sysroot;

/// Where module trees live (merged-/usr systems use the second).
const MODULE_ROOTS: [&str; 2] = ["/lib/modules", "/usr/lib/modules"];
/// Where DKMS (and el7's kmod packaging) install amdgpu within a kernel's tree.
const DKMS_DIRS: [&str; 2] = ["updates/dkms", "extra"];
const MODULE_FILES: [&str; 4] = ["amdgpu.ko", "amdgpu.ko.xz", "amdgpu.ko.zst", "amdgpu.ko.gz"];

/// DKMS amdgpu builds found on disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DkmsAmdgpu {
    /// `(kernel release, host path of the module)` for every kernel that has one.
    pub builds: Vec<(String, String)>,
    /// Versions registered with DKMS (`/var/lib/dkms/amdgpu/<version>`).
    pub registered: Vec<String>,
}

impl DkmsAmdgpu {
    /// The build for `kernel`, if any.
    pub fn build_for(&self, kernel: &str) -> Option<&str> {
        self.builds
            .iter()
            .find(|(k, _)| k == kernel)
            .map(|(_, p)| p.as_str())
    }

    /// Whether any DKMS amdgpu is installed at all.
    pub fn is_installed(&self) -> bool {
        !self.builds.is_empty() || !self.registered.is_empty()
    }
}

/// Scans the module trees and the DKMS tree for amdgpu builds.
pub fn scan(root: &Sysroot) -> DkmsAmdgpu {
    let mut found = DkmsAmdgpu::default();
    for modules in MODULE_ROOTS {
        let Ok(kernels) = root.list_dir(modules) else {
            continue;
        };
        for kernel in kernels {
            if found.builds.iter().any(|(k, _)| *k == kernel) {
                continue;
            }
            let kernel_ref = &kernel;
            let hit = DKMS_DIRS
                .iter()
                .flat_map(|d| {
                    MODULE_FILES
                        .iter()
                        .map(move |f| format!("{modules}/{kernel_ref}/{d}/{f}"))
                })
                .find(|p| root.exists(p));
            if let Some(path) = hit {
                found.builds.push((kernel, path));
            }
        }
    }
    if let Ok(versions) = root.list_dir("/var/lib/dkms/amdgpu") {
        found.registered = versions
            .into_iter()
            .filter(|v| v != "kernel" && !v.starts_with('.'))
            .collect();
    }
    found
}
