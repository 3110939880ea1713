//! The RDMA network cards beside the GPUs (`/sys/class/infiniband`): each
//! device's ports (state, physical state, rate, link layer, RoCE GIDs and
//! the netdev behind them), its firmware, and the PCI function it is.
//!
//! Sources (Linux `drivers/infiniband/core/sysfs.c` and `cache.c`,
//! `net/core/net-sysfs.c`, 6.8 to 6.18):
//! - `ports/<n>/state` prints `"%d: %s\n"` (`1: DOWN`, `4: ACTIVE`) and
//!   `phys_state` `"%u: %s\n"` (`2: Polling`, `3: Disabled`, `5: LinkUp`).
//!   RoCE ports of mlx5 (`mlx5_query_port_roce`) and bnxt_re
//!   (`bnxt_re_query_port`) show only `4: ACTIVE` / `5: LinkUp` (the netdev
//!   runs with carrier) or `1: DOWN` / `3: Disabled`: on RoCE, Disabled is
//!   no administrative setting.
//! - `rate` prints `"%d%s Gb/sec (%dX%s)\n"` (`400 Gb/sec (4X NDR)`,
//!   `2.5 Gb/sec (1X SDR)`; older kernels `(4X)` for a speed they cannot
//!   name) and fails with EINVAL for a width it cannot name. A down port's
//!   rate means nothing: mlx5 RoCE prints its default `40 Gb/sec (4X QDR)`,
//!   bnxt_re `2.5 Gb/sec (1X SDR)`.
//! - `link_layer` is `InfiniBand` or `Ethernet` (`Unknown` otherwise).
//! - `gids/<i>` prints the GID with `%pI6` (eight groups of four hex
//!   digits); an empty entry reads the zero GID, and its
//!   `gid_attrs/types/<i>` (`IB/RoCE v1`, `RoCE v2`) and
//!   `gid_attrs/ndevs/<i>` fail with EINVAL. The GID cache fills the
//!   lowest free index, so the table is dense from 0.
//! - `fw_ver` is the driver's string: mlx5 `"%d.%d.%04d"` (`28.39.1002`),
//!   bnxt_re `"%d.%d.%d.%d"`; `hca_type` is mlx5's `MT<device id in
//!   decimal>` (`MT4129`) and bnxt_re's `0x<device id>` since 2025 (its node
//!   description before): the PCI ids, not the device's name, tell the
//!   card, since rdma-core's udev rule may rename devices (`rocep12s0`).
//! - `<dev>/device` links to the PCI function; its netdevs are in
//!   `device/net/`, whose `mtu` prints `"%u"` and whose `carrier` and
//!   `speed` fail with EINVAL while the interface is down (an empty string
//!   on some 6.14 kernels).

use super::pci::{self, PCI_DEVICES};
use crate::{ReadError, Sysroot};
use std::net::Ipv6Addr;

/// Host path of the RDMA device class.
pub const RDMA_CLASS: &str = "/sys/class/infiniband";

/// The RDMA devices of a node, and the entries that could not be read.
#[derive(Clone, Debug, Default)]
pub struct RdmaScan {
    /// Every device, in name order.
    pub devices: Vec<RdmaDevice>,
    /// Devices whose directory could not be read at all.
    pub errors: Vec<ReadError>,
}

/// One RDMA device (`mlx5_0`, `bnxt_re3`): a PCI function with its ports.
#[derive(Clone, Debug, Default)]
pub struct RdmaDevice {
    /// The device's name in `/sys/class/infiniband`.
    pub name: String,
    /// The PCI function it is, when its `device` link leads to one.
    pub pci: Option<NicFunction>,
    /// Its firmware version (`fw_ver`).
    pub firmware: Option<String>,
    /// The driver's name for the card (`hca_type`).
    pub hca_type: Option<String>,
    /// The board's part id (`board_id`), where the driver gives one.
    pub board_id: Option<String>,
    /// Its ports, in number order.
    pub ports: Vec<RdmaPort>,
    /// Whether its PCI function is an SR-IOV virtual function (it has a
    /// `physfn` link): a slice of a card, not a card.
    pub virtual_function: bool,
    /// Files that exist but could not be read.
    pub unread: Vec<ReadError>,
}

