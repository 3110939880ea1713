//! What the end of a run looks like in a terminal of a given width, and
//! next steps that can be pasted as they are: filled with the GPU's own
//! address and the node's own OS commands.

use crate::util::{
    FakeRun, assert_has, assert_lacks, finish, node, result, results, run_finished, text,
};
use std::path::Path;

/// `rocgate run` on `root` with `COLUMNS` set: its stdout.
fn run_at(root: &Path, columns: usize) -> String {
    let (out, _, _) = run_finished(
        root,
        &["--progress", "none"],
        &[("COLUMNS", &columns.to_string())],
    );
    out.stdout
}

/// The lines of `stdout` from the ladder's heading to the blank line after
/// it.
fn ladder(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("scope "))
        .take_while(|l| !l.is_empty())
        .collect()
}

/// Whether `line` is wider than `columns` only because a command in
/// backticks is: a pasted command must stay whole.
fn long_only_for_a_command(line: &str, columns: usize) -> bool {
    line.split('`')
        .skip(1)
        .step_by(2)
        .any(|command| command.chars().count() + 2 > columns / 2)
}

#[test]
fn at_80_columns_every_line_fits_and_the_ladder_lists_what_did_not_pass() {
    for name in [
        "mi300x-8",
        "mi300x-8-cpx",
        "firmware-load-failed",
        "pcie-acs-enabled",
    ] {
        let n = node(name);
        let stdout = run_at(&n.root, 80);
        let rows = ladder(&stdout);
        assert!(rows.len() > 1, "{name}: no ladder in\n{stdout}");
        assert!(
            rows[0].contains("layers that did not pass"),
            "{name}:\n{stdout}"
        );
        for line in stdout.lines() {
            let width = line.chars().count();
            assert!(
                width <= 80 || long_only_for_a_command(line, 80),
                "{name}: {width} columns: {line}\n{stdout}"
            );
        }
        // A GPU that passed everything says so in one word; a failing one
        // names its layers.
        if name == "firmware-load-failed" {
            assert_has(&stdout, "gpu7  firmware FAIL, amdgpu blocked");
            assert_has(&stdout, "gpu0  hsa skip, hip skip");
        }
    }
}

#[test]
fn a_wide_terminal_gets_the_grid_and_partitions_fold_under_their_device() {
    let n = node("mi300x-8-cpx");
    let stdout = run_at(&n.root, 200);
    let rows = ladder(&stdout);
    assert!(
        rows[0].starts_with("scope         system   pci"),
        "{stdout}"
    );
    // 64 partitions of 8 devices: one row a device, named by its address.
    assert_eq!(rows.len(), 1 + 1 + 8, "{stdout}");
    assert!(
        rows[1..].iter().any(|r| r.starts_with("gpu8..gpu15 ")
            && r.ends_with("0000:26:00.0  AMD Instinct MI300X  gfx942  (8 partitions)")),
        "{stdout}"
    );
    assert_has(
        &stdout,
        "8x AMD Instinct MI300X (gfx942) as 64 CPX partitions",
    );
    assert_has(&stdout, "(32 node + 32 per partition x 64 partitions)");
}

#[test]
fn a_host_without_gpus_says_so_in_its_plan() {
    let n = node("no-amd-gpu");
    let stdout = run_at(&n.root, 200);
    assert_has(&stdout, "checks (node-wide only: no GPU to test)");
    assert_lacks(&stdout, "x 0 GPUs");
}

/// The next step of `id`'s finding in a run on `root`.
fn next_step(root: &Path, id: &str) -> String {
    let (_, json, _) = run_finished(root, &[], &[]);
    text(&result(&json, id)["finding"]["next_step"]).to_string()
}

