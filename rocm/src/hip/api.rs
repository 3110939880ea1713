//! HIP calls that return `Result`, and owners for device memory, pinned host
//! memory and modules.

#![allow(unsafe_code, reason = "this module is the safe face of the HIP C API")]

use super::error::{HipError, fallback_name};
use super::sys::{self, RtcTable, Table};
use crate::loader::{LoadError, Loaded, MissingSymbol, Search};
use std::ffi::{CString, c_char, c_void};
use std::path::Path;
use std::sync::Arc;

/// An opened HIP runtime.
pub struct Hip {
    table: Table,
    loaded: Loaded,
}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hip")
            .field("path", &self.loaded.path)
            .finish()
    }
}

/// `hipRuntimeGetVersion`'s number (`50221153`) as `5.2.21153`.
pub fn format_version(v: i32) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

fn text(p: *const c_char) -> String {
    // SAFETY: the runtime returns static NUL-terminated strings or NULL.
    unsafe { crate::loader::c_text(p) }.unwrap_or_default()
}

impl Hip {
    /// Opens the runtime through `search`.
    pub fn open(search: &Search) -> Result<Arc<Hip>, LoadError> {
        let loaded = search.open(&super::LIBRARY)?;
        Ok(Arc::new(Hip {
            table: Table::load(&loaded),
            loaded,
        }))
    }

    /// The file that was loaded.
    pub fn path(&self) -> &Path {
        &self.loaded.path
    }

    fn f<F: Copy>(r: &Result<F, MissingSymbol>) -> Result<F, HipError> {
        r.clone().map_err(HipError::from)
    }

    fn check(&self, call: &'static str, code: sys::Error) -> Result<(), HipError> {
        if code == sys::SUCCESS {
            return Ok(());
        }
        let name = match &self.table.hipGetErrorName {
            // SAFETY: returns a static string for any code.
            Ok(f) => text(unsafe { f(code) }),
            Err(_) => fallback_name(code).to_string(),
        };
        let detail = match &self.table.hipGetErrorString {
            // SAFETY: as above.
            Ok(f) => text(unsafe { f(code) }),
            Err(_) => String::new(),
        };
        let name = if name.is_empty() {
            fallback_name(code).to_string()
        } else {
            name
        };
        // HIP 5 returns the name again as the description; keep one.
        let text = if detail == name {
            String::new()
        } else {
            detail
        };
        Err(HipError::Code {
            call,
            code,
            name,
            text,
        })
    }

    fn int(
        &self,
        call: &'static str,
        f: &Result<unsafe extern "C" fn(*mut i32) -> sys::Error, MissingSymbol>,
    ) -> Result<i32, HipError> {
        let f = Self::f(f)?;
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
        let f = Self::f(&self.table.hipInit)?;
        // SAFETY: flags must be 0.
        self.check("hipInit", unsafe { f(0) })
    }

    /// `hipGetDeviceCount`.
    pub fn device_count(&self) -> Result<i32, HipError> {
        self.int("hipGetDeviceCount", &self.table.hipGetDeviceCount)
    }

    /// `hipSetDevice`.
    pub fn set_device(&self, device: i32) -> Result<(), HipError> {
        let f = Self::f(&self.table.hipSetDevice)?;
        // SAFETY: by value.
        self.check("hipSetDevice", unsafe { f(device) })
    }

    /// `hipDeviceGetAttribute`.
    pub fn attribute(&self, attr: i32, device: i32) -> Result<i32, HipError> {
        let f = Self::f(&self.table.hipDeviceGetAttribute)?;
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
        let f = Self::f(f)?;
        let mut buf = [0u8; 256];
        // SAFETY: the runtime writes at most `len` bytes, NUL-terminated.
        self.check(call, unsafe { f(buf.as_mut_ptr().cast(), 255, device) })?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).trim().to_string())
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
        let f = Self::f(&self.table.hipDeviceTotalMem)?;
        let mut v = 0usize;
        // SAFETY: writes one size_t.
        self.check("hipDeviceTotalMem", unsafe { f(&mut v, device) })?;
        Ok(v)
    }

    /// `hipDeviceSynchronize`.
    pub fn synchronize(&self) -> Result<(), HipError> {
        let f = Self::f(&self.table.hipDeviceSynchronize)?;
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
        let f = Self::f(&self.table.hipModuleLaunchKernel)?;
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
        let mut args: [*mut c_void; 4] = [
            (&raw mut pa).cast(),
            (&raw mut pb).cast(),
            (&raw mut pc).cast(),
            (&raw mut n_arg).cast(),
        ];
        // SAFETY: the arguments match vector_add's signature and the buffers
        // are large enough (checked above).
        unsafe { self.launch(f, n.div_ceil(256), 256, &mut args) }
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
        let mut args: [*mut c_void; 3] = [
            (&raw mut px).cast(),
            (&raw mut ps).cast(),
            (&raw mut pn).cast(),
        ];
        // SAFETY: as documented; sizes checked above.
        unsafe { self.launch(f, n.div_ceil(256), 256, &mut args) }
    }
}