/// The PCI function of an RDMA device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicFunction {
    /// `dddd:bb:dd.f`.
    pub address: String,
    /// PCI vendor and device ids, when readable.
    pub ids: Option<(u16, u16)>,
    /// The bound driver (`mlx5_core`, `bnxt_en`).
    pub driver: Option<String>,
}

impl RdmaDevice {
    /// The card's model as people name it (`ConnectX-7`, `BCM57608`), else
    /// its PCI ids, else the driver's `hca_type`.
    pub fn model(&self) -> String {
        match self.pci.as_ref().and_then(|p| p.ids) {
            Some(ids) => model_name(ids)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{:04x}:{:04x}", ids.0, ids.1)),
            None => self
                .hca_type
                .clone()
                .unwrap_or_else(|| "unknown card".to_string()),
        }
    }

    /// The device's PCI address, when known.
    pub fn address(&self) -> Option<&str> {
        self.pci.as_ref().map(|p| p.address.as_str())
    }

    /// What makes two devices the same kind of card: its model, its board
    /// (SKU: a dual-port frontend card and a single-port rail of one chip
    /// are two kinds) and its PCI function number (the second port of a
    /// dual-port card is function 1, its own RDMA device).
    pub fn kind(&self) -> String {
        let board = self
            .board_id
            .as_deref()
            .map_or_else(String::new, |b| format!(" {b}"));
        let function = self
            .address()
            .and_then(|a| a.rsplit('.').next())
            .filter(|f| *f != "0")
            .map_or_else(String::new, |f| format!(" function {f}"));
        format!("{}{board}{function}", self.model())
    }
}

/// RDMA cards seen beside Instinct GPUs, by PCI ids (Linux
/// `mlx5_core_pci_table` in drivers/net/ethernet/mellanox/mlx5/core/main.c,
/// `bnxt_pci_tbl` in drivers/net/ethernet/broadcom/bnxt/bnxt.c; AMD's
/// Pollara from its product brief).
pub fn model_name(ids: (u16, u16)) -> Option<&'static str> {
    Some(match ids {
        (0x15b3, 0x101b) => "ConnectX-6",
        (0x15b3, 0x101d) => "ConnectX-6 Dx",
        (0x15b3, 0x1021) => "ConnectX-7",
        (0x15b3, 0x1023) => "ConnectX-8",
        (0x15b3, 0xa2dc) => "BlueField-3",
        (0x14e4, 0x1750) => "BCM57508",
        (0x14e4, 0x1760) => "BCM57608",
        (0x1dd8, 0x1002) => "Pollara 400",
        _ => return None,
    })
}

/// One port of an RDMA device.
#[derive(Clone, Debug, Default)]
pub struct RdmaPort {
    /// The port number (from 1).
    pub number: u32,
    /// `state`: the logical state.
    pub state: Option<PortState>,
    /// `phys_state`: the physical link.
    pub phys_state: Option<PortState>,
    /// `rate`, when it reads as the kernel prints it.
    pub rate: Option<Rate>,
    /// `rate` as read, when it does not parse (shown, not judged).
    pub rate_text: Option<String>,
    /// `link_layer`: `InfiniBand` or `Ethernet`.
    pub link_layer: Option<String>,
    /// The RoCE GIDs in use (Ethernet ports only; empty entries left out).
    pub gids: Vec<Gid>,
    /// How many GID entries were read.
    pub gids_read: usize,
    /// Why the GID table could not be read, when it could not.
    pub gid_error: Option<ReadError>,
    /// The netdev that carries the port's RoCE traffic (or its IPoIB
    /// interface), when one is found.
    pub netdev: Option<Netdev>,
}

impl RdmaPort {
    /// Whether the port is up: logically ACTIVE on a physical link that is
    /// up.
    pub fn is_up(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.code == 4)
            && self.phys_state.as_ref().is_none_or(|p| p.code == 5)
    }

    /// Whether the port runs RoCE (an Ethernet link layer).
    pub fn is_roce(&self) -> bool {
        self.link_layer.as_deref() == Some("Ethernet")
    }

    /// `state` and `phys_state` as one phrase (`DOWN, Polling`).
    pub fn state_text(&self) -> String {
        let name = |s: &Option<PortState>| {
            s.as_ref()
                .map_or_else(|| "unreadable".to_string(), |s| s.name.clone())
        };
        format!("{}, {}", name(&self.state), name(&self.phys_state))
    }
}

