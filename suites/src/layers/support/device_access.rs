//! Findings for device nodes the user cannot open (`/dev/kfd`, render nodes).

use crate::findings::{Code, codes};
use rocgate_harness::{Finding, Verdict};
use rocgate_node::facts::NodeFacts;
use rocgate_node::facts::access::{Access, group_name};

/// In a container, the finding for a device node `path` that does not
/// exist: the container was started without it. `None` on a host.
pub fn not_passed(facts: &NodeFacts, path: &str) -> Option<Verdict> {
    let c = facts.container.as_ref()?;
    Some(Verdict::found(codes::CONTAINER_DEVICE_NOT_PASSED.finding_next(
        format!(
            "{path} does not exist inside this {} container ({}): it was started without the GPU's devices",
            c.runtime, c.evidence
        ),
        "start the container with `--device=/dev/kfd --device=/dev/dri` (GitHub Actions: `container:` `options: --device=/dev/kfd --device=/dev/dri --group-add video --group-add render`; Kubernetes: request amd.com/gpu through the AMD GPU device plugin)",
    )))
}

/// The verdict for opening `path` read-write. `missing_code` is the finding
/// code when the node does not exist.
pub fn verdict(facts: &NodeFacts, path: &str, missing_code: Code) -> Verdict {
    let who = facts.user.as_ref().map_or_else(
        || "the current user".to_string(),
        |u| format!("user {} (uid {})", u.name, u.uid),
    );
    match facts.access(path) {
        Access::Granted => Verdict::pass(format!("{who} can open {path} read-write")),
        Access::Unknown { reason } => {
            Verdict::unverifiable(format!("cannot tell whether {path} opens: {reason}"))
        }
        Access::Missing => not_passed(facts, path).unwrap_or_else(|| Verdict::found(missing_code.finding_next(format!("{path} does not exist"), "on the host, check that amdgpu is loaded and udev created the node"))),
        Access::Failed { error } => Verdict::found(codes::DEVICE_OPEN_FAILED.finding_next(format!("opening {path} read-write fails: {error}"), "the driver refused the open: read `dmesg | grep -i -e kfd -e amdgpu`; errors such as ENOMEM or EFAULT here usually mean an IOMMU problem (try iommu=pt) or an amdgpu driver that does not match this ROCm release")),
        Access::Denied { errno, gid } => Verdict::found(denied(facts, path, &who, &errno, gid)),
    }
}

fn denied(facts: &NodeFacts, path: &str, who: &str, errno: &str, gid: Option<u32>) -> Finding {
    if errno == "EPERM" {
        return codes::KFD_PERMISSION.finding_next(format!(
                "{who} cannot open {path} read-write: operation not permitted (EPERM): a device cgroup denies it"
            ), format!(
                "the container was started without this device: pass `--device /dev/kfd --device /dev/dri` (docker/podman) or request the GPU through the AMD GPU device plugin (Kubernetes); {path} must be allowed in the cgroup"
            ));
    }
    let user = facts.user.as_ref();
    let user_name = user.map_or("$USER", |u| u.name.as_str());
    match gid {
        Some(gid) => {
            let group = group_name(&facts.groups, gid);
            let member = user.map(|u| u.groups.contains(&gid));
            if let (Some(c), Some(false)) = (&facts.container, member) {
                let groups = user.map_or_else(String::new, |u| {
                    u.groups.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                });
                return codes::DEVICE_GID_MISMATCH.finding_next(
                    format!(
                        "{who} cannot open {path} read-write (EACCES): it belongs to gid {gid} ({group} here), which is not among this {} container's groups ({groups}): the image's render and video groups are numbered differently from the host's",
                        c.runtime
                    ),
                    format!(
                        "add the host's gid to the container as a number: `--group-add {gid}` (GitHub Actions: `container:` `options: --group-add {gid}`)"
                    ),
                );
            }
            if member == Some(true) {
                codes::KFD_PERMISSION.finding_next(format!(
                        "{who} cannot open {path} read-write (EACCES) although it is in the device's group {group}: the node's mode does not give the group read-write"
                    ), format!(
                        "fix the udev rule for the node (e.g. /etc/udev/rules.d/70-amdgpu.rules: KERNEL==\"kfd\", GROUP=\"{group}\", MODE=\"0660\"), then `sudo udevadm trigger`"
                    ))
            } else {
                codes::KFD_PERMISSION.finding_next(format!(
                        "{who} cannot open {path} read-write (EACCES): the device belongs to group {group}, which {user_name} is not in"
                    ), format!(
                        "add the user to the group: `sudo usermod -aG {group} {user_name}`, then log in again (restart a CI runner service); in a container add `--group-add {group}`"
                    ))
            }
        }
        None => codes::KFD_PERMISSION.finding_next(format!("{who} cannot open {path} read-write (EACCES)"), "add the user to the device's group (usually render or video): `sudo usermod -aG render,video $USER`, then log in again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{code, next_step, node};
    use rocgate_harness::Status;

    /// The verdict for opening `/dev/kfd` on the fixture `scenario`.
    fn kfd_verdict(scenario: &str) -> Verdict {
        verdict(&node(scenario).ctx.facts, "/dev/kfd", codes::KFD_MISSING)
    }

    #[test]
    fn a_device_node_the_user_can_open_passes_and_on_a_host_nothing_is_missing_from_a_container() {
        let n = node("mi300x-8");
        assert!(not_passed(&n.ctx.facts, "/dev/kfd").is_none());
        let v = kfd_verdict("mi300x-8");
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert!(
            v.message.ends_with("can open /dev/kfd read-write"),
            "{}",
            v.message
        );
    }

    #[test]
    fn a_user_outside_the_device_s_group_is_told_to_join_it() {
        let v = kfd_verdict("kfd-permission");
        assert_eq!(code(&v), Some(codes::KFD_PERMISSION.code), "{}", v.message);
        assert!(next_step(&v).contains("usermod -aG"), "{}", next_step(&v));
    }

    #[test]
    fn a_device_cgroup_that_denies_the_open_is_named() {
        let v = kfd_verdict("container-cgroup");
        assert_eq!(code(&v), Some(codes::KFD_PERMISSION.code), "{}", v.message);
        assert!(v.message.contains("EPERM"), "{}", v.message);
        assert!(
            next_step(&v).contains("--device /dev/kfd"),
            "{}",
            next_step(&v)
        );
    }

    #[test]
    fn a_container_s_group_numbered_unlike_the_host_s_is_told_apart_from_a_missing_membership() {
        let v = kfd_verdict("container-gid-mismatch");
        assert_eq!(
            code(&v),
            Some(codes::DEVICE_GID_MISMATCH.code),
            "{}",
            v.message
        );
        assert!(next_step(&v).contains("--group-add"), "{}", next_step(&v));
    }

    #[test]
    fn a_device_node_a_container_was_started_without_is_not_passed_in() {
        let n = node("container-devices-not-passed");
        let v = not_passed(&n.ctx.facts, "/dev/kfd").expect("a container");
        let want = codes::CONTAINER_DEVICE_NOT_PASSED.code;
        assert_eq!(code(&v), Some(want), "{}", v.message);
        let v = kfd_verdict("container-devices-not-passed");
        assert_eq!(code(&v), Some(want), "{}", v.message);
    }
}
