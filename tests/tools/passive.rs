//! The passive tier is safe beside running jobs: watched by `strace -f`,
//! `rocgate health --tier passive` starts no worker process, opens no ROCm
//! library and no device, even with the fake ROCm offered to it; the same
//! command at the quick tier, watched the same way, does all three (so the
//! witness sees what it is looking for). Without strace the trial is
//! ignored with the reason, and fails under `CI=true`.

use crate::util;
use crate::util::{fake_rocm, have, node, rocgate_bin};
use libtest_mimic::{Completion, Failed, Trial};
use std::path::Path;
use std::process::Command;

/// This module's trials.
pub fn trials() -> Vec<Trial> {
    vec![Trial::ignorable_test(
        "passive_health_starts_no_worker_and_opens_no_library_or_device",
        passive_health_starts_no_worker_and_opens_no_library_or_device,
    )]
}

/// What a traced run did.
struct Trace {
    /// Programs executed (the first is rocgate itself).
    execs: Vec<String>,
    /// Paths opened.
    opened: Vec<String>,
    exit: Option<i32>,
    stdout: String,
}

/// `rocgate health --tier TIER` on `root` with the fake ROCm at `rocm`,
/// under `strace -f`.
fn traced(root: &Path, rocm: &Path, tier: &str) -> Trace {
    let log = root.with_extension(format!("{tier}.strace"));
    let out = Command::new("strace")
        .args([
            "-f",
            "-qq",
            // Each descriptor with its path: a capture's files are looked
            // up relative to its root's descriptor (openat2) and opened
            // again through /proc/self/fd, so the path an open returns is
            // the file it opened.
            "-y",
            "-s",
            "512",
            "-e",
            "trace=execve,open,openat,openat2",
            "-o",
        ])
        .arg(&log)
        .arg(rocgate_bin())
        .args(["health", "--tier", tier, "--budget", "60", "--sysroot"])
        .arg(root)
        .arg("--rocm-path")
        .arg(rocm)
        .env("ROCGATE_CONFIG", "")
        .env("ROCGATE_FAKE_NODE", root)
        .output()
        .expect("strace runs");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let quoted = |line: &str| line.split('"').nth(1).map(str::to_string);
    let execs = text
        .lines()
        .filter(|l| l.contains("execve(") && !l.contains("= -1"))
        .filter_map(|l| {
            // The arguments show what was started: keep them.
            l.split_once("execve(").map(|(_, rest)| rest.to_string())
        })
        .collect();
    // The file an open returned (`= 5</path>`); an `O_PATH` descriptor
    // only names a file, it does not open it (open(2)), so it is left out.
    let returned = |line: &str| {
        let (_, ret) = line.rsplit_once(") = ")?;
        let (_, path) = ret.split_once('<')?;
        path.rsplit_once('>').map(|(p, _)| p.to_string())
    };
    let opened = text
        .lines()
        .filter(|l| {
            (l.contains("open(") || l.contains("openat(") || l.contains("openat2("))
                && !l.contains("= -1")
                && !l.contains("O_PATH")
        })
        .filter_map(|l| returned(l).or_else(|| quoted(l)))
        .collect();
    Trace {
        execs,
        opened,
        exit: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

fn passive_health_starts_no_worker_and_opens_no_library_or_device() -> Result<Completion, Failed> {
    if !have("strace") {
        return util::missing("strace is not installed (apt-get install strace)");
    }
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let libraries = |t: &Trace| -> Vec<String> {
        t.opened
            .iter()
            .filter(|p| {
                p.starts_with(&rocm.path().display().to_string())
                    || [
                        "libhsa",
                        "libamdhip",
                        "libhiprtc",
                        "librocblas",
                        "libMIOpen",
                        "librccl",
                    ]
                    .iter()
                    .any(|l| p.contains(l))
            })
            .cloned()
            .collect()
    };
    // Device nodes, the node's (a capture's plain files) or this host's.
    let devices = |t: &Trace| -> Vec<String> {
        let dev = n.root.join("dev").display().to_string();
        t.opened
            .iter()
            .filter(|p| {
                p.starts_with(&dev) || p.starts_with("/dev/kfd") || p.starts_with("/dev/dri")
            })
            .cloned()
            .collect()
    };
    let workers = |t: &Trace| t.execs.iter().filter(|e| e.contains("__worker")).count();

    let passive = traced(&n.root, rocm.path(), "passive");
    util::check(
        passive.exit == Some(0),
        format!("passive: {}", passive.stdout),
    )?;
    util::check(
        passive.stdout.starts_with("rocgate: ok 8 GPUs (passive)"),
        format!("passive line: {}", passive.stdout),
    )?;
    util::check(
        passive.execs.len() == 1 && workers(&passive) == 0,
        format!("passive started processes: {:?}", passive.execs),
    )?;
    util::check(
        libraries(&passive).is_empty(),
        format!("passive opened ROCm libraries: {:?}", libraries(&passive)),
    )?;
    util::check(
        devices(&passive).is_empty(),
        format!("passive opened devices: {:?}", devices(&passive)),
    )?;
    util::check(
        passive
            .opened
            .iter()
            .any(|p| p.contains("/sys/class/kfd/kfd/topology")),
        "the passive trace shows the files it read",
    )?;

    // The same witness sees the quick tier start workers, load the
    // libraries and open /dev/kfd.
    let quick = traced(&n.root, rocm.path(), "quick");
    util::check(quick.exit == Some(0), format!("quick: {}", quick.stdout))?;
    util::check(
        workers(&quick) >= 8,
        format!("quick started {} workers", workers(&quick)),
    )?;
    util::check(
        !libraries(&quick).is_empty(),
        "the quick trace shows the ROCm libraries opened",
    )?;
    // In a capture a device is a plain file whose access the capture record
    // gives, so no tier opens it: what keeps the passive tier off devices
    // is that it has no check that opens one.
    let ids = |tier: &str| -> Vec<String> {
        let out = Command::new(rocgate_bin())
            .args(["list", "--tier", tier, "--sysroot"])
            .arg(&n.root)
            .env("ROCGATE_CONFIG", "")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let opening = ["kfd.dev_kfd_access", "kfd.render_access"];
    util::check(
        !ids("passive")
            .iter()
            .any(|i| opening.iter().any(|o| i.contains(o))),
        "the passive tier has a check that opens a device",
    )?;
    util::check(
        ids("quick")
            .iter()
            .any(|i| i.contains("kfd.dev_kfd_access")),
        "the quick tier opens /dev/kfd",
    )?;
    Ok(Completion::Completed)
}