/// A `state` or `phys_state` value: its number and the kernel's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortState {
    /// The number before the colon.
    pub code: u32,
    /// The name after it (`ACTIVE`, `LinkUp`).
    pub name: String,
}

/// Parses `"4: ACTIVE"`. `None` for anything else; never panics.
pub fn parse_state(text: &str) -> Option<PortState> {
    let (code, name) = text.trim().split_once(':')?;
    Some(PortState {
        code: code.trim().parse().ok()?,
        name: name.trim().to_string(),
    })
}

/// A port's rate as sysfs prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    /// Gb/s.
    pub gbps: f64,
    /// Lanes (the `4` of `4X`).
    pub width: u32,
    /// The per-lane speed's name (`NDR`), when the kernel names it.
    pub speed: Option<String>,
    /// The text as read (`400 Gb/sec (4X NDR)`).
    pub text: String,
}

/// Parses `"400 Gb/sec (4X NDR)"`, `"2.5 Gb/sec (1X SDR)"` or `"10 Gb/sec
/// (4X)"`. `None` for anything else; never panics.
pub fn parse_rate(text: &str) -> Option<Rate> {
    let text = text.trim_end_matches('\0').trim();
    let (number, rest) = text.split_once(' ')?;
    let gbps: f64 = number.parse().ok()?;
    if !gbps.is_finite() || gbps < 0.0 || number.contains(['e', 'E', '+', '-']) {
        return None;
    }
    let inner = rest.strip_prefix("Gb/sec (")?.strip_suffix(')')?.trim();
    let (lanes, speed) = match inner.split_once(' ') {
        Some((l, s)) => (l, Some(s.trim().to_string())),
        None => (inner, None),
    };
    let width: u32 = lanes.strip_suffix('X')?.parse().ok()?;
    Some(Rate {
        gbps,
        width,
        speed: speed.filter(|s| !s.is_empty()),
        text: text.to_string(),
    })
}

/// A RoCE GID in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gid {
    /// Its index in the port's table.
    pub index: u32,
    /// The GID as an IPv6 address (an IPv4 address mapped into it for
    /// IPv4).
    pub address: Ipv6Addr,
    /// `IB/RoCE v1` or `RoCE v2`, when readable.
    pub kind: Option<String>,
    /// The netdev it belongs to, when readable.
    pub netdev: Option<String>,
}

impl Gid {
    /// Whether the GID carries a routable address (an IPv4 address, or an
    /// IPv6 address that is not link-local): what RoCE v2 routes on, and
    /// what RCCL's network plugin looks for (NCCL_IB_ADDR_FAMILY).
    pub fn is_routable(&self) -> bool {
        self.address.to_ipv4_mapped().is_some()
            || (self.address.segments()[0] & 0xffc0) != 0xfe80 && !self.address.is_unspecified()
    }

    /// Whether it is a RoCE v2 GID.
    pub fn is_v2(&self) -> bool {
        self.kind.as_deref() == Some("RoCE v2")
    }

    /// The address as people write it (`10.1.0.5`, `fe80::1`).
    pub fn shown(&self) -> String {
        match self.address.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => self.address.to_string(),
        }
    }
}

/// Parses a GID as `%pI6` prints it. `None` for anything else.
pub fn parse_gid(text: &str) -> Option<Ipv6Addr> {
    text.trim_end_matches('\0').trim().parse().ok()
}

/// A network interface behind a port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Netdev {
    /// Its name (`ens12np0`, `ib0`).
    pub name: String,
    /// `mtu`.
    pub mtu: Option<u32>,
    /// `operstate` (`up`, `down`, `lowerlayerdown`).
    pub operstate: Option<String>,
    /// `carrier`: `None` when the interface is down (the read fails with
    /// EINVAL) or the file is absent.
    pub carrier: Option<bool>,
    /// Whether it is set up (`flags` has IFF_UP, 0x1): a netdev its
    /// administrator set down carries nothing by design.
    pub admin_up: Option<bool>,
}

