//! The KFD topology under `/sys/class/kfd/kfd/topology`.

use super::properties::Properties;
use crate::{ReadError, Sysroot};
use std::path::Path;

/// Host path of the topology.
pub const TOPOLOGY: &str = "/sys/class/kfd/kfd/topology";

/// io_link `type` of an XGMI link.
pub const LINK_TYPE_XGMI: u64 = 11;
/// io_link `type` of a PCIe link.
pub const LINK_TYPE_PCIE: u64 = 2;

/// The parsed topology; nodes that could not be read are kept as errors so
/// one damaged node does not hide the others.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    /// `generation_id`, when readable.
    pub generation_id: Option<u64>,
    /// Nodes in numeric order.
    pub nodes: Vec<KfdNode>,
    /// Nodes (or their parts) that could not be read, naming the file.
    pub errors: Vec<ReadError>,
}

impl Topology {
    /// The GPU nodes (`simd_count` > 0), in node order.
    pub fn gpu_nodes(&self) -> impl Iterator<Item = &KfdNode> {
        self.nodes.iter().filter(|n| n.is_gpu())
    }
}

/// A link from one KFD node to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoLink {
    /// 2 PCIe, 11 XGMI, 1 HyperTransport, 5 QPI.
    pub link_type: u64,
    /// Source node.
    pub node_from: u64,
    /// Destination node.
    pub node_to: u64,
    /// 0x1 enabled, 0x10 no peer-to-peer DMA.
    pub flags: u64,
    /// MB/s.
    pub max_bandwidth: Option<u64>,
}

/// One KFD node (a CPU, a GPU or a GPU partition).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KfdNode {
    /// The node's directory number.
    pub id: u32,
    /// `gpu_id` (0 for CPU nodes), when present.
    pub gpu_id: Option<u64>,
    /// `name`, when present.
    pub name: Option<String>,
    /// SIMDs; 0 on CPU nodes.
    pub simd_count: u64,
    /// SIMDs per compute unit.
    pub simd_per_cu: Option<u64>,
    /// major*10000 + minor*100 + stepping; absent on old kernels.
    pub gfx_target_version: Option<u64>,
    /// PCI vendor id (4098 = 0x1002).
    pub vendor_id: Option<u64>,
    /// PCI device id.
    pub device_id: Option<u64>,
    /// `bus << 8 | dev << 3 | fn`.
    pub location_id: Option<u64>,
    /// PCI domain; absent on old kernels (then 0).
    pub domain: Option<u64>,
    /// Minor of `/dev/dri/renderD<minor>`.
    pub drm_render_minor: Option<u64>,
    /// XGMI hive (0 = none).
    pub hive_id: Option<u64>,
    /// Device serial, shared by the partitions of one GPU.
    pub unique_id: Option<u64>,
    /// Accelerator complexes (XCCs) in this node.
    pub num_xcc: Option<u64>,
    /// MEC firmware version.
    pub fw_version: Option<u64>,
    /// SDMA firmware version.
    pub sdma_fw_version: Option<u64>,
    /// Wavefront size.
    pub wave_front_size: Option<u64>,
    /// Memory banks: `(heap_type, size_in_bytes)`.
    pub mem_banks: Vec<(u64, u64)>,
    /// `io_links`.
    pub io_links: Vec<IoLink>,
}

impl KfdNode {
    /// Whether this node is a GPU (or GPU partition).
    pub fn is_gpu(&self) -> bool {
        self.simd_count > 0
    }

    /// Compute units (`simd_count / simd_per_cu`), when both are known.
    pub fn compute_units(&self) -> Option<u64> {
        match self.simd_per_cu {
            Some(per) if per > 0 => Some(self.simd_count / per),
            _ => None,
        }
    }

