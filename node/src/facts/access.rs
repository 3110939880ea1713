//! Whether the current user can open a device node read-write, and if not,
//! which group would grant it.

use super::capture::Capture;
use crate::Sysroot;
use std::os::unix::fs::MetadataExt;

/// The user whose access is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Login name (or the uid as text).
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Group ids the user's processes carry.
    pub groups: Vec<u32>,
}

/// One line of `/etc/group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Group name.
    pub name: String,
    /// Group id.
    pub gid: u32,
}

/// The result of trying to open a device node read-write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// It opened.
    Granted,
    /// The node does not exist.
    Missing,
    /// EACCES or EPERM. `gid` is the node's owning group.
    Denied {
        /// `EACCES` (file permissions) or `EPERM` (device cgroup).
        errno: String,
        /// Owning group of the node, when known.
        gid: Option<u32>,
    },
    /// Any other error (ENOMEM, EFAULT: the driver refused).
    Failed {
        /// The error text.
        error: String,
    },
    /// Access cannot be determined here (a sysroot without a record).
    Unknown {
        /// Why.
        reason: String,
    },
}

/// The user running rocgate, or the user recorded in a sysroot's capture.
pub fn current_user(root: &Sysroot, capture: Option<&Capture>) -> Option<User> {
    if !root.is_live() {
        return capture.and_then(|c| c.user.as_ref()).map(|u| User {
            name: u.name.clone(),
            uid: u.uid,
            groups: u.groups.clone(),
        });
    }
    let uid = nix::unistd::getuid();
    let mut groups: Vec<u32> = nix::unistd::getgroups()
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.as_raw())
        .collect();
    groups.push(nix::unistd::getegid().as_raw());
    groups.sort_unstable();
    groups.dedup();
    let name = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    Some(User {
        name,
        uid: uid.as_raw(),
        groups,
    })
}

/// Parses `/etc/group` (`name:x:gid:members`); malformed lines are skipped.
pub fn parse_groups(text: &str) -> Vec<Group> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(':');
            let name = f.next()?.trim();
            let _password = f.next()?;
            let gid = f.next()?.trim().parse().ok()?;
            (!name.is_empty() && !name.starts_with('#')).then(|| Group {
                name: name.to_string(),
                gid,
            })
        })
        .collect()
}

/// The groups of the node (`/etc/group` through the sysroot).
pub fn read_groups(root: &Sysroot) -> Vec<Group> {
    root.read_text("/etc/group")
        .map(|t| parse_groups(&t))
        .unwrap_or_default()
}

/// Tries to open `host` read-write: for real on a live host, from the capture
/// record in a sysroot.
pub fn probe(root: &Sysroot, capture: Option<&Capture>, host: &str) -> Access {
    if root.is_live() {
        return probe_live(host);
    }
    let Some(record) = capture.and_then(|c| c.device(host)) else {
        if !root.exists(host) {
            return Access::Missing;
        }
        return Access::Unknown {
            reason: format!(
                "the sysroot has no access record for {host} (add it to {})",
                root.path(super::capture::CAPTURE_FILE).display()
            ),
        };
    };
    match record.open.as_str() {
        "ok" => Access::Granted,
        "ENOENT" => Access::Missing,
        "EACCES" | "EPERM" => Access::Denied {
            errno: record.open.clone(),
            gid: record.gid,
        },
        other => Access::Failed {
            error: other.to_string(),
        },
    }
}

fn probe_live(host: &str) -> Access {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(host)
    {
        Ok(_) => Access::Granted,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Access::Missing,
        Err(e) if matches!(e.raw_os_error(), Some(1 | 13)) => Access::Denied {
            errno: if e.raw_os_error() == Some(1) {
                "EPERM"
            } else {
                "EACCES"
            }
            .to_string(),
            gid: std::fs::metadata(host).ok().map(|m| m.gid()),
        },
        Err(e) => Access::Failed {
            error: e.to_string(),
        },
    }
}

/// The name of group `gid`, or the number as text.
pub fn group_name(groups: &[Group], gid: u32) -> String {
    groups
        .iter()
        .find(|g| g.gid == gid)
        .map_or_else(|| format!("gid {gid}"), |g| g.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_group_file() {
        let g = parse_groups("root:x:0:\nvideo:x:44:ci\nrender:x:110:\nbroken\n:x:5:\n");
        assert_eq!(g.len(), 3);
        assert_eq!(group_name(&g, 110), "render");
        assert_eq!(group_name(&g, 999), "gid 999");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse_groups(&s);
        }
    }
}