/// How many empty GID entries in a row end the reading of a table: the
/// cache fills the lowest free index, so past a few empty entries the rest
/// are empty too (a table holds 128 to 256 entries, mostly empty).
const EMPTY_GIDS_AT_END: usize = 4;

/// Reads every RDMA device of the node. `Ok(None)` when the node has no
/// RDMA class (no RDMA driver loaded); `Err` only when the class directory
/// exists but cannot be listed.
pub fn scan(root: &Sysroot) -> Result<Option<RdmaScan>, ReadError> {
    let Some(names) = root.list_dir_if_present(RDMA_CLASS)? else {
        return Ok(None);
    };
    let mut scan = RdmaScan::default();
    for name in names {
        match device(root, &name) {
            Ok(d) => scan.devices.push(d),
            Err(e) => scan.errors.push(e),
        }
    }
    Ok(Some(scan))
}

fn device(root: &Sysroot, name: &str) -> Result<RdmaDevice, ReadError> {
    let dir = format!("{RDMA_CLASS}/{name}");
    let ports_dir = format!("{dir}/ports");
    let port_numbers = root.list_dir(&ports_dir)?;
    let mut d = RdmaDevice {
        name: name.to_string(),
        ..RdmaDevice::default()
    };
    let text = |unread: &mut Vec<ReadError>, path: &str| match root.read_opt(path) {
        Ok(t) => t.filter(|t| !t.is_empty()),
        Err(e) => {
            unread.push(e);
            None
        }
    };
    d.virtual_function = root.exists(&format!("{dir}/device/physfn"));
    d.firmware = text(&mut d.unread, &format!("{dir}/fw_ver"));
    d.hca_type = text(&mut d.unread, &format!("{dir}/hca_type"));
    d.board_id = text(&mut d.unread, &format!("{dir}/board_id"));
    d.pci = match root.link_name(&format!("{dir}/device")) {
        Ok(Some(address)) if pci::is_pci_address(&address) => {
            let ids = match pci::function_ids(root, &address) {
                Ok(ids) => Some(ids),
                Err(e) => {
                    d.unread.push(e);
                    None
                }
            };
            let driver = root
                .link_name(&format!("{PCI_DEVICES}/{address}/driver"))
                .unwrap_or_else(|e| {
                    d.unread.push(e);
                    None
                });
            Some(NicFunction {
                address,
                ids,
                driver,
            })
        }
        Ok(_) => None,
        Err(e) => {
            d.unread.push(e);
            None
        }
    };
    let interfaces = root
        .list_dir_if_present(&format!("{dir}/device/net"))
        .unwrap_or_else(|e| {
            d.unread.push(e);
            None
        })
        .unwrap_or_default();
    for number in port_numbers {
        let Ok(n) = number.parse::<u32>() else {
            continue;
        };
        let p = format!("{ports_dir}/{number}");
        let mut port = RdmaPort {
            number: n,
            ..RdmaPort::default()
        };
        port.state = text(&mut d.unread, &format!("{p}/state")).and_then(|t| parse_state(&t));
        port.phys_state =
            text(&mut d.unread, &format!("{p}/phys_state")).and_then(|t| parse_state(&t));
        port.link_layer = text(&mut d.unread, &format!("{p}/link_layer"));
        // A down port's rate is the driver's default, and EINVAL is what a
        // width the kernel cannot name gives: neither is an error to show.
        if let Ok(Some(t)) = root.read_opt(&format!("{p}/rate")) {
            match parse_rate(&t) {
                Some(r) => port.rate = Some(r),
                None => port.rate_text = Some(t),
            }
        }
        if port.is_roce() {
            read_gids(root, &p, &mut port);
        }
        // The netdev that carries the routable RoCE v2 GID is the one RCCL
        // sends through (a VLAN or bond above the card's own, perhaps),
        // else any GID's, else the card's only one.
        let netdev = port
            .gids
            .iter()
            .filter(|g| g.is_v2() && g.is_routable())
            .chain(&port.gids)
            .find_map(|g| g.netdev.clone())
            .or_else(|| match interfaces.as_slice() {
                [only] => Some(only.clone()),
                _ => None,
            });
        port.netdev = netdev.map(|name| read_netdev(root, name));
        d.ports.push(port);
    }
    Ok(d)
}

