//! network: the RDMA cards beside the GPUs, from sysfs alone
//! (`rocgate_node::facts::rdma`): their ports, rates, RoCE addressing and
//! MTU, firmware, PCIe links, and which card each GPU would send its RDMA
//! traffic through. The layer stands beside the stack
//! ([`crate::stack::NETWORK`]): a NIC's port says nothing of the GPU
//! driver, and the GPU layers say nothing of the NICs, so neither gates the
//! other; every check here is node-wide and none gates.
//!
//! Cards are judged against their siblings on the node (the same model and
//! port number): on a GPU node the RDMA cards are rails, one per GPU, alike
//! by design, so a port that is down or slow while its siblings are up
//! and fast is the odd one out, and a second port that no card uses is not.

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::support::{check, combine, end, list};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
use rocgate_node::facts::pci;
use rocgate_node::facts::rdma::{self, Closeness, Placement, RdmaDevice, RdmaPort, RdmaScan};
use std::collections::BTreeMap;

/// The network layer's checks: node-wide, none gating.
pub fn checks() -> Vec<Check<NodeContext>> {
    [
        check(
            "network::rdma_devices",
            stack::NETWORK,
            ScopeKind::Node,
            "every RDMA card on the PCI bus has its RDMA device (its RDMA driver is loaded)",
            rdma_devices,
        ),
        check(
            "network::rdma_ports",
            stack::NETWORK,
            ScopeKind::Node,
            "every RDMA port is up (ACTIVE on a link that is up) where the node's other ports of its card and number are",
            rdma_ports,
        ),
        check(
            "network::rdma_rate",
            stack::NETWORK,
            ScopeKind::Node,
            "every RDMA port that is up runs at the rate of the node's fastest port of its card and number",
            rdma_rate,
        ),
        check(
            "network::roce_gids",
            stack::NETWORK,
            ScopeKind::Node,
            "every RoCE port that is up has a RoCE v2 GID with a routable address",
            roce_gids,
        ),
        check(
            "network::roce_mtu",
            stack::NETWORK,
            ScopeKind::Node,
            "every RoCE port's netdev MTU lets RoCE use 4096-byte packets (at least 4200)",
            roce_mtu,
        ),
        check(
            "network::nic_firmware",
            stack::NETWORK,
            ScopeKind::Node,
            "the node's RDMA cards of one model run one firmware version",
            nic_firmware,
        ),
        check(
            "network::nic_pcie_link",
            stack::NETWORK,
            ScopeKind::Node,
            "every RDMA card's PCIe link runs at the full width and speed of both its ends",
            nic_pcie_link,
        ),
        check(
            "network::gpu_nic_affinity",
            stack::NETWORK,
            ScopeKind::Node,
            "on a node with an RDMA card per GPU, each GPU has one on its PCIe switch, root complex or NUMA node",
            gpu_nic_affinity,
        ),
    ]
    .into_iter()
    .map(|c| Check { gates: false, ..c })
    .collect()
}

/// The node's RDMA cards, or the verdict of a check that has none to look
/// at.
fn cards(ctx: &NodeContext) -> Result<&RdmaScan, Verdict> {
    match ctx.facts.rdma() {
        Ok(Some(scan)) if physical(scan).next().is_some() => Ok(scan),
        Ok(Some(scan)) if !scan.devices.is_empty() => Err(Verdict::not_applicable(format!(
            "only SR-IOV virtual functions ({}): their cards are judged where their physical functions are",
            list(
                &scan
                    .devices
                    .iter()
                    .map(|d| d.name.clone())
                    .collect::<Vec<_>>(),
                4
            )
        ))),
        Ok(Some(scan)) if !scan.errors.is_empty() => Err(Verdict::unverifiable(format!(
            "no RDMA device could be read: {}",
            list(
                &scan
                    .errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                3
            )
        ))),
        Ok(_) => Err(Verdict::not_applicable(format!(
            "no RDMA network card ({} is empty or absent: no RDMA driver is loaded)",
            rdma::RDMA_CLASS
        ))),
        Err(e) => Err(Verdict::unverifiable(format!(
            "the RDMA devices cannot be listed: {e}"
        ))),
    }
}

/// A device that could not be read, as the part of a verdict it leaves
/// unjudged.
fn unread_devices(scan: &RdmaScan) -> Option<Verdict> {
    (!scan.errors.is_empty()).then(|| {
        let names: Vec<String> = scan.errors.iter().map(ToString::to_string).collect();
        Verdict::unverifiable(format!("not read: {}", list(&names, 3)))
    })
}

/// A check's verdict when it found nothing: what it saw (a pass, or why
/// nothing applied), with what could not be read (`what`: the items) and
/// the devices that did not read as parts that could not look, which are
/// never a pass.
fn looked(seen: Option<Verdict>, what: &str, unread: &[String], scan: &RdmaScan) -> Verdict {
    let mut parts: Vec<Verdict> = seen.into_iter().collect();
    if !unread.is_empty() {
        parts.push(Verdict::unverifiable(format!(
            "{what}: {}",
            list(unread, 4)
        )));
    }
    parts.extend(unread_devices(scan));
    combine(parts, "nothing to judge")
}

/// One port of one device.
#[derive(Clone, Copy)]
struct Port<'a> {
    device: &'a RdmaDevice,
    port: &'a RdmaPort,
}