#[test]
fn next_steps_name_the_nodes_own_package_tools() {
    // A kernel update without a DKMS rebuild: the headers to install are
    // the running kernel's, by the node's package manager.
    let n = node("dkms-stale");
    let id = "node.amdgpu.dkms";
    let ubuntu = next_step(&n.root, id);
    assert_has(&ubuntu, "`sudo apt install linux-headers-6.8.0-85-generic`");
    for (os_release, says) in [
        (
            "NAME=\"Red Hat Enterprise Linux\"\nID=\"rhel\"\nID_LIKE=\"fedora\"\nVERSION_ID=\"9.4\"\nPRETTY_NAME=\"Red Hat Enterprise Linux 9.4 (Plow)\"\n",
            "`sudo dnf install kernel-devel-6.8.0-85-generic`",
        ),
        (
            "NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.4\"\n",
            "`sudo dnf install kernel-devel-6.8.0-85-generic`",
        ),
        (
            "NAME=\"SLES\"\nID=\"sles\"\nID_LIKE=\"suse\"\nVERSION_ID=\"15.6\"\n",
            "`sudo zypper install kernel-default-devel`",
        ),
    ] {
        std::fs::write(n.root.join("etc/os-release"), os_release).unwrap();
        let step = next_step(&n.root, id);
        assert_has(&step, says);
        assert_lacks(&step, "apt ");
    }
}

#[test]
fn a_hung_gpu_is_reset_by_its_address_and_no_placeholder_is_left() {
    // gpu5's signals fail to be created, and gpu3's queue hangs.
    let (out, json, _) = FakeRun::scenario("mi300x-8")
        .faults("hsa_signal_create@gpu5=error:0x1008;hsa_queue_create@gpu3=hang")
        .timeout("hsa::queue", 4)
        .run_finished();
    assert_eq!(out.code, 1, "{}", out.stdout);
    let step = text(&result(&json, "gpu5.hsa.signal")["finding"]["next_step"]);
    // amd-smi's index need not be rocgate's: the BDF says which GPU.
    assert_has(step, "`sudo amd-smi reset -G -g 0000:a6:00.0`");
    // A check that timed out is rerun alone, on its own GPU.
    let step = text(&result(&json, "gpu3.hsa.queue")["finding"]["next_step"]);
    assert_has(step, "`rocgate run --no-gate --gpus 3`");
    for r in results(&json) {
        let Some(step) = r["finding"]["next_step"].as_str() else {
            continue;
        };
        for placeholder in [
            "<address>",
            "<gpu>",
            "<reset>",
            "<rerun>",
            "-g N",
            "<update-",
        ] {
            assert_lacks(step, placeholder);
        }
    }
}

#[test]
fn a_gpu_is_chosen_by_its_serial_as_inventory_prints_it() {
    let n = node("mi300x-8");
    let inventory = finish(&mut crate::util::on_sysroot(
        &["inventory", "--json"],
        &n.root,
    ));
    let doc: serde_json::Value = serde_json::from_str(&inventory.stdout).unwrap();
    let serial = doc["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["index"] == 3)
        .and_then(|g| g["unique_id"].as_str())
        .unwrap_or_else(|| panic!("no serial for gpu3 in {doc}"))
        .to_string();
    let (out, json, _) = run_finished(&n.root, &["--gpus", &serial, "--progress", "none"], &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    let gpus: Vec<&str> = json["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["scope"].as_str())
        .filter(|s| s.starts_with("gpu"))
        .collect();
    assert_eq!(gpus, ["gpu3"], "{serial}");
    let wrong = finish(&mut crate::util::on_sysroot(
        &["run", "--gpus", "0xdeadbeef"],
        &n.root,
    ));
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert_has(&wrong.stderr, "no GPU matches '0xdeadbeef'");
}

#[test]
fn the_rocm_release_of_an_install_outside_opt_rocm_is_read_from_rocm_path() {
    // This machine itself, live: a Spack or module install that only
    // ROCM_PATH (or --rocm-path) names.
    let dir = tempfile::tempdir().unwrap();
    let spack = dir.path().join("spack/linux-x86_64/rocm-core-6.3.1-abcdef");
    std::fs::create_dir_all(spack.join(".info")).unwrap();
    std::fs::write(spack.join(".info/version"), "6.3.1-48\n").unwrap();
    let release = |cmd: &mut assert_cmd::Command| {
        let out = finish(cmd);
        let doc: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
        doc["versions"]["node"]["rocm"].as_str().map(str::to_string)
    };
    let via_env = release(
        crate::util::rocgate()
            .args(["inventory", "--json"])
            .env("ROCM_PATH", &spack),
    );
    assert_eq!(via_env.as_deref(), Some("6.3.1"));
    let via_flag = release(
        crate::util::rocgate()
            .args(["inventory", "--json", "--rocm-path"])
            .arg(&spack)
            .env_remove("ROCM_PATH"),
    );
    assert_eq!(via_flag.as_deref(), Some("6.3.1"));
}
