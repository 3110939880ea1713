//! Next steps a user can paste. The catalogue's and the checks' next steps
//! name what differs from node to node with placeholders, filled once per
//! result from the scope the finding speaks of and the node's OS:
//!
//! | placeholder | becomes |
//! |---|---|
//! | `<address>` | the GPU's PCI address (`0000:a6:00.0`) |
//! | `<gpu>` | rocgate's index of the GPU (for `--gpus`) |
//! | `<reset>` | `` `sudo amd-smi reset -G -g 0000:a6:00.0` ``: amd-smi's `-g` takes a BDF, and amd-smi's own index need not be rocgate's |
//! | `<rerun>` | `` `rocgate run --no-gate --gpus 5` `` (no `--gpus` for the node) |
//! | `<update-initramfs>` | `` `sudo update-initramfs -u` `` (Debian, Ubuntu) or `` `sudo dracut -f` `` (RHEL, SUSE) |
//! | `<update-grub>` | `` `sudo update-grub` `` or `` `sudo grub2-mkconfig -o /boot/grub2/grub.cfg` `` |
//! | `<install-headers>` | the package manager's install of the running kernel's headers |
//!
//! Command placeholders carry their own backticks, so a command for an OS
//! that is not known can name each family's. amd-smi's reset syntax is
//! `amd-smi reset (-g GPU ...) -G` (`-G, --gpureset`; `-g` takes an ID, a
//! BDF or a UUID), as amd-smi's README documents it (ROCm 6.x, 7.x).

use rocgate_harness::CheckResult;
use rocgate_node::facts::NodeFacts;
use rocgate_node::versions::OsRelease;

/// The package and boot tooling a Linux distribution uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsFamily {
    /// Debian and Ubuntu: apt, update-initramfs, update-grub.
    Debian,
    /// RHEL, Rocky, Alma, Oracle Linux, CentOS, Fedora: dnf, dracut,
    /// grub2-mkconfig.
    Rhel,
    /// SLES and openSUSE: zypper, dracut, grub2-mkconfig.
    Suse,
}

impl OsFamily {
    /// The family of an os-release, by its `ID` and then its `ID_LIKE`.
    pub fn of(os: &OsRelease) -> Option<OsFamily> {
        std::iter::once(os.id.as_str())
            .chain(os.id_like.split_whitespace())
            .find_map(|id| match id {
                "debian" | "ubuntu" => Some(OsFamily::Debian),
                "rhel" | "centos" | "fedora" | "rocky" | "almalinux" | "ol" => Some(OsFamily::Rhel),
                "sles" | "suse" | "opensuse" | "opensuse-leap" | "opensuse-tumbleweed" => {
                    Some(OsFamily::Suse)
                }
                _ => None,
            })
    }
}

/// What the placeholders of one next step are filled with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fill<'a> {
    /// The GPU's PCI address.
    pub address: Option<&'a str>,
    /// rocgate's index of the GPU.
    pub gpu: Option<u32>,
    /// The node's OS family.
    pub os: Option<OsFamily>,
    /// The node's kernel release (`uname -r` on the node itself, which a
    /// `--sysroot` replay elsewhere is not).
    pub kernel: Option<&'a str>,
}

/// A command per family, or each family's named when the OS is not known.
fn per_family(os: Option<OsFamily>, debian: &str, rhel: &str, suse: &str) -> String {
    match os {
        Some(OsFamily::Debian) => format!("`{debian}`"),
        Some(OsFamily::Rhel) => format!("`{rhel}`"),
        Some(OsFamily::Suse) => format!("`{suse}`"),
        None if rhel == suse => format!("`{debian}` (Debian, Ubuntu; `{rhel}` on RHEL and SUSE)"),
        None => format!("`{debian}` (Debian, Ubuntu; `{rhel}` on RHEL, `{suse}` on SUSE)"),
    }
}

