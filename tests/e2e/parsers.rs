//! The node's files as a damaged driver, a failing sensor or a broken
//! capture leaves them, through the real binary: one unreadable RAS file
//! hides no readable count, garbled readings (NaN, infinities, values the
//! kernel cannot print) are unverifiable and never written into a report,
//! and the system, PCI and KFD readers name the file they could not make
//! sense of instead of passing, failing or calling it not applicable.

use crate::util;
use crate::util::{
    TOPO, assert_has, assert_lacks, doctor, entry, mec, nix_is_root, node, on_sysroot, real,
    result, result_with_status, rocgate_on, run, set_prop, text,
};
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

/// Runs `cmd` as the unprivileged user `nobody` when this test runs as
/// root (root reads any file), else as it is.
fn as_unprivileged(cmd: &mut Command) -> Command {
    if nix_is_root() {
        let mut wrapped = Command::new("setpriv");
        wrapped.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        wrapped.arg(cmd.get_program());
        wrapped.args(cmd.get_args());
        wrapped
    } else {
        let mut same = Command::new(cmd.get_program());
        same.args(cmd.get_args());
        same
    }
}

/// Makes every directory from `dir` up to the temporary root traversable
/// by another user (the node's own files keep their modes).
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for d in dir
        .ancestors()
        .take_while(|d| d.starts_with(std::env::temp_dir()) && *d != std::env::temp_dir())
    {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn binary_for_others() -> (tempfile::TempDir, PathBuf) {
    // The build tree may not be readable by another user: copy the binary.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("rocgate");
    std::fs::copy(env!("CARGO_BIN_EXE_rocgate"), &bin).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, bin)
}

/// The PCI directory of the mi300x-8 scenario's GPU `gpu`.
fn dev(root: &Path, gpu: usize) -> std::path::PathBuf {
    const BUSES: [u8; 8] = [0x05, 0x26, 0x46, 0x65, 0x85, 0xa6, 0xc6, 0xe5];
    root.join(format!("sys/bus/pci/devices/0000:{:02x}:00.0", BUSES[gpu]))
}

/// The one hwmon directory of GPU `gpu`.
fn hwmon(root: &Path, gpu: usize) -> std::path::PathBuf {
    let base = dev(root, gpu).join("hwmon");
    let name = fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .find(|n| n.to_string_lossy().starts_with("hwmon"))
        .unwrap();
    base.join(name)
}

/// `id`'s status and message.
fn status<'a>(json: &'a Value, id: &str) -> (&'a str, &'a str) {
    let r = result(json, id);
    (r["status"].as_str().unwrap(), text(&r["message"]))
}

/// `id` was skipped as unverifiable with a message containing every one of
/// `says`.
#[track_caller]
fn unverifiable(json: &Value, id: &str, says: &[&str]) {
    let r = result(json, id);
    assert_eq!(r["status"], "skipped", "{id}: {r}");
    assert_eq!(r["skip_reason"], "unverifiable", "{id}: {r}");
    for s in says {
        assert!(
            text(&r["message"]).contains(s),
            "{id} should say {s:?}: {r}"
        );
    }
}

/// No metric of the report is anything but a number.
#[track_caller]
fn every_metric_is_a_number(json: &Value) {
    for r in json["results"].as_array().unwrap() {
        for m in r["metrics"].as_array().into_iter().flatten() {
            assert!(m["value"].is_number(), "{}: {m}", r["id"]);
        }
    }
}

