//! Every sysfs reader against sysfs as the kernel serves it: fixture nodes
//! mounted over FUSE by `rocgate_fixtures::sysfs_fs` (attributes of size
//! 4096, binary attributes answering each read's exact offset and size,
//! the bad-pages callback's whole-record rule, config space cut for readers
//! without CAP_SYS_ADMIN, injected EINVAL / EIO / ENODEV / EACCES / reads
//! that do not answer), driven through the real `rocgate` binary. Mounting
//! needs root, /dev/fuse and `fusermount3`: without them each trial is
//! ignored with the reason, and fails under `CI=true`.

use crate::util;
use crate::util::{
    FakeRun, HANG_GUARD, doctor, finding_codes, fuse_unavailable, missing, mount_sysfs, node,
    on_sysroot, result, results, rocgate_bin, run, text,
};
use libtest_mimic::{Completion, Failed, Trial};
use rocgate_fixtures::sysfs_fs::{Fault, Faults};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

type Outcome = Result<Completion, Failed>;

/// A trial: its name and body.
type Named = (&'static str, fn() -> Outcome);

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    let trials: Vec<Named> = vec![
        (
            "node_layers_doctor_and_inventory_read_the_same_through_sysfs",
            node_layers_doctor_and_inventory_read_the_same_through_sysfs,
        ),
        (
            "a_snapshot_through_sysfs_replays_the_same_verdicts_and_stores_every_bad_page",
            a_snapshot_through_sysfs_replays_the_same_verdicts_and_stores_every_bad_page,
        ),
        (
            "retired_pages_read_whole_through_sysfs_and_cross_the_threshold",
            retired_pages_read_whole_through_sysfs_and_cross_the_threshold,
        ),
        (
            "an_einval_ras_file_leaves_the_other_files_and_the_kernel_log_judged",
            an_einval_ras_file_leaves_the_other_files_and_the_kernel_log_judged,
        ),
        (
            "eio_and_enodev_are_unverifiable_naming_the_file",
            eio_and_enodev_are_unverifiable_naming_the_file,
        ),
        (
            "a_read_that_does_not_answer_is_abandoned_without_hanging_the_run",
            a_read_that_does_not_answer_is_abandoned_without_hanging_the_run,
        ),
        (
            "a_reader_without_root_sees_acs_and_denied_files_unverifiable",
            a_reader_without_root_sees_acs_and_denied_files_unverifiable,
        ),
        (
            "rdma_cards_read_the_same_through_sysfs_and_einval_leaves_no_false_verdict",
            rdma_cards_read_the_same_through_sysfs_and_einval_leaves_no_false_verdict,
        ),
    ];
    trials
        .into_iter()
        .map(|(name, f)| {
            Trial::ignorable_test(name, move || match fuse_unavailable() {
                Some(why) => missing(&why),
                None => f(),
            })
        })
        .collect()
}

/// The PCI address of GPU `i` of the 8x MI300X fixtures.
fn address(i: usize) -> String {
    const BUSES: [u8; 8] = [0x05, 0x26, 0x46, 0x65, 0x85, 0xa6, 0xc6, 0xe5];
    format!("0000:{:02x}:00.0", BUSES[i])
}

/// A file of GPU `i` (below its PCI device directory), as a path relative
/// to the node's root.
fn gpu_file(i: usize, file: &str) -> String {
    format!("sys/bus/pci/devices/{}/{file}", address(i))
}

/// What a run decided per check: status, skip reason and finding code.
fn verdicts(json: &Value) -> BTreeMap<String, String> {
    results(json)
        .iter()
        .map(|r| {
            (
                text(&r["id"]).to_string(),
                format!(
                    "{} {} {}",
                    r["status"], r["skip_reason"], r["finding"]["code"]
                ),
            )
        })
        .collect()
}

/// The first difference between two verdict maps, or `None`.
fn differs(plain: &BTreeMap<String, String>, fused: &BTreeMap<String, String>) -> Option<String> {
    if plain.keys().ne(fused.keys()) {
        return Some(format!(
            "different checks: {:?} vs {:?}",
            plain.keys().collect::<Vec<_>>(),
            fused.keys().collect::<Vec<_>>()
        ));
    }
    plain
        .iter()
        .find(|(k, v)| fused[*k] != **v)
        .map(|(k, v)| format!("{k}: {v} on the directory, {} through sysfs", fused[k]))
}

