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