impl Port<'_> {
    /// `mlx5_5 port 1`.
    fn name(&self) -> String {
        format!("{} port {}", self.device.name, self.port.number)
    }

    /// `mlx5_5 port 1 (ConnectX-7 at 0000:ac:00.0, InfiniBand)`.
    fn described(&self) -> String {
        let at = self
            .device
            .address()
            .map_or_else(String::new, |a| format!(" at {a}"));
        let layer = self
            .port
            .link_layer
            .as_deref()
            .unwrap_or("link layer unknown");
        // A RoCE port is its netdev to those who configure it.
        let netdev = match (&self.port.netdev, self.port.is_roce()) {
            (Some(n), true) => format!(", {}", n.name),
            _ => String::new(),
        };
        format!(
            "{} ({}{at}, {layer}{netdev})",
            self.name(),
            self.device.model()
        )
    }

    /// What makes ports siblings: the card's model, the port's number and
    /// its link layer.
    fn kind(&self) -> (String, u32, String) {
        (
            self.device.kind(),
            self.port.number,
            self.port.link_layer.clone().unwrap_or_default(),
        )
    }

    /// `port 1 of the other 7 ConnectX-7 cards` (`others` of them).
    fn siblings_text(&self, others: usize) -> String {
        let (n, model) = (self.port.number, self.device.model());
        match others {
            1 => format!("port {n} of the other {model} card"),
            _ => format!("port {n} of each of the other {others} {model} cards"),
        }
    }

    /// Where to look at this port first: `ibstat` for InfiniBand, `ip` and
    /// `ethtool` on its netdev for RoCE.
    fn look(&self) -> String {
        if self.port.is_roce() {
            let n = self.netdev_name();
            format!("`ip link show {n}` and `ethtool {n}`")
        } else {
            format!(
                "`ibstat {} {}` and `iblinkinfo`",
                self.device.name, self.port.number
            )
        }
    }

    /// The port's interface: `ibp12s0`, or the device name.
    fn netdev_name(&self) -> String {
        self.port
            .netdev
            .as_ref()
            .map_or_else(|| self.device.name.clone(), |n| n.name.clone())
    }
}

/// The node's cards: its RDMA devices that are not SR-IOV virtual
/// functions (a VF is a slice of a card, whose port mirrors the card's).
fn physical(scan: &RdmaScan) -> impl Iterator<Item = &RdmaDevice> {
    scan.devices.iter().filter(|d| !d.virtual_function)
}

fn ports(scan: &RdmaScan) -> Vec<Port<'_>> {
    physical(scan)
        .flat_map(|device| device.ports.iter().map(move |port| Port { device, port }))
        .collect()
}

/// A line per port: what `ibstat` and `ip link` would say, for the output.
fn port_table(scan: &RdmaScan) -> String {
    let mut out = String::new();
    for p in ports(scan) {
        let rate = p
            .port
            .rate
            .as_ref()
            .map(|r| r.text.clone())
            .or_else(|| p.port.rate_text.clone())
            .unwrap_or_else(|| "rate unread".to_string());
        let netdev = p.port.netdev.as_ref().map_or_else(String::new, |n| {
            let mtu = n.mtu.map_or_else(String::new, |m| format!(" mtu {m}"));
            format!(" {}{mtu}", n.name)
        });
        out.push_str(&format!(
            "{}: {}, {}, {rate}, fw {}{netdev}\n",
            p.described(),
            p.port.state_text(),
            if p.port.is_up() { "up" } else { "down" },
            p.device.firmware.as_deref().unwrap_or("unread"),
        ));
    }
    out
}

/// Why a port that is not up is down, from its physical state.
fn why_down(p: &RdmaPort) -> &'static str {
    match (p.is_roce(), p.phys_state.as_ref().map(|s| s.code)) {
        (_, Some(2)) => ": no link partner (cable, transceiver or switch port)",
        (true, Some(3)) => ": its netdev has no link",
        (false, Some(3)) => ": disabled (by the subnet manager or ibportstate)",
        (_, Some(4)) => ": still training its link",
        (_, Some(6)) => ": recovering from link errors",
        (false, Some(5)) => ": the link is up but the subnet manager has not made the port ACTIVE",
        _ => "",
    }
}

fn rdma_devices(ctx: &NodeContext, _: Scope) -> Outcome {
    let sysroot = &ctx.facts.sysroot;
    let on_bus = rdma::rdma_cards_on_bus(sysroot).map_err(|e| {
        Verdict::unverifiable(format!("the PCI bus cannot be listed for RDMA cards: {e}"))
    })?;
    let scan = match ctx.facts.rdma() {
        Ok(s) => s.as_ref(),
        Err(e) => {
            return end(Verdict::unverifiable(format!(
                "the RDMA devices cannot be listed: {e}"
            )));
        }
    };
    let devices: Vec<&RdmaDevice> = scan.map(|s| physical(s).collect()).unwrap_or_default();
    if on_bus.is_empty() && devices.is_empty() {
        return end(Verdict::not_applicable(format!(
            "no RDMA network card on the PCI bus and none in {}",
            rdma::RDMA_CLASS
        )));
    }
    let missing: Vec<String> = on_bus
        .iter()
        .filter(|card| !devices.iter().any(|d| d.address() == Some(&card.address)))
        .map(|card| {
            let model = card.ids.map_or_else(String::new, |ids| {
                rdma::model_name(ids)
                    .map_or_else(|| format!("{:04x}:{:04x}", ids.0, ids.1), str::to_string)
            });
            let driver = card
                .driver
                .as_deref()
                .map_or_else(|| "no driver".to_string(), |d| format!("driver {d}"));
            format!("{} ({model}, {driver})", card.address)
        })
        .collect();
    if !missing.is_empty() {
        return end(Verdict::found(codes::RDMA_DEVICE_MISSING.finding(format!(
            "{} of the {} RDMA cards on the PCI bus have no RDMA device in {}: {}",
            missing.len(),
            on_bus.len(),
            rdma::RDMA_CLASS,
            list(&missing, 4)
        ))));
    }
    let mut parts = vec![Verdict::pass(format!(
        "{} RDMA devices, one for each RDMA card on the PCI bus",
        devices.len()
    ))];
    parts.extend(scan.and_then(unread_devices));
    Ok(combine(parts, "no card"))
}