    /// `dddd:bb:dd.f` from `domain` and `location_id`.
    pub fn pci_address(&self) -> Option<String> {
        let loc = self.location_id?;
        Some(format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain.unwrap_or(0),
            (loc >> 8) & 0xff,
            (loc >> 3) & 0x1f,
            loc & 0x7
        ))
    }

    /// VRAM from the public and private heaps (`heap_type` 1 and 2).
    pub fn vram_bytes(&self) -> Option<u64> {
        let sum: u64 = self
            .mem_banks
            .iter()
            .filter(|(t, _)| *t == 1 || *t == 2)
            .map(|(_, s)| *s)
            .sum();
        (sum > 0).then_some(sum)
    }
}

/// Reads the topology. `Err` when the topology directory itself is missing
/// or unreadable; damaged nodes are collected in [`Topology::errors`].
pub fn read(root: &Sysroot) -> Result<Topology, ReadError> {
    let node_names = root.list_dir(&format!("{TOPOLOGY}/nodes"))?;
    let mut topo = Topology {
        generation_id: match root.read_opt(&format!("{TOPOLOGY}/generation_id")) {
            Ok(Some(t)) => t.parse().ok(),
            _ => None,
        },
        ..Topology::default()
    };
    for name in node_names {
        let Ok(id) = name.parse::<u32>() else {
            continue;
        };
        match read_node(root, id) {
            Ok(node) => topo.nodes.push(node),
            Err(e) => topo.errors.push(e),
        }
    }
    Ok(topo)
}

fn read_node(root: &Sysroot, id: u32) -> Result<KfdNode, ReadError> {
    let dir = format!("{TOPOLOGY}/nodes/{id}");
    let props_path = format!("{dir}/properties");
    let path = Path::new(&props_path);
    let props = Properties::parse(&root.read_text(&props_path)?, path)?;
    // Every KFD node prints these (kfd_topology.c node_show, from the first
    // KFD kernels on); without them the file is empty, truncated or NUL
    // bytes, and must not pass for a node with no compute units.
    if let Some(missing) = ["cpu_cores_count", "simd_count"]
        .into_iter()
        .find(|k| props.text(k).is_none())
    {
        return Err(ReadError::malformed(
            path,
            format!("no {missing} (the file is empty, truncated or NUL bytes)"),
        ));
    }
    // kfd_topology.c `node_show` prints every key here with "%u" from a
    // 32-bit field (`sysfs_show_32bit_prop`) but hive_id and unique_id
    // ("%llu", `sysfs_show_64bit_prop`): a value past its type is not what
    // the kernel wrote.
    let num = |key: &str| props.number32(key, path);
    let num64 = |key: &str| props.number(key, path);
    let mut node = KfdNode {
        id,
        gpu_id: root
            .read_opt(&format!("{dir}/gpu_id"))?
            .and_then(|t| t.parse().ok()),
        name: root
            .read_opt(&format!("{dir}/name"))?
            .filter(|n| !n.is_empty()),
        simd_count: num("simd_count")?.unwrap_or(0),
        simd_per_cu: num("simd_per_cu")?,
        gfx_target_version: num("gfx_target_version")?,
        vendor_id: num("vendor_id")?,
        device_id: num("device_id")?,
        location_id: num("location_id")?,
        domain: num("domain")?,
        drm_render_minor: num("drm_render_minor")?,
        hive_id: num64("hive_id")?,
        unique_id: num64("unique_id")?,
        num_xcc: num("num_xcc")?,
        fw_version: num("fw_version")?,
        sdma_fw_version: num("sdma_fw_version")?,
        wave_front_size: num("wave_front_size")?,
        ..KfdNode::default()
    };
    // A GPU's render minor names /dev/dri/renderD<minor>, a device minor
    // of MINORBITS = 20 bits (include/linux/kdev_t.h; drm_drv.c allocates
    // render minors below it).
    if let Some(minor) = node
        .drm_render_minor
        .filter(|m| node.is_gpu() && *m >= 1 << 20)
    {
        return Err(ReadError::malformed(
            path,
            format!(
                "drm_render_minor is {minor}, past the 20-bit device minors the kernel allocates"
            ),
        ));
    }
    for bank in list_sub(root, &format!("{dir}/mem_banks"))? {
        let p = format!("{dir}/mem_banks/{bank}/properties");
        let path = Path::new(&p);
        let props = Properties::parse(&root.read_text(&p)?, path)?;
        // mem_show: heap_type "%u" (32-bit), size_in_bytes "%llu".
        node.mem_banks.push((
            props.number32("heap_type", path)?.unwrap_or(0),
            props.number("size_in_bytes", path)?.unwrap_or(0),
        ));
    }
    for link in list_sub(root, &format!("{dir}/io_links"))? {
        let p = format!("{dir}/io_links/{link}/properties");
        let path = Path::new(&p);
        let props = Properties::parse(&root.read_text(&p)?, path)?;
        // iolink_show prints every key with "%u" (32-bit).
        node.io_links.push(IoLink {
            link_type: props.number32("type", path)?.unwrap_or(0),
            node_from: props.number32("node_from", path)?.unwrap_or(u64::from(id)),
            node_to: props.number32("node_to", path)?.unwrap_or(u64::MAX),
            flags: props.number32("flags", path)?.unwrap_or(0),
            max_bandwidth: props.number32("max_bandwidth", path)?,
        });
    }
    Ok(node)
}