/// `rocgate inventory --json` on `root`, its paths replaced by `<root>`.
fn inventory(root: &Path) -> Value {
    let out = on_sysroot(&["inventory", "--json"], root)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).replace(&root.display().to_string(), "<root>");
    serde_json::from_str(&shown).unwrap_or_else(|e| {
        panic!(
            "inventory printed no JSON ({e}): {shown}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn check(cond: bool, what: impl Into<String>) -> Result<(), Failed> {
    util::check(cond, what)
}

/// The result `id` was skipped as unverifiable, its message saying each
/// of `says`.
fn unverifiable(json: &Value, id: &str, says: &[&str]) -> Result<(), Failed> {
    let r = result(json, id);
    check(
        r["status"] == "skipped" && r["skip_reason"] == "unverifiable",
        format!("{id} should be unverifiable: {r}"),
    )?;
    for s in says {
        check(
            text(&r["message"]).contains(s),
            format!("{id} should say {s:?}: {r}"),
        )?;
    }
    Ok(())
}

/// 8x MI300X with 3, 128 and 470 retired pages on GPUs 0, 1 and 2.
fn retired_pages_node(threshold: i64) -> util::Node {
    let n = node("mi300x-8");
    let mut spec = n.scenario.spec.clone();
    for (i, pages) in [(0, 3), (1, 128), (2, 470)] {
        spec.gpus[i].bad_pages = pages;
    }
    spec.bad_page_threshold = threshold;
    std::fs::remove_dir_all(&n.root).unwrap();
    spec.write(&n.root).unwrap();
    n
}

fn node_layers_doctor_and_inventory_read_the_same_through_sysfs() -> Outcome {
    for name in [
        "mi300x-8",
        "mi210-8-two-hives",
        "ras-uncorrectable",
        "pcie-acs-enabled",
    ] {
        let plain = node(name);
        let fused = mount_sysfs(&plain.root, &Faults::none());
        // Every reader: the inventory holds what discovery and the RAS,
        // hwmon and version readers found.
        let (a, b) = (inventory(&plain.root), inventory(&fused.root));
        check(
            a == b,
            format!("{name}: inventory differs through sysfs:\n{a}\n---\n{b}"),
        )?;
        for tier in ["passive", "quick"] {
            let (code_a, _, json_a, _) = FakeRun::on(&plain.root)
                .args(&["--tier", tier, "--no-gate"])
                .run();
            let (code_b, out_b, json_b, _) = FakeRun::on(&fused.root)
                .args(&["--tier", tier, "--no-gate"])
                .run();
            if let Some(d) = differs(&verdicts(&json_a), &verdicts(&json_b)) {
                return Err(format!("{name} --tier {tier}: {d}\n{out_b}").into());
            }
            check(
                code_a == code_b,
                format!("{name} --tier {tier}: exit {code_a} vs {code_b}"),
            )?;
        }
        let (code_a, doc_a) = doctor(&plain.root, &[]);
        let (code_b, doc_b) = doctor(&fused.root, &[]);
        check(
            code_a == code_b && finding_codes(&doc_a) == finding_codes(&doc_b),
            format!("{name}: doctor differs through sysfs:\n{doc_a}\n---\n{doc_b}"),
        )?;
    }
    Ok(Completion::Completed)
}

/// The records of every `gpu_vram_bad_pages` stored in `archive`, by GPU
/// address.
fn stored_bad_pages(archive: &Path) -> BTreeMap<String, usize> {
    let file = std::fs::File::open(archive).unwrap();
    let mut tar = tar::Archive::new(zstd::Decoder::new(file).unwrap());
    let mut out = BTreeMap::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        if let Some(dir) = path.strip_suffix("/ras/gpu_vram_bad_pages") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            let gpu = dir.rsplit('/').next().unwrap().to_string();
            out.insert(gpu, text.lines().count());
        }
    }
    out
}