fn read_gids(root: &Sysroot, port_dir: &str, port: &mut RdmaPort) {
    let entries = match root.list_dir(&format!("{port_dir}/gids")) {
        Ok(e) => e,
        Err(e) => {
            port.gid_error = Some(e);
            return;
        }
    };
    let mut empty_run = 0;
    for entry in entries {
        let Ok(index) = entry.parse::<u32>() else {
            continue;
        };
        port.gids_read += 1;
        let address = match root.read_opt(&format!("{port_dir}/gids/{entry}")) {
            Ok(t) => t.and_then(|t| parse_gid(&t)),
            Err(e) => {
                port.gid_error = Some(e);
                return;
            }
        };
        match address {
            Some(a) if !a.is_unspecified() => {
                empty_run = 0;
                let attr = |what: &str| {
                    root.read_opt(&format!("{port_dir}/gid_attrs/{what}/{entry}"))
                        .ok()
                        .flatten()
                        .filter(|t| !t.is_empty())
                };
                port.gids.push(Gid {
                    index,
                    address: a,
                    kind: attr("types"),
                    netdev: attr("ndevs"),
                });
            }
            _ => {
                empty_run += 1;
                if empty_run >= EMPTY_GIDS_AT_END {
                    break;
                }
            }
        }
    }
}

/// Host path of the network interfaces.
pub const NET_CLASS: &str = "/sys/class/net";

fn read_netdev(root: &Sysroot, name: String) -> Netdev {
    let dir = format!("{NET_CLASS}/{name}");
    let value = |file: &str| {
        root.read_opt(&format!("{dir}/{file}"))
            .ok()
            .flatten()
            .filter(|t| !t.is_empty())
    };
    Netdev {
        mtu: value("mtu").and_then(|t| t.parse().ok()),
        operstate: value("operstate"),
        carrier: value("carrier").and_then(|t| match t.as_str() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }),
        admin_up: value("flags")
            .and_then(|t| pci::parse_hex(&t))
            .map(|f| f & 1 == 1),
        name,
    }
}

/// The PCI functions on the bus that are RDMA cards (not virtual
/// functions): every NVIDIA/Mellanox network or InfiniBand controller
/// (mlx5 drives them all) and the Broadcom and AMD cards [`model_name`]
/// knows. What the RDMA class should hold a device of.
pub fn rdma_cards_on_bus(root: &Sysroot) -> Result<Vec<NicFunction>, ReadError> {
    let mut cards = Vec::new();
    for address in root.list_dir(PCI_DEVICES)? {
        if !pci::is_pci_address(&address) {
            continue;
        }
        let dir = format!("{PCI_DEVICES}/{address}");
        let Ok((vendor, device)) = pci::function_ids(root, &address) else {
            continue;
        };
        if !matches!(vendor, 0x15b3 | 0x14e4 | 0x1dd8) {
            continue;
        }
        let class = root
            .read_opt(&format!("{dir}/class"))?
            .and_then(|t| pci::parse_hex(&t))
            .unwrap_or(0);
        let network = class >> 16 == 0x02;
        let rdma = (vendor == 0x15b3 && network) || model_name((vendor, device)).is_some();
        if rdma && !root.exists(&format!("{dir}/physfn")) {
            cards.push(NicFunction {
                driver: root.link_name(&format!("{dir}/driver")).ok().flatten(),
                ids: Some((vendor, device)),
                address,
            });
        }
    }
    Ok(cards)
}

/// How many NUMA nodes the kernel has online (`/sys/devices/system/node/
/// online`: `0`, `0-1`, `0-3,5`); `None` when it does not say.
pub fn numa_nodes_online(root: &Sysroot) -> Option<usize> {
    let text = root.read_opt("/sys/devices/system/node/online").ok()??;
    let mut count = 0usize;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        count = count.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
    }
    (count > 0).then_some(count)
}

/// Where a PCI function sits: its root complex (the `pci<domain>:<bus>`
/// host bridge its path starts at), the bridges between (nearest the root
/// first) and its NUMA node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// `pci0000:00`, when its bus entry leads into `/sys/devices`.
    pub host_bridge: Option<String>,
    /// The bridges above it.
    pub bridges: Vec<String>,
    /// `numa_node`; `None` when absent, unreadable or -1 (no node).
    pub numa_node: Option<u32>,
}

