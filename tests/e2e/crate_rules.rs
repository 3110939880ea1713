//! What each crate may depend on (ARCHITECTURE.md, "What each crate may
//! depend on"), read from the manifests: Cargo would allow any of these
//! dependencies, so this test is what keeps the layering.

use std::collections::BTreeSet;
use std::path::Path;

/// A crate's normal and build dependencies, by name.
fn dependencies(manifest: &str) -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest);
    let text = std::fs::read_to_string(&path).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    ["dependencies", "build-dependencies"]
        .iter()
        .filter_map(|section| table.get(*section).and_then(toml::Value::as_table))
        .flat_map(|deps| deps.keys().cloned())
        .collect()
}

/// The rocgate crates among `deps`.
fn ours(deps: &BTreeSet<String>) -> Vec<&str> {
    deps.iter()
        .map(String::as_str)
        .filter(|d| d.starts_with("rocgate"))
        .collect()
}

#[test]
fn each_crate_reaches_only_the_crates_below_it() {
    for (manifest, allowed) in [
        // The engine knows no stack.
        ("harness/Cargo.toml", &[][..]),
        // The node's view reaches the engine only to tell a running check
        // that a file did not answer.
        ("node/Cargo.toml", &["rocgate-harness"][..]),
        (
            "suites/Cargo.toml",
            &[
                "rocgate-harness",
                "rocgate-kernels",
                "rocgate-node",
                "rocgate-rocm",
            ][..],
        ),
        ("rocm/Cargo.toml", &[][..]),
        ("kernels/Cargo.toml", &[][..]),
        ("fixtures/Cargo.toml", &[][..]),
    ] {
        assert_eq!(ours(&dependencies(manifest)), allowed, "{manifest}");
    }
}

#[test]
fn the_suites_hold_no_front_end() {
    let deps = dependencies("suites/Cargo.toml");
    for front_end in ["libtest-mimic", "tar", "zstd", "clap"] {
        assert!(!deps.contains(front_end), "{front_end} in the suites");
    }
}

#[test]
fn the_fake_libraries_are_independent_witnesses() {
    for fake in ["common", "hip", "hsa", "miopen", "rccl", "rocblas"] {
        let manifest = format!("fixtures/fake-rocm/{fake}/Cargo.toml");
        for dep in ours(&dependencies(&manifest)) {
            assert_eq!(dep, "rocgate-fake-common", "{manifest}");
        }
    }
}
