//! The archive's layout: which recorded paths a capture stores, and where
//! each goes. Unpacking never writes through a link, so what lies beneath a
//! stored link is stored beneath its target, and absolute link targets are
//! made relative so that a replay stays inside the unpacked snapshot.

use crate::PathUse as Use;
use crate::Sysroot;
use crate::sysroot::Kind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Files every capture stores beside what was read: what reports and the
/// other commands read of the node (its OS, ROCm release, host name, GPU
/// packages).
const ALWAYS: [&str; 4] = [
    "/etc/os-release",
    "/opt/rocm/.info/version",
    "/proc/sys/kernel/hostname",
    "/var/lib/dpkg/status",
];

/// What a capture stores: every recorded path and how it was used, and
/// the links the archive holds by where they are stored.
pub(super) struct Plan {
    /// Host path to its use, sorted.
    pub(super) accesses: BTreeMap<String, Use>,
    /// Placed path (relative) to the link's target as recorded.
    pub(super) links: BTreeMap<String, PathBuf>,
}

/// The plan for what `root` (a recording sysroot) has accessed.
pub(super) fn plan(root: &Sysroot) -> Plan {
    let mut accesses: BTreeMap<String, Use> = root.accesses().into_iter().collect();
    for extra in ALWAYS {
        accesses.entry(extra.to_string()).or_insert(Use::Read);
    }
    add_listed_entries(root, &mut accesses);
    let links = settle_links(root, &accesses);
    Plan { accesses, links }
}

/// A listing replays from the directory's entries, and some readers use
/// only the names (the DKMS versions registered): every entry of a listed
/// directory is stored, as a directory, a link, or an empty file (its
/// content was not read, so only its presence is known).
fn add_listed_entries(root: &Sysroot, accesses: &mut BTreeMap<String, Use>) {
    let listed: Vec<String> = accesses
        .iter()
        .filter(|(_, how)| **how == Use::Listed)
        .map(|(host, _)| host.trim_end_matches('/').to_string())
        .collect();
    for dir in listed {
        let Some(entries) = root.recorded_list(&dir) else {
            continue;
        };
        for (name, kind) in entries {
            let how = match kind {
                Kind::Link => Use::Linked,
                Kind::Dir => Use::Listed,
                _ => Use::Probed,
            };
            accesses.entry(format!("{dir}/{name}")).or_insert(how);
        }
    }
}

/// The links the archive stores, by where they are stored.
fn settle_links(root: &Sysroot, accesses: &BTreeMap<String, Use>) -> BTreeMap<String, PathBuf> {
    let read: Vec<(&str, PathBuf)> = accesses
        .iter()
        .filter(|(_, how)| **how == Use::Linked)
        .filter_map(|(host, _)| {
            let target = root.recorded_link(host)?;
            Some((host.trim_start_matches('/'), target))
        })
        .collect();
    let mut links: BTreeMap<String, PathBuf> = BTreeMap::new();
    // Placing a link can depend on a link placed later (a target that
    // leads beneath another link): a few rounds settle it.
    for _ in 0..8 {
        let next: BTreeMap<String, PathBuf> = read
            .iter()
            .filter_map(|(rel, target)| Some((place(rel, &links)?, target.clone())))
            .collect();
        if next == links {
            break;
        }
        links = next;
    }
    links
}

/// A tar header for an entry of `kind`: no owner, no time, so that two
/// captures of one node are byte for byte the same.
pub(super) fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h
}

/// Where `rel` (a path relative to the root) goes in the archive. Unpacking
/// never writes through a symbolic link, so a path beneath a link the
/// archive stores (`links`: placed path to target) is stored beneath the
/// link's target instead; replaying follows the link to the same place.
/// `None` when the links loop.
pub(super) fn place(rel: &str, links: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut parts: Vec<String> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_string)
        .collect();
    // As the kernel's limit on links followed in one lookup.
    let mut hops = 0;
    'resolve: loop {
        for i in 1..parts.len() {
            let Some(target) = links.get(&parts[..i].join("/")) else {
                continue;
            };
            hops += 1;
            if hops > 40 {
                return None;
            }
            // Within the sysroot an absolute target starts at its root and
            // `..` stops there, as in a chroot.
            let mut base: Vec<String> = if target.has_root() {
                Vec::new()
            } else {
                parts[..i - 1].to_vec()
            };
            for c in target.components() {
                match c {
                    std::path::Component::Normal(s) => base.push(s.to_string_lossy().into_owned()),
                    std::path::Component::ParentDir => {
                        base.pop();
                    }
                    _ => {}
                }
            }
            base.extend_from_slice(&parts[i..]);
            parts = base;
            continue 'resolve;
        }
        return (!parts.is_empty()).then(|| parts.join("/"));
    }
}

/// The target a link stored at `at` gets in the archive. An absolute
/// target means the node's root, so it is made relative to the link's
/// directory: replayed, the link then leads inside the unpacked snapshot
/// (as [`place`] stored what lies beneath it), not into the replaying
/// host's own `/opt/rocm` or `/etc`.
pub(super) fn within_root(at: &str, target: &Path) -> PathBuf {
    let Ok(below) = target.strip_prefix("/") else {
        return target.to_path_buf();
    };
    let depth = at
        .split('/')
        .filter(|p| !p.is_empty())
        .count()
        .saturating_sub(1);
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push(below);
    if rel.as_os_str().is_empty() {
        rel.push(".");
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_beneath_stored_links_are_placed_at_their_targets() {
        let links: BTreeMap<String, PathBuf> = [
            (
                "sys/class/drm/card0/device",
                "../../../devices/pci0000:00/0000:05:00.0",
            ),
            ("opt/rocm", "/opt/rocm-6.2.0"),
            ("loop/a", "b"),
            ("loop/b", "a"),
            ("deep", "../../../../x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
        .collect();
        assert_eq!(
            place("sys/class/drm/card0/device/vendor", &links).as_deref(),
            Some("sys/devices/pci0000:00/0000:05:00.0/vendor")
        );
        // The link itself stays where it is.
        assert_eq!(
            place("sys/class/drm/card0/device", &links).as_deref(),
            Some("sys/class/drm/card0/device")
        );
        assert_eq!(
            place("opt/rocm/.info/version", &links).as_deref(),
            Some("opt/rocm-6.2.0/.info/version")
        );
        assert_eq!(place("loop/a/x", &links), None);
        assert_eq!(place("deep/y", &links).as_deref(), Some("x/y"));
        assert_eq!(
            place("proc/modules", &links).as_deref(),
            Some("proc/modules")
        );
    }

    #[test]
    fn absolute_link_targets_are_stored_relative_to_the_link() {
        assert_eq!(
            within_root("opt/rocm", Path::new("/opt/rocm-6.2.0")),
            Path::new("../opt/rocm-6.2.0")
        );
        assert_eq!(within_root("a/b/c", Path::new("/x")), Path::new("../../x"));
        assert_eq!(within_root("top", Path::new("/")), Path::new("."));
        assert_eq!(within_root("a/b", Path::new("/")), Path::new(".."));
        assert_eq!(within_root("a/b", Path::new("../c")), Path::new("../c"));
    }
}