/// Numbered subdirectories of `dir`; a missing directory is empty.
fn list_sub(root: &Sysroot, dir: &str) -> Result<Vec<String>, ReadError> {
    let names = root.list_dir_if_present(dir)?.unwrap_or_default();
    Ok(names
        .into_iter()
        .filter(|n| n.parse::<u32>().is_ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A one-GPU topology whose GPU node has `key value` among its
    /// properties.
    fn topology_with(key: &str, value: &str) -> Result<Topology, ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/class/kfd/kfd/topology/nodes/1");
        std::fs::create_dir_all(&node).unwrap();
        let mut props = String::from(
            "cpu_cores_count 0\nsimd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\ndomain 0\ndrm_render_minor 128\n",
        );
        props = props
            .lines()
            .filter(|l| !l.starts_with(&format!("{key} ")))
            .map(|l| format!("{l}\n"))
            .collect();
        props.push_str(&format!("{key} {value}\n"));
        std::fs::write(node.join("properties"), props).unwrap();
        read(&Sysroot::at(dir.path()))
    }

    #[test]
    fn values_past_what_the_kernel_prints_are_damage() {
        for (key, value) in [
            ("simd_count", u64::MAX.to_string()),
            ("drm_render_minor", (1u64 << 32).to_string()),
            ("drm_render_minor", (1u64 << 20).to_string()),
            ("domain", (1u64 << 32).to_string()),
            ("gfx_target_version", "99999999999".to_string()),
        ] {
            let t = topology_with(key, &value).unwrap();
            assert!(t.nodes.is_empty(), "{key} {value}");
            assert!(t.errors[0].to_string().contains(key), "{}", t.errors[0]);
        }
        // At the limits the kernel can print, they read.
        let t = topology_with("domain", &u32::MAX.to_string()).unwrap();
        assert_eq!(t.nodes[0].domain, Some(u64::from(u32::MAX)));
        let t = topology_with("hive_id", &u64::MAX.to_string()).unwrap();
        assert_eq!(t.nodes[0].hive_id, Some(u64::MAX));
    }

    proptest! {
        #[test]
        fn no_value_panics_the_reader(key in "(simd_count|domain|drm_render_minor|gfx_target_version|location_id|hive_id)", value in "[0-9]{1,22}|\\PC{0,8}") {
            let _ = topology_with(&key, &value);
        }
    }

    #[test]
    fn pci_address_from_domain_and_location() {
        let n = KfdNode {
            location_id: Some(25344),
            domain: Some(0),
            ..KfdNode::default()
        };
        assert_eq!(n.pci_address().as_deref(), Some("0000:63:00.0"));
        let p = KfdNode {
            location_id: Some(0x0503),
            domain: Some(2),
            ..KfdNode::default()
        };
        assert_eq!(p.pci_address().as_deref(), Some("0002:05:00.3"));
        let cu = KfdNode {
            simd_count: 1216,
            simd_per_cu: Some(4),
            ..KfdNode::default()
        };
        assert_eq!(cu.compute_units(), Some(304));
    }
}