/// Why a port that is not up carries nothing by its administrator's (or
/// its fabric manager's) choice, if it does: a RoCE netdev set down, an
/// InfiniBand port disabled.
fn disabled(p: &Port<'_>) -> Option<String> {
    let netdev_down = p.port.netdev.as_ref().filter(|n| n.admin_up == Some(false));
    match (p.port.is_roce(), netdev_down) {
        (true, Some(n)) => Some(format!("its netdev {} is set down", n.name)),
        (false, _) if p.port.phys_state.as_ref().is_some_and(|s| s.code == 3) => {
            Some("disabled (by the subnet manager or ibportstate)".to_string())
        }
        _ => None,
    }
}

/// What to do first about a port that is down, from how it is down.
fn advice(p: &Port<'_>) -> String {
    let phys = p.port.phys_state.as_ref().map(|s| s.code);
    match (p.port.is_roce(), phys) {
        (false, Some(5)) => format!(
            "the link is up but no subnet manager has made the port ACTIVE: check that opensm or the fabric's UFM runs and reaches it (`sminfo`, {})",
            p.look()
        ),
        (_, Some(2)) => format!(
            "{} show the port; it has no link partner: reseat or replace the cable or transceiver and check the switch port it reaches",
            p.look()
        ),
        (true, _) => format!(
            "{} show the link: reseat or replace the cable or transceiver and check the switch port; `sudo ip link set {} up` if it was set down",
            p.look(),
            p.netdev_name()
        ),
        (false, _) => format!(
            "{} show the port and the switch port it reaches; reseat or replace the cable or transceiver",
            p.look()
        ),
    }
}

fn rdma_ports(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let all = ports(scan);
    let table = port_table(scan);
    let mut up_of_kind: BTreeMap<(String, u32, String), usize> = BTreeMap::new();
    for p in &all {
        *up_of_kind.entry(p.kind()).or_default() += usize::from(p.port.is_up());
    }
    let (mut down, mut alone, mut unread) = (Vec::new(), Vec::new(), Vec::new());
    let mut off = Vec::new();
    for p in &all {
        if p.port.state.is_none() {
            unread.push(format!("{}/ports/{}/state", p.device.name, p.port.number));
        } else if p.port.is_up() {
            continue;
        } else if let Some(why) = disabled(p) {
            off.push(format!(
                "{} is {}: {why}",
                p.described(),
                p.port.state_text()
            ));
        } else {
            let siblings_up = up_of_kind.get(&p.kind()).copied().unwrap_or(0);
            let text = format!(
                "{} is {}{}",
                p.described(),
                p.port.state_text(),
                why_down(p.port)
            );
            if siblings_up > 0 {
                down.push((
                    *p,
                    format!("{text}, while {} is up", p.siblings_text(siblings_up)),
                ));
            } else {
                alone.push((*p, text));
            }
        }
    }
    let up = all.iter().filter(|p| p.port.is_up()).count();
    let with = |v: Verdict| {
        v.with_output(table.clone())
            .with_count("rdma_ports_up", up as f64, "ports")
    };
    // Ports set down on purpose are said beside any other finding.
    let also = if off.is_empty() {
        String::new()
    } else {
        format!("; also set down: {}", off.join("; "))
    };
    if let Some((first, _)) = down.first() {
        let text: Vec<&str> = down.iter().map(|(_, t)| t.as_str()).collect();
        return end(with(Verdict::found(codes::RDMA_PORT_DOWN.finding_next(
            format!("{}{also}", text.join("; ")),
            advice(first),
        ))));
    }
    if let Some((first, _)) = alone.first() {
        let text: Vec<&str> = alone.iter().map(|(_, t)| t.as_str()).collect();
        return end(with(Verdict::found(codes::RDMA_NO_PORT_UP.finding_next(
            format!("no port of its kind is up: {}{also}", text.join("; ")),
            format!(
                "if the node should be on this fabric: {}; if these ports are unused by design, waive this code for the node",
                advice(first)
            ),
        ))));
    }
    if !off.is_empty() {
        return end(with(Verdict::found(
            codes::RDMA_PORT_DISABLED.finding(off.join("; ")),
        )));
    }
    let seen = Verdict::pass(format!(
        "{up} RDMA port{} up ({})",
        if up == 1 { "" } else { "s" },
        kinds_text(&all)
    ));
    Ok(with(looked(
        Some(seen),
        "port state not read",
        &unread,
        scan,
    )))
}

