//! amdgpu's RAS as the driver really behaves, through the real binary: the
//! driver's default bad-page threshold per MP0 version (or its own count
//! from debugfs), the MI300A on which the driver turns page retirement off
//! itself, hwmon limits of 0 that are no limits, uncorrectable UMC errors
//! that reach only the kernel log through the CPU's machine-check path,
//! and a block counted by both `aca_<block>` and `<block>_err_count`.

use crate::util;
use crate::util::{
    assert_has, assert_lacks, node, result, result_with_finding, result_with_status, run, text,
};
use std::fs;
use std::path::Path;

const PCI: &str = "sys/bus/pci/devices";

/// Writes `count` retired pages into the GPU at `address`.
fn retire(root: &Path, address: &str, count: u32) {
    let pages: String = (0..count)
        .map(|p| format!("0x{:08x} : 0x00001000 : R\n", 0x0004_0000 + p * 3))
        .collect();
    fs::write(
        root.join(format!("{PCI}/{address}/ras/gpu_vram_bad_pages")),
        pages,
    )
    .unwrap();
}

fn set_parameter(root: &Path, name: &str, value: &str) {
    fs::write(
        root.join(format!("sys/module/amdgpu/parameters/{name}")),
        format!("{value}\n"),
    )
    .unwrap();
}

fn set_mp0(root: &Path, address: &str, (major, minor, revision): (u32, u32, u32)) {
    let dir = root.join(format!("{PCI}/{address}/ip_discovery/die/0/MP0/0"));
    fs::create_dir_all(&dir).unwrap();
    for (f, n) in [("major", major), ("minor", minor), ("revision", revision)] {
        fs::write(dir.join(f), format!("{n}\n")).unwrap();
    }
}

fn append_log(root: &Path, line: &str) {
    let path = root.join("var/log/kern.log");
    let mut log = fs::read_to_string(&path).unwrap();
    log.push_str(line);
    log.push('\n');
    fs::write(path, log).unwrap();
}

#[test]
fn the_default_threshold_on_mi300x_is_128_pages_and_past_it_the_gpu_fails() {
    let n = node("mi300x-8");
    // gpu3 near (120 of 128), gpu4 past (129), gpu5 at 100: clear.
    retire(&n.root, "0000:65:00.0", 120);
    retire(&n.root, "0000:85:00.0", 129);
    retire(&n.root, "0000:a6:00.0", 100);
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1, "a GPU past the threshold fails the run: {stdout}");
    let near = result_with_finding(&json, "gpu3.amdgpu.ras_bad_pages", "ras-bad-pages");
    assert_eq!(near["status"], "warn", "{near}");
    assert!(
        text(&near["message"]).contains("120 retired VRAM pages of a threshold of 128"),
        "{near}"
    );
    let past = result_with_finding(
        &json,
        "gpu4.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
    assert_eq!(past["status"], "fail", "{past}");
    let message = text(&past["message"]);
    assert_has(message, "129 retired VRAM pages of a threshold of 128");
    assert_has(message, "MP0 13.0.6 (from ip_discovery)");
    assert_has(message, "Service Action Guide");
    let clear = result_with_status(&json, "gpu5.amdgpu.ras_bad_pages", "pass");
    assert!(
        text(&clear["message"]).contains("100 retired VRAM pages of a threshold of 128"),
        "{clear}"
    );
    // The catalogue no longer says the driver marks a GPU bad at the default.
    let catalogue = fs::read_to_string(util::repo().join("FINDINGS.md")).unwrap();
    assert!(!catalogue.contains("past which the driver marks it bad"));
}