fn a_snapshot_through_sysfs_replays_the_same_verdicts_and_stores_every_bad_page() -> Outcome {
    let plain = retired_pages_node(1000);
    let fused = mount_sysfs(&plain.root, &Faults::none());
    let archive = fused.dir.path().join("node.tar.zst");
    let out = on_sysroot(&["snapshot"], &fused.root)
        .arg("--out")
        .arg(&archive)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    check(
        out.status.success(),
        format!("snapshot: {}", String::from_utf8_lossy(&out.stderr)),
    )?;
    let stored = stored_bad_pages(&archive);
    for (i, pages) in [(0, 3), (1, 128), (2, 470), (3, 0)] {
        check(
            stored.get(&address(i)) == Some(&pages),
            format!("GPU {i} should be stored with {pages} retired pages: {stored:?}"),
        )?;
    }
    let (code_a, _, json_a, _) = run(&plain.root, &["--tier", "passive", "--no-gate"]);
    let (code_b, out_b, json_b, _) = run(&archive, &["--tier", "passive", "--no-gate"]);
    if let Some(d) = differs(&verdicts(&json_a), &verdicts(&json_b)) {
        return Err(format!("replay of the snapshot: {d}\n{out_b}").into());
    }
    check(code_a == code_b, format!("exit {code_a} vs {code_b}"))?;
    let (_, doc_a) = doctor(&plain.root, &[]);
    let (_, doc_b) = doctor(&archive, &[]);
    check(
        finding_codes(&doc_a) == finding_codes(&doc_b),
        format!("doctor on the replay:\n{doc_a}\n---\n{doc_b}"),
    )?;
    Ok(Completion::Completed)
}

fn retired_pages_read_whole_through_sysfs_and_cross_the_threshold() -> Outcome {
    // A threshold none reaches: the counts as read.
    let plain = retired_pages_node(1000);
    let fused = mount_sysfs(&plain.root, &Faults::none());
    let inv = inventory(&fused.root);
    for (i, pages) in [(0, "3"), (1, "128"), (2, "470")] {
        let gpu = util::entry(&inv["gpus"], "pci_address", &address(i));
        check(
            gpu["health"]["ras_bad_pages"] == pages,
            format!("GPU {i} should read {pages} retired pages through sysfs: {gpu}"),
        )?;
    }
    let (_, _, json, _) = run(&fused.root, &["--no-gate"]);
    for (i, pages) in [(0, "3"), (1, "128"), (2, "470")] {
        let r = result(&json, &format!("gpu{i}.amdgpu.ras_bad_pages"));
        check(r["facts"]["ras_bad_pages"] == pages, format!("gpu{i}: {r}"))?;
    }
    drop(fused);
    // A threshold 128 crosses (the variant: not the 470 alone).
    let plain = retired_pages_node(100);
    let fused = mount_sysfs(&plain.root, &Faults::none());
    let (code, stdout, json, _) = run(&fused.root, &["--no-gate"]);
    check(
        stdout.contains("128 retired VRAM pages of a threshold of 100, past it"),
        format!("gpu1's 128 pages are past the threshold: {stdout}"),
    )?;
    for i in [1, 2] {
        let r = result(&json, &format!("gpu{i}.amdgpu.ras_bad_pages"));
        check(
            r["finding"]["code"] == "ras-bad-pages-past-threshold" && r["status"] == "fail",
            format!("gpu{i} is past the threshold of 100: {r}"),
        )?;
    }
    check(
        code == 1,
        format!("a GPU past its threshold makes the run red: exit {code}"),
    )?;
    check(
        result(&json, "gpu0.amdgpu.ras_bad_pages")["status"] == "pass",
        "3 pages stay below 100",
    )?;
    Ok(Completion::Completed)
}

fn an_einval_ras_file_leaves_the_other_files_and_the_kernel_log_judged() -> Outcome {
    // ras-uncorrectable: GPU 3 counts 2 UMC uncorrectable errors and the
    // kernel log says so. Its UMC counter fails with EINVAL (a reset holds
    // the reset lock); GPU 1's gfx counter too, while its UMC counts 4.
    let plain = node("ras-uncorrectable");
    let mut spec = plain.scenario.spec.clone();
    spec.gpus[1].ras_errors = vec![("umc", 4, 0)];
    std::fs::remove_dir_all(&plain.root).unwrap();
    spec.write(&plain.root).unwrap();
    let faults = Faults::none()
        .on(&gpu_file(3, "ras/aca_umc"), Fault::Einval)
        .on(&gpu_file(1, "ras/aca_gfx"), Fault::Einval)
        .on(&gpu_file(6, "ras/aca_gfx"), Fault::Einval);
    let fused = mount_sysfs(&plain.root, &faults);
    let (code, stdout, json, _) = run(&fused.root, &["--no-gate"]);
    check(code == 1, format!("uncorrectable errors are red: {stdout}"))?;
    let r = result(&json, "gpu3.amdgpu.ras_errors");
    check(
        r["finding"]["code"] == "ras-uncorrectable"
            && text(&r["finding"]["message"])
                .contains("uncorrectable hardware errors detected in umc block")
            && text(&r["finding"]["message"]).contains("aca_umc"),
        format!("gpu3: the kernel log is judged, the EINVAL file named: {r}"),
    )?;
    let r = result(&json, "gpu1.amdgpu.ras_errors");
    check(
        r["finding"]["code"] == "ras-uncorrectable"
            && text(&r["finding"]["message"]).contains("umc: 4 uncorrectable"),
        format!("gpu1: the readable UMC counter is judged: {r}"),
    )?;
    // A GPU with nothing but the EINVAL file to say cannot pass.
    unverifiable(
        &json,
        "gpu6.amdgpu.ras_errors",
        &["aca_gfx", "Invalid argument"],
    )?;
    // Its other files are facts of their own.
    check(
        result(&json, "gpu3.amdgpu.ras_bad_pages")["status"] == "pass",
        "gpu3's bad pages still read",
    )?;
    Ok(Completion::Completed)
}

