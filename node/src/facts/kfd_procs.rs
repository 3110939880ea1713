//! The processes KFD lists as using the node's GPUs.
//!
//! Source: amdkfd/kfd_process.c (Linux 5.8 and later, ROCm's amdgpu DKMS):
//! `kfd_procfs_add_sysfs_files` gives each process that opened /dev/kfd a
//! directory `/sys/class/kfd/kfd/proc/<pid>/` with `pasid` and, for each
//! device it acquired a VM on, `vram_<gpu_id>` (`kfd_procfs_show`: the
//! bytes of VRAM it holds on that device, `"%llu\n"`; `<gpu_id>` is the
//! KFD topology node's `gpu_id`, `"%u"`); `kfd_procfs_add_queue` adds
//! `queues/<queue id>/` with `gpuid` (`"%u\n"`), `type` and `size` for
//! each user queue it created. ROCr acquires a VM on every GPU it sees, so
//! a process lists every GPU, most with 0 bytes; what it holds is VRAM
//! above zero and queues.

use crate::{ReadError, Sysroot};

/// Where KFD lists its processes.
pub const PROC: &str = "/sys/class/kfd/kfd/proc";

/// One process KFD lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KfdProcess {
    /// Its pid (the directory's name).
    pub pid: u32,
    /// `/proc/<pid>/comm`, when readable (a process in another PID
    /// namespace, or gone, has none here).
    pub command: Option<String>,
    /// VRAM held, by KFD `gpu_id`: bytes.
    pub vram: Vec<(u64, u64)>,
    /// Queues, by KFD `gpu_id`: how many.
    pub queues: Vec<(u64, u32)>,
}

impl KfdProcess {
    /// What it holds on the device with KFD `gpu_id`: VRAM bytes and
    /// queues; `None` when it holds nothing there.
    pub fn holds(&self, gpu_id: u64) -> Option<(u64, u32)> {
        let vram = self
            .vram
            .iter()
            .filter(|(g, _)| *g == gpu_id)
            .map(|(_, b)| *b)
            .sum::<u64>();
        let queues = self
            .queues
            .iter()
            .filter(|(g, _)| *g == gpu_id)
            .map(|(_, n)| *n)
            .sum::<u32>();
        (vram > 0 || queues > 0).then_some((vram, queues))
    }

    /// `pid 4242 (python3)`.
    pub fn label(&self) -> String {
        match &self.command {
            Some(c) => format!("pid {} ({c})", self.pid),
            None => format!("pid {}", self.pid),
        }
    }
}

/// What KFD lists: `None` when there is no `proc/` directory (amdkfd not
/// loaded, or a kernel before 5.8); entries that could not be read are
/// kept as errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KfdProcesses {
    /// The processes, by pid.
    pub processes: Vec<KfdProcess>,
    /// Files that did not read (a process that ended while being read is
    /// not one: its directory is gone).
    pub errors: Vec<ReadError>,
}

/// Reads KFD's process list, leaving out `own_pid` (rocgate itself).
pub fn read(root: &Sysroot, own_pid: Option<u32>) -> Result<Option<KfdProcesses>, ReadError> {
    let Some(entries) = root.list_dir_if_present(PROC)? else {
        return Ok(None);
    };
    let mut found = KfdProcesses::default();
    let mut pids: Vec<u32> = entries.iter().filter_map(|e| e.parse().ok()).collect();
    pids.sort_unstable();
    for pid in pids.into_iter().filter(|p| Some(*p) != own_pid) {
        let dir = format!("{PROC}/{pid}");
        let files = match root.list_dir(&dir) {
            Ok(f) => f,
            // Ended between the listing and now.
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                found.errors.push(e);
                continue;
            }
        };
        let mut process = KfdProcess {
            pid,
            command: root.read_opt(&format!("/proc/{pid}/comm")).ok().flatten(),
            ..KfdProcess::default()
        };
        for file in &files {
            let Some(gpu_id) = file.strip_prefix("vram_").and_then(|g| g.parse().ok()) else {
                continue;
            };
            let path = format!("{dir}/{file}");
            match root.read_opt(&path) {
                Ok(Some(text)) => match text.parse() {
                    Ok(bytes) => process.vram.push((gpu_id, bytes)),
                    Err(_) => found.errors.push(ReadError::malformed(
                        &path,
                        format!("{text:?} is not a byte count"),
                    )),
                },
                Ok(None) => {}
                Err(e) => found.errors.push(e),
            }
        }
        if files.iter().any(|f| f == "queues") {
            read_queues(root, &dir, &mut process, &mut found.errors);
        }
        found.processes.push(process);
    }
    Ok(Some(found))
}

fn read_queues(root: &Sysroot, dir: &str, process: &mut KfdProcess, errors: &mut Vec<ReadError>) {
    let queues = format!("{dir}/queues");
    let ids = match root.list_dir(&queues) {
        Ok(ids) => ids,
        Err(e) if e.is_not_found() => return,
        Err(e) => return errors.push(e),
    };
    for id in ids {
        let path = format!("{queues}/{id}/gpuid");
        match root.read_opt(&path) {
            Ok(Some(text)) => match text.parse::<u64>() {
                Ok(gpu_id) => match process.queues.iter_mut().find(|(g, _)| *g == gpu_id) {
                    Some((_, n)) => *n += 1,
                    None => process.queues.push((gpu_id, 1)),
                },
                Err(_) => errors.push(ReadError::malformed(
                    &path,
                    format!("{text:?} is not a gpu_id"),
                )),
            },
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &std::path::Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn lists_what_each_process_holds_and_leaves_out_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        put(r, "sys/class/kfd/kfd/proc/4242/pasid", "0\n");
        put(r, "sys/class/kfd/kfd/proc/4242/vram_1000", "0\n");
        put(r, "sys/class/kfd/kfd/proc/4242/vram_9191", "162135015424\n");
        put(r, "sys/class/kfd/kfd/proc/4242/queues/3/gpuid", "9191\n");
        put(r, "sys/class/kfd/kfd/proc/4242/queues/4/gpuid", "9191\n");
        put(r, "proc/4242/comm", "python3\n");
        put(r, "sys/class/kfd/kfd/proc/77/vram_1000", "4096\n");
        put(r, "sys/class/kfd/kfd/proc/77/vram_bad", "x\n");
        put(r, "sys/class/kfd/kfd/proc/99/vram_1000", "lots\n");
        let got = read(&Sysroot::at(r), Some(77)).unwrap().unwrap();
        assert_eq!(got.processes.len(), 2);
        let p = &got.processes[1];
        assert_eq!(p.label(), "pid 4242 (python3)");
        assert_eq!(p.holds(1000), None);
        assert_eq!(p.holds(9191), Some((162_135_015_424, 2)));
        assert_eq!(got.processes[0].label(), "pid 99");
        assert_eq!(got.errors.len(), 1, "{:?}", got.errors);
    }

    #[test]
    fn no_proc_directory_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(&Sysroot::at(dir.path()), None).unwrap(), None);
    }
}
