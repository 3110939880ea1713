//! HIP calls that return `Result`, and owners for device memory, pinned host
//! memory and modules.

#![allow(unsafe_code, reason = "this module is the safe face of the HIP C API")]

use super::error::HipError;
use super::sys::{self, RtcTable, Table};
use crate::library::{Binding, Library, buffer_text};
use crate::loader::{LibrarySpec, LoadError, MissingSymbol, Search, open_path};
use crate::range::DeviceRange;
use crate::table::release_on_drop;
use std::ffi::{CString, c_char, c_void};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// An opened HIP runtime.
pub type Hip = Library<Table>;

/// `hipRuntimeGetVersion`'s number (`50221153`) as `5.2.21153`.
pub fn format_version(v: i32) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

impl Hip {
    fn int(
        &self,
        call: &'static str,
        f: &Result<unsafe extern "C" fn(*mut i32) -> sys::Error, MissingSymbol>,
    ) -> Result<i32, HipError> {
        let f = f.clone()?;
        let mut v = 0;
        // SAFETY: writes one int.
        self.check(call, unsafe { f(&mut v) })?;
        Ok(v)
    }

    /// `hipRuntimeGetVersion`.
    pub fn runtime_version(&self) -> Result<i32, HipError> {
        self.int("hipRuntimeGetVersion", &self.table.hipRuntimeGetVersion)
    }

    /// `hipDriverGetVersion`.
    pub fn driver_version(&self) -> Result<i32, HipError> {
        self.int("hipDriverGetVersion", &self.table.hipDriverGetVersion)
    }

    /// `hipInit(0)`.
    pub fn init(&self) -> Result<(), HipError> {
        let f = self.table.hipInit.clone()?;
        // SAFETY: flags must be 0.
        self.check("hipInit", unsafe { f(0) })
    }

    /// `hipGetDeviceCount`.
    pub fn device_count(&self) -> Result<i32, HipError> {
        self.int("hipGetDeviceCount", &self.table.hipGetDeviceCount)
    }

    /// `hipSetDevice`.
    pub fn set_device(&self, device: i32) -> Result<(), HipError> {
        let f = self.table.hipSetDevice.clone()?;
        // SAFETY: by value.
        self.check("hipSetDevice", unsafe { f(device) })
    }

    /// `hipDeviceCanAccessPeer`: whether `device` can map `peer`'s memory.
    pub fn can_access_peer(&self, device: i32, peer: i32) -> Result<bool, HipError> {
        let f = self.table.hipDeviceCanAccessPeer.clone()?;
        let mut can = 0;
        // SAFETY: writes one int.
        self.check("hipDeviceCanAccessPeer", unsafe {
            f(&mut can, device, peer)
        })?;
        Ok(can != 0)
    }

    /// `hipDeviceEnablePeerAccess(peer, 0)` from the current device; access
    /// enabled before counts as enabled.
    pub fn enable_peer_access(&self, peer: i32) -> Result<(), HipError> {
        let f = self.table.hipDeviceEnablePeerAccess.clone()?;
        // SAFETY: by value; flags must be 0.
        match unsafe { f(peer, 0) } {
            sys::ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            status => self.check("hipDeviceEnablePeerAccess", status),
        }
    }

    /// `hipDeviceGetAttribute`.
    pub fn attribute(&self, attr: i32, device: i32) -> Result<i32, HipError> {
        let f = self.table.hipDeviceGetAttribute.clone()?;
        let mut v = 0;
        // SAFETY: writes one int.
        self.check("hipDeviceGetAttribute", unsafe { f(&mut v, attr, device) })?;
        Ok(v)
    }

    fn string(
        &self,
        call: &'static str,
        f: &Result<unsafe extern "C" fn(*mut c_char, i32, i32) -> sys::Error, MissingSymbol>,
        device: i32,
    ) -> Result<String, HipError> {
        let f = f.clone()?;
        let mut buf = [0u8; 256];
        // SAFETY: the runtime writes at most `len` bytes, NUL-terminated.
        self.check(call, unsafe { f(buf.as_mut_ptr().cast(), 255, device) })?;
        Ok(buffer_text(&buf).trim().to_string())
    }