#[test]
fn the_scenario_past_the_default_is_diagnosed() {
    let n = node("ras-bad-pages-past-default");
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    result_with_finding(
        &json,
        "gpu5.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
}

#[test]
fn mp0_13_0_14_doubles_the_default_and_no_ip_discovery_falls_back_to_the_device_id() {
    let n = node("mi300x-8");
    set_mp0(&n.root, "0000:05:00.0", (13, 0, 14));
    retire(&n.root, "0000:05:00.0", 200);
    retire(&n.root, "0000:26:00.0", 240);
    set_mp0(&n.root, "0000:26:00.0", (13, 0, 14));
    fs::remove_dir_all(n.root.join(format!("{PCI}/0000:46:00.0/ip_discovery"))).unwrap();
    retire(&n.root, "0000:46:00.0", 129);
    let (_, _, json, _) = run(&n.root, &[]);
    let v = result_with_status(&json, "gpu0.amdgpu.ras_bad_pages", "pass");
    assert!(
        text(&v["message"]).contains("200 retired VRAM pages of a threshold of 256"),
        "{v}"
    );
    let v = result_with_finding(&json, "gpu1.amdgpu.ras_bad_pages", "ras-bad-pages");
    assert!(text(&v["message"]).contains("MP0 13.0.14"), "{v}");
    let v = result_with_finding(
        &json,
        "gpu2.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
    assert!(
        text(&v["message"]).contains("from its PCI device id"),
        "{v}"
    );
}

#[test]
fn minus_two_is_a_page_per_100_mib_and_debugfs_gives_the_drivers_own_count() {
    let n = node("mi300x-8");
    set_parameter(&n.root, "bad_page_threshold", "-2");
    // 192 GiB of VRAM: 1966 pages.
    retire(&n.root, "0000:05:00.0", 1900);
    retire(&n.root, "0000:26:00.0", 1967);
    retire(&n.root, "0000:46:00.0", 300);
    // debugfs, readable by root: the driver's own count wins. gpu3 is card3.
    let debugfs = n.root.join("sys/kernel/debug/dri/3/ras");
    fs::create_dir_all(&debugfs).unwrap();
    fs::write(debugfs.join("bad_page_cnt_threshold"), "50\n").unwrap();
    retire(&n.root, "0000:65:00.0", 60);
    let (_, _, json, _) = run(&n.root, &[]);
    let v = result_with_finding(&json, "gpu0.amdgpu.ras_bad_pages", "ras-bad-pages");
    assert!(
        text(&v["message"]).contains("1900 retired VRAM pages of a threshold of 1966"),
        "{v}"
    );
    result_with_finding(
        &json,
        "gpu1.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
    result_with_status(&json, "gpu2.amdgpu.ras_bad_pages", "pass");
    let v = result_with_finding(
        &json,
        "gpu3.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
    assert!(text(&v["message"]).contains("debugfs"), "{v}");
}

#[test]
fn a_user_threshold_past_which_the_driver_marks_the_gpu_bad_fails() {
    let n = node("ras-bad-pages");
    retire(&n.root, "0000:05:00.0", 513);
    let (_, _, json, _) = run(&n.root, &[]);
    let v = result_with_finding(
        &json,
        "gpu0.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
    assert!(text(&v["message"]).contains("marks the GPU bad"), "{v}");
    // 470 of 512 stays a warning.
    let v = result_with_finding(&json, "gpu5.amdgpu.ras_bad_pages", "ras-bad-pages");
    assert_eq!(v["status"], "warn", "{v}");
}

#[test]
fn on_mi300a_the_drivers_own_zero_is_no_advisory_and_retirement_is_not_applicable() {
    let n = node("mi300a-4");
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 0, "{stdout}");
    result_with_status(&json, "node.system.amdgpu_parameters", "pass");
    for gpu in 0..4 {
        let v = result_with_status(&json, &format!("gpu{gpu}.amdgpu.ras_bad_pages"), "skipped");
        assert_eq!(v["skip_reason"], "not-applicable", "{v}");
        assert!(text(&v["message"]).contains("MI300A"), "{v}");
    }
    // A 0 on an MI300X is still someone's setting.
    let n = node("mi300x-8");
    set_parameter(&n.root, "bad_page_threshold", "0");
    let (_, _, json, _) = run(&n.root, &[]);
    result_with_finding(
        &json,
        "node.system.amdgpu_parameters",
        "amdgpu-checks-weakened",
    );
}

#[test]
fn temperature_limits_of_zero_are_no_limits_and_the_check_says_it_judged_none() {
    let n = node("mi300x-8");
    let hw = n.root.join(format!("{PCI}/0000:05:00.0/hwmon/hwmon2"));
    for t in [2, 3] {
        fs::write(hw.join(format!("temp{t}_crit")), "0\n").unwrap();
        fs::write(hw.join(format!("temp{t}_emergency")), "0\n").unwrap();
    }
    // gpu1: no temperature limit and no power cap either.
    let hw1 = n.root.join(format!("{PCI}/0000:26:00.0/hwmon/hwmon3"));
    for t in [2, 3] {
        fs::write(hw1.join(format!("temp{t}_crit")), "0\n").unwrap();
        fs::remove_file(hw1.join(format!("temp{t}_emergency"))).unwrap();
    }
    fs::write(hw1.join("power1_cap"), "0\n").unwrap();
    // gpu2: hot, with only the emergency limit left.
    let hw2 = n.root.join(format!("{PCI}/0000:46:00.0/hwmon/hwmon4"));
    fs::write(hw2.join("temp2_crit"), "0\n").unwrap();
    fs::write(hw2.join("temp2_input"), "102000\n").unwrap();
    let (_, _, json, _) = run(&n.root, &[]);
    let v = result_with_status(&json, "gpu0.amdgpu.thermals", "pass");
    let message = text(&v["message"]);
    assert_has(message, "not judged, no limit exposed");
    assert_has(message, "junction, mem");
    let v = result_with_status(&json, "gpu1.amdgpu.thermals", "skipped");
    assert_eq!(v["skip_reason"], "unverifiable", "{v}");
    assert!(text(&v["message"]).contains("nothing was judged"), "{v}");
    let v = result_with_finding(&json, "gpu2.amdgpu.thermals", "gpu-at-limit-idle");
    assert!(
        text(&v["message"]).contains("junction at 102 °C, emergency limit 105 °C"),
        "{v}"
    );
}

#[test]
fn an_uncorrectable_umc_error_from_the_cpus_machine_check_fails_its_gpu() {
    let n = node("mi210-8-two-hives");
    // MI210s keep <block>_err_count, all zero: only the log tells.
    append_log(
        &n.root,
        "[ 9120.000210] amdgpu 0000:43:00.0: amdgpu: Uncorrectable error detected in UMC inst: 2, chan_idx: 5",
    );
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    let bad = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["id"].as_str().unwrap().ends_with(".amdgpu.ras_errors") && r["status"] == "fail"
        })
        .collect::<Vec<_>>();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0]["finding"]["code"], "ras-uncorrectable");
    assert!(
        text(&bad[0]["message"]).contains("0000:43:00.0")
            && text(&bad[0]["message"]).contains("UMC inst: 2"),
        "{}",
        bad[0]
    );

    // A line that names no GPU concerns the node: every GPU's RAS is red.
    let n = node("mi300x-8");
    append_log(
        &n.root,
        "[ 9121.000000] Uncorrectable error detected in UMC inst: 0, chan_idx: 1",
    );
    let (_, _, json, _) = run(&n.root, &[]);
    for gpu in 0..8 {
        let v = result_with_finding(
            &json,
            &format!("gpu{gpu}.amdgpu.ras_errors"),
            "ras-uncorrectable",
        );
        assert!(text(&v["message"]).contains("names no GPU"), "{v}");
    }
}