/// Where the PCI function at `address` sits.
pub fn placement(root: &Sysroot, address: &str) -> Result<Placement, ReadError> {
    let entry = format!("{PCI_DEVICES}/{address}");
    let target = super::acs::device_path(root, address)?;
    let host_bridge = target.as_deref().and_then(super::acs::root_bus_in);
    let bridges = target
        .as_deref()
        .map(|t| super::acs::bridges_in(t, address))
        .unwrap_or_default();
    let numa_node = root
        .read_opt(&format!("{entry}/numa_node"))?
        .and_then(|t| t.parse::<i64>().ok())
        .and_then(|n| u32::try_from(n).ok());
    Ok(Placement {
        host_bridge,
        bridges,
        numa_node,
    })
}

/// How close two PCI functions are, as RCCL's topology ranks paths
/// (closest first): a PCIe switch between them and the CPU (NCCL's
/// PIX/PXB), one root complex (PHB), one NUMA node (NODE), or across the
/// sockets' interconnect (SYS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Closeness {
    /// Below one PCIe switch.
    Switch,
    /// On one root complex.
    RootComplex,
    /// On one NUMA node, through different root complexes.
    NumaNode,
    /// On different NUMA nodes.
    Remote,
    /// Not known: a NUMA node or a path that could not be read.
    Unknown,
}

impl Closeness {
    /// How a report says it.
    pub fn phrase(self) -> &'static str {
        match self {
            Closeness::Switch => "behind one PCIe switch",
            Closeness::RootComplex => "on one root complex",
            Closeness::NumaNode => "on one NUMA node",
            Closeness::Remote => "on different NUMA nodes",
            Closeness::Unknown => "placed unknown to each other",
        }
    }
}

