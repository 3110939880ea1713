//! The node's GPUs: KFD GPU nodes (a partition counts as one) merged with the
//! AMD GPUs on the PCI bus, so a GPU missing from KFD still has a scope.

use super::drm::DrmNodes;
use super::ids;
use super::kfd::{KfdNode, Topology};
use super::pci::{PciDevice, PciScan};

/// One GPU (or partition) of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// Position in the inventory (`gpu<index>`).
    pub index: u32,
    /// Its KFD node, when KFD has one.
    pub kfd: Option<KfdNode>,
    /// Its PCI address (a partition's comes from KFD's location_id).
    pub pci_address: String,
    /// The physical PCI function: the same address, or function 0 of the
    /// same device for a partition.
    pub pci: Option<PciDevice>,
    /// PCI device id.
    pub device_id: Option<u16>,
    /// Marketing name, when the device id is known.
    pub product: Option<String>,
    /// gfx target (`gfx942`).
    pub gfx_target: Option<String>,
    /// Whether the gfx target came from the device-id table (old kernels).
    pub gfx_from_device_table: bool,
}

impl Gpu {
    /// Its VRAM in bytes: KFD's memory banks, else DRM's
    /// `mem_info_vram_total` (amdgpu_vram_mgr.c,
    /// `amdgpu_mem_info_vram_total_show`) for a GPU KFD does not size; None
    /// when neither says. The one place both inventory and the snapshot's
    /// capture read it, so a replay reads what the node did.
    pub fn vram_bytes(&self, sysroot: &crate::Sysroot) -> Option<u64> {
        self.kfd.as_ref().and_then(KfdNode::vram_bytes).or_else(|| {
            let pci = self.pci.as_ref()?;
            let total = sysroot
                .read_opt(&format!("{}/mem_info_vram_total", pci.sysfs_dir()))
                .ok()
                .flatten()?;
            total.trim().parse().ok()
        })
    }

    /// The address of the physical function (where sysfs keeps firmware and
    /// the driver link).
    pub fn physical_address(&self) -> &str {
        self.pci.as_ref().map_or(&self.pci_address, |p| &p.address)
    }

    /// The gfx major version (9 for gfx942, 11 for gfx1100): KFD's
    /// gfx_target_version / 10000, else read from the target's name.
    pub fn gfx_major(&self) -> Option<u32> {
        if let Some(v) = self.kfd.as_ref().and_then(|k| k.gfx_target_version) {
            if v >= 10_000 {
                return u32::try_from(v / 10_000).ok();
            }
        }
        let digits = self.gfx_target.as_deref()?.strip_prefix("gfx")?;
        // Minor and stepping are one hex digit each; the rest is the major.
        digits.get(..digits.len().checked_sub(2)?)?.parse().ok()
    }

    /// The compute partition mode this KFD node is part of (`SPX` whole
    /// GPU, `DPX`, `TPX`, `QPX`, `CPX`), from the product's XCDs and the
    /// node's `num_xcc`; `None` for GPUs that do not partition.
    pub fn partition_mode(&self) -> Option<&'static str> {
        let xcds = super::ids::xcds(self.device_id?)?;
        let per = self.kfd.as_ref()?.num_xcc.filter(|&n| n > 0)?;
        Some(match (per, xcds / per) {
            (1, n) if n == xcds && xcds > 1 => "CPX",
            (_, 1) => "SPX",
            (_, 2) => "DPX",
            (_, 3) => "TPX",
            (_, 4) => "QPX",
            _ => return None,
        })
    }

    /// Compute units from KFD.
    pub fn compute_units(&self) -> Option<u64> {
        self.kfd.as_ref().and_then(KfdNode::compute_units)
    }

    /// The render minor: KFD's `drm_render_minor` if non-zero, else the DRM
    /// class entry whose device is this GPU.
    pub fn render_minor(&self, drm: &DrmNodes) -> Option<u32> {
        self.kfd
            .as_ref()
            .and_then(|k| k.drm_render_minor)
            .filter(|&m| m > 0)
            .and_then(|m| u32::try_from(m).ok())
            .or_else(|| drm.render_by_device.get(&self.pci_address).copied())
    }

    /// A short label for messages: `gpu3 (0000:05:00.0, AMD Instinct MI300X)`.
    pub fn label(&self) -> String {
        match &self.product {
            Some(p) => format!("gpu{} ({}, {p})", self.index, self.pci_address),
            None => format!("gpu{} ({})", self.index, self.pci_address),
        }
    }
}

/// The function-0 address of the device `address` belongs to.
pub fn function_zero(address: &str) -> Option<String> {
    address.rsplit_once('.').map(|(dev, _)| format!("{dev}.0"))
}

