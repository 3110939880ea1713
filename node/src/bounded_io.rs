//! File reads that cannot hang a run. A sysfs attribute of a wedged GPU can
//! block `read()` in the kernel for good, and a FIFO standing in for a file
//! (a captured node's record of a file that did not answer) blocks `open()`.
//! On the live node, reads of /sys, /proc and /dev run on a small pool of
//! threads and are abandoned after a deadline; a FIFO is never opened. A
//! file that did not answer once is not tried again in the same run: later
//! reads fail at once, naming it.

use std::collections::BTreeSet;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// The queue readers take jobs from, and its sending end.
type Pool = (Sender<Job>, Arc<Mutex<Receiver<Job>>>);

/// How long a live read may take before it is abandoned.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// Reader threads kept for live reads.
const READERS: usize = 4;

/// The size of one read of a file: a page, the most kernfs returns to one
/// read of an attribute (`kernfs_file_read_iter`, fs/kernfs/file.c:
/// `len = min(count, PAGE_SIZE)`).
pub(crate) const PAGE: usize = 4096;

/// Reads `file` to its end, or to `limit` bytes, in page-sized reads until
/// one returns 0. This is how a sysfs binary attribute must be read:
/// kernfs passes each read(2)'s offset and size straight to the
/// attribute's callback, and `amdgpu_ras_sysfs_badpages_read`
/// (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c) returns only the whole 28-byte
/// records that fit in the size asked for, so a short read (the 32-byte
/// probe and the small tail reads of `read_to_end`) returns 0 before the
/// end and the list reads short. `st_size` is never trusted: sysfs says
/// 4096 for every attribute whatever it holds.
pub(crate) fn read_paged(mut file: impl std::io::Read, limit: u64) -> std::io::Result<Vec<u8>> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut page = vec![0u8; PAGE];
    while bytes.len() < limit {
        let want = PAGE.min(limit - bytes.len());
        match file.read(&mut page[..want]) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&page[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(bytes)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Deadline-bounded reads, and the files that did not answer.
#[derive(Debug)]
pub(crate) struct BoundedIo {
    deadline: Duration,
    pool: Mutex<Option<Pool>>,
    wedged: Mutex<BTreeSet<String>>,
}

impl BoundedIo {
    pub(crate) fn new(deadline: Duration) -> Self {
        BoundedIo {
            deadline,
            pool: Mutex::new(None),
            wedged: Mutex::new(BTreeSet::new()),
        }
    }

    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Whether `host` did not answer earlier in this run.
    pub(crate) fn is_wedged(&self, host: &str) -> bool {
        lock(&self.wedged).contains(host)
    }

    /// Records that `host` did not answer.
    pub(crate) fn mark_wedged(&self, host: &str) {
        lock(&self.wedged).insert(host.to_string());
    }

    /// The files that did not answer, sorted.
    pub(crate) fn wedged(&self) -> Vec<String> {
        lock(&self.wedged).iter().cloned().collect()
    }

    /// Whether `host` is, or lies beneath, a path that did not answer (the
    /// directory of a wedged device, as [`device_of`] names it).
    pub(crate) fn is_wedged_beneath(&self, host: &str) -> bool {
        lock(&self.wedged)
            .iter()
            .any(|w| host.starts_with(w.as_str()))
    }

    /// Reads `host` whole in pages ([`read_paged`], up to `limit` bytes)
    /// with `open`, a device at a time: once a file does not answer within
    /// the deadline, its PCI device ([`device_of`]) is taken for wedged and
    /// none of its other files is tried. `open` refusing a file that would
    /// block (`WouldBlock`: a FIFO of a capture) makes it one that did not
    /// answer too, though nothing was waited for.
    pub(crate) fn read_device_file(
        &self,
        host: &str,
        limit: u64,
        open: impl FnOnce() -> std::io::Result<std::fs::File> + Send + 'static,
    ) -> DeviceRead {
        if self.is_wedged_beneath(host) {
            return DeviceRead::NoAnswer;
        }
        match self.run(&device_of(host), move || {
            open().and_then(|f| read_paged(f, limit))
        }) {
            Some(Ok(bytes)) => DeviceRead::Bytes(bytes),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => DeviceRead::NoAnswer,
            Some(Err(_)) => DeviceRead::Failed,
            None => DeviceRead::NoAnswer,
        }
    }

    fn spawn_reader(rx: &Arc<Mutex<Receiver<Job>>>) {
        let rx = Arc::clone(rx);
        // If the OS refuses a thread, the reads still time out.
        let _ = std::thread::Builder::new()
            .name("rocgate-read".into())
            .spawn(move || {
                loop {
                    let job = match lock(&rx).recv() {
                        Ok(j) => j,
                        Err(_) => return,
                    };
                    job();
                }
            });
    }

    fn sender(&self) -> Sender<Job> {
        let mut pool = lock(&self.pool);
        let (tx, rx) = pool.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let rx = Arc::new(Mutex::new(rx));
            for _ in 0..READERS {
                Self::spawn_reader(&rx);
            }
            (tx, rx)
        });
        let _ = rx;
        tx.clone()
    }

    /// Runs `op` on a reader thread; `None` when it does not finish within
    /// the deadline (`host` is then marked as not answering, and the stuck
    /// thread replaced).
    pub(crate) fn run<T: Send + 'static>(
        &self,
        host: &str,
        op: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = tx.send(op());
        });
        if self.sender().send(job).is_err() {
            return None;
        }
        match rx.recv_timeout(self.deadline) {
            Ok(v) => Some(v),
            Err(_) => {
                self.mark_wedged(host);
                if let Some((_, rx)) = lock(&self.pool).as_ref() {
                    Self::spawn_reader(rx);
                }
                None
            }
        }
    }
}

