//! The README demo's nodes are fixture scenarios that `ci/regen-fixtures`
//! writes: every `fixtures/nodes/NAME` the README runs rocgate on is a
//! scenario of the fixture builder and in the script's list, and the script
//! writes no node the README does not use. The trees are generated, never
//! committed, so a check that changes what a node holds changes no file of
//! the repository but the builder.

use crate::util;
use std::collections::BTreeSet;

/// The node names the README gives `--sysroot fixtures/nodes/NAME`.
fn readme_nodes() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(util::repo().join("README.md")).unwrap();
    readme
        .split("fixtures/nodes/")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The names in `ci/regen-fixtures`' `nodes=(...)` list.
fn script_nodes() -> BTreeSet<String> {
    let script = std::fs::read_to_string(util::repo().join("ci/regen-fixtures")).unwrap();
    let list = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("nodes=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("ci/regen-fixtures has a nodes=(...) line");
    list.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_readme_demo_nodes_are_scenarios_that_ci_regen_fixtures_writes() {
    let (readme, script) = (readme_nodes(), script_nodes());
    assert!(
        readme.len() >= 3,
        "expected the README demo nodes (fixtures/nodes/NAME): {readme:?}"
    );
    assert_eq!(
        readme, script,
        "the nodes the README runs on and those ci/regen-fixtures writes"
    );
    for name in &script {
        let scenario = rocgate_fixtures::scenario(name)
            .unwrap_or_else(|| panic!("ci/regen-fixtures writes {name}, which is not a scenario"));
        // The builder writes it whole: what the demo runs on exists.
        let tmp = tempfile::tempdir().unwrap();
        scenario.spec.write(tmp.path()).unwrap();
        assert!(
            tmp.path().join("sys/bus/pci/devices").is_dir(),
            "{name}: no PCI devices written"
        );
    }
}