/// A HIP stream on the device current when it was created, destroyed on drop.
pub struct Stream {
    hip: Arc<Hip>,
    raw: sys::Stream,
}

impl Stream {
    /// `hipStreamCreate` on the current device.
    pub fn new(hip: &Arc<Hip>) -> Result<Stream, HipError> {
        let f = Hip::f(&hip.table.hipStreamCreate)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes the stream handle.
        hip.check("hipStreamCreate", unsafe { f(&mut raw) })?;
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
        let f = Hip::f(&self.hip.table.hipStreamQuery)?;
        // SAFETY: a live stream.
        match unsafe { f(self.raw) } {
            sys::ERROR_NOT_READY => Ok(false),
            code => self.hip.check("hipStreamQuery", code).map(|()| true),
        }
    }

    /// `hipStreamSynchronize`.
    pub fn synchronize(&self) -> Result<(), HipError> {
        let f = Hip::f(&self.hip.table.hipStreamSynchronize)?;
        // SAFETY: a live stream.
        self.hip
            .check("hipStreamSynchronize", unsafe { f(self.raw) })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(f) = &self.hip.table.hipStreamDestroy {
            // SAFETY: destroyed once, here.
            unsafe { f(self.raw) };
        }
    }
}

/// Device memory, freed on drop.
pub struct DeviceBuffer {
    hip: Arc<Hip>,
    ptr: *mut c_void,
    len: usize,
}

impl DeviceBuffer {
    /// `hipMalloc(len)`.
    pub fn new(hip: &Arc<Hip>, len: usize) -> Result<DeviceBuffer, HipError> {
        let f = Hip::f(&hip.table.hipMalloc)?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: writes the allocation's address.
        hip.check("hipMalloc", unsafe { f(&mut ptr, len) })?;
        Ok(DeviceBuffer {
            hip: Arc::clone(hip),
            ptr,
            len,
        })
    }