/// What [`BoundedIo::read_device_file`] read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DeviceRead {
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// It could not be opened or read (missing, refused).
    Failed,
    /// It, or another file of its device, did not answer.
    NoAnswer,
}

/// The PCI device directory a sysfs path belongs to (up to its last
/// `dddd:bb:dd.f` component), or the path itself: what one hung read
/// takes out.
pub(crate) fn device_of(host: &str) -> String {
    let is_bdf = |c: &str| {
        let b = c.as_bytes();
        b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
    };
    let mut end = None;
    let mut pos = 0;
    for part in host.split('/') {
        pos += part.len() + 1;
        if is_bdf(part) {
            end = Some(pos);
        }
    }
    end.and_then(|e| host.get(..e)).unwrap_or(host).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A reader with the kernel's bad-pages rule: only whole 28-byte
    /// records that fit in the read, at most a page per read.
    struct BadPages {
        records: usize,
        pos: usize,
    }

    impl std::io::Read for BadPages {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let count = buf.len().min(PAGE);
            if count == 0 {
                return Ok(0);
            }
            let (start, end) = (self.pos.div_ceil(28), (self.pos + count - 1) / 28);
            let mut n = 0;
            for r in start..end.min(self.records) {
                let line = format!("0x{r:08x} : 0x00001000 : R\n");
                buf[n..n + 28].copy_from_slice(line.as_bytes());
                n += 28;
            }
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn binary_attributes_read_whole_in_pages() {
        use std::io::Read;
        for records in [0, 1, 3, 128, 146, 147, 470] {
            let got = read_paged(BadPages { records, pos: 0 }, 1 << 20).unwrap();
            assert_eq!(got.len(), records * 28, "{records} records");
            // What a plain read_to_end makes of the same callback: short.
            let mut short = Vec::new();
            BadPages { records, pos: 0 }
                .read_to_end(&mut short)
                .unwrap();
            if records > 2 {
                assert!(short.len() < records * 28, "{records}: {}", short.len());
            }
        }
        // The limit bounds it.
        let got = read_paged(
            BadPages {
                records: 470,
                pos: 0,
            },
            100,
        )
        .unwrap();
        assert!(got.len() <= 100);
        assert_eq!(read_paged(&b"abc"[..], 2).unwrap(), b"ab");
    }

    #[test]
    fn a_hung_file_wedges_its_device_only() {
        assert_eq!(
            device_of("/sys/devices/pci0000:00/0000:46:00.0/fw_version/mec_fw_version"),
            "/sys/devices/pci0000:00/0000:46:00.0/"
        );
        assert_eq!(
            device_of("/sys/bus/pci/devices/0000:46:00.0/serial_number"),
            "/sys/bus/pci/devices/0000:46:00.0/"
        );
        assert_eq!(device_of("/proc/modules"), "/proc/modules");
    }

    #[test]
    fn a_read_that_does_not_answer_is_abandoned_and_remembered() {
        let io = BoundedIo::new(Duration::from_millis(100));
        assert_eq!(io.run("/sys/ok", || 7), Some(7));
        let start = Instant::now();
        assert_eq!(
            io.run("/sys/hung", || std::thread::sleep(Duration::from_secs(30))),
            None
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(io.is_wedged("/sys/hung") && !io.is_wedged("/sys/ok"));
        // Stuck readers are replaced: reads keep working.
        for _ in 0..READERS + 1 {
            let _ = io.run("/sys/hung2", || std::thread::sleep(Duration::from_secs(30)));
        }
        assert_eq!(io.run("/sys/ok", || 8), Some(8));
        assert_eq!(io.wedged(), ["/sys/hung", "/sys/hung2"]);
    }
}