    /// `hipDeviceGetName`.
    pub fn device_name(&self, device: i32) -> Result<String, HipError> {
        self.string("hipDeviceGetName", &self.table.hipDeviceGetName, device)
    }

    /// `hipDeviceGetPCIBusId` (`0000:05:00.0`), lower-cased.
    pub fn pci_bus_id(&self, device: i32) -> Result<String, HipError> {
        Ok(self
            .string(
                "hipDeviceGetPCIBusId",
                &self.table.hipDeviceGetPCIBusId,
                device,
            )?
            .to_ascii_lowercase())
    }

    /// `hipDeviceTotalMem`.
    pub fn total_mem(&self, device: i32) -> Result<usize, HipError> {
        let f = self.table.hipDeviceTotalMem.clone()?;
        let mut v = 0usize;
        // SAFETY: writes one size_t.
        self.check("hipDeviceTotalMem", unsafe { f(&mut v, device) })?;
        Ok(v)
    }

    /// `hipDeviceSynchronize`.
    pub fn synchronize(&self) -> Result<(), HipError> {
        let f = self.table.hipDeviceSynchronize.clone()?;
        // SAFETY: no arguments.
        self.check("hipDeviceSynchronize", unsafe { f() })
    }

    /// `hipModuleLaunchKernel` with packed arguments (`args[i]` points at the
    /// i-th kernel argument), one dimension.
    ///
    /// # Safety
    /// `function` must come from a live [`Module`], and `args` must point at
    /// values of the kernel's argument types, in order; device pointers among
    /// them must be allocations large enough for the launch.
    pub unsafe fn launch(
        &self,
        function: Function<'_>,
        grid: u32,
        block: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), HipError> {
        let f = self.table.hipModuleLaunchKernel.clone()?;
        // SAFETY: `args` points at live values of the kernel's argument types.
        self.check("hipModuleLaunchKernel", unsafe {
            f(
                function.raw,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                std::ptr::null_mut(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}

/// Launches kernel `$f` over `$n` work-items in blocks of 256, its
/// arguments the mutable locals `$arg`, in order.
macro_rules! launch {
    ($hip:expr, $f:expr, $n:expr; $($arg:ident),+) => {{
        let mut args = [$((&raw mut $arg).cast::<c_void>()),+];
        // SAFETY: every caller binds locals of the kernel's parameter types,
        // in order, and checks its buffers' sizes against `$n` first.
        unsafe { $hip.launch($f, $n.div_ceil(256), 256, &mut args) }
    }};
}

impl Hip {
    /// Launches rocgate's `vector_add(a, b, c, n)`: `c = a + b` over `n`
    /// floats. `f` must be that kernel; the buffers must hold `n` floats.
    pub fn launch_vector_add(
        &self,
        f: Function<'_>,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &DeviceBuffer,
        n: u32,
    ) -> Result<(), HipError> {
        let need = n as usize * 4;
        if [a, b, c].iter().any(|d| d.len < need) {
            return Err(HipError::Invalid {
                call: "hipModuleLaunchKernel",
                reason: format!("vector_add over {n} floats needs {need}-byte buffers"),
            });
        }
        let (mut pa, mut pb, mut pc, mut n_arg) = (a.ptr, b.ptr, c.ptr, n);
        launch!(self, f, n; pa, pb, pc, n_arg)
    }

    /// Launches a `name(float* x, float s, unsigned n)` kernel scaling `x` in
    /// place. `f` must have that signature; `x` must hold `n` floats.
    pub fn launch_scale(
        &self,
        f: Function<'_>,
        x: &DeviceBuffer,
        s: f32,
        n: u32,
    ) -> Result<(), HipError> {
        if x.len < n as usize * 4 {
            return Err(HipError::Invalid {
                call: "hipModuleLaunchKernel",
                reason: format!("scaling {n} floats needs a {}-byte buffer", n as usize * 4),
            });
        }
        let (mut px, mut ps, mut pn) = (x.ptr, s, n);
        launch!(self, f, n; px, ps, pn)
    }

    /// Launches rocgate's `memtest_write(buf, mode, seed, n)`: fills the
    /// first `n` words of `buf` with pattern `mode` (0 address in address,
    /// 1 walking ones) moved by `seed`. `f` must be that kernel.
    pub fn launch_memtest_write(
        &self,
        f: Function<'_>,
        buf: &DeviceBuffer,
        pattern: (u32, u32),
        n: u32,
    ) -> Result<(), HipError> {
        words_fit(buf, n, "memtest_write")?;
        let (mut pb, mut mode, mut seed, mut pn) = (buf.ptr, pattern.0, pattern.1, n);
        launch!(self, f, n; pb, mode, seed, pn)
    }

    /// Launches rocgate's `memtest_check(buf, mode, seed, n, errors,
    /// capacity)`: counts the words of `buf` not holding the pattern in
    /// `errors[0]` and records up to `capacity` (index, differing bits)
    /// pairs after it. `errors` must hold `1 + 2 * capacity` words.
    pub fn launch_memtest_check(
        &self,
        f: Function<'_>,
        buf: &DeviceBuffer,
        pattern: (u32, u32),
        n: u32,
        errors: &DeviceBuffer,
        capacity: u32,
    ) -> Result<(), HipError> {
        words_fit(buf, n, "memtest_check")?;
        words_fit(errors, 1 + 2 * capacity, "memtest_check")?;
        let (mut pb, mut mode, mut seed, mut pn) = (buf.ptr, pattern.0, pattern.1, n);
        let (mut pe, mut cap) = (errors.ptr, capacity);
        launch!(self, f, n; pb, mode, seed, pn, pe, cap)
    }
}

impl Hip {
    /// Launches rocgate's `triad(a, b, c, scalar, n)`: `a = b + scalar * c`
    /// over `n` floats (STREAM's triad). `f` must be that kernel.
    pub fn launch_triad(
        &self,
        f: Function<'_>,
        [a, b, c]: [&DeviceBuffer; 3],
        scalar: f32,
        n: u32,
    ) -> Result<(), HipError> {
        for buf in [a, b, c] {
            words_fit(buf, n, "triad")?;
        }
        let (mut pa, mut pb, mut pc, mut ps, mut pn) = (a.ptr, b.ptr, c.ptr, scalar, n);
        launch!(self, f, n; pa, pb, pc, ps, pn)
    }

    /// Launches rocgate's `stream_copy(a, c, n)`: `c = a` over `n` floats
    /// (BabelStream's copy). `f` must be that kernel.
    pub fn launch_stream_copy(
        &self,
        f: Function<'_>,
        a: &DeviceBuffer,
        c: &DeviceBuffer,
        n: u32,
    ) -> Result<(), HipError> {
        words_fit(a, n, "stream_copy")?;
        words_fit(c, n, "stream_copy")?;
        let (mut pa, mut pc, mut pn) = (a.ptr, c.ptr, n);
        launch!(self, f, n; pa, pc, pn)
    }

    /// Launches rocgate's `burn_hash(out, seed, rounds, n)`: xors into each
    /// of the first `n` words of `out` the mix of `seed` and its index
    /// applied `rounds` times. `f` must be that kernel.
    pub fn launch_burn_hash(
        &self,
        f: Function<'_>,
        out: &DeviceBuffer,
        seed: u32,
        rounds: u32,
        n: u32,
    ) -> Result<(), HipError> {
        words_fit(out, n, "burn_hash")?;
        let (mut po, mut ps, mut pr, mut pn) = (out.ptr, seed, rounds, n);
        launch!(self, f, n; po, ps, pr, pn)
    }
}

/// Refuses a launch over `n` 32-bit words of a smaller buffer.
fn words_fit(buf: &DeviceBuffer, n: u32, kernel: &str) -> Result<(), HipError> {
    let need = n as usize * 4;
    if buf.len < need {
        return Err(HipError::Invalid {
            call: "hipModuleLaunchKernel",
            reason: format!(
                "{kernel} over {n} words needs a {need}-byte buffer, not {}",
                buf.len
            ),
        });
    }
    Ok(())
}

/// A HIP stream on the device current when it was created, destroyed on drop.
pub struct Stream {
    hip: Arc<Hip>,
    raw: sys::Stream,
}

impl Stream {
    /// `hipStreamCreate` on the current device.
    pub fn new(hip: &Arc<Hip>) -> Result<Stream, HipError> {
        let raw = hip.create("hipStreamCreate", &hip.table.hipStreamCreate)?;
        Ok(Stream {
            hip: Arc::clone(hip),
            raw,
        })
    }

    /// The raw handle, for libraries that take a `hipStream_t`.
    pub fn raw(&self) -> sys::Stream {
        self.raw
    }

    /// `hipStreamQuery`: `Ok(true)` when all work is done.
    pub fn is_done(&self) -> Result<bool, HipError> {
        let f = self.hip.table.hipStreamQuery.clone()?;
        // SAFETY: a live stream.
        match unsafe { f(self.raw) } {
            sys::ERROR_NOT_READY => Ok(false),
            code => self.hip.check("hipStreamQuery", code).map(|()| true),
        }
    }

    /// `hipStreamSynchronize`.
    pub fn synchronize(&self) -> Result<(), HipError> {
        let f = self.hip.table.hipStreamSynchronize.clone()?;
        // SAFETY: a live stream.
        self.hip
            .check("hipStreamSynchronize", unsafe { f(self.raw) })
    }
}

release_on_drop!(Stream, hip.hipStreamDestroy(raw));

/// A copy whose time [`Stream::time_copies`] measures.
pub enum TimedCopy<'a> {
    /// Pinned host memory to the device (`hipMemcpyAsync`).
    Upload {
        /// Where to.
        to: &'a DeviceBuffer,
        /// From where.
        from: &'a HostBuffer,
    },
    /// The device to pinned host memory (`hipMemcpyAsync`).
    Download {
        /// Where to.
        to: &'a mut HostBuffer,
        /// From where.
        from: &'a DeviceBuffer,
    },
    /// One device's memory to another's (`hipMemcpyPeerAsync`).
    Peer {
        /// Where to.
        to: &'a DeviceBuffer,
        /// The device `to` is on.
        to_device: i32,
        /// From where.
        from: &'a DeviceBuffer,
        /// The device `from` is on.
        from_device: i32,
    },
}

impl Stream {
    /// Enqueues `copy` once untimed, then `times` more back to back with an
    /// event between each two, waits for all of them, and returns each
    /// timed copy's duration on the GPU's clock (`hipEventElapsedTime`):
    /// what the host's scheduler does meanwhile is not counted, and the
    /// untimed copy keeps the GPU busy while the rest is enqueued. Waits
    /// for the stream before returning, on errors too, so no copy is still
    /// using the buffers when their borrows end.
    pub fn time_copies(
        &self,
        copy: &mut TimedCopy<'_>,
        times: usize,
    ) -> Result<Vec<Duration>, HipError> {
        let events = (0..=times)
            .map(|_| Event::new(&self.hip))
            .collect::<Result<Vec<Event>, HipError>>()?;
        let enqueued = (|| {
            self.enqueue(copy)?;
            for (i, e) in events.iter().enumerate() {
                e.record(self)?;
                if i < times {
                    self.enqueue(copy)?;
                }
            }
            Ok::<(), HipError>(())
        })();
        let waited = self.synchronize();
        enqueued?;
        waited?;
        events
            .windows(2)
            .map(|pair| pair[1].since(&pair[0]))
            .collect()
    }

    fn enqueue(&self, copy: &mut TimedCopy<'_>) -> Result<(), HipError> {
        let hip = &self.hip;
        match copy {
            TimedCopy::Upload { to, from } => {
                let f = hip.table.hipMemcpyAsync.clone()?;
                let n = from.len.min(to.len);
                // SAFETY: both ranges are valid for `n` bytes until the
                // stream is synchronised, which `time_copies` does before
                // the borrows end.
                hip.check("hipMemcpyAsync", unsafe {
                    f(to.ptr, from.ptr, n, sys::MEMCPY_HOST_TO_DEVICE, self.raw)
                })
            }
            TimedCopy::Download { to, from } => {
                let f = hip.table.hipMemcpyAsync.clone()?;
                let n = from.len.min(to.len);
                // SAFETY: as above; `to` is borrowed mutably, so nothing
                // else reads it while the copy writes it.
                hip.check("hipMemcpyAsync", unsafe {
                    f(to.ptr, from.ptr, n, sys::MEMCPY_DEVICE_TO_HOST, self.raw)
                })
            }
            TimedCopy::Peer {
                to,
                to_device,
                from,
                from_device,
            } => {
                let f = hip.table.hipMemcpyPeerAsync.clone()?;
                let n = from.len.min(to.len);
                // SAFETY: both device ranges are valid for `n` bytes until
                // the stream is synchronised.
                hip.check("hipMemcpyPeerAsync", unsafe {
                    f(to.ptr, *to_device, from.ptr, *from_device, n, self.raw)
                })
            }
        }
    }
}

/// A HIP event, destroyed on drop.
struct Event {
    hip: Arc<Hip>,
    raw: sys::Event,
}

impl Event {
    /// `hipEventCreate`.
    fn new(hip: &Arc<Hip>) -> Result<Event, HipError> {
        let raw = hip.create("hipEventCreate", &hip.table.hipEventCreate)?;
        Ok(Event {
            hip: Arc::clone(hip),
            raw,
        })
    }

    /// `hipEventRecord` on `stream`.
    fn record(&self, stream: &Stream) -> Result<(), HipError> {
        self.record_raw(stream.raw)
    }

    /// `hipEventRecord` on a raw stream (null: the current device's null
    /// stream, where [`Hip::launch`] queues kernels).
    fn record_raw(&self, stream: sys::Stream) -> Result<(), HipError> {
        let f = self.hip.table.hipEventRecord.clone()?;
        // SAFETY: a live event; `stream` is a live stream or null.
        self.hip
            .check("hipEventRecord", unsafe { f(self.raw, stream) })
    }

    /// The GPU time from `start` to this event (`hipEventElapsedTime`),
    /// both recorded and complete.
    fn since(&self, start: &Event) -> Result<Duration, HipError> {
        let sync = self.hip.table.hipEventSynchronize.clone()?;
        // SAFETY: a live event.
        self.hip
            .check("hipEventSynchronize", unsafe { sync(self.raw) })?;
        let f = self.hip.table.hipEventElapsedTime.clone()?;
        let mut ms = 0f32;
        // SAFETY: writes one float; both events are live.
        self.hip.check("hipEventElapsedTime", unsafe {
            f(&mut ms, start.raw, self.raw)
        })?;
        if !ms.is_finite() || ms < 0.0 {
            return Err(HipError::Invalid {
                call: "hipEventElapsedTime",
                reason: format!("returned {ms} ms"),
            });
        }
        Ok(Duration::from_secs_f64(f64::from(ms) / 1e3))
    }
}

release_on_drop!(Event, hip.hipEventDestroy(raw));

/// Times the work queued on the current device's null stream (the kernels
/// [`Hip::launch`] starts) between [`GpuTimer::start`] and
/// [`GpuTimer::stop`] with two HIP events: the GPU's clock, so what the
/// host does meanwhile (synchronising, reading results back, being
/// descheduled) is not counted as the kernels' time.
pub struct GpuTimer {
    start: Event,
    hip: Arc<Hip>,
}

impl GpuTimer {
    /// Records the start event on the null stream.
    pub fn start(hip: &Arc<Hip>) -> Result<GpuTimer, HipError> {
        let start = Event::new(hip)?;
        start.record_raw(std::ptr::null_mut())?;
        Ok(GpuTimer {
            start,
            hip: Arc::clone(hip),
        })
    }

    /// Records the stop event after the work queued since the start, waits
    /// for it, and returns the GPU time between the two.
    pub fn stop(self) -> Result<Duration, HipError> {
        let stop = Event::new(&self.hip)?;
        stop.record_raw(std::ptr::null_mut())?;
        stop.since(&self.start)
    }
}

/// Device memory, freed on drop.
pub struct DeviceBuffer {
    hip: Arc<Hip>,
    range: DeviceRange,
}

impl std::ops::Deref for DeviceBuffer {
    type Target = DeviceRange;

    fn deref(&self) -> &DeviceRange {
        &self.range
    }
}

impl DeviceBuffer {
    /// `hipMalloc(len)`.
    pub fn new(hip: &Arc<Hip>, len: usize) -> Result<DeviceBuffer, HipError> {
        let f = hip.table.hipMalloc.clone()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: writes the allocation's address.
        hip.check("hipMalloc", unsafe { f(&mut ptr, len) })?;
        Ok(DeviceBuffer {
            hip: Arc::clone(hip),
            range: DeviceRange { ptr, len },
        })
    }

    /// Copies `src` (at most the buffer's length) to the device.
    pub fn upload(&self, src: &[u8]) -> Result<(), HipError> {
        let f = self.hip.table.hipMemcpy.clone()?;
        let n = src.len().min(self.len);
        // SAFETY: both ranges are valid for `n` bytes.
        self.hip.check("hipMemcpy", unsafe {
            f(self.ptr, src.as_ptr().cast(), n, sys::MEMCPY_HOST_TO_DEVICE)
        })
    }

    /// Sets every byte of the buffer to `value` (`hipMemset`).
    pub fn fill(&self, value: u8) -> Result<(), HipError> {
        let f = self.hip.table.hipMemset.clone()?;
        // SAFETY: the whole allocation.
        self.hip.check("hipMemset", unsafe {
            f(self.ptr, i32::from(value), self.len)
        })
    }

    /// `hipMemcpyPeer`: copies `src` on `src_device` (at most this buffer's
    /// length) into this buffer on `device`.
    pub fn copy_from_peer(
        &self,
        device: i32,
        src: &DeviceBuffer,
        src_device: i32,
    ) -> Result<(), HipError> {
        let f = self.hip.table.hipMemcpyPeer.clone()?;
        let n = src.len.min(self.len);
        // SAFETY: both device ranges are valid for `n` bytes.
        self.hip.check("hipMemcpyPeer", unsafe {
            f(self.ptr, device, src.ptr, src_device, n)
        })
    }

    /// Copies the device memory from byte `offset` into `dst` (at most to
    /// the buffer's end).
    pub fn download_at(&self, offset: usize, dst: &mut [u8]) -> Result<(), HipError> {
        let f = self.hip.table.hipMemcpy.clone()?;
        if offset > self.len {
            return Err(HipError::Invalid {
                call: "hipMemcpy",
                reason: format!("offset {offset} past a {}-byte buffer", self.len),
            });
        }
        let n = dst.len().min(self.len - offset);
        // SAFETY: `offset + n` is within the allocation; `dst` holds `n`.
        self.hip.check("hipMemcpy", unsafe {
            f(
                dst.as_mut_ptr().cast(),
                self.ptr.cast::<u8>().add(offset).cast(),
                n,
                sys::MEMCPY_DEVICE_TO_HOST,
            )
        })
    }

    /// Copies the device memory into `dst` (at most the buffer's length).
    pub fn download(&self, dst: &mut [u8]) -> Result<(), HipError> {
        self.download_at(0, dst)
    }
}

release_on_drop!(DeviceBuffer, hip.hipFree(ptr));

/// Pinned host memory, freed on drop.
pub struct HostBuffer {
    hip: Arc<Hip>,
    ptr: *mut c_void,
    len: usize,
}

impl HostBuffer {
    /// `hipHostMalloc(len)`.
    pub fn new(hip: &Arc<Hip>, len: usize) -> Result<HostBuffer, HipError> {
        let f = hip.table.hipHostMalloc.clone()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: writes the allocation's address.
        hip.check("hipHostMalloc", unsafe {
            f(&mut ptr, len, sys::HOST_MALLOC_DEFAULT)
        })?;
        if ptr.is_null() {
            return Err(HipError::Invalid {
                call: "hipHostMalloc",
                reason: "returned a null pointer".into(),
            });
        }
        Ok(HostBuffer {
            hip: Arc::clone(hip),
            ptr,
            len,
        })
    }

    /// The memory as `u32` words (allocations are page-aligned).
    pub fn words(&mut self) -> &mut [u32] {
        // SAFETY: pinned host memory of `len` bytes, aligned for u32, owned
        // by this buffer.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u32>(), self.len / 4) }
    }

    /// The memory as bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: pinned host memory of `len` bytes, owned by this buffer.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u8>(), self.len) }
    }
}

release_on_drop!(HostBuffer, hip.hipHostFree(ptr));

/// A kernel of a loaded module; it cannot outlive the module.
#[derive(Clone, Copy, Debug)]
pub struct Function<'m> {
    raw: sys::Function,
    _module: std::marker::PhantomData<&'m Module>,
}

/// A loaded module, unloaded on drop.
pub struct Module {
    hip: Arc<Hip>,
    raw: sys::Module,
    _image: Vec<u8>,
}

impl Module {
    /// `hipModuleLoadData` of a code object.
    pub fn load(hip: &Arc<Hip>, image: &[u8]) -> Result<Module, HipError> {
        let f = hip.table.hipModuleLoadData.clone()?;
        let image = image.to_vec();
        let mut raw = std::ptr::null_mut();
        // SAFETY: the image lives as long as the module.
        hip.check("hipModuleLoadData", unsafe {
            f(&mut raw, image.as_ptr().cast())
        })?;
        Ok(Module {
            hip: Arc::clone(hip),
            raw,
            _image: image,
        })
    }

    /// `hipModuleGetFunction`.
    pub fn function(&self, name: &str) -> Result<Function<'_>, HipError> {
        let f = self.hip.table.hipModuleGetFunction.clone()?;
        let cname = CString::new(name).map_err(|_| HipError::Invalid {
            call: "hipModuleGetFunction",
            reason: format!("{name:?} contains NUL"),
        })?;
        let mut func = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name.
        self.hip.check("hipModuleGetFunction", unsafe {
            f(&mut func, self.raw, cname.as_ptr())
        })?;
        Ok(Function {
            raw: func,
            _module: std::marker::PhantomData,
        })
    }
}

release_on_drop!(Module, hip.hipModuleUnload(raw));

/// hiprtc: from libhiprtc when present, else from the HIP runtime itself
/// (ROCm 5 and 6 export it there).
pub struct Rtc {
    lib: Library<RtcTable>,
}

/// hiprtc found inside the HIP runtime rather than in a library of its own.
const RTC_IN_RUNTIME: LibrarySpec = LibrarySpec {
    name: "hiprtc in the HIP runtime",
    sonames: &[],
};

impl Rtc {
    /// Opens hiprtc; `hip_path` is the loaded HIP runtime, the fallback when
    /// no libhiprtc exists. A libhiprtc that exists but does not load is an
    /// error: programs linked with it would fail the same way.
    pub fn open(search: &Search, hip_path: &Path) -> Result<Rtc, LoadError> {
        let lib = match search.open(&super::RTC_LIBRARY) {
            Ok(loaded) => Library::from_loaded(loaded),
            Err(e @ LoadError::Failed { .. }) => return Err(e),
            Err(not_found) => {
                let lib = Library::<RtcTable>::from_loaded(open_path(&RTC_IN_RUNTIME, hip_path)?);
                // A runtime without hiprtc means hiprtc is not installed.
                if lib.table.hiprtcCreateProgram.is_err() {
                    return Err(not_found);
                }
                lib
            }
        };
        Ok(Rtc { lib })
    }