    /// The device address.
    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` (at most the buffer's length) to the device.
    pub fn upload(&self, src: &[u8]) -> Result<(), HipError> {
        let f = Hip::f(&self.hip.table.hipMemcpy)?;
        let n = src.len().min(self.len);
        // SAFETY: both ranges are valid for `n` bytes.
        self.hip.check("hipMemcpy", unsafe {
            f(self.ptr, src.as_ptr().cast(), n, sys::MEMCPY_HOST_TO_DEVICE)
        })
    }

    /// Sets every byte of the buffer to `value` (`hipMemset`).
    pub fn fill(&self, value: u8) -> Result<(), HipError> {
        let f = Hip::f(&self.hip.table.hipMemset)?;
        // SAFETY: the whole allocation.
        self.hip.check("hipMemset", unsafe {
            f(self.ptr, i32::from(value), self.len)
        })
    }

    /// Copies the device memory into `dst` (at most the buffer's length).
    pub fn download(&self, dst: &mut [u8]) -> Result<(), HipError> {
        let f = Hip::f(&self.hip.table.hipMemcpy)?;
        let n = dst.len().min(self.len);
        // SAFETY: both ranges are valid for `n` bytes.
        self.hip.check("hipMemcpy", unsafe {
            f(
                dst.as_mut_ptr().cast(),
                self.ptr,
                n,
                sys::MEMCPY_DEVICE_TO_HOST,
            )
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Ok(f) = &self.hip.table.hipFree {
            // SAFETY: freed once, here.
            unsafe { f(self.ptr) };
        }
    }
}

/// Pinned host memory, freed on drop.
pub struct HostBuffer {
    hip: Arc<Hip>,
    ptr: *mut c_void,
    len: usize,
}

impl HostBuffer {
    /// `hipHostMalloc(len)`.
    pub fn new(hip: &Arc<Hip>, len: usize) -> Result<HostBuffer, HipError> {
        let f = Hip::f(&hip.table.hipHostMalloc)?;
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

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Ok(f) = &self.hip.table.hipHostFree {
            // SAFETY: freed once, here.
            unsafe { f(self.ptr) };
        }
    }
}

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
        let f = Hip::f(&hip.table.hipModuleLoadData)?;
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
        let f = Hip::f(&self.hip.table.hipModuleGetFunction)?;
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

impl Drop for Module {
    fn drop(&mut self) {
        if let Ok(f) = &self.hip.table.hipModuleUnload {
            // SAFETY: unloaded once, here.
            unsafe { f(self.raw) };
        }
    }
}

/// hiprtc: from libhiprtc when present, else from the HIP runtime itself
/// (ROCm 5 and 6 export it there).
pub struct Rtc {
    table: RtcTable,
    loaded: Loaded,
}

impl Rtc {
    /// Opens hiprtc; `hip_path` is the loaded HIP runtime, the fallback when
    /// no libhiprtc exists. A libhiprtc that exists but does not load is an
    /// error: programs linked with it would fail the same way.
    pub fn open(search: &Search, hip_path: &Path) -> Result<Rtc, LoadError> {
        let loaded = match search.open(&super::RTC_LIBRARY) {
            Ok(l) => l,
            Err(e @ LoadError::Failed { .. }) => return Err(e),
            Err(not_found) => {
                let fallback = crate::loader::LibrarySpec {
                    name: "hiprtc in the HIP runtime",
                    sonames: &[],
                };
                // SAFETY: the HIP runtime is already loaded in this process.
                #[allow(unsafe_code)]
                let lib = unsafe { libloading::Library::new(hip_path) }.map_err(|e| {
                    LoadError::Failed {
                        library: fallback.name,
                        path: hip_path.display().to_string(),
                        error: e.to_string(),
                    }
                })?;
                let loaded = Loaded {
                    library: lib,
                    path: hip_path.to_path_buf(),
                };
                let table = RtcTable::load(&loaded);
                if table.hiprtcCreateProgram.is_err() {
                    return Err(not_found);
                }
                return Ok(Rtc { table, loaded });
            }
        };
        Ok(Rtc {
            table: RtcTable::load(&loaded),
            loaded,
        })
    }

    /// The file hiprtc came from.
    pub fn path(&self) -> &Path {
        &self.loaded.path
    }

    fn err(&self, call: &'static str, code: i32, log: String) -> HipError {
        let text = match &self.table.hiprtcGetErrorString {
            // SAFETY: returns a static string.
            Ok(f) => text(unsafe { f(code) }),
            Err(_) => String::new(),
        };
        HipError::Rtc {
            call,
            code,
            text,
            log,
        }
    }

    /// Compiles HIP `source` with `options`; returns the code object.
    pub fn compile(&self, source: &str, name: &str, options: &[&str]) -> Result<Vec<u8>, HipError> {
        let create = Hip::f(&self.table.hiprtcCreateProgram)?;
        let compile = Hip::f(&self.table.hiprtcCompileProgram)?;
        let size = Hip::f(&self.table.hiprtcGetCodeSize)?;
        let code = Hip::f(&self.table.hiprtcGetCode)?;
        let destroy = Hip::f(&self.table.hiprtcDestroyProgram)?;
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
            let rc = create(
                &mut prog,
                csource.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            );
            if rc != 0 {
                return Err(self.err("hiprtcCreateProgram", rc, String::new()));
            }
            let n = i32::try_from(opt_ptrs.len()).unwrap_or(0);
            let rc = compile(prog, n, opt_ptrs.as_ptr());
            let result = if rc != 0 {
                Err(self.err("hiprtcCompileProgram", rc, self.log(prog)))
            } else {
                let mut len = 0usize;
                let rc = size(prog, &mut len);
                if rc != 0 {
                    Err(self.err("hiprtcGetCodeSize", rc, String::new()))
                } else {
                    let mut buf = vec![0u8; len];
                    let rc = code(prog, buf.as_mut_ptr().cast());
                    if rc != 0 {
                        Err(self.err("hiprtcGetCode", rc, String::new()))
                    } else {
                        Ok(buf)
                    }
                }
            };
            destroy(&mut prog);
            result
        }
    }

    fn log(&self, prog: sys::RtcProgram) -> String {
        let (Ok(size), Ok(get)) = (
            &self.table.hiprtcGetProgramLogSize,
            &self.table.hiprtcGetProgramLog,
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
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).into_owned()
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
