//! Snapshots of what engineers read: doctor, run and inventory output on
//! synthetic nodes (paths and timings filtered out).

use crate::util;
use crate::util::{node, on_sysroot};

fn stdout(args: &[&str], root: &std::path::Path) -> String {
    let out = on_sysroot(args, root).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn settings(root: &std::path::Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex_escape(&root.display().to_string()), "[SYSROOT]");
    s.add_filter(r"(?m)in (\d+\.\d m?s|\d+m\d\ds)$", "in [TIME] ms");
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

#[test]
fn fleet_html_report() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["mi300x-8", "kfd-missing", "pcie-link-degraded"] {
        let n = node(name);
        let report = dir.path().join(format!("{name}.json"));
        on_sysroot(&["run", "--json", report.to_str().unwrap()], &n.root)
            .output()
            .unwrap();
    }
    let out = util::rocgate()
        .args(["fleet", "report", "--format", "html"])
        .arg(dir.path())
        .output()
        .unwrap();
    let mut s = settings(dir.path());
    // The style sheet is the same on every page; the snapshot holds what
    // the page says. One element per line, so that a change reads as a diff.
    s.add_filter(r"(?s)<style>:root.*?</style>", "<style>[style.css]</style>");
    // Report ages count to the moment the page was made.
    s.add_filter(r"as of \d{4}-\d\d-\d\dT[0-9:]+Z", "as of [now]");
    s.add_filter(
        r#"title="\d{4}-\d\d-\d\dT[0-9:]+Z">\d+ s<"#,
        r#"title="[finished]">[age]<"#,
    );
    s.add_filter(
        "(<(?:h1|h2|table|thead|tbody|tr|ul|li|p|footer|form|label|div)[ >])",
        "\n$1",
    );
    s.bind(|| insta::assert_snapshot!("fleet-html", String::from_utf8_lossy(&out.stdout)));
}