    /// The file hiprtc came from.
    pub fn path(&self) -> &Path {
        self.lib.path()
    }

    /// hiprtcCompileProgram's error, with the compiler's log.
    fn compile_error(&self, code: i32, prog: sys::RtcProgram) -> HipError {
        let mut e = self.lib.table.error("hiprtcCompileProgram", code);
        if let HipError::Rtc { log, .. } = &mut e {
            *log = self.log(prog);
        }
        e
    }

    /// Compiles HIP `source` with `options`; returns the code object.
    pub fn compile(&self, source: &str, name: &str, options: &[&str]) -> Result<Vec<u8>, HipError> {
        let create = self.lib.table.hiprtcCreateProgram.clone()?;
        let compile = self.lib.table.hiprtcCompileProgram.clone()?;
        let size = self.lib.table.hiprtcGetCodeSize.clone()?;
        let code = self.lib.table.hiprtcGetCode.clone()?;
        let destroy = self.lib.table.hiprtcDestroyProgram.clone()?;
        let invalid = |what: &str| HipError::Invalid {
            call: "hiprtcCreateProgram",
            reason: format!("{what} contains NUL"),
        };
        let csource = CString::new(source).map_err(|_| invalid("source"))?;
        let cname = CString::new(name).map_err(|_| invalid("name"))?;
        let copts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(*o))
            .collect::<Result<_, _>>()
            .map_err(|_| invalid("an option"))?;
        let opt_ptrs: Vec<*const c_char> = copts.iter().map(|c| c.as_ptr()).collect();
        let mut prog: sys::RtcProgram = std::ptr::null_mut();
        // SAFETY: every pointer is a live NUL-terminated string; the program
        // is destroyed before returning.
        unsafe {
            self.lib.check(
                "hiprtcCreateProgram",
                create(
                    &mut prog,
                    csource.as_ptr(),
                    cname.as_ptr(),
                    0,
                    std::ptr::null(),
                    std::ptr::null(),
                ),
            )?;
            let n = i32::try_from(opt_ptrs.len()).unwrap_or(0);
            let rc = compile(prog, n, opt_ptrs.as_ptr());
            let result = if rc != 0 {
                Err(self.compile_error(rc, prog))
            } else {
                let mut len = 0usize;
                self.lib
                    .check("hiprtcGetCodeSize", size(prog, &mut len))
                    .and_then(|()| {
                        let mut buf = vec![0u8; len];
                        self.lib
                            .check("hiprtcGetCode", code(prog, buf.as_mut_ptr().cast()))
                            .map(|()| buf)
                    })
            };
            destroy(&mut prog);
            result
        }
    }

    fn log(&self, prog: sys::RtcProgram) -> String {
        let (Ok(size), Ok(get)) = (
            &self.lib.table.hiprtcGetProgramLogSize,
            &self.lib.table.hiprtcGetProgramLog,
        ) else {
            return String::new();
        };
        let mut len = 0usize;
        // SAFETY: live program; the buffer holds `len` bytes.
        unsafe {
            if size(prog, &mut len) != 0 || len == 0 {
                return String::new();
            }
            let mut buf = vec![0u8; len];
            if get(prog, buf.as_mut_ptr().cast()) != 0 {
                return String::new();
            }
            buffer_text(&buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_format_like_hipconfig() {
        assert_eq!(format_version(50_221_153), "5.2.21153");
        assert_eq!(format_version(60_241_512), "6.2.41512");
    }
}
