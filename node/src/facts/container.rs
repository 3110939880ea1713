//! Whether rocgate runs inside a container, and which: most GPU CI runs in
//! one, where a device that is missing or not openable was usually not
//! passed in (`--device`) or belongs to a group the image numbers
//! differently, rather than broken on the host.

use crate::Sysroot;

/// The container rocgate runs in, as detected; `None` on a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// `docker`, `podman` or `kubernetes`/`containerd` (from the cgroup).
    pub runtime: String,
    /// What told: `/.dockerenv`, `/run/.containerenv`, `/proc/1/cgroup`.
    pub evidence: String,
}

/// Markers container runtimes leave, most specific first: Docker creates
/// `/.dockerenv`, Podman `/run/.containerenv`; otherwise PID 1's cgroup
/// path names the runtime (cgroup v1, and v2 under Kubernetes).
pub fn detect(root: &Sysroot) -> Option<Container> {
    for (file, runtime) in [("/.dockerenv", "docker"), ("/run/.containerenv", "podman")] {
        if root.exists(file) {
            return Some(Container {
                runtime: runtime.into(),
                evidence: file.into(),
            });
        }
    }
    let cgroup = root.read_opt("/proc/1/cgroup").ok().flatten()?;
    runtime_in_cgroup(&cgroup).map(|runtime| Container {
        runtime: runtime.into(),
        evidence: "/proc/1/cgroup".into(),
    })
}

/// The container runtime a cgroup file names, if any.
fn runtime_in_cgroup(text: &str) -> Option<&'static str> {
    [
        ("kubepods", "kubernetes"),
        ("/docker", "docker"),
        ("libpod", "podman"),
        ("containerd", "containerd"),
    ]
    .into_iter()
    .find(|(marker, _)| text.contains(marker))
    .map(|(_, runtime)| runtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rocgate_fixtures::hostile::put;

    proptest! {
        #[test]
        fn any_cgroup_text_is_read_without_panic(text in ".{0,200}") {
            let _ = runtime_in_cgroup(&text);
        }
    }

    #[test]
    fn markers_and_cgroups_name_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        assert_eq!(detect(&root), None);
        put(dir.path(), "proc/1/cgroup", "0::/\n").unwrap();
        assert_eq!(detect(&root), None, "a host's PID 1 sits at the root");
        put(
            dir.path(),
            "proc/1/cgroup",
            "0::/kubepods/burstable/pod1234/abcd\n",
        )
        .unwrap();
        assert_eq!(detect(&root).unwrap().runtime, "kubernetes");
        put(dir.path(), ".dockerenv", "").unwrap();
        let docker = detect(&root).unwrap();
        assert_eq!(
            (docker.runtime.as_str(), docker.evidence.as_str()),
            ("docker", "/.dockerenv")
        );
    }
}
