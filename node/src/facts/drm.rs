//! DRM devices (`/sys/class/drm`): which card and render node belong to which
//! PCI device.

use crate::Sysroot;
use std::collections::{BTreeMap, BTreeSet};

/// Host path of the DRM class.
pub const DRM_CLASS: &str = "/sys/class/drm";

/// Render nodes and cards found in sysfs.
#[derive(Clone, Debug, Default)]
pub struct DrmNodes {
    /// Render minors present in sysfs (`renderD128` gives 128).
    pub render_minors: BTreeSet<u32>,
    /// Render minor of each device, keyed by the `device` link's target name
    /// (a PCI address, or `amdgpu_xcp.N` for a partition).
    pub render_by_device: BTreeMap<String, u32>,
    /// Card number of each PCI device.
    pub card_by_device: BTreeMap<String, u32>,
}

impl DrmNodes {
    /// The device a render minor belongs to, if sysfs says.
    pub fn device_of_render(&self, minor: u32) -> Option<&str> {
        self.render_by_device
            .iter()
            .find(|(_, m)| **m == minor)
            .map(|(d, _)| d.as_str())
    }
}

/// Reads `/sys/class/drm`; a missing class is an empty set.
pub fn read(root: &Sysroot) -> DrmNodes {
    let mut drm = DrmNodes::default();
    let Ok(entries) = root.list_dir(DRM_CLASS) else {
        return drm;
    };
    for name in entries {
        let device = || {
            root.link_name(&format!("{DRM_CLASS}/{name}/device"))
                .ok()
                .flatten()
        };
        if let Some(minor) = name
            .strip_prefix("renderD")
            .and_then(|m| m.parse::<u32>().ok())
        {
            drm.render_minors.insert(minor);
            if let Some(dev) = device() {
                drm.render_by_device.insert(dev, minor);
            }
        } else if let Some(card) = name
            .strip_prefix("card")
            .and_then(|c| c.parse::<u32>().ok())
        {
            if let Some(dev) = device() {
                drm.card_by_device.insert(dev, card);
            }
        }
    }
    drm
}