#[test]
fn an_unreadable_ras_file_hides_no_readable_uncorrectable_count() {
    let n = node("mi300x-8");
    let root = &n.root;
    // gpu1: 5 uncorrectable UMC errors, and `features` a directory.
    fs::write(dev(root, 1).join("ras/aca_umc"), "ue: 5\nce: 0\nde: 0\n").unwrap();
    let features = dev(root, 1).join("ras/features");
    fs::remove_file(&features).unwrap();
    fs::create_dir(&features).unwrap();
    // gpu3: 3 in XGMI, and the retired-page list a link to nothing.
    let ras3 = dev(root, 3).join("ras");
    let xgmi = fs::read_dir(&ras3)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("aca_") && n != "aca_umc")
        .unwrap_or_else(|| "aca_xgmi".into());
    fs::write(ras3.join(&xgmi), "ue: 3\nce: 1\nde: 0\n").unwrap();
    fs::remove_file(ras3.join("gpu_vram_bad_pages")).unwrap();
    std::os::unix::fs::symlink("gone", ras3.join("gpu_vram_bad_pages")).unwrap();
    // gpu5: its ras/ directory replaced by a file, and the kernel log
    // reporting an uncorrectable error on it.
    let ras5 = dev(root, 5).join("ras");
    fs::remove_dir_all(&ras5).unwrap();
    fs::write(&ras5, "").unwrap();
    let log = root.join("var/log/kern.log");
    let mut log_text = fs::read_to_string(&log).unwrap_or_default();
    log_text.push_str("[ 811.123456] amdgpu 0000:a6:00.0: amdgpu: uncorrectable hardware error(ERR_TYPE) detected!\n");
    fs::write(&log, log_text).unwrap();

    let (code, stdout, json, _) = run(root, &["--no-gate"]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(json["passed"], false);
    for (id, says) in [
        ("gpu1.amdgpu.ras_errors", "umc: 5 uncorrectable"),
        ("gpu3.amdgpu.ras_errors", "3 uncorrectable"),
        ("gpu5.amdgpu.ras_errors", "uncorrectable hardware error"),
    ] {
        let r = result(&json, id);
        assert_eq!(r["finding"]["code"], "ras-uncorrectable", "{id}: {r}");
        assert!(text(&r["finding"]["message"]).contains(says), "{id}: {r}");
    }
    // What depends on the unreadable file alone cannot be verified; it is
    // no GPU "without ECC".
    unverifiable(&json, "gpu3.amdgpu.ras_bad_pages", &["gpu_vram_bad_pages"]);
    assert_eq!(
        entry(&json["scopes"], "scope", "gpu1")["properties"]["ras_ue"],
        "5"
    );
    assert_ne!(
        json["decision"]["health"], "healthy",
        "{}",
        json["decision"]
    );
    // `health`, which Slurm and node-problem-detector act on, says so too.
    let out = on_sysroot(&["health"], root)
        .timeout(util::HANG_GUARD)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert_has(&said, "ras-uncorrectable");
}

#[test]
fn retired_page_lists_cut_or_garbled_are_unverifiable() {
    let n = node("mi300x-8");
    let root = &n.root;
    // gpu0: a line that is no record among good ones.
    fs::write(
        dev(root, 0).join("ras/gpu_vram_bad_pages"),
        "0x00012345 : 0x00001000 : R\nthis is not a record\n",
    )
    .unwrap();
    // gpu2: far more than any reader should take (past 1 MiB), one record
    // among noise: too few to be past the threshold, so not decisive.
    let line = "0x00012345 : 0x00001000 : R\n";
    fs::write(
        dev(root, 2).join("ras/gpu_vram_bad_pages"),
        format!("{line}{}", "no record, only noise\n".repeat(60_000)),
    )
    .unwrap();
    // gpu4: a flag the driver never prints, alone.
    fs::write(
        dev(root, 4).join("ras/gpu_vram_bad_pages"),
        "0x1 : 0x1000 : X\n",
    )
    .unwrap();
    let (_, _, json, _) = run(root, &["--no-gate"]);
    unverifiable(
        &json,
        "gpu0.amdgpu.ras_bad_pages",
        &["gpu_vram_bad_pages", "line 2", "1 valid"],
    );
    unverifiable(&json, "gpu2.amdgpu.ras_bad_pages", &["1 MiB"]);
    unverifiable(&json, "gpu4.amdgpu.ras_bad_pages", &["\"X\""]);
    assert_eq!(status(&json, "gpu1.amdgpu.ras_bad_pages").0, "pass");
}