fn rdma_cards_read_the_same_through_sysfs_and_einval_leaves_no_false_verdict() -> Outcome {
    // The RDMA class is links into /sys/devices, each device's `device`
    // a link back to its PCI function: followed through the mount as on
    // a live node.
    for name in [
        "mi300x-8-ib",
        "mi300x-8-roce",
        "rdma-port-down",
        "nic-numa-remote",
    ] {
        let plain = node(name);
        let fused = mount_sysfs(&plain.root, &Faults::none());
        let (code_a, _, json_a, _) = run(&plain.root, &["--tier", "passive"]);
        let (code_b, out_b, json_b, _) = run(&fused.root, &["--tier", "passive"]);
        if let Some(d) = differs(&verdicts(&json_a), &verdicts(&json_b)) {
            return Err(format!("{name}: {d}\n{out_b}").into());
        }
        check(
            code_a == code_b,
            format!("{name}: exit {code_a} vs {code_b}"),
        )?;
    }
    // A down port whose rate fails with EINVAL (a width the kernel cannot
    // name) is still the port that is down, and its rate is no error.
    let plain = node("rdma-port-down");
    let faults = Faults::none().on("sys/class/infiniband/mlx5_5/ports/1/rate", Fault::Einval);
    let fused = mount_sysfs(&plain.root, &faults);
    let (code, stdout, json, _) = run(&fused.root, &["--tier", "passive"]);
    check(code == 1, format!("a rail down is red: {stdout}"))?;
    let r = result(&json, "node.network.rdma_ports");
    check(
        r["finding"]["code"] == "rdma-port-down" && text(&r["message"]).contains("mlx5_5 port 1"),
        format!("mlx5_5 is named: {r}"),
    )?;
    check(
        result(&json, "node.network.rdma_rate")["status"] == "pass",
        "the other ports' rates are judged",
    )?;
    // A RoCE GID entry that fails to read leaves that port's addressing
    // unverified, never reported missing.
    let plain = node("mi300x-8-roce");
    let faults = Faults::none().on(
        "sys/class/infiniband/bnxt_re4/ports/1/gids/2",
        Fault::Einval,
    );
    let fused = mount_sysfs(&plain.root, &faults);
    let (code, stdout, json, _) = run(&fused.root, &["--tier", "passive"]);
    check(code == 0, format!("nothing is red: {stdout}"))?;
    unverifiable(
        &json,
        "node.network.roce_gids",
        &["bnxt_re4 port 1", "Invalid argument"],
    )?;
    Ok(Completion::Completed)
}

fn eio_and_enodev_are_unverifiable_naming_the_file() -> Outcome {
    let plain = node("mi300x-8");
    let faults = Faults::none()
        .on(&gpu_file(0, "ras/aca_umc"), Fault::Eio)
        .on(&gpu_file(2, "ras/gpu_vram_bad_pages"), Fault::Enodev)
        .on(&gpu_file(4, "ras/aca_sdma"), Fault::Enodev);
    let fused = mount_sysfs(&plain.root, &faults);
    // --strict: a check that could not look fails the run.
    let (code, stdout, json, _) = run(&fused.root, &["--no-gate", "--strict"]);
    check(
        code == 1,
        format!("a check that could not look is no pass: {stdout}"),
    )?;
    unverifiable(
        &json,
        "gpu0.amdgpu.ras_errors",
        &[
            &format!("/sys/bus/pci/devices/{}/ras/aca_umc", address(0)),
            "Input/output error",
        ],
    )?;
    unverifiable(
        &json,
        "gpu2.amdgpu.ras_bad_pages",
        &["gpu_vram_bad_pages", "No such device"],
    )?;
    unverifiable(
        &json,
        "gpu4.amdgpu.ras_errors",
        &["aca_sdma", "No such device"],
    )?;
    check(
        result(&json, "gpu1.amdgpu.ras_errors")["status"] == "pass",
        "the other GPUs still pass",
    )?;
    Ok(Completion::Completed)
}