#[test]
fn a_block_counted_by_both_file_names_is_counted_once() {
    let n = node("mi300x-8");
    let ras = n.root.join(format!("{PCI}/0000:26:00.0/ras"));
    fs::write(ras.join("aca_umc"), "ue: 2\nce: 4\nde: 0\n").unwrap();
    fs::write(ras.join("umc_err_count"), "ue: 2\nce: 6\nde: 0\n").unwrap();
    let (code, _, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1);
    let v = result_with_finding(&json, "gpu1.amdgpu.ras_errors", "ras-uncorrectable");
    let message = text(&v["message"]);
    assert_has(message, "umc: 2 uncorrectable");
    assert_lacks(message, "umc: 2 uncorrectable, umc");
    let gpu1 = util::entry(&json["scopes"], "scope", "gpu1");
    assert_eq!(gpu1["properties"]["ras_ue"], "2", "{gpu1}");
    assert_eq!(gpu1["properties"]["ras_ce"], "6", "{gpu1}");
    let _ = result(&json, "gpu1.amdgpu.ras_bad_pages");
}

#[test]
fn a_cut_list_whose_lower_bound_is_past_the_default_fails_naming_the_bound() {
    let n = node("mi300x-8");
    // Past the 1 MiB rocgate reads: the whole records read are a lower bound.
    let line = "0x00012345 : 0x00001000 : R\n";
    fs::write(
        n.root
            .join(format!("{PCI}/0000:46:00.0/ras/gpu_vram_bad_pages")),
        line.repeat(60_000),
    )
    .unwrap();
    let (_, _, json, _) = run(&n.root, &[]);
    let v = result_with_finding(
        &json,
        "gpu2.amdgpu.ras_bad_pages",
        "ras-bad-pages-past-threshold",
    );
    assert!(text(&v["message"]).contains("at least 37449"), "{v}");
    assert_eq!(v["facts"]["ras_bad_pages"], "at least 37449", "{v}");
}