#[test]
fn ras_counts_saturate_and_a_repeated_key_cannot_clear_an_error() {
    let n = node("mi300x-8");
    let root = &n.root;
    let ras = dev(root, 1).join("ras");
    let names: Vec<String> = fs::read_dir(&ras)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("aca_"))
        .collect();
    assert!(names.len() >= 2, "{names:?}");
    fs::write(
        ras.join(&names[0]),
        format!("ue: {}\nce: 0\nde: 0\n", u64::MAX),
    )
    .unwrap();
    fs::write(ras.join(&names[1]), "ue: 1\nce: 0\nde: 0\n").unwrap();
    // gpu2: 5 errors, then a second `ue:` line saying 0.
    fs::write(
        dev(root, 2).join("ras/aca_umc"),
        "ue: 5\nce: 0\nde: 0\nue: 0\n",
    )
    .unwrap();
    let (code, _, json, _) = run(root, &["--no-gate"]);
    assert_eq!(code, 1);
    let gpu1 = entry(&json["scopes"], "scope", "gpu1");
    assert_eq!(gpu1["properties"]["ras_ue"], u64::MAX.to_string(), "{gpu1}");
    let r = result(&json, "gpu2.amdgpu.ras_errors");
    assert_eq!(r["finding"]["code"], "ras-uncorrectable", "{r}");
    assert!(text(&r["finding"]["message"]).contains("umc: 5"), "{r}");
}

#[test]
fn garbled_sensor_readings_are_unverifiable_and_never_written_as_numbers() {
    let n = node("mi300x-8");
    let root = &n.root;
    let garble = |gpu: usize, file: &str, value: &[u8]| {
        fs::write(hwmon(root, gpu).join(file), value).unwrap();
    };
    garble(0, "temp2_input", b"nan\n");
    garble(1, "power1_input", b"inf\n");
    garble(2, "temp2_input", b"-inf\n");
    garble(3, "temp2_input", b"1e300\n");
    garble(4, "temp2_input", b"99999999999999\n");
    garble(5, "temp2_input", b"\xff\xfe40000\n");
    // gpu6 and gpu7: limits of 0 and below are no limits; power1_cap 0 is
    // none either.
    garble(6, "temp2_crit", b"0\n");
    garble(7, "temp2_crit", b"-5000\n");
    garble(7, "temp2_emergency", b"0\n");
    garble(7, "power1_cap", b"0\n");
    let prom = root.with_extension("prom");
    let (_, stdout, json, junit) = run(root, &["--no-gate", "--prom", prom.to_str().unwrap()]);
    for (gpu, file) in [
        (0, "temp2_input"),
        (1, "power1_input"),
        (2, "temp2_input"),
        (3, "temp2_input"),
        (4, "temp2_input"),
        (5, "temp2_input"),
    ] {
        unverifiable(&json, &format!("gpu{gpu}.amdgpu.thermals"), &[file]);
    }
    for gpu in [6, 7] {
        let (s, m) = status(&json, &format!("gpu{gpu}.amdgpu.thermals"));
        assert_eq!(s, "pass", "gpu{gpu}: {m}");
    }
    every_metric_is_a_number(&json);
    let all = format!("{stdout}{junit}{}", fs::read_to_string(&prom).unwrap());
    for bad in ["NaN", "nan °C", "inf W", "inf °C"] {
        assert!(!all.contains(bad), "{bad} written: {all}");
    }
}

#[test]
fn unreadable_system_settings_are_unverifiable_naming_the_file() {
    let n = node("mi300x-8");
    let root = &n.root;
    // An empty IOMMU group type on gpu0.
    let group = root.join("sys/kernel/iommu_groups/77");
    fs::create_dir_all(&group).unwrap();
    fs::write(group.join("type"), "\n").unwrap();
    let link = dev(root, 0).join("iommu_group");
    let _ = fs::remove_file(&link);
    // Relative, as the kernel makes it: from the device's own directory up
    // to the root.
    let real = fs::canonicalize(dev(root, 0)).unwrap();
    let depth = real
        .strip_prefix(fs::canonicalize(root).unwrap())
        .unwrap()
        .components()
        .count();
    std::os::unix::fs::symlink(
        format!("{}sys/kernel/iommu_groups/77", "../".repeat(depth)),
        &link,
    )
    .unwrap();
    // An empty numa_balancing, and THP without a bracketed choice.
    let numa = root.join("proc/sys/kernel/numa_balancing");
    fs::create_dir_all(numa.parent().unwrap()).unwrap();
    fs::write(&numa, "\n").unwrap();
    let thp = root.join("sys/kernel/mm/transparent_hugepage/enabled");
    fs::create_dir_all(thp.parent().unwrap()).unwrap();
    fs::write(&thp, "always madvise never\n").unwrap();
    let (_, _, json, _) = run(root, &["--no-gate"]);
    unverifiable(&json, "node.system.iommu", &["iommu_group/type"]);
    unverifiable(&json, "node.system.numa_balancing", &["numa_balancing"]);
    unverifiable(
        &json,
        "node.system.transparent_hugepages",
        &["transparent_hugepage/enabled"],
    );

    // A dangling iommu_group link is no "IOMMU off".
    fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../../../kernel/iommu_groups/404", &link).unwrap();
    let (_, _, json, _) = run(root, &["--no-gate"]);
    unverifiable(&json, "node.system.iommu", &["iommu_group"]);
}