/// Merges KFD GPU nodes and PCI GPUs into the inventory's GPU list.
pub fn enumerate(topology: Option<&Topology>, pci: Option<&PciScan>) -> Vec<Gpu> {
    let mut gpus = Vec::new();
    let empty = PciScan::default();
    let pci = pci.unwrap_or(&empty);
    for node in topology.iter().flat_map(|t| t.gpu_nodes()) {
        let address = node
            .pci_address()
            .unwrap_or_else(|| format!("kfd-node-{}", node.id));
        let physical = pci
            .by_address(&address)
            .or_else(|| function_zero(&address).and_then(|a| pci.by_address(&a)))
            .cloned();
        let device_id = node
            .device_id
            .and_then(|d| u16::try_from(d).ok())
            .filter(|&d| d != 0)
            .or(physical.as_ref().map(|p| p.device_id));
        let known = device_id.and_then(ids::known_device);
        let from_version = node.gfx_target_version.and_then(ids::gfx_target_name);
        gpus.push(Gpu {
            index: 0,
            kfd: Some(node.clone()),
            pci_address: address,
            pci: physical,
            device_id,
            product: known.map(|k| k.product.to_string()),
            gfx_from_device_table: from_version.is_none() && known.is_some(),
            gfx_target: from_version.or(known.map(|k| k.gfx_target.to_string())),
        });
    }
    for dev in &pci.gpus {
        if gpus.iter().any(|g| g.pci_address == dev.address) {
            continue;
        }
        let known = ids::known_device(dev.device_id);
        gpus.push(Gpu {
            index: 0,
            kfd: None,
            pci_address: dev.address.clone(),
            pci: Some(dev.clone()),
            device_id: Some(dev.device_id),
            product: known.map(|k| k.product.to_string()),
            gfx_target: known.map(|k| k.gfx_target.to_string()),
            gfx_from_device_table: known.is_some(),
        });
    }
    for (i, g) in gpus.iter_mut().enumerate() {
        g.index = u32::try_from(i).unwrap_or(u32::MAX);
    }
    gpus
}

/// Resolves a GPU selection: inventory indices (`0,3`, `gpu3`), PCI
/// addresses (`0000:05:00.0`, `05:00.0`; a device's address selects all its
/// partitions) or serials (`0x1d2a3f4000000000`, KFD's unique_id). `None`
/// selects every GPU.
pub fn select(gpus: &[Gpu], selector: Option<&str>) -> Result<Vec<u32>, String> {
    // `0x` and 16 hex digits: a serial, not a BDF (which has colons).
    fn serial(token: &str) -> Option<u64> {
        let hex = token
            .strip_prefix("0x")
            .or_else(|| token.strip_prefix("0X"))?;
        u64::from_str_radix(hex, 16).ok()
    }
    let Some(selector) = selector else {
        return Ok(gpus.iter().map(|g| g.index).collect());
    };
    let mut chosen = Vec::new();
    for token in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let token = token.strip_prefix("gpu").unwrap_or(token);
        let hits: Vec<u32> = if let Ok(i) = token.parse::<u32>() {
            gpus.iter()
                .filter(|g| g.index == i)
                .map(|g| g.index)
                .collect()
        } else if let Some(serial) = serial(token) {
            // A serial (KFD's unique_id, as `rocgate inventory` and
            // amd-smi's ASIC_SERIAL print it) follows the GPU wherever it
            // sits; a partitioned device's serial selects all its partitions.
            gpus.iter()
                .filter(|g| g.kfd.as_ref().and_then(|k| k.unique_id) == Some(serial))
                .map(|g| g.index)
                .collect()
        } else {
            let mut addr = token.to_ascii_lowercase();
            if addr.matches(':').count() == 1 {
                addr.insert_str(0, "0000:");
            }
            gpus.iter()
                .filter(|g| g.pci_address == addr || g.physical_address() == addr)
                .map(|g| g.index)
                .collect()
        };
        if hits.is_empty() {
            let range = match gpus.len() {
                0 => "this node has no GPU".to_string(),
                n => format!("this node has gpu0..gpu{} (see `rocgate inventory`)", n - 1),
            };
            return Err(format!("--gpus: no GPU matches '{token}'; {range}"));
        }
        chosen.extend(hits);
    }
    // An empty selection would check nothing and pass: not what anyone
    // asking for GPUs means.
    if chosen.is_empty() {
        return Err(format!(
            "--gpus {selector:?} selects no GPU: give indices (0,3), PCI addresses (0000:05:00.0) or serials (0x1d2a3f4000000000)"
        ));
    }
    chosen.sort_unstable();
    chosen.dedup();
    Ok(chosen)
}
