//! The version of every layer: firmware per IP and VBIOS per GPU; kernel,
//! OS, amdgpu driver and ROCm release for the node. (The runtime libraries'
//! versions come from the checks that load them, as facts.)

use crate::Sysroot;
use crate::bounded_io::BoundedIo;
use crate::driver_release::{self, DriverRow};
use crate::facts::NodeFacts;
use crate::facts::pci::parse_hex;
use std::collections::BTreeMap;
use std::time::Duration;

/// `/etc/os-release`'s `ID`, `VERSION_ID` and `PRETTY_NAME`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OsRelease {
    /// `ubuntu`.
    pub id: String,
    /// `24.04`.
    pub version_id: String,
    /// `Ubuntu 24.04.3 LTS`.
    pub pretty: String,
    /// `ID_LIKE`: the distributions it derives from (`rhel centos fedora`).
    pub id_like: String,
}

impl OsRelease {
    /// `ubuntu 24.04`, the form the compatibility matrix uses.
    pub fn short(&self) -> String {
        format!("{} {}", self.id, self.version_id)
    }
}

/// Parses os-release `KEY=value` lines (values may be quoted).
pub fn parse_os_release(text: &str) -> OsRelease {
    let mut os = OsRelease::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        match k.trim() {
            "ID" => os.id = v.to_ascii_lowercase(),
            "VERSION_ID" => os.version_id = v,
            "PRETTY_NAME" => os.pretty = v,
            "ID_LIKE" => os.id_like = v.to_ascii_lowercase(),
            _ => {}
        }
    }
    os
}

/// The OS of the node.
pub fn os_release(root: &Sysroot) -> Option<OsRelease> {
    let text = root
        .read_opt("/etc/os-release")
        .ok()
        .flatten()
        .or_else(|| root.read_opt("/usr/lib/os-release").ok().flatten())?;
    let os = parse_os_release(&text);
    (!os.id.is_empty()).then_some(os)
}

/// The host's OS, or why it cannot be known: inside a container without the
/// host's root mounted, `/etc/os-release` is the image's, which says
/// nothing of the host the GPUs and their driver run on.
pub fn host_os(facts: &NodeFacts) -> Result<OsRelease, String> {
    if let (Some(c), None) = (&facts.container, facts.sysroot.host_root()) {
        let image = image_os(facts).map_or_else(String::new, |os| format!(" ({})", os.pretty));
        return Err(format!(
            "rocgate runs in a {} container without the host's root: its /etc/os-release is the image's{image}, not the host's; mount the host's / read-only at /host (`-v /:/host:ro`, or --host-root DIR)",
            c.runtime
        ));
    }
    os_release(&facts.sysroot).ok_or_else(|| {
        "/etc/os-release (or /usr/lib/os-release) could not be read or names no OS".into()
    })
}

/// The container image's own OS, when rocgate runs in a container.
pub fn image_os(facts: &NodeFacts) -> Option<OsRelease> {
    facts.container.as_ref()?;
    let text = facts
        .sysroot
        .read_image_opt("/etc/os-release")
        .or_else(|| facts.sysroot.read_image_opt("/usr/lib/os-release"))?;
    let os = parse_os_release(&text);
    (!os.id.is_empty()).then_some(os)
}

/// The installed ROCm release: that of the first of `dirs` (the install
/// rocgate was pointed at: `--rocm-path`, `ROCM_PATH`) whose
/// `.info/version` it has or whose name is `rocm-X.Y.Z`, else
/// `/opt/rocm/.info/version` (`6.2.0-66` gives `6.2.0`), or, where
/// `/opt/rocm` is absent, the one versioned `/opt/rocm-X.Y.Z` installed.
/// Several versioned installs and no `/opt/rocm` is ambiguous: `None` (see
/// [`rocm_installs`]).
pub fn rocm_release(root: &Sysroot, dirs: &[String]) -> Option<String> {
    for dir in dirs {
        let dir = dir.trim_end_matches('/');
        if let Some(v) = release_file(root, dir) {
            return Some(v);
        }
        let name = dir.rsplit('/').next().unwrap_or_default();
        if let Some(v) = name.strip_prefix("rocm-").filter(|v| {
            v.split('.').count() >= 2
                && v.split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        }) {
            return Some(v.to_string());
        }
    }
    if let Some(v) = release_file(root, "/opt/rocm") {
        return Some(v);
    }
    match rocm_installs(root).as_slice() {
        [(_, release)] => Some(release.clone()),
        _ => None,
    }
}