/// `text` with its placeholders filled; a value not known leaves its
/// placeholder as it is (a node-wide step has no GPU address).
pub fn fill(text: &str, with: &Fill<'_>) -> String {
    if !text.contains('<') {
        return text.to_string();
    }
    let address = with.address.unwrap_or("<address>");
    let gpu = with
        .gpu
        .map_or_else(|| "<gpu>".to_string(), |g| g.to_string());
    let kernel = with.kernel.unwrap_or("$(uname -r)");
    let rerun = match with.gpu {
        Some(g) => format!("`rocgate run --no-gate --gpus {g}`"),
        None => "`rocgate run --no-gate`".to_string(),
    };
    text.replace("<reset>", &format!("`sudo amd-smi reset -G -g {address}`"))
        .replace("<rerun>", &rerun)
        .replace(
            "<update-initramfs>",
            &per_family(
                with.os,
                "sudo update-initramfs -u",
                "sudo dracut -f",
                "sudo dracut -f",
            ),
        )
        .replace(
            "<update-grub>",
            &per_family(
                with.os,
                "sudo update-grub",
                "sudo grub2-mkconfig -o /boot/grub2/grub.cfg",
                "sudo grub2-mkconfig -o /boot/grub2/grub.cfg",
            ),
        )
        .replace(
            "<install-headers>",
            &per_family(
                with.os,
                &format!("sudo apt install linux-headers-{kernel}"),
                &format!("sudo dnf install kernel-devel-{kernel}"),
                "sudo zypper install kernel-default-devel",
            ),
        )
        .replace("<address>", address)
        .replace("<gpu>", &gpu)
}

/// Fills the next step of every finding in `results` for the scope it
/// blames (else its result's) on the node of `facts`.
pub fn fill_results(results: &mut [CheckResult], facts: &NodeFacts) {
    let os = rocgate_node::versions::host_os(facts)
        .ok()
        .as_ref()
        .and_then(OsFamily::of);
    for r in results.iter_mut() {
        let scope = r.scope;
        let Some(f) = r.finding.as_mut() else {
            continue;
        };
        let gpu = f.blames.unwrap_or(scope).gpu();
        let address = gpu
            .and_then(|g| facts.gpus.iter().find(|x| x.index == g))
            .map(|g| g.pci_address.as_str());
        let with = Fill {
            address,
            gpu,
            os,
            kernel: facts.kernel_release.as_deref().ok(),
        };
        f.next_step = fill(&f.next_step, &with);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(id: &str, like: &str) -> OsRelease {
        OsRelease {
            id: id.into(),
            id_like: like.into(),
            ..OsRelease::default()
        }
    }

    #[test]
    fn families_come_from_the_id_then_what_it_is_like() {
        assert_eq!(
            OsFamily::of(&os("ubuntu", "debian")),
            Some(OsFamily::Debian)
        );
        assert_eq!(OsFamily::of(&os("rhel", "fedora")), Some(OsFamily::Rhel));
        assert_eq!(
            OsFamily::of(&os("rocky", "rhel centos fedora")),
            Some(OsFamily::Rhel)
        );
        assert_eq!(OsFamily::of(&os("sles", "suse")), Some(OsFamily::Suse));
        assert_eq!(
            OsFamily::of(&os("pop", "ubuntu debian")),
            Some(OsFamily::Debian)
        );
        assert_eq!(OsFamily::of(&os("arch", "")), None);
    }

    #[test]
    fn a_gpus_values_and_its_oss_commands_fill_the_placeholders() {
        let with = Fill {
            address: Some("0000:a6:00.0"),
            gpu: Some(5),
            os: Some(OsFamily::Rhel),
            kernel: None,
        };
        assert_eq!(
            fill(
                "reset it (<reset>), check `lspci -s <address>`, then <rerun>; <update-initramfs>",
                &with
            ),
            "reset it (`sudo amd-smi reset -G -g 0000:a6:00.0`), check `lspci -s 0000:a6:00.0`, then `rocgate run --no-gate --gpus 5`; `sudo dracut -f`"
        );
        let ubuntu = Fill {
            os: Some(OsFamily::Debian),
            ..with
        };
        assert_eq!(
            fill("<install-headers>", &ubuntu),
            "`sudo apt install linux-headers-$(uname -r)`"
        );
        assert_eq!(fill("<update-grub>", &ubuntu), "`sudo update-grub`");
    }

    #[test]
    fn an_unknown_os_names_each_familys_command_and_unknown_values_stay() {
        let got = fill("<update-initramfs> for <address>", &Fill::default());
        assert_eq!(
            got,
            "`sudo update-initramfs -u` (Debian, Ubuntu; `sudo dracut -f` on RHEL and SUSE) for <address>"
        );
        assert_eq!(fill("<rerun>", &Fill::default()), "`rocgate run --no-gate`");
    }
}
