//! One source of driver rows: with `--matrix FILE`, the driver release the
//! reports name (`amdgpu_release` in JSON, JUnit and the inventory) is the
//! one the compat check and `matrix check` judge, both read from that
//! file's `[[driver]]` rows, never from the built-in matrix.

use crate::util::{entry, node, on_sysroot, result, run, text};
use serde_json::Value;
use std::path::Path;

/// The built-in matrix's row for the mi300x-8 node's module, and the same
/// row as the user's matrix gives it: build 2255209 is release 30.20.9.
const BUILTIN_ROW: &str = r#"releases = [["30.20.0", "2238411"], ["30.20.1", "2255209"]]"#;
const USER_ROW: &str = r#"releases = [["30.20.0", "2238411"], ["30.20.9", "2255209"]]"#;

/// mi300x-8 without dpkg's record of amdgpu-dkms, so that its driver
/// release is read from its DKMS build through the matrix's driver rows;
/// and a matrix, beside it, whose row for that build names another release
/// than the built-in one.
fn node_and_user_matrix() -> (crate::util::Node, std::path::PathBuf) {
    let n = node("mi300x-8");
    let status = n.root.join("var/lib/dpkg/status");
    let kept: Vec<String> = std::fs::read_to_string(&status)
        .unwrap()
        .split("\n\n")
        .filter(|stanza| !stanza.contains("Package: amdgpu-dkms"))
        .map(str::to_string)
        .collect();
    std::fs::write(&status, kept.join("\n\n")).unwrap();
    let builtin =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/compat.toml"))
            .unwrap();
    assert!(
        builtin.contains(BUILTIN_ROW),
        "the built-in 6.16.6 row moved"
    );
    let matrix = n.root.with_extension("matrix.toml");
    std::fs::write(&matrix, builtin.replace(BUILTIN_ROW, USER_ROW)).unwrap();
    (n, matrix)
}

fn json_of(args: &[&str], root: &Path) -> Value {
    let out = on_sysroot(args, root).output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn the_reports_and_the_compat_check_name_the_release_of_the_users_matrix() {
    let (n, matrix) = node_and_user_matrix();
    let matrix = matrix.to_str().unwrap();
    let (_, _, json, junit) = run(&n.root, &["--matrix", matrix]);
    assert_eq!(
        json["versions"]["node"]["amdgpu_release"], "30.20.9",
        "{}",
        json["versions"]
    );
    assert!(
        junit.contains(r#"<property name="amdgpu_release" value="30.20.9"/>"#),
        "{junit}"
    );
    let compat = result(&json, "node.compat.combination");
    assert!(
        text(&compat["output"]).contains("have 30.20.9 (from DKMS build amdgpu/6.16.6-2255209"),
        "{compat}"
    );

    let check = json_of(&["matrix", "check", "--json", "--matrix", matrix], &n.root);
    let amdgpu = entry(&check["components"], "component", "amdgpu");
    assert!(
        text(&amdgpu["have"]).starts_with("30.20.9 (from "),
        "{check}"
    );

    let inventory = json_of(&["inventory", "--json", "--matrix", matrix], &n.root);
    assert_eq!(inventory["versions"]["node"]["amdgpu_release"], "30.20.9");
}

#[test]
fn without_a_matrix_both_name_the_built_in_release() {
    let (n, _) = node_and_user_matrix();
    let (_, _, json, _) = run(&n.root, &[]);
    assert_eq!(json["versions"]["node"]["amdgpu_release"], "30.20.1");
    let compat = result(&json, "node.compat.combination");
    assert!(
        text(&compat["output"]).contains("have 30.20.1 (from DKMS build"),
        "{compat}"
    );
}