#[test]
fn cpufreq_policies_count_their_cpus_not_themselves() {
    let n = node("mi300x-8");
    let root = &n.root;
    let cpus = root.join("sys/devices/system/cpu");
    let _ = fs::remove_dir_all(&cpus);
    // Four CPUs without cpufreq links; one policy covers them all.
    for cpu in 0..4 {
        fs::create_dir_all(cpus.join(format!("cpu{cpu}"))).unwrap();
    }
    let policy = cpus.join("cpufreq/policy0");
    fs::create_dir_all(&policy).unwrap();
    fs::write(policy.join("scaling_governor"), "powersave\n").unwrap();
    fs::write(policy.join("affected_cpus"), "0 1 2 3\n").unwrap();
    let (_, _, json, _) = run(root, &["--no-gate"]);
    let r = result(&json, "node.system.cpu_governor");
    let m = text(&r["finding"]["message"]);
    assert!(m.contains("powersave on 4 of 4 CPUs"), "{r}");
}

#[test]
fn a_root_capture_without_a_bridge_config_does_not_ask_for_root() {
    let n = node("mi300x-8");
    let root = &n.root;
    let capture = root.join("rocgate-capture.toml");
    let record = fs::read_to_string(&capture).unwrap();
    let record = record
        .lines()
        .map(|l| {
            if l.starts_with("uid =") {
                "uid = 0".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    fs::write(&capture, record + "\n").unwrap();
    // gpu0's nearest bridge: its config stored empty.
    let target = fs::canonicalize(dev(root, 0)).unwrap();
    let bridge = target.parent().unwrap();
    fs::write(bridge.join("config"), b"").unwrap();
    let (_, _, json, _) = run(root, &["--no-gate"]);
    // The stock node's root ports redirect, as Linux sets them on EPYC
    // hosts: that finding stands, and the bridge the capture did not store
    // is named as not seen, blamed on the capture.
    let (s, m) = status(&json, "node.system.pcie_acs");
    assert_eq!(s, "warn", "{m}");
    assert_has(m, "not seen: ");
    assert_has(m, "the capture did not store it");
    assert_lacks(m, "run rocgate as root");
}

#[test]
fn kfd_values_past_what_the_kernel_prints_are_garbled() {
    for (key, value) in [
        ("simd_count", u64::MAX.to_string()),
        ("drm_render_minor", (1u64 << 32).to_string()),
        ("domain", (1u64 << 32).to_string()),
        ("gfx_target_version", "99999999999".to_string()),
    ] {
        let n = node("mi300x-8");
        // gpu2 is KFD node 4.
        set_prop(&n.root, 4, key, &value);
        let (code, stdout, json, _) = run(&n.root, &["--no-gate"]);
        assert_eq!(code, 1, "{key}: {stdout}");
        let r = result(&json, "node.kfd.topology");
        assert_eq!(
            r["finding"]["code"], "kfd-topology-unreadable",
            "{key}: {r}"
        );
        assert!(text(&r["finding"]["message"]).contains(key), "{key}: {r}");
    }
}

#[test]
fn unreadable_input_names_the_file_and_the_error() {
    use std::os::unix::fs::PermissionsExt;
    let (_bin_dir, bin) = binary_for_others();
    let doctor_as_other = |root: &Path| {
        let mut cmd = Command::new(&bin);
        cmd.args(["doctor", "--json", "--sysroot"]).arg(root);
        let out = as_unprivileged(&mut cmd).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // EACCES on a PCI vendor file: the GPU cannot be identified, it is not
    // "missing from the bus"; rocgate could not see the node, so there is
    // no verdict on it (exit 2), never a fault of the node.
    let n = node("mi300x-8");
    open_up(&n.root);
    let vendor = real(&n.root, "sys/bus/pci/devices/0000:05:00.0/vendor");
    std::fs::set_permissions(&vendor, std::fs::Permissions::from_mode(0o000)).unwrap();
    let (code, stdout, stderr) = doctor_as_other(&n.root);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["likely_cause"]["code"], "pci-sysfs-unreadable", "{doc}");
    let message = doc["likely_cause"]["message"].as_str().unwrap();
    assert_has(message, "0000:05:00.0/vendor");
    assert_has(message, "permission denied");

    // A sysroot another user cannot read is refused saying so, not
    // diagnosed as a node without a capture record.
    let n = node("mi300x-8");
    open_up(n.root.parent().unwrap());
    std::fs::set_permissions(&n.root, std::fs::Permissions::from_mode(0o700)).unwrap();
    if nix_is_root() {
        let (code, stdout, stderr) = doctor_as_other(&n.root);
        assert_eq!(code, Some(2), "{stdout}{stderr}");
        assert_has(&stderr, "ermission denied");
    } else {
        std::fs::set_permissions(&n.root, std::fs::Permissions::from_mode(0o000)).unwrap();
        let (code, out) = rocgate_on(&n.root, &["doctor"]);
        std::fs::set_permissions(&n.root, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(code, Some(2), "{out}");
        assert_has(&out, "ermission denied");
    }

    // A sysroot that is a symlink loop says so.
    let dir = tempfile::tempdir().unwrap();
    let looped = dir.path().join("node");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let (code, out) = rocgate_on(&looped, &["doctor"]);
    assert_eq!(code, Some(2), "{out}");
    assert_has(&out, "symbolic links");

    // A KFD properties file of NUL bytes is a damaged topology naming it,
    // not a GPU missing from KFD.
    let n = node("mi300x-8");
    std::fs::write(n.root.join(format!("{TOPO}/3/properties")), [0u8; 4096]).unwrap();
    let (_, doc) = doctor(&n.root, &[]);
    assert_eq!(
        doc["likely_cause"]["code"], "kfd-topology-unreadable",
        "{doc}"
    );
    assert!(
        text(&doc["likely_cause"]["message"]).contains("nodes/3/properties"),
        "{doc}"
    );
}

#[test]
fn damaged_files_are_named_not_fatal() {
    let n = node("mi300x-8");
    let topo = n.root.join("sys/class/kfd/kfd/topology/nodes");
    std::fs::write(
        topo.join("3/properties"),
        b"simd_count 1216\nsimd_per_cu \xff\xfe\n",
    )
    .unwrap();
    std::fs::write(
        topo.join("4/properties"),
        b"cpu_cores_count 0\nsimd_count 1216\nsimd_per",
    )
    .unwrap();
    // NUL padding is what real captures look like; it must still parse.
    std::fs::write(mec(&n.root, "05"), b"0x0000009a\n\0\0\0\0\0\0\0\0").unwrap();
    std::fs::write(
        n.root.join("sys/bus/pci/devices/0000:85:00.0/class"),
        b"display\n",
    )
    .unwrap();
    let (code, stdout, json, _) = run(&n.root, &[]);
    assert_eq!(code, 1, "{stdout}");
    let topo = result_with_status(&json, "node.kfd.topology", "fail");
    assert_eq!(topo["finding"]["code"], "kfd-topology-unreadable");
    let msg = topo["message"].as_str().unwrap();
    assert_has(msg, "nodes/3/properties");
    assert_has(msg, "not UTF-8");
    assert!(text(&topo["output"]).contains("nodes/4/properties"));
    assert_eq!(result(&json, "gpu0.firmware.versions")["status"], "pass");
    let pci = result(&json, "node.pci.amd_gpu_present");
    assert!(text(&pci["output"]).contains("0000:85:00.0/class"), "{pci}");
    assert!(util::results(&json).iter().all(|r| r["status"] != "crash"));
}