/// `8 ConnectX-7 port 1, InfiniBand`: how many ports of each kind.
fn kinds_text(all: &[Port<'_>]) -> String {
    let mut kinds: BTreeMap<(String, u32, String), usize> = BTreeMap::new();
    for p in all {
        let (_, n, layer) = p.kind();
        *kinds.entry((p.device.model(), n, layer)).or_default() += 1;
    }
    kinds
        .into_iter()
        .map(|((model, n, layer), count)| format!("{count} {model} port {n}, {layer}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn rdma_rate(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let up: Vec<Port<'_>> = ports(scan).into_iter().filter(|p| p.port.is_up()).collect();
    if up.is_empty() {
        return end(Verdict::not_applicable(
            "no RDMA port is up to measure (see network.rdma_ports)",
        ));
    }
    let mut groups: BTreeMap<(String, u32, String), Vec<Port<'_>>> = BTreeMap::new();
    for p in &up {
        groups.entry(p.kind()).or_default().push(*p);
    }
    let mut verdict = Verdict::pass("");
    let (mut slow, mut unread, mut judged, mut alone) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for members in groups.values() {
        let best = members
            .iter()
            .filter_map(|p| p.port.rate.as_ref())
            .max_by(|a, b| a.gbps.total_cmp(&b.gbps));
        for p in members {
            let Some(rate) = &p.port.rate else {
                unread.push(format!(
                    "{} ({})",
                    p.name(),
                    p.port.rate_text.as_deref().unwrap_or("rate absent")
                ));
                continue;
            };
            verdict = verdict.with_throughput(
                &format!("rdma_rate.{}.port{}", p.device.name, p.port.number),
                rate.gbps,
                "Gb/s",
            );
            match best {
                _ if members.len() < 2 => alone.push(format!("{} at {}", p.described(), rate.text)),
                Some(b) if rate.gbps < b.gbps => {
                    let others = members
                        .iter()
                        .filter(|q| q.port.rate.as_ref().is_some_and(|r| r.gbps >= b.gbps))
                        .count();
                    slow.push((
                        *p,
                        format!(
                            "{} runs at {} while {} runs at {}",
                            p.described(),
                            rate.text,
                            p.siblings_text(others),
                            b.text
                        ),
                    ));
                }
                _ => judged.push(rate.text.clone()),
            }
        }
    }
    if let Some((first, _)) = slow.first() {
        let text: Vec<&str> = slow.iter().map(|(_, t)| t.as_str()).collect();
        let mut v = Verdict::found(codes::RDMA_PORT_SLOW.finding_next(
            text.join("; "),
            format!(
                "{} show the speed and lanes it trained at; reseat or replace the cable or transceiver, and check the switch port's speed setting",
                first.look()
            ),
        ));
        v.metrics = verdict.metrics;
        return end(v);
    }
    let seen = if judged.is_empty() {
        Verdict::not_applicable(format!(
            "no other port of its kind to compare with: {}",
            list(&alone, 3)
        ))
    } else {
        judged.dedup();
        Verdict::pass(format!(
            "every port runs at its siblings' rate ({})",
            judged.join(", ")
        ))
    };
    let mut v = looked(Some(seen), "rate not read", &unread, scan);
    v.metrics = verdict.metrics;
    Ok(v)
}

/// The RoCE ports that are up, or the verdict of a check with none.
fn roce_up(scan: &RdmaScan) -> Result<Vec<Port<'_>>, Verdict> {
    let roce: Vec<Port<'_>> = ports(scan)
        .into_iter()
        .filter(|p| p.port.is_roce() && p.port.is_up())
        .collect();
    if roce.is_empty() {
        return end(Verdict::not_applicable(
            "no RoCE port is up (InfiniBand ports, or RoCE ports that are down: see network.rdma_ports)",
        ));
    }
    Ok(roce)
}

fn roce_gids(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let roce = roce_up(scan)?;
    let (mut missing, mut addressed, mut unread) = (Vec::new(), Vec::new(), Vec::new());
    for p in &roce {
        let found = p.port.gids.iter().find(|g| g.is_v2() && g.is_routable());
        if let (None, Some(e)) = (found, &p.port.gid_error) {
            // A table that did not read whole cannot say it lacks a GID.
            unread.push(format!("{}: {e}", p.name()));
            continue;
        }
        match found {
            Some(g) => addressed.push(format!("{} {} (GID {})", p.device.name, g.shown(), g.index)),
            None => {
                let has: Vec<String> = p
                    .port
                    .gids
                    .iter()
                    .map(|g| {
                        format!(
                            "{} {}",
                            g.shown(),
                            g.kind.as_deref().unwrap_or("type unread")
                        )
                    })
                    .collect();
                let has = if has.is_empty() {
                    format!("no GID in the {} entries read", p.port.gids_read)
                } else {
                    format!("only {}", list(&has, 4))
                };
                missing.push((*p, format!("{}: {has}", p.described())));
            }
        }
    }
    if let Some((first, _)) = missing.first() {
        let text: Vec<&str> = missing.iter().map(|(_, t)| t.as_str()).collect();
        let n = first.netdev_name();
        return end(Verdict::found(codes::ROCE_GID_MISSING.finding_next(
            format!("no routable RoCE v2 GID: {}", text.join("; ")),
            format!(
                "give {n} its address (`ip addr show {n}`; the site's netplan or NetworkManager configuration); `grep . /sys/class/infiniband/{}/ports/{}/gids/*` then lists its new GIDs",
                first.device.name, first.port.number
            ),
        )));
    }
    let seen = (!addressed.is_empty()).then(|| {
        Verdict::pass(format!(
            "every RoCE port that is up has a routable RoCE v2 GID: {}",
            list(&addressed, 8)
        ))
    });
    Ok(looked(seen, "GID table not read", &unread, scan))
}

/// The least netdev MTU that gives a RoCE MTU of 4096: Linux's
/// `iboe_get_mtu` (include/rdma/ib_addr.h) takes the GRH, UDP, BTH, XRC,
/// atomic and ICRC headers (96 bytes) from the netdev's MTU first.
const ROCE_4096_NETDEV_MTU: u32 = 4096 + 96;

/// What sites set (and vendors recommend) for RoCE: a little above the
/// least that works.
const ROCE_MTU_ADVICE: u32 = 4200;

fn roce_mtu(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let roce = roce_up(scan)?;
    let (mut small, mut unread, mut mtus) = (Vec::new(), Vec::new(), Vec::new());
    for p in &roce {
        match p.port.netdev.as_ref().and_then(|n| n.mtu) {
            Some(mtu) => {
                mtus.push(mtu.to_string());
                if mtu < ROCE_4096_NETDEV_MTU {
                    small.push((*p, format!("{} has MTU {mtu}", p.described())));
                }
            }
            None => unread.push(p.name()),
        }
    }
    if let Some((first, _)) = small.first() {
        let text: Vec<&str> = small.iter().map(|(_, t)| t.as_str()).collect();
        let n = first.netdev_name();
        return end(Verdict::found(codes::ROCE_MTU_SMALL.finding_next(
            format!(
                "{}: RoCE runs 4096-byte packets only over a netdev MTU of {ROCE_4096_NETDEV_MTU} or more ({ROCE_MTU_ADVICE} as usually set)",
                text.join("; ")
            ),
            format!(
                "`sudo ip link set {n} mtu 9000` (and the same MTU on the switch ports), then set it in the site's network configuration to keep it"
            ),
        )));
    }
    mtus.sort();
    mtus.dedup();
    let seen = (!mtus.is_empty()).then(|| {
        Verdict::pass(format!(
            "RoCE netdev MTU {}: RoCE runs 4096-byte packets",
            mtus.join(", ")
        ))
    });
    Ok(looked(seen, "no netdev MTU read for", &unread, scan))
}

fn nic_firmware(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let mut by_model: BTreeMap<String, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    let mut unread = Vec::new();
    for d in physical(scan) {
        // One firmware per card (both functions of a dual-port card run
        // it), compared among cards of one model and board.
        let card = match &d.board_id {
            Some(b) => format!("{} ({b})", d.model()),
            None => d.model(),
        };
        match d.firmware.as_deref() {
            Some(fw) => by_model
                .entry(card)
                .or_default()
                .entry(fw)
                .or_default()
                .push(&d.name),
            None => unread.push(d.name.clone()),
        }
    }
    let fact = by_model
        .iter()
        .map(|(model, versions)| {
            let v: Vec<&str> = versions.keys().copied().collect();
            format!("{model} {}", v.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut differ = Vec::new();
    for (model, versions) in &by_model {
        if versions.len() < 2 {
            continue;
        }
        // The version most cards run (ties: the first in text order).
        let Some((&most, _)) = versions
            .iter()
            .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
        else {
            continue;
        };
        let odd: Vec<String> = versions
            .iter()
            .filter(|(v, _)| **v != most)
            .map(|(v, names)| format!("{} on {v}", list(names, 4)))
            .collect();
        differ.push(format!(
            "{} of the node's {model} cards run {most}, {}",
            versions[most].len(),
            odd.join(", ")
        ));
    }
    let with = |v: Verdict| {
        if fact.is_empty() {
            v
        } else {
            v.with_fact("nic_firmware", fact.clone())
        }
    };
    if !differ.is_empty() {
        return end(with(Verdict::found(
            codes::NIC_FIRMWARE_DIFFERS.finding(differ.join("; ")),
        )));
    }
    let seen =
        (!by_model.is_empty()).then(|| Verdict::pass(format!("one firmware per model: {fact}")));
    Ok(with(looked(
        seen,
        "no firmware version read for",
        &unread,
        scan,
    )))
}

fn nic_pcie_link(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let mut seen = std::collections::BTreeSet::new();
    let (mut short, mut unread, mut full) = (Vec::new(), Vec::new(), Vec::new());
    let mut metrics = Verdict::pass("");
    for d in physical(scan) {
        // Both ports of a dual-port card on one function share its link.
        let Some(address) = d.address() else {
            unread.push(format!("{} (no PCI function)", d.name));
            continue;
        };
        if !seen.insert(address) {
            continue;
        }
        // A card with a PCIe switch of its own (ConnectX-8, BlueField-3)
        // trains its slot link above its own vendor's bridges.
        let vendor = d.pci.as_ref().and_then(|p| p.ids).map_or(0, |(v, _)| v);
        let link = match pci::physical_link_past(&ctx.facts.sysroot, address, vendor) {
            Ok(l) => l,
            Err(e) => {
                unread.push(format!("{}: {e}", d.name));
                continue;
            }
        };
        let (Some(cur), Some(max)) = (link.current_width, link.max_width) else {
            unread.push(match link.unread.first() {
                Some(e) => format!("{} ({address}): {e}", d.name),
                None => format!("{} ({address}): no link width", d.name),
            });
            continue;
        };
        metrics = metrics.with_count(
            &format!("nic_link_width.{}", d.name),
            f64::from(cur),
            "lanes",
        );
        let speed = |t: &Option<String>| t.as_deref().and_then(pci::parse_link_speed);
        let (now, top) = (speed(&link.current_speed), speed(&link.max_speed));
        let shown = |t: &Option<String>| t.clone().unwrap_or_else(|| "speed unread".into());
        let slower = matches!((now, top), (Some(n), Some(t)) if n < t);
        if cur < max || slower {
            short.push((
                address,
                format!(
                    "{} ({} at {address}) trained at x{cur} at {}, of x{max} at {} both ends can",
                    d.name,
                    d.model(),
                    shown(&link.current_speed),
                    shown(&link.max_speed)
                ),
            ));
        } else if now.is_none() || top.is_none() {
            unread.push(format!(
                "{} ({address}): link speed {:?}",
                d.name, link.current_speed
            ));
        } else {
            full.push(format!("x{cur} {}", shown(&link.current_speed)));
        }
    }
    if let Some((address, _)) = short.first() {
        let text: Vec<&str> = short.iter().map(|(_, t)| t.as_str()).collect();
        let mut v = Verdict::found(codes::NIC_PCIE_LINK_DEGRADED.finding_next(
            text.join("; "),
            format!(
                "`sudo lspci -vv -s {address}` shows LnkCap and LnkSta; reseat the card or its riser and check the slot's link setting in the BIOS"
            ),
        ));
        v.metrics = metrics.metrics;
        return end(v);
    }
    full.sort();
    full.dedup();
    let seen = (!full.is_empty()).then(|| {
        Verdict::pass(format!(
            "every card's link at its full width and speed ({})",
            full.join(", ")
        ))
    });
    let mut v = looked(seen, "link not read", &unread, scan);
    v.metrics = metrics.metrics;
    Ok(v)
}

/// A PCI function and where it sits.
struct Placed<'a> {
    /// `gpu3` or `mlx5_3`.
    name: String,
    address: &'a str,
    at: Placement,
}

impl Placed<'_> {
    fn shown(&self) -> String {
        let numa = self.at.numa_node.map_or_else(
            || "NUMA node unknown".to_string(),
            |n| format!("NUMA node {n}"),
        );
        format!("{} ({}, {numa})", self.name, self.address)
    }

    fn root_complex(&self) -> &str {
        self.at.host_bridge.as_deref().unwrap_or("?")
    }
}

/// Each GPU's card: pairs taken closest first (a shared switch, then a
/// root complex, then a NUMA node, then a card whose NUMA node is unknown
/// before one known to be remote), ties to the card whose bus is nearest
/// the GPU's, as RCCL gives each GPU the closest NIC.
fn pair<'a>(
    gpus: &[Placed<'a>],
    nics: &[Placed<'a>],
    one_domain: bool,
) -> Vec<Option<(usize, Closeness)>> {
    let close = |g: &Placed<'_>, n: &Placed<'_>| match rdma::closeness(&g.at, &n.at) {
        Closeness::Unknown if one_domain => Closeness::NumaNode,
        c => c,
    };
    // The bus of `dddd:bb:dd.f` (domains may have five digits).
    let bus = |a: &str| {
        a.rsplit(':')
            .nth(1)
            .and_then(|b| u8::from_str_radix(b, 16).ok())
            .unwrap_or(0)
    };
    let mut taken = vec![false; nics.len()];
    let mut pairs = vec![None; gpus.len()];
    for level in [
        Closeness::Switch,
        Closeness::RootComplex,
        Closeness::NumaNode,
        Closeness::Unknown,
        Closeness::Remote,
    ] {
        for (gi, g) in gpus.iter().enumerate() {
            if pairs[gi].is_some() {
                continue;
            }
            let best = nics
                .iter()
                .enumerate()
                .filter(|(ni, n)| !taken[*ni] && close(g, n) == level)
                .min_by_key(|(_, n)| bus(n.address).abs_diff(bus(g.address)));
            if let Some((ni, _)) = best {
                taken[ni] = true;
                pairs[gi] = Some((ni, level));
            }
        }
    }
    pairs
}

fn gpu_nic_affinity(ctx: &NodeContext, _: Scope) -> Outcome {
    let scan = cards(ctx)?;
    let sysroot = &ctx.facts.sysroot;
    let mut unread = Vec::new();
    let mut place = |name: String, address: &str| match rdma::placement(sysroot, address) {
        Ok(at) => Some(at),
        Err(e) => {
            unread.push(format!("{name}: {e}"));
            None
        }
    };
    let mut gpus: Vec<Placed<'_>> = Vec::new();
    for g in &ctx.facts.gpus {
        let Some(p) = g.pci.as_ref() else { continue };
        if gpus.iter().any(|x| x.address == p.address) {
            continue;
        }
        if let Some(at) = place(format!("gpu{}", g.index), &p.address) {
            gpus.push(Placed {
                name: format!("gpu{}", g.index),
                address: &p.address,
                at,
            });
        }
    }
    // The rails: the cards of the kind the node has most of (a frontend
    // card, the unused function of a dual-port card or a VF is no GPU's
    // rail), one per PCI function.
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for d in physical(scan) {
        *kinds.entry(d.kind()).or_default() += 1;
    }
    let rail = kinds
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(k, _)| k.clone())
        .unwrap_or_default();
    let mut nics: Vec<Placed<'_>> = Vec::new();
    for d in physical(scan).filter(|d| d.kind() == rail) {
        let Some(address) = d.address() else { continue };
        if nics.iter().any(|n| n.address == address) {
            continue;
        }
        if let Some(at) = place(d.name.clone(), address) {
            nics.push(Placed {
                name: d.name.clone(),
                address,
                at,
            });
        }
    }
    if gpus.is_empty() {
        return end(Verdict::not_applicable(
            "no GPU on the PCI bus to pair with a card",
        ));
    }
    if nics.is_empty() {
        return end(Verdict::unverifiable(format!(
            "no RDMA card's PCI function could be placed: {}",
            list(&unread, 3)
        )));
    }
    // One memory domain: nothing is remote. The kernel says how many
    // NUMA nodes it has; without that, a node where no device has one
    // (numa_node -1 everywhere) is taken as one.
    let one_domain = match rdma::numa_nodes_online(sysroot) {
        Some(n) => n == 1,
        None => gpus.iter().chain(&nics).all(|p| p.at.numa_node.is_none()),
    };
    let pairs = pair(&gpus, &nics, one_domain);
    let mut table = String::new();
    for (g, p) in gpus.iter().zip(&pairs) {
        match p {
            Some((ni, level)) => table.push_str(&format!(
                "{} <-> {}: {}\n",
                g.shown(),
                nics[*ni].shown(),
                level.phrase()
            )),
            None => table.push_str(&format!("{}: no card left\n", g.shown())),
        }
    }
    let with = |v: Verdict| v.with_output(table.clone());
    if nics.len() < gpus.len() {
        let unplaced = if unread.is_empty() {
            String::new()
        } else {
            format!("; not placed: {}", list(&unread, 4))
        };
        return end(with(Verdict::not_applicable(format!(
            "{} {rail} cards for {} GPUs: GPUs share cards, so no GPU is owed one nearby (the pairing RCCL would start from is in the output){unplaced}",
            nics.len(),
            gpus.len()
        ))));
    }
    let mut far = Vec::new();
    let mut unknown = Vec::new();
    for (g, p) in gpus.iter().zip(&pairs) {
        let Some((ni, level)) = p else { continue };
        let n = &nics[*ni];
        match level {
            Closeness::Remote => {
                // Cards crowding another GPU's root complex say where the
                // missing one went.
                let mut crowded: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                for x in &nics {
                    crowded.entry(x.root_complex()).or_default().push(&x.name);
                }
                let gpus_on = |rc: &str| gpus.iter().filter(|y| y.root_complex() == rc).count();
                let crowd: Vec<String> = crowded
                    .iter()
                    .filter(|(rc, names)| names.len() > gpus_on(rc).max(1))
                    .map(|(rc, names)| {
                        format!(
                            "{} cards share root complex {rc} ({})",
                            names.len(),
                            names.join(", ")
                        )
                    })
                    .collect();
                far.push(format!(
                    "{} has no card on its PCIe switch, root complex or NUMA node: the one left for it, {}, is on another NUMA node{}",
                    g.shown(),
                    n.shown(),
                    if crowd.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", crowd.join("; "))
                    }
                ));
            }
            Closeness::Unknown => unknown.push(format!("{} and {}", g.name, n.name)),
            _ => {}
        }
    }
    if !far.is_empty() {
        return end(with(Verdict::found(codes::GPU_NIC_FAR.finding(format!(
            "{} RDMA cards for {} GPUs, yet {}",
            nics.len(),
            gpus.len(),
            far.join("; ")
        )))));
    }
    let mut levels: BTreeMap<Closeness, usize> = BTreeMap::new();
    for (_, level) in pairs.iter().flatten() {
        *levels.entry(*level).or_default() += 1;
    }
    let mut parts = vec![Verdict::pass(format!(
        "each of {} GPUs has a card of its own nearby: {}",
        gpus.len(),
        levels
            .iter()
            .filter(|(l, _)| **l != Closeness::Unknown)
            .map(|(l, n)| format!("{n} {}", l.phrase()))
            .collect::<Vec<_>>()
            .join(", ")
    ))];
    if !unknown.is_empty() {
        parts.push(Verdict::unverifiable(format!(
            "NUMA node unknown for {}",
            list(&unknown, 4)
        )));
    }
    if !unread.is_empty() {
        parts.push(Verdict::unverifiable(format!(
            "not placed: {}",
            list(&unread, 4)
        )));
    }
    parts.extend(unread_devices(scan));
    Ok(with(combine(parts, "no GPU")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{assert_found, code, next_step, node};
    use rocgate_harness::SkipReason;

    #[test]
    fn a_node_without_rdma_cards_has_nothing_to_judge() {
        let n = node("mi300x-8");
        for c in checks() {
            let v = n.verdict(c.run, Scope::Node);
            assert_eq!(
                v.skip_reason,
                Some(SkipReason::NotApplicable),
                "{}: {v:?}",
                c.id
            );
        }
    }

    #[test]
    fn eight_rails_beside_eight_gpus_pass_every_check() {
        for scenario in ["mi300x-8-ib", "mi300x-8-roce"] {
            let n = node(scenario);
            let passed: Vec<&str> = checks()
                .iter()
                .filter(|c| n.verdict(c.run, Scope::Node).status == rocgate_harness::Status::Pass)
                .map(|c| c.id)
                .collect();
            // InfiniBand has no RoCE to judge.
            let expected = if scenario.ends_with("ib") { 6 } else { 8 };
            assert_eq!(passed.len(), expected, "{scenario}: {passed:?}");
        }
        let n = node("mi300x-8-ib");
        let v = n.verdict(rdma_ports, Scope::Node);
        assert!(
            v.message
                .contains("8 RDMA ports up (8 ConnectX-7 port 1, InfiniBand)"),
            "{}",
            v.message
        );
        let v = n.verdict(nic_firmware, Scope::Node);
        assert_eq!(
            v.facts.get("nic_firmware").map(String::as_str),
            Some("ConnectX-7 (MT_0000000838) 28.39.1002")
        );
        let v = n.verdict(gpu_nic_affinity, Scope::Node);
        assert!(v.message.contains("8 on one root complex"), "{}", v.message);
        assert!(
            v.output
                .contains("gpu3 (0000:65:00.0, NUMA node 0) <-> mlx5_3"),
            "{}",
            v.output
        );
    }

    #[test]
    fn one_port_down_among_its_siblings_fails_naming_it() {
        let n = node("rdma-port-down");
        let v = n.verdict(rdma_ports, Scope::Node);
        assert_found(
            &v,
            codes::RDMA_PORT_DOWN,
            "mlx5_5 port 1 (ConnectX-7 at 0000:ac:00.0, InfiniBand) is DOWN, Polling: no link partner",
        );
        assert_found(
            &v,
            codes::RDMA_PORT_DOWN,
            "while port 1 of each of the other 7 ConnectX-7 cards is up",
        );
        assert!(
            next_step(&v).starts_with("`ibstat mlx5_5 1` and `iblinkinfo`"),
            "{}",
            next_step(&v)
        );
        // Its rate means nothing and is not judged.
        assert_eq!(
            n.verdict(rdma_rate, Scope::Node).status,
            rocgate_harness::Status::Pass
        );
    }

    #[test]
    fn a_slow_port_and_a_far_card_warn() {
        let v = node("rdma-port-slow").verdict(rdma_rate, Scope::Node);
        assert_found(
            &v,
            codes::RDMA_PORT_SLOW,
            "bnxt_re2 port 1 (BCM57608 at 0000:4c:00.0, Ethernet, enp76s0np0) runs at 200 Gb/sec (4X HDR) while port 1 of each of the other 7 BCM57608 cards runs at 400 Gb/sec (4X NDR)",
        );
        assert_eq!(v.metrics.len(), 8);
        let v = node("nic-numa-remote").verdict(gpu_nic_affinity, Scope::Node);
        for says in [
            "gpu3 (0000:65:00.0, NUMA node 0) has no card",
            "mlx5_3 (0000:ed:00.0, NUMA node 1)",
            "2 cards share root complex pci0000:e0 (mlx5_3, mlx5_7)",
        ] {
            assert_found(&v, codes::GPU_NIC_FAR, says);
        }
    }

    /// Writes `contents` to `rel` under the node's root.
    fn put(root: &std::path::Path, rel: &str, contents: &str) {
        std::fs::write(root.join(rel), contents).unwrap();
    }

    #[test]
    fn cards_that_are_no_rails_are_not_judged_as_rails() {
        use crate::layers::fixture::node_changed;
        // Each rail card grows an unused second port (function 1, its own
        // RDMA device, down), and mlx5_0 a virtual function that is down.
        let n = node_changed("mi300x-8-ib", |root| {
            let devices = root.join("sys/devices");
            // (device, PCI function, its directory under sys/devices)
            let spares = [
                (
                    "mlx5_8",
                    "0000:0c:00.1",
                    "pci0000:00/0000:00:03.4/0000:0c:00.1",
                    "0x1021",
                ),
                (
                    "mlx5_9",
                    "0000:2c:00.2",
                    "pci0000:20/0000:20:03.4/0000:2c:00.2",
                    "0x101e",
                ),
            ];
            for (name, address, dir, id) in spares {
                let f = devices.join(dir);
                let ib = f.join("infiniband").join(name);
                std::fs::create_dir_all(ib.join("ports/1")).unwrap();
                for (file, v) in [
                    ("vendor", "0x15b3\n"),
                    ("device", id),
                    ("class", "0x020700\n"),
                ] {
                    put(&f, file, v);
                }
                for (file, v) in [
                    ("fw_ver", "28.39.1002\n"),
                    ("hca_type", "MT4129\n"),
                    ("board_id", "MT_0000000838\n"),
                ] {
                    put(&ib, file, v);
                }
                for (file, v) in [
                    ("state", "1: DOWN\n"),
                    ("phys_state", "2: Polling\n"),
                    ("link_layer", "InfiniBand\n"),
                    ("rate", "10 Gb/sec (4X SDR)\n"),
                ] {
                    put(&ib, &format!("ports/1/{file}"), v);
                }
                std::os::unix::fs::symlink(format!("../../../{address}"), ib.join("device"))
                    .unwrap();
                std::os::unix::fs::symlink(
                    format!("../../devices/{dir}/infiniband/{name}"),
                    root.join("sys/class/infiniband").join(name),
                )
                .unwrap();
                std::os::unix::fs::symlink(
                    format!("../../../devices/{dir}"),
                    root.join("sys/bus/pci/devices").join(address),
                )
                .unwrap();
            }
            // mlx5_9 is a VF of mlx5_1's card.
            std::os::unix::fs::symlink(
                "../0000:2c:00.0",
                devices.join("pci0000:20/0000:20:03.4/0000:2c:00.2/physfn"),
            )
            .unwrap();
        });
        // The unused second ports of one kind are all down: a warning, not
        // a drain; the VF is no card at all.
        let v = n.verdict(rdma_ports, Scope::Node);
        assert_eq!(code(&v), Some("rdma-no-port-up"), "{}", v.message);
        assert!(
            v.message.contains("mlx5_8 port 1") && !v.message.contains("mlx5_9"),
            "{}",
            v.message
        );
        let v = n.verdict(gpu_nic_affinity, Scope::Node);
        assert_eq!(v.status, rocgate_harness::Status::Pass, "{}", v.message);
        assert!(
            !v.output.contains("mlx5_8") && !v.output.contains("mlx5_9"),
            "{}",
            v.output
        );
    }

    #[test]
    fn a_port_set_down_warns_and_a_card_without_its_rdma_device_is_named() {
        use crate::layers::fixture::node_changed;
        let n = node_changed("mi300x-8-roce", |root| {
            let ib = root.join("sys/class/infiniband");
            let port = ib.join("bnxt_re3/ports/1");
            put(&port, "state", "1: DOWN\n");
            put(&port, "phys_state", "3: Disabled\n");
            put(&root.join("sys/class/net/enp108s0np0"), "flags", "0x1002\n");
            // bnxt_re5's RDMA device never came: bnxt_re did not probe it.
            std::fs::remove_file(ib.join("bnxt_re5")).unwrap();
        });
        let v = n.verdict(rdma_ports, Scope::Node);
        assert_eq!(code(&v), Some("rdma-port-disabled"), "{}", v.message);
        assert!(
            v.message.contains("its netdev enp108s0np0 is set down"),
            "{}",
            v.message
        );
        let v = n.verdict(rdma_devices, Scope::Node);
        assert_eq!(code(&v), Some("rdma-device-missing"), "{}", v.message);
        assert!(v.message.contains("1 of the 8 RDMA cards on the PCI bus have no RDMA device in /sys/class/infiniband: 0000:ac:00.0 (BCM57608, driver bnxt_en)"), "{}", v.message);
    }

    #[test]
    fn the_pairing_prefers_a_shared_switch_and_knows_one_memory_domain() {
        let at = |hb: &str, bridges: &[&str], numa: Option<u32>| Placement {
            host_bridge: Some(hb.to_string()),
            bridges: bridges.iter().map(|b| b.to_string()).collect(),
            numa_node: numa,
        };
        let placed = |name: &str, address: &'static str, at: Placement| Placed {
            name: name.to_string(),
            address,
            at,
        };
        let gpus = [
            placed(
                "gpu0",
                "0000:05:00.0",
                at("pci0000:00", &["0000:00:01.1", "0000:02:00.0"], None),
            ),
            placed(
                "gpu1",
                "0000:85:00.0",
                at("pci0000:80", &["0000:80:01.1"], None),
            ),
        ];
        let nics = [
            placed(
                "a",
                "0000:0c:00.0",
                at("pci0000:00", &["0000:00:03.1"], None),
            ),
            placed(
                "b",
                "0000:06:00.0",
                at("pci0000:00", &["0000:00:01.1", "0000:02:01.0"], None),
            ),
        ];
        let pairs = pair(&gpus, &nics, true);
        assert_eq!(pairs[0], Some((1, Closeness::Switch)));
        assert_eq!(pairs[1], Some((0, Closeness::NumaNode)));
        assert_eq!(pair(&gpus, &nics, false)[1], Some((0, Closeness::Unknown)));
    }
}