fn a_read_that_does_not_answer_is_abandoned_without_hanging_the_run() -> Outcome {
    let plain = node("mi300x-8");
    let faults = Faults::none()
        .on(&gpu_file(5, "ras/aca_umc"), Fault::Block)
        .on(&gpu_file(7, "ras/gpu_vram_bad_pages"), Fault::Block);
    let fused = mount_sysfs(&plain.root, &faults);
    let start = std::time::Instant::now();
    let (code, stdout, json, _) = run(&fused.root, &["--no-gate"]);
    check(
        start.elapsed() < HANG_GUARD,
        "the run ended within the hang guard",
    )?;
    check(
        code != 0,
        format!("a file that did not answer is no pass: {stdout}"),
    )?;
    // The check waited the read deadline, then ended as timed out (a
    // failure: a wedged device), naming the file.
    for (id, file) in [
        ("gpu5.amdgpu.ras_errors", "ras/aca_umc"),
        ("gpu7.amdgpu.ras_bad_pages", "ras/gpu_vram_bad_pages"),
    ] {
        let r = result(&json, id);
        let path = format!("/sys/bus/pci/devices/{}", id_address(id));
        check(
            r["status"] == "timeout"
                && r["finding"]["code"] == "check-timeout"
                && text(&r["message"]).contains(&format!("{path}/{file} did not answer")),
            format!("{id} should have timed out on {file}: {r}"),
        )?;
    }
    check(
        result(&json, "gpu6.amdgpu.ras_errors")["status"] == "pass",
        "the other GPUs still pass",
    )?;
    Ok(Completion::Completed)
}

/// `rocgate ARGS` as the user nobody (uid 65534, no groups): without
/// CAP_SYS_ADMIN, as a CI job that is not root.
fn as_nobody(args: &[&str], root: &Path, out_dir: &Path) -> std::process::Output {
    assert_cmd::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(rocgate_bin())
        .args(args)
        .arg("--sysroot")
        .arg(root)
        .env("NO_COLOR", "1")
        .env("ROCGATE_CONFIG", "")
        .env("HOME", out_dir)
        .env("TMPDIR", out_dir)
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("ROCGATE_NODE_NAME")
        .timeout(HANG_GUARD)
        .output()
        .unwrap()
}

fn a_reader_without_root_sees_acs_and_denied_files_unverifiable() -> Outcome {
    use std::os::unix::fs::PermissionsExt;
    if !util::have("setpriv") {
        return missing("setpriv is missing (util-linux)");
    }
    // ACS on, as a stock kernel sets it: a reader that gets 64 bytes of
    // config space must not read it as off.
    let plain = node("pcie-acs-enabled");
    let faults = Faults::none().on(&gpu_file(0, "ras/aca_umc"), Fault::EaccesNonRoot);
    let fused = mount_sysfs(&plain.root, &faults);
    let out_dir = fused.dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let json_path = out_dir.join("results.json");
    let json_arg = json_path.display().to_string();
    let out = as_nobody(
        &["run", "--no-gate", "--json", &json_arg],
        &fused.root,
        &out_dir,
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap_or_else(|e| {
            panic!(
                "no results as nobody ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        }))
        .unwrap();
    unverifiable(&json, "node.system.pcie_acs", &["64 bytes"])?;
    unverifiable(
        &json,
        "gpu0.amdgpu.ras_errors",
        &["aca_umc", "permission denied"],
    )?;
    // As root the same mount shows the redirects.
    let (_, _, json, _) = run(&fused.root, &["--no-gate"]);
    let r = result(&json, "node.system.pcie_acs");
    check(
        r["finding"]["code"] == "pcie-acs-enabled",
        format!("as root the config space is whole: {r}"),
    )?;
    Ok(Completion::Completed)
}

/// The PCI address of the GPU a result id (`gpu5.amdgpu.ras_errors`) is
/// about.
fn id_address(id: &str) -> String {
    let n: usize = id
        .strip_prefix("gpu")
        .and_then(|r| r.split('.').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    address(n)
}