/// How close the functions placed at `a` and `b` are.
pub fn closeness(a: &Placement, b: &Placement) -> Closeness {
    if let (Some(x), Some(y)) = (&a.host_bridge, &b.host_bridge) {
        if x == y {
            // Below one root port there is a switch: a root port has one
            // link.
            return if !a.bridges.is_empty() && a.bridges.first() == b.bridges.first() {
                Closeness::Switch
            } else {
                Closeness::RootComplex
            };
        }
    }
    match (a.numa_node, b.numa_node) {
        (Some(x), Some(y)) if x == y => Closeness::NumaNode,
        (Some(_), Some(_)) => Closeness::Remote,
        _ => Closeness::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn states_rates_and_gids_read_as_the_kernel_prints_them() {
        assert_eq!(
            parse_state("4: ACTIVE\n"),
            Some(PortState {
                code: 4,
                name: "ACTIVE".into()
            })
        );
        assert_eq!(parse_state("5: LinkUp").map(|s| s.code), Some(5));
        assert_eq!(parse_state("ACTIVE"), None);
        assert_eq!(parse_state("x: ACTIVE"), None);
        let r = parse_rate("400 Gb/sec (4X NDR)\n").unwrap();
        assert_eq!(
            (r.gbps, r.width, r.speed.as_deref()),
            (400.0, 4, Some("NDR"))
        );
        let r = parse_rate("2.5 Gb/sec (1X SDR)").unwrap();
        assert_eq!((r.gbps, r.width), (2.5, 1));
        let r = parse_rate("10 Gb/sec (4X)").unwrap();
        assert_eq!((r.gbps, r.width, r.speed), (10.0, 4, None));
        assert_eq!(parse_rate("400 Gb/sec (8X HDR)").map(|r| r.width), Some(8));
        for bad in [
            "",
            "400",
            "400 Gb/sec",
            "400 Gb/sec (X NDR)",
            "NaN Gb/sec (4X NDR)",
            "-4 Gb/sec (4X)",
            "1e3 Gb/sec (4X)",
        ] {
            assert_eq!(parse_rate(bad), None, "{bad}");
        }
        let g = Gid {
            index: 3,
            address: parse_gid("0000:0000:0000:0000:0000:ffff:0a01:0005").unwrap(),
            kind: Some("RoCE v2".into()),
            netdev: None,
        };
        assert!(g.is_routable() && g.is_v2());
        assert_eq!(g.shown(), "10.1.0.5");
        let local = Gid {
            address: parse_gid("fe80:0000:0000:0000:5eff:fe00:0001:0203").unwrap(),
            ..g.clone()
        };
        assert!(!local.is_routable());
        let global = Gid {
            address: parse_gid("2001:0db8:0000:0000:0000:0000:0000:0005").unwrap(),
            ..g
        };
        assert!(global.is_routable());
        assert_eq!(parse_gid("zz"), None);
    }

    #[test]
    fn closeness_follows_the_shared_part_of_two_paths() {
        let at = |hb: &str, bridges: &[&str], numa: Option<u32>| Placement {
            host_bridge: Some(hb.to_string()),
            bridges: bridges.iter().map(|b| b.to_string()).collect(),
            numa_node: numa,
        };
        let gpu = at("pci0000:00", &["0000:00:01.1", "0000:03:00.0"], Some(0));
        let nic_on_switch = at("pci0000:00", &["0000:00:01.1", "0000:03:01.0"], Some(0));
        let nic_on_root = at("pci0000:00", &["0000:00:03.1"], Some(0));
        let nic_same_numa = at("pci0000:20", &["0000:20:03.1"], Some(0));
        let nic_remote = at("pci0000:80", &["0000:80:03.1"], Some(1));
        let nic_unknown = at("pci0000:80", &["0000:80:03.1"], None);
        assert_eq!(closeness(&gpu, &nic_on_switch), Closeness::Switch);
        assert_eq!(closeness(&gpu, &nic_on_root), Closeness::RootComplex);
        assert_eq!(closeness(&gpu, &nic_same_numa), Closeness::NumaNode);
        assert_eq!(closeness(&gpu, &nic_remote), Closeness::Remote);
        assert_eq!(closeness(&gpu, &nic_unknown), Closeness::Unknown);
        assert!(Closeness::Switch < Closeness::RootComplex);
        assert!(Closeness::Remote < Closeness::Unknown);
    }

    #[test]
    fn a_kind_of_card_is_its_model_board_and_function() {
        let d = |address: &str, board: Option<&str>| RdmaDevice {
            pci: Some(NicFunction {
                address: address.into(),
                ids: Some((0x15b3, 0x1021)),
                driver: None,
            }),
            board_id: board.map(str::to_string),
            ..RdmaDevice::default()
        };
        assert_eq!(d("0000:0c:00.0", None).kind(), "ConnectX-7");
        assert_eq!(
            d("0000:0c:00.1", Some("MT_0000000838")).kind(),
            "ConnectX-7 MT_0000000838 function 1"
        );
    }

    #[test]
    fn models_are_named_by_their_pci_ids() {
        assert_eq!(model_name((0x15b3, 0x1021)), Some("ConnectX-7"));
        assert_eq!(model_name((0x14e4, 0x1760)), Some("BCM57608"));
        assert_eq!(model_name((0x8086, 0x1592)), None);
        let d = RdmaDevice {
            pci: Some(NicFunction {
                address: "0000:0c:00.0".into(),
                ids: Some((0x8086, 0x1592)),
                driver: None,
            }),
            ..RdmaDevice::default()
        };
        assert_eq!(d.model(), "8086:1592");
    }

    proptest! {
        #[test]
        fn no_text_makes_a_parser_panic(s in "\\PC{0,40}") {
            let _ = parse_state(&s);
            let _ = parse_rate(&s);
            let _ = parse_gid(&s);
        }

        #[test]
        fn every_rate_the_kernel_prints_reads_back(tenths in 1u32..40_000, width in prop::sample::select(vec![1u32, 2, 4, 8, 12]), speed in prop::sample::select(vec!["SDR", "QDR", "HDR", "NDR", "XDR", ""])) {
            let dot = if tenths % 10 == 0 { "" } else { ".5" };
            let name = if speed.is_empty() { String::new() } else { format!(" {speed}") };
            let text = format!("{}{dot} Gb/sec ({width}X{name})", tenths / 10);
            let r = parse_rate(&text).unwrap();
            prop_assert_eq!(r.width, width);
            let half = if dot.is_empty() { 0.0 } else { 0.5 };
            prop_assert!((r.gbps - (f64::from(tenths / 10) + half)).abs() < 1e-9);
        }
    }
}