/// Every versioned ROCm install, `/opt/rocm-X.Y.Z`, with its release (from
/// its `.info/version`, else its directory name).
pub fn rocm_installs(root: &Sysroot) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = root
        .list_dir("/opt")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            let from_name = name.strip_prefix("rocm-")?.to_string();
            from_name.chars().next().filter(char::is_ascii_digit)?;
            let dir = format!("/opt/{name}");
            let release = release_file(root, &dir).unwrap_or(from_name);
            Some((dir, release))
        })
        .collect();
    out.sort();
    out
}

/// The release in `<dir>/.info/version`.
fn release_file(root: &Sysroot, dir: &str) -> Option<String> {
    let text = root
        .read_opt(&format!("{dir}/.info/version"))
        .ok()
        .flatten()?;
    let v = text.lines().next()?.trim();
    let v = v.split('-').next().unwrap_or(v);
    (!v.is_empty() && v.chars().next().is_some_and(|c| c.is_ascii_digit())).then(|| v.to_string())
}

/// The ROCm release the runtime libraries were actually loaded from, when
/// their path names a versioned install (`/opt/rocm-6.2.0/lib/...`): it can
/// differ from `/opt/rocm` when `LD_LIBRARY_PATH` or `--rocm-path` points
/// elsewhere.
pub fn loaded_rocm_release(versions: &BTreeMap<String, String>) -> Option<String> {
    versions
        .iter()
        .filter(|(k, _)| k.ends_with("_library"))
        .find_map(|(_, path)| {
            path.split('/').find_map(|part| {
                let v = part.strip_prefix("rocm-")?;
                (v.chars().next().is_some_and(|c| c.is_ascii_digit())
                    && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .then(|| v.to_string())
            })
        })
}

/// Adds `rocm_loaded` to node versions that name runtime libraries.
pub fn add_loaded_rocm(versions: &mut BTreeMap<String, String>) {
    if let Some(v) = loaded_rocm_release(versions) {
        versions.insert("rocm_loaded".into(), v);
    }
}

/// Node-wide versions; `driver_rows` name the amdgpu driver release the
/// loaded module belongs to (the compatibility matrix's `[[driver]]` rows).
pub fn node_versions(facts: &NodeFacts, driver_rows: &[DriverRow]) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    if let Ok(k) = &facts.kernel_release {
        v.insert("kernel".into(), k.clone());
    }
    if let Ok(os) = host_os(facts) {
        v.insert("os".into(), os.short());
        v.insert("os_name".into(), os.pretty);
    }
    if let Some(os) = image_os(facts) {
        v.insert("image_os".into(), os.short());
    }
    match (&facts.amdgpu.version, facts.amdgpu.inbox_srcversion()) {
        (Some(ver), _) => {
            v.insert("amdgpu".into(), ver.clone());
        }
        (None, Some(src)) => {
            v.insert("amdgpu".into(), format!("inbox (srcversion {src})"));
        }
        _ => {}
    }
    if let Some((_, package)) = driver_release::amdgpu_dkms_release(&facts.sysroot) {
        v.insert("amdgpu_dkms_package".into(), package);
    }
    if let Some(release) = driver_release::read(facts, driver_rows).describe() {
        v.insert("amdgpu_release".into(), release);
    }
    if let Some(r) = rocm_release(&facts.sysroot, &facts.rocm_dirs) {
        v.insert("rocm".into(), r);
    }
    let installs = rocm_installs(&facts.sysroot);
    if installs.len() > 1 {
        let list: Vec<String> = installs.into_iter().map(|(_, r)| r).collect();
        v.insert("rocm_installed".into(), list.join(", "));
    }
    v
}

/// Per-GPU versions: VBIOS and each IP's firmware (`fw_mec`), from the
/// physical function's sysfs. A partition reports its device's.
///
/// These reads touch the GPU's sysfs, which blocks on a wedged GPU: a run
/// learns them from the firmware layer's check (under its timeout), and
/// other callers use [`gpu_versions_within`].
pub fn gpu_versions(facts: &NodeFacts, index: u32) -> BTreeMap<String, String> {
    match facts.gpu(index).and_then(|g| g.pci.as_ref()) {
        Some(pci) => read_gpu_versions(&facts.sysroot, &pci.sysfs_dir()),
        None => BTreeMap::new(),
    }
}

/// [`gpu_versions`] of every GPU, each device read on its own helper
/// thread so that a wedged GPU can hang neither the caller nor the other
/// GPUs: a GPU not read within `wait` gets a single `versions` entry saying
/// so, and its thread is abandoned (it ends with the process).
pub fn gpu_versions_within(
    facts: &NodeFacts,
    wait: Duration,
) -> BTreeMap<u32, BTreeMap<String, String>> {
    per_device_within(facts, wait, "versions", read_gpu_versions)
}

