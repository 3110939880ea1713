//! Snapshots of what engineers read: doctor, run and inventory output on
//! synthetic nodes (paths and timings filtered out).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{node, on_sysroot};

fn stdout(args: &[&str], root: &std::path::Path) -> String {
    let out = on_sysroot(args, root).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn settings(root: &std::path::Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex_escape(&root.display().to_string()), "[SYSROOT]");
    s.add_filter(r"in \d+\.\d ms", "in [TIME] ms");
    s
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn doctor_reports() {
    for name in [
        "mi300x-8",
        "amdgpu-blacklisted",
        "dkms-stale",
        "firmware-load-failed",
        "kfd-permission",
        "gpu-bound-to-vfio",
    ] {
        let n = node(name);
        settings(&n.root).bind(|| {
            insta::assert_snapshot!(format!("doctor-{name}"), stdout(&["doctor"], &n.root))
        });
    }
}

#[test]
fn run_reports() {
    for name in ["mi300x-8-cpx", "amdgpu-not-loaded", "kfd-topology-empty"] {
        let n = node(name);
        settings(&n.root)
            .bind(|| insta::assert_snapshot!(format!("run-{name}"), stdout(&["run"], &n.root)));
    }
}

#[test]
fn inventory_reports() {
    for name in ["mi210-8-two-hives", "mi25-old-kernel"] {
        let n = node(name);
        settings(&n.root).bind(|| {
            insta::assert_snapshot!(format!("inventory-{name}"), stdout(&["inventory"], &n.root))
        });
    }
}
