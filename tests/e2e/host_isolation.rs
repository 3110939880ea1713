//! PCIe ACS and IOMMU groups as a stock EPYC host has them, through the
//! binary: Linux turns ACS redirect on at boot on every ACS-capable port
//! once the AMD IOMMU driver asks for it (`pci_request_acs()` in
//! drivers/iommu/amd/init.c, `pci_std_enable_acs` in drivers/pci/pci.c),
//! `iommu=pt` or not; an IOMMU group's type is one of the names
//! drivers/iommu/iommu.c `iommu_group_show_type` prints.

use crate::util::{assert_has, node, result, result_with_finding, result_with_status, run, text};
use std::path::Path;

/// The ACS Control register of the bridge at `address` (the fixtures put
/// the ACS capability at 0x168, its control at 0x16e).
fn acs_control(root: &Path, address: &str) -> u16 {
    let c = std::fs::read(root.join(format!("sys/bus/pci/devices/{address}/config"))).unwrap();
    u16::from_le_bytes([c[0x16e], c[0x16f]])
}

#[test]
fn a_stock_epyc_node_with_acs_redirect_on_is_green_with_a_warning() {
    let n = node("mi300x-8");
    // What Linux sets: SrcValid, ReqRedir, CmpltRedir, UpstreamFwd.
    assert_eq!(acs_control(&n.root, "0000:00:01.1"), 0x001d);
    let (code, stdout, json, junit) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(json["passed"], true);
    assert_has(&stdout, "PASSED with 1 warning");
    let r = result_with_finding(&json, "node.system.pcie_acs", "pcie-acs-enabled");
    assert_eq!(r["status"], "warn");
    assert!(
        text(&r["message"]).contains("at 8 of 24 bridges")
            && text(&r["message"])
                .contains("0000:e0:01.1 (ReqRedir CmpltRedir on; above 0000:e5:00.0)"),
        "{r}"
    );
    let next = text(&r["finding"]["next_step"]);
    assert!(
        next.contains("setpci -s $b ECAP_ACS+0x6.w=0000")
            && next.contains("pci=disable_acs_redir=0000:00:01.1;0000:20:01.1;")
            && next.contains("pci=disable_acs_redir=pci:1022:14ab")
            && next.contains("pci=config_acs=x0x00xx@0000:00:01.1;"),
        "{next}"
    );
    assert_has(&junit, r#"failures="0""#);
    assert_has(&junit, "warn [pcie-acs-enabled]");

    // As AMD's cluster guides leave it (ACS off), the check passes.
    for entry in std::fs::read_dir(n.root.join("sys/bus/pci/devices")).unwrap() {
        let config = entry.unwrap().path().join("config");
        if let Ok(mut c) = std::fs::read(&config) {
            if c.len() > 0x16f {
                c[0x16e] = 0;
                c[0x16f] = 0;
                std::fs::write(&config, c).unwrap();
            }
        }
    }
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 0);
    assert_eq!(json["warnings"].as_array().map(Vec::len), Some(0), "{json}");
    result_with_status(&json, "node.system.pcie_acs", "pass");
}

/// Writes `kind` as the IOMMU group type of the GPUs with the given indices
/// (the fixtures put GPU `n` in group `40 + n`).
fn group_type(root: &Path, gpus: &[u32], kind: &str) {
    for n in gpus {
        let path = root.join(format!("sys/kernel/iommu_groups/{}/type", 40 + n));
        assert!(path.exists(), "{}", path.display());
        std::fs::write(path, format!("{kind}\n")).unwrap();
    }
}

#[test]
fn each_iommu_group_type_is_named_and_judged() {
    // Translated: a warning naming the type.
    for kind in ["DMA", "DMA-FQ"] {
        let n = node("mi300x-8");
        group_type(&n.root, &[0, 1, 2, 3, 4, 5, 6, 7], kind);
        let (code, _, json, _) = run(&n.root, &[]);
        assert_eq!(code, 0, "{kind}");
        let r = result_with_finding(&json, "node.system.iommu", "iommu-not-passthrough");
        assert!(
            text(&r["message"]).contains(&format!("8 of 8 GPUs: 0000:05:00.0 ({kind})")),
            "{r}"
        );
    }
    // Held by vfio: named, and no verdict on the host's DMA setting.
    let n = node("mi300x-8");
    group_type(&n.root, &[2], "unmanaged");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result_with_status(&json, "node.system.iommu", "pass");
    assert!(
        text(&r["message"]).starts_with("7 GPUs in passthrough")
            && text(&r["message"]).contains("held by vfio")
            && text(&r["message"]).contains("0000:46:00.0 (unmanaged)"),
        "{r}"
    );
    // Blocked: the GPU cannot reach memory at all, a failure.
    let n = node("mi300x-8");
    group_type(&n.root, &[5], "blocked");
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1, "{stdout}");
    let r = result_with_finding(&json, "node.system.iommu", "iommu-dma-blocked");
    assert_eq!(r["status"], "fail");
    assert!(
        text(&r["message"])
            .contains("blocks all DMA of 1 of 8 GPUs (group type blocked): 0000:a6:00.0 (blocked)"),
        "{r}"
    );
    // Unknown: the check could not judge, not a pass.
    let n = node("mi300x-8");
    group_type(&n.root, &[7], "unknown");
    let (_, _, json, _) = run(&n.root, &[]);
    let r = result(&json, "node.system.iommu");
    assert_eq!(r["status"], "skipped", "{r}");
    assert!(
        text(&r["message"]).contains("0000:e5:00.0 (unknown)"),
        "{r}"
    );
}