/// Each GPU's RAS counts, retired pages, temperatures and power
/// (`ras_ue`, `ras_ce`, `ras_bad_pages`, `temp_junction`, `power_w`), read
/// as [`gpu_versions_within`] reads versions: a device at a time on helper
/// threads, within `wait`.
pub fn gpu_health_within(
    facts: &NodeFacts,
    wait: Duration,
) -> BTreeMap<u32, BTreeMap<String, String>> {
    per_device_within(facts, wait, "health", read_gpu_health)
}

/// `read` of every GPU's PCI function directory, each device on its own
/// thread so that a wedged GPU can hang neither the caller nor the other
/// GPUs: a GPU not read within `wait` gets a single `what` entry saying so.
///
/// The deadline is [`BoundedIo`]'s, the one every bounded read of a node
/// uses: the read runs on its reader thread and is abandoned (it ends with
/// the process) when it does not answer in time. Each device gets a
/// `BoundedIo` of its own, since one shared pool of readers would queue a
/// healthy GPU behind wedged ones until its own deadline passed.
fn per_device_within(
    facts: &NodeFacts,
    wait: Duration,
    what: &'static str,
    read: fn(&Sysroot, &str) -> BTreeMap<String, String>,
) -> BTreeMap<u32, BTreeMap<String, String>> {
    // Partitions share their device's sysfs directory: read each once.
    let mut by_dir: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for g in &facts.gpus {
        match &g.pci {
            Some(pci) => by_dir.entry(pci.sysfs_dir()).or_default().push(g.index),
            None => {
                out.insert(g.index, BTreeMap::new());
            }
        }
    }
    let read = std::thread::scope(|scope| {
        let waiting: Vec<_> = by_dir
            .iter()
            .map(|(dir, indices)| {
                let (root, dir) = (facts.sysroot.clone(), dir.clone());
                // A thread the OS refuses leaves that GPU unread, said so.
                let answer = std::thread::Builder::new()
                    .name("rocgate-versions".into())
                    .spawn_scoped(scope, move || {
                        BoundedIo::new(wait).run(&dir.clone(), move || read(&root, &dir))
                    })
                    .ok();
                (indices, answer)
            })
            .collect();
        // `run` returns by its deadline, so every join is bounded.
        waiting
            .into_iter()
            .map(|(indices, answer)| (indices, answer.and_then(|a| a.join().ok().flatten())))
            .collect::<Vec<_>>()
    });
    for (indices, versions) in read {
        let versions = versions.unwrap_or_else(|| {
            BTreeMap::from([(
                what.to_string(),
                format!("unread: this GPU's sysfs did not answer within {wait:?}"),
            )])
        });
        for &index in indices {
            out.insert(index, versions.clone());
        }
    }
    out
}

/// RAS totals, retired pages, junction (else edge) temperature and power of
/// the GPU whose PCI function is at `sysfs_dir`; what it lacks is left out.
fn read_gpu_health(root: &Sysroot, sysfs_dir: &str) -> BTreeMap<String, String> {
    let mut h = BTreeMap::new();
    let address = sysfs_dir.rsplit('/').next().unwrap_or_default();
    if let Ok(Some(ras)) = crate::facts::ras::read(root, address) {
        h.insert("ras_ue".into(), ras.total_ue().to_string());
        h.insert("ras_ce".into(), ras.total_ce().to_string());
        if let Some(pages) = &ras.bad_pages {
            h.insert("ras_bad_pages".into(), pages.len().to_string());
        }
    }
    if let Ok(Some(hw)) = crate::facts::hwmon::read(root, address) {
        let temp = hw
            .temperatures
            .iter()
            .find(|t| t.label == "junction")
            .or(hw.temperatures.first());
        if let Some(t) = temp {
            h.insert(format!("temp_{}", t.label), format!("{:.0}", t.celsius));
        }
        if let Some((w, _)) = hw.power {
            h.insert("power_w".into(), format!("{w:.0}"));
        }
    }
    h
}

