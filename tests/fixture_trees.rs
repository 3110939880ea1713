//! The node trees checked in under fixtures/nodes (for the README demo) are
//! exactly what the fixture builder writes. Regenerate with `ci/regen-fixtures`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, PartialEq)]
enum Entry {
    File(Vec<u8>),
    Link(String),
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Entry>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            out.insert(
                rel,
                Entry::Link(std::fs::read_link(&path).unwrap().display().to_string()),
            );
        } else if kind.is_dir() {
            walk(root, &path, out);
        } else {
            out.insert(rel, Entry::File(std::fs::read(&path).unwrap()));
        }
    }
}

fn tree(root: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn checked_in_nodes_match_the_builder() {
    let nodes = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/nodes");
    let mut checked = 0;
    for entry in std::fs::read_dir(&nodes).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let scenario = rocgate_fixtures::scenario(&name)
            .unwrap_or_else(|| panic!("fixtures/nodes/{name} is not a scenario"));
        let tmp = tempfile::tempdir().unwrap();
        scenario.spec.write(tmp.path()).unwrap();
        let (want, have) = (tree(tmp.path()), tree(&dir));
        let missing: Vec<&String> = want.keys().filter(|k| !have.contains_key(*k)).collect();
        let extra: Vec<&String> = have.keys().filter(|k| !want.contains_key(*k)).collect();
        let differ: Vec<&String> = want
            .iter()
            .filter(|(k, v)| have.get(*k).is_some_and(|h| h != *v))
            .map(|(k, _)| k)
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty() && differ.is_empty(),
            "fixtures/nodes/{name} is stale (run ci/regen-fixtures): missing {missing:?}, extra {extra:?}, different {differ:?}"
        );
        checked += 1;
    }
    assert!(
        checked >= 3,
        "expected the README demo nodes under fixtures/nodes"
    );
}
