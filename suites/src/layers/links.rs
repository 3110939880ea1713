//! The links between the node's GPU devices as KFD describes them (XGMI,
//! PCIe, whether peer-to-peer DMA is allowed), shared by the interconnect
//! check and the peer-to-peer bandwidth matrix. A device is a PCI device:
//! an MI300X in CPX mode is one device of eight partitions, and its links
//! are listed on its first partition's KFD node.

use rocgate_node::facts::gpus::{Gpu, function_zero};
use rocgate_node::facts::kfd::{LINK_TYPE_PCIE, LINK_TYPE_XGMI};
use std::collections::{BTreeMap, BTreeSet};

/// KFD io_link flag: the link is enabled (kfd_crat.h CRAT_IOLINK_FLAGS_ENABLED).
const FLAG_ENABLED: u64 = 0x1;
/// KFD io_link flag: no peer-to-peer DMA over it (kfd_crat.h
/// CRAT_IOLINK_FLAGS_NO_PEER_TO_PEER_DMA).
const FLAG_NO_P2P_DMA: u64 = 0x10;

/// How two devices are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LinkKind {
    /// An enabled XGMI link.
    Xgmi,
    /// A PCIe link KFD lists between them.
    Pcie,
    /// Nothing direct: through the host.
    Host,
}

impl LinkKind {
    /// As the topology table and reports print it.
    pub fn label(self) -> &'static str {
        match self {
            LinkKind::Xgmi => "XGMI",
            LinkKind::Pcie => "PCIe",
            LinkKind::Host => "host",
        }
    }
}

/// The node's GPU devices and the links between them.
pub(super) struct Links<'a> {
    /// Each device's PCI address (function 0) and its GPUs (partitions), in
    /// address order.
    pub devices: Vec<(String, Vec<&'a Gpu>)>,
    xgmi: Vec<Vec<bool>>,
    pcie: Vec<Vec<bool>>,
    /// Device pairs (lower index first) a link says have no peer-to-peer DMA.
    pub no_p2p: BTreeSet<(usize, usize)>,
}

impl<'a> Links<'a> {
    /// The links among the KFD GPUs of `gpus`.
    pub fn of(gpus: &'a [Gpu]) -> Links<'a> {
        let mut by_address: BTreeMap<String, Vec<&Gpu>> = BTreeMap::new();
        for g in gpus.iter().filter(|g| g.kfd.is_some()) {
            by_address
                .entry(function_zero(&g.pci_address).unwrap_or_else(|| g.pci_address.clone()))
                .or_default()
                .push(g);
        }
        let devices: Vec<(String, Vec<&Gpu>)> = by_address.into_iter().collect();
        let node_of: BTreeMap<u64, usize> = devices
            .iter()
            .enumerate()
            .flat_map(|(i, (_, gs))| {
                gs.iter()
                    .filter_map(move |g| g.kfd.as_ref().map(|k| (u64::from(k.id), i)))
            })
            .collect();
        let n = devices.len();
        let mut links = Links {
            xgmi: vec![vec![false; n]; n],
            pcie: vec![vec![false; n]; n],
            no_p2p: BTreeSet::new(),
            devices: Vec::new(),
        };
        for (a, (_, gs)) in devices.iter().enumerate() {
            let io_links = gs
                .iter()
                .filter_map(|g| g.kfd.as_ref())
                .flat_map(|k| &k.io_links);
            for link in io_links {
                let Some(&b) = node_of.get(&link.node_to).filter(|&&b| b != a) else {
                    continue;
                };
                let enabled = link.flags & FLAG_ENABLED != 0;
                if link.link_type == LINK_TYPE_XGMI && enabled {
                    links.xgmi[a][b] = true;
                    links.xgmi[b][a] = true;
                } else if link.link_type == LINK_TYPE_PCIE && enabled {
                    links.pcie[a][b] = true;
                    links.pcie[b][a] = true;
                }
                if link.flags & FLAG_NO_P2P_DMA != 0 {
                    links.no_p2p.insert((a.min(b), a.max(b)));
                }
            }
        }
        links.devices = devices;
        links
    }

    /// Whether devices `a` and `b` share an enabled XGMI link.
    pub fn xgmi(&self, a: usize, b: usize) -> bool {
        self.xgmi[a][b]
    }

    /// How devices `a` and `b` are connected.
    pub fn kind(&self, a: usize, b: usize) -> LinkKind {
        if self.xgmi[a][b] {
            LinkKind::Xgmi
        } else if self.pcie[a][b] {
            LinkKind::Pcie
        } else {
            LinkKind::Host
        }
    }

    /// The device holding the GPU of inventory index `gpu`.
    pub fn device_of(&self, gpu: u32) -> Option<usize> {
        self.devices
            .iter()
            .position(|(_, gs)| gs.iter().any(|g| g.index == gpu))
    }

    /// Device `a`'s XGMI hive, when it is in one.
    pub fn hive(&self, a: usize) -> Option<u64> {
        self.devices[a]
            .1
            .iter()
            .find_map(|g| g.kfd.as_ref().and_then(|k| k.hive_id))
            .filter(|&h| h != 0)
    }

    /// The observed topology as a table: a row and a column per device.
    pub fn table(&self) -> String {
        let n = self.devices.len();
        let mut table = format!("{:<14}", "");
        for i in 0..n {
            table.push_str(&format!("{:>6}", format!("d{i}")));
        }
        table.push('\n');
        for (a, (name, _)) in self.devices.iter().enumerate() {
            table.push_str(&format!("d{a} {name:<11}"));
            for b in 0..n {
                let cell = if a == b { "-" } else { self.kind(a, b).label() };
                table.push_str(&format!("{cell:>6}"));
            }
            table.push('\n');
        }
        table
    }
}