/// VBIOS and firmware versions under one PCI function's sysfs directory.
fn read_gpu_versions(root: &Sysroot, sysfs_dir: &str) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    if let Ok(Some(b)) = root.read_opt(&format!("{sysfs_dir}/vbios_version")) {
        if !b.is_empty() {
            v.insert("vbios".into(), b);
        }
    }
    let dir = format!("{sysfs_dir}/fw_version");
    for name in root.list_dir(&dir).unwrap_or_default() {
        let Some(ip) = name.strip_suffix("_fw_version") else {
            continue;
        };
        match root.read_opt(&format!("{dir}/{name}")) {
            Ok(text) => {
                if let Some(x) = text.and_then(|t| parse_hex(&t)) {
                    v.insert(format!("fw_{ip}"), format!("0x{x:08x}"));
                }
            }
            // A wedged GPU: say which file did not answer, read no more.
            Err(e) if e.is_timeout() => {
                v.insert("versions".into(), format!("unread: {e}"));
                break;
            }
            Err(_) => {}
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rocgate_fixtures::hostile::put;

    #[test]
    fn parses_os_release() {
        let os = parse_os_release(
            "NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\n",
        );
        assert_eq!(os.short(), "ubuntu 24.04");
    }

    #[test]
    fn finds_versioned_installs_when_opt_rocm_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "opt/rocm-6.2.0/.info/version", "6.2.0-66\n").unwrap();
        let root = Sysroot::at(dir.path());
        assert_eq!(rocm_release(&root, &[]).as_deref(), Some("6.2.0"));
        std::fs::create_dir_all(dir.path().join("opt/rocm-6.4.1")).unwrap();
        std::fs::create_dir_all(dir.path().join("opt/rocm-smi")).unwrap();
        assert_eq!(rocm_release(&root, &[]), None, "two installs, no /opt/rocm");
        let installs: Vec<String> = rocm_installs(&root).into_iter().map(|(_, r)| r).collect();
        assert_eq!(installs, ["6.2.0", "6.4.1"]);
        put(dir.path(), "opt/rocm/.info/version", "6.4.1-120\n").unwrap();
        assert_eq!(rocm_release(&root, &[]).as_deref(), Some("6.4.1"));
        // The install rocgate was pointed at comes first: its version file,
        // else its name; one that says neither is passed over.
        put(dir.path(), "spack/rocm-core/.info/version", "6.3.1-48\n").unwrap();
        let dirs = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            rocm_release(&root, &dirs(&["/nowhere", "/spack/rocm-core/"])).as_deref(),
            Some("6.3.1")
        );
        assert_eq!(
            rocm_release(&root, &dirs(&["/modules/rocm-6.2.4"])).as_deref(),
            Some("6.2.4")
        );
        assert_eq!(
            rocm_release(&root, &dirs(&["/modules/rocm-latest"])).as_deref(),
            Some("6.4.1")
        );
    }

    #[test]
    fn names_the_release_libraries_were_loaded_from() {
        let mut v = BTreeMap::from([
            ("kernel".to_string(), "6.8.0".to_string()),
            (
                "hip_library".to_string(),
                "/opt/rocm-6.2.0/lib/libamdhip64.so.6".to_string(),
            ),
        ]);
        add_loaded_rocm(&mut v);
        assert_eq!(v["rocm_loaded"], "6.2.0");
        let mut debian = BTreeMap::from([(
            "hsa_library".to_string(),
            "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1".to_string(),
        )]);
        add_loaded_rocm(&mut debian);
        assert!(!debian.contains_key("rocm_loaded"));
    }

    /// Reads nothing, and never answers for the first GPU of mi300x-8.
    fn wedged_first(_: &Sysroot, dir: &str) -> BTreeMap<String, String> {
        if dir.ends_with(FIRST_GPU) {
            std::thread::sleep(Duration::from_secs(1000));
        }
        BTreeMap::from([("vbios".to_string(), dir.to_string())])
    }

    const FIRST_GPU: &str = "0000:05:00.0";

    #[test]
    fn a_wedged_gpu_is_unread_and_the_others_are_read() {
        let dir = tempfile::tempdir().unwrap();
        rocgate_fixtures::scenario("mi300x-8")
            .unwrap()
            .spec
            .write(dir.path())
            .unwrap();
        let facts = NodeFacts::discover(Sysroot::at(dir.path()));
        assert_eq!(facts.gpus.len(), 8);
        let first = facts.gpus.iter().find(|g| {
            g.pci
                .as_ref()
                .is_some_and(|p| p.sysfs_dir().ends_with(FIRST_GPU))
        });
        let first = first.expect("mi300x-8 has a GPU at 0000:05:00.0").index;
        let read = per_device_within(&facts, Duration::from_secs(5), "versions", wedged_first);
        assert_eq!(read.len(), 8);
        for (index, versions) in read {
            if index == first {
                assert!(versions["versions"].starts_with("unread: "), "{versions:?}");
            } else {
                assert!(
                    versions["vbios"].contains("0000:"),
                    "gpu{index}: {versions:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = parse_os_release(&s);
            let _ = loaded_rocm_release(&BTreeMap::from([("x_library".to_string(), s)]));
        }
    }
}
