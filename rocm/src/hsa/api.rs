//! HSA calls that return `Result`, and owners for queues, signals, memory
//! and executables.

#![allow(unsafe_code, reason = "this module is the safe face of the HSA C API")]

use super::status::HsaError;
use super::sys::{self, Agent, MemoryPool, Status, Table};
use crate::library::{Binding, Library, buffer_text};
use crate::range::DeviceRange;
use crate::table::release_on_drop;
use std::ffi::{CString, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// An opened HSA runtime.
pub type Hsa = Library<Table>;

/// An agent's `hsa_device_type_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// `HSA_DEVICE_TYPE_CPU`.
    Cpu,
    /// `HSA_DEVICE_TYPE_GPU`.
    Gpu,
    /// `HSA_DEVICE_TYPE_DSP`.
    Dsp,
    /// `HSA_DEVICE_TYPE_AIE` (ROCm 7: the NPU of Ryzen AI hosts).
    Aie,
    /// A type this build does not know.
    Other(u32),
}

impl DeviceKind {
    /// The kind of a raw `hsa_device_type_t`.
    pub fn from_raw(raw: u32) -> DeviceKind {
        match raw {
            sys::DEVICE_TYPE_CPU => DeviceKind::Cpu,
            sys::DEVICE_TYPE_GPU => DeviceKind::Gpu,
            sys::DEVICE_TYPE_DSP => DeviceKind::Dsp,
            sys::DEVICE_TYPE_AIE => DeviceKind::Aie,
            other => DeviceKind::Other(other),
        }
    }

    /// A short name for messages (`CPU`, `GPU`, `DSP`, `AIE`, `type 7`).
    pub fn name(self) -> String {
        match self {
            DeviceKind::Cpu => "CPU".into(),
            DeviceKind::Gpu => "GPU".into(),
            DeviceKind::Dsp => "DSP".into(),
            DeviceKind::Aie => "AIE".into(),
            DeviceKind::Other(n) => format!("type {n}"),
        }
    }
}

/// What rocgate reads about an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentInfo {
    /// The handle.
    pub agent: Agent,
    /// CPU, GPU, DSP or AIE: not every agent that is not a GPU is a CPU.
    pub kind: DeviceKind,
    /// `gfx942` for GPUs.
    pub name: String,
    /// Marketing name.
    pub product: String,
    /// Compute units.
    pub compute_units: u32,
    /// Wavefront size.
    pub wavefront_size: u32,
    /// PCI location id (`bus << 8 | dev << 3 | fn`).
    pub bdfid: u32,
    /// PCI domain.
    pub domain: u32,
}

/// A memory pool and its properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    /// The handle.
    pub pool: MemoryPool,
    /// Segment (0 = global).
    pub segment: u32,
    /// Global flags (kernarg 1, fine 2, coarse 4).
    pub flags: u32,
    /// Size in bytes.
    pub size: usize,
    /// Whether the runtime may allocate from it.
    pub alloc_allowed: bool,
}

impl AgentInfo {
    /// Whether the agent is a GPU.
    pub fn is_gpu(&self) -> bool {
        self.kind == DeviceKind::Gpu
    }

    /// Whether the agent is a CPU (the owner of system memory pools).
    pub fn is_cpu(&self) -> bool {
        self.kind == DeviceKind::Cpu
    }
}

impl PoolInfo {
    /// A global pool the runtime can allocate from, with `flag` set.
    pub fn is_global_with(&self, flag: u32) -> bool {
        self.segment == sys::SEGMENT_GLOBAL && self.alloc_allowed && self.flags & flag != 0
    }
}

unsafe extern "C" fn collect_agent(agent: Agent, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `Vec<Agent>` passed by `Hsa::agents`.
    unsafe { (*(data as *mut Vec<Agent>)).push(agent) };
    sys::STATUS_SUCCESS
}

unsafe extern "C" fn collect_pool(pool: MemoryPool, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `Vec<MemoryPool>` passed by `Hsa::pools`.
    unsafe { (*(data as *mut Vec<MemoryPool>)).push(pool) };
    sys::STATUS_SUCCESS
}

impl Hsa {
    /// `hsa_status_string` for `status` (empty if unavailable).
    pub fn status_text(&self, status: Status) -> String {
        self.table.describe(status).unwrap_or_default()
    }

    /// `hsa_init`.
    pub fn init(&self) -> Result<(), HsaError> {
        let f = self.table.hsa_init.clone()?;
        // SAFETY: no arguments.
        self.check("hsa_init", unsafe { f() })
    }

    /// The runtime's HSA version (`hsa_system_get_info`), after `init`.
    pub fn version(&self) -> Result<(u16, u16), HsaError> {
        let f = self.table.hsa_system_get_info.clone()?;
        let (mut major, mut minor) = (0u16, 0u16);
        // SAFETY: both attributes are uint16_t.
        self.check("hsa_system_get_info", unsafe {
            f(sys::SYSTEM_INFO_VERSION_MAJOR, (&raw mut major).cast())
        })?;
        self.check("hsa_system_get_info", unsafe {
            f(sys::SYSTEM_INFO_VERSION_MINOR, (&raw mut minor).cast())
        })?;
        Ok((major, minor))
    }

    fn info<T: Copy + Default>(&self, agent: Agent, attr: u32) -> Result<T, HsaError> {
        let f = self.table.hsa_agent_get_info.clone()?;
        let mut v = T::default();
        // SAFETY: the caller picks `T` to match the attribute's C type.
        self.check("hsa_agent_get_info", unsafe {
            f(agent, attr, (&raw mut v).cast())
        })?;
        Ok(v)
    }

    fn info_name(&self, agent: Agent, attr: u32) -> Result<String, HsaError> {
        let f = self.table.hsa_agent_get_info.clone()?;
        let mut v = [0u8; 64];
        // SAFETY: name attributes are char[64].
        self.check("hsa_agent_get_info", unsafe {
            f(agent, attr, v.as_mut_ptr().cast())
        })?;
        Ok(buffer_text(&v).trim().to_string())
    }

    /// Every agent, with what rocgate reads about it.
    pub fn agents(&self) -> Result<Vec<AgentInfo>, HsaError> {
        let f = self.table.hsa_iterate_agents.clone()?;
        let mut agents: Vec<Agent> = Vec::new();
        // SAFETY: the callback only pushes into `agents`, which outlives the call.
        self.check("hsa_iterate_agents", unsafe {
            f(collect_agent, (&raw mut agents).cast())
        })?;
        agents
            .into_iter()
            .map(|agent| {
                let device: u32 = self.info(agent, sys::AGENT_INFO_DEVICE)?;
                let name = self.info_name(agent, sys::AGENT_INFO_NAME)?;
                let kind = DeviceKind::from_raw(device);
                let is_gpu = kind == DeviceKind::Gpu;
                // AMD extensions exist for every agent on ROCr; tolerate their
                // absence on agents other than GPUs.
                let product = self
                    .info_name(agent, sys::AMD_AGENT_INFO_PRODUCT_NAME)
                    .unwrap_or_default();
                Ok(AgentInfo {
                    agent,
                    kind,
                    name,
                    product,
                    compute_units: if is_gpu {
                        self.info(agent, sys::AMD_AGENT_INFO_COMPUTE_UNIT_COUNT)?
                    } else {
                        0
                    },
                    wavefront_size: if is_gpu {
                        self.info(agent, sys::AGENT_INFO_WAVEFRONT_SIZE)?
                    } else {
                        0
                    },
                    bdfid: if is_gpu {
                        self.info(agent, sys::AMD_AGENT_INFO_BDFID)?
                    } else {
                        0
                    },
                    domain: if is_gpu {
                        self.info(agent, sys::AMD_AGENT_INFO_DOMAIN).unwrap_or(0)
                    } else {
                        0
                    },
                })
            })
            .collect()
    }

    /// The agent's memory pools.
    pub fn pools(&self, agent: Agent) -> Result<Vec<PoolInfo>, HsaError> {
        let iterate = self.table.hsa_amd_agent_iterate_memory_pools.clone()?;
        let info = self.table.hsa_amd_memory_pool_get_info.clone()?;
        let mut pools: Vec<MemoryPool> = Vec::new();
        // SAFETY: the callback only pushes into `pools`.
        self.check("hsa_amd_agent_iterate_memory_pools", unsafe {
            iterate(agent, collect_pool, (&raw mut pools).cast())
        })?;
        pools
            .into_iter()
            .map(|pool| {
                let (mut segment, mut flags, mut size, mut alloc) = (0u32, 0u32, 0usize, false);
                // SAFETY: segment and flags are 32-bit enums/bitfields, size is size_t, alloc is bool.
                unsafe {
                    self.check(
                        "hsa_amd_memory_pool_get_info",
                        info(pool, sys::POOL_INFO_SEGMENT, (&raw mut segment).cast()),
                    )?;
                    if segment == sys::SEGMENT_GLOBAL {
                        self.check(
                            "hsa_amd_memory_pool_get_info",
                            info(pool, sys::POOL_INFO_GLOBAL_FLAGS, (&raw mut flags).cast()),
                        )?;
                    }
                    self.check(
                        "hsa_amd_memory_pool_get_info",
                        info(pool, sys::POOL_INFO_SIZE, (&raw mut size).cast()),
                    )?;
                    self.check(
                        "hsa_amd_memory_pool_get_info",
                        info(
                            pool,
                            sys::POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                            (&raw mut alloc).cast(),
                        ),
                    )?;
                }
                Ok(PoolInfo {
                    pool,
                    segment,
                    flags,
                    size,
                    alloc_allowed: alloc,
                })
            })
            .collect()
    }

    /// Copies `src` into `dst` (as much as both hold) with the copy engines
    /// and waits for completion.
    pub fn copy(
        self: &Arc<Self>,
        dst: &PoolMemory,
        dst_agent: Agent,
        src: &PoolMemory,
        src_agent: Agent,
        timeout: Duration,
    ) -> Result<(), HsaError> {
        let f = self.table.hsa_amd_memory_async_copy.clone()?;
        let done = Signal::new(self, 1)?;
        let size = dst.len.min(src.len);
        // SAFETY: both allocations are live and hold `size` bytes.
        self.check("hsa_amd_memory_async_copy", unsafe {
            f(
                dst.ptr,
                dst_agent,
                src.ptr,
                src_agent,
                size,
                0,
                std::ptr::null(),
                done.raw,
            )
        })?;
        done.wait_complete(timeout, "hsa_amd_memory_async_copy", || None)
    }
}

/// An HSA signal, destroyed on drop.
pub struct Signal {
    hsa: Arc<Hsa>,
    raw: sys::Signal,
}

impl Signal {
    /// `hsa_signal_create` with `initial`.
    pub fn new(hsa: &Arc<Hsa>, initial: i64) -> Result<Signal, HsaError> {
        let f = hsa.table.hsa_signal_create.clone()?;
        let mut raw = sys::Signal::default();
        // SAFETY: no consumers list; writes the handle.
        hsa.check("hsa_signal_create", unsafe {
            f(initial, 0, std::ptr::null(), &mut raw)
        })?;
        Ok(Signal {
            hsa: Arc::clone(hsa),
            raw,
        })
    }

    /// The raw handle (for packets).
    pub fn raw(&self) -> sys::Signal {
        self.raw
    }

    /// Stores a value (relaxed).
    pub fn store(&self, value: i64) -> Result<(), HsaError> {
        let f = self.hsa.table.hsa_signal_store_relaxed.clone()?;
        // SAFETY: a live signal.
        unsafe { f(self.raw, value) };
        Ok(())
    }

    /// Loads the value (relaxed).
    pub fn load(&self) -> Result<i64, HsaError> {
        let f = self.hsa.table.hsa_signal_load_relaxed.clone()?;
        // SAFETY: a live signal.
        Ok(unsafe { f(self.raw) })
    }

    /// Waits until the value is below `bound`, failing after `timeout`.
    /// Returns the value seen.
    pub fn wait_below(
        &self,
        bound: i64,
        timeout: Duration,
        what: &'static str,
    ) -> Result<i64, HsaError> {
        self.wait(bound, timeout, what, &|| None)
    }

    /// Waits for an operation's completion signal (created at 1) to drop
    /// below 1. ROCr marks a failed operation by setting its completion
    /// signal negative (hsa_ext_amd.h, `hsa_amd_memory_async_copy`), so a
    /// negative value is an error, not a completion. `abort` is polled
    /// while waiting (a queue's error callback) and ends the wait with its
    /// error.
    pub fn wait_complete(
        &self,
        timeout: Duration,
        what: &'static str,
        abort: impl Fn() -> Option<HsaError>,
    ) -> Result<(), HsaError> {
        let v = self.wait(1, timeout, what, &abort)?;
        if v < 0 {
            return Err(HsaError::SignalError {
                call: what,
                value: v,
            });
        }
        Ok(())
    }

    fn wait(
        &self,
        bound: i64,
        timeout: Duration,
        what: &'static str,
        abort: &dyn Fn() -> Option<HsaError>,
    ) -> Result<i64, HsaError> {
        let f = self.hsa.table.hsa_signal_wait_scacquire.clone()?;
        let deadline = Instant::now() + timeout;
        loop {
            // SAFETY: a live signal; the timeout hint is in signal ticks and
            // may be ignored, so the loop keeps its own deadline.
            let v = unsafe {
                f(
                    self.raw,
                    sys::SIGNAL_CONDITION_LT,
                    bound,
                    1_000_000,
                    sys::WAIT_STATE_BLOCKED,
                )
            };
            if v < bound {
                return Ok(v);
            }
            if let Some(e) = abort() {
                return Err(e);
            }
            if Instant::now() >= deadline {
                return Err(HsaError::Invalid {
                    call: what,
                    reason: format!(
                        "not complete after {:.1} s (signal value {v})",
                        timeout.as_secs_f64()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

release_on_drop!(Signal, hsa.hsa_signal_destroy(raw));

/// `ptr` as `call` returned it, refused when null: ROCr reported success
/// but handed back `what`.
fn non_null<T>(ptr: *mut T, call: &'static str, what: &str) -> Result<*mut T, HsaError> {
    if ptr.is_null() {
        Err(HsaError::Invalid {
            call,
            reason: format!("returned {what}"),
        })
    } else {
        Ok(ptr)
    }
}

/// Memory from a pool, freed on drop.
pub struct PoolMemory {
    hsa: Arc<Hsa>,
    range: DeviceRange,
    host_visible: bool,
}

impl std::ops::Deref for PoolMemory {
    type Target = DeviceRange;

    fn deref(&self) -> &DeviceRange {
        &self.range
    }
}

impl PoolMemory {
    /// Device memory from a GPU pool (not readable from the host).
    pub fn allocate(hsa: &Arc<Hsa>, pool: MemoryPool, len: usize) -> Result<PoolMemory, HsaError> {
        Self::allocate_in(hsa, pool, len, false)
    }

    /// Host-visible memory from a CPU agent's system pool.
    pub fn allocate_host(
        hsa: &Arc<Hsa>,
        pool: MemoryPool,
        len: usize,
    ) -> Result<PoolMemory, HsaError> {
        Self::allocate_in(hsa, pool, len, true)
    }

    fn allocate_in(
        hsa: &Arc<Hsa>,
        pool: MemoryPool,
        len: usize,
        host_visible: bool,
    ) -> Result<PoolMemory, HsaError> {
        let f = hsa.table.hsa_amd_memory_pool_allocate.clone()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: writes the allocation's address.
        hsa.check("hsa_amd_memory_pool_allocate", unsafe {
            f(pool, len, 0, &mut ptr)
        })?;
        non_null(ptr, "hsa_amd_memory_pool_allocate", "a null pointer")?;
        Ok(PoolMemory {
            hsa: Arc::clone(hsa),
            range: DeviceRange { ptr, len },
            host_visible,
        })
    }

    /// Lets `agents` access this memory.
    pub fn allow(&self, agents: &[Agent]) -> Result<(), HsaError> {
        let f = self.hsa.table.hsa_amd_agents_allow_access.clone()?;
        let n = u32::try_from(agents.len()).unwrap_or(u32::MAX);
        // SAFETY: `agents` is a live slice; the memory is ours.
        self.hsa.check("hsa_amd_agents_allow_access", unsafe {
            f(n, agents.as_ptr(), std::ptr::null(), self.ptr)
        })
    }

    /// The memory as `u32`s, for host-visible memory. Call it only between
    /// device operations (after their completion signals).
    pub fn host_u32s(&mut self) -> Result<&mut [u32], HsaError> {
        if !self.host_visible {
            return Err(HsaError::Invalid {
                call: "PoolMemory::host_u32s",
                reason: "device memory is not readable from the host".into(),
            });
        }
        // SAFETY: host-visible, `len` bytes, at least 4-byte aligned (pool
        // allocations are page-aligned); `&mut self` excludes other views.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u32>(), self.len / 4) })
    }

    /// Writes `bytes` at `offset` (host-visible memory only).
    pub fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), HsaError> {
        if !self.host_visible || offset.saturating_add(bytes.len()) > self.len {
            return Err(HsaError::Invalid {
                call: "PoolMemory::write_at",
                reason: format!(
                    "cannot write {} bytes at {offset} into {} bytes of {}memory",
                    bytes.len(),
                    self.len,
                    if self.host_visible { "" } else { "device " }
                ),
            });
        }
        // SAFETY: bounds checked above; host-visible memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.cast::<u8>().add(offset),
                bytes.len(),
            )
        };
        Ok(())
    }
}

release_on_drop!(PoolMemory, hsa.hsa_amd_memory_pool_free(ptr));

/// An AQL queue, destroyed on drop. Created with an error callback, so a
/// queue error (a hardware exception, an illegal instruction) is reported
/// with its status instead of showing only as a dispatch that never ends.
pub struct Queue {
    hsa: Arc<Hsa>,
    raw: *mut sys::Queue,
    // Boxed so its address, handed to ROCr as the callback's data, is stable;
    // dropped after the queue is destroyed (fields drop after `Drop::drop`).
    error: Box<AtomicU32>,
}

/// ROCr calls this from its own thread when the queue fails; `data` is the
/// queue's `error` cell.
unsafe extern "C" fn on_queue_error(status: Status, _queue: *mut sys::Queue, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: `data` is the `AtomicU32` owned by the `Queue`, which
        // outlives the runtime's queue.
        let cell = unsafe { &*(data as *const AtomicU32) };
        // Keep the first error: later ones follow from it.
        let _ = cell.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire);
    }
}

impl Queue {
    /// `hsa_queue_create` of `size` packets on `agent`.
    pub fn new(hsa: &Arc<Hsa>, agent: Agent, size: u32) -> Result<Queue, HsaError> {
        let f = hsa.table.hsa_queue_create.clone()?;
        let mut raw = std::ptr::null_mut();
        let error = Box::new(AtomicU32::new(0));
        // SAFETY: the callback's data is the boxed cell, which lives as long
        // as the queue; writes the queue pointer.
        hsa.check("hsa_queue_create", unsafe {
            f(
                agent,
                size,
                sys::QUEUE_TYPE_SINGLE,
                Some(on_queue_error),
                (&raw const *error).cast_mut().cast(),
                u32::MAX,
                u32::MAX,
                &mut raw,
            )
        })?;
        non_null(raw, "hsa_queue_create", "a null queue")?;
        Ok(Queue {
            hsa: Arc::clone(hsa),
            raw,
            error,
        })
    }

    /// The error ROCr reported through the queue's error callback, if any.
    pub fn error(&self) -> Option<HsaError> {
        match self.error.load(Ordering::Acquire) {
            0 => None,
            status => Some(match self.hsa.table.error("queue", status) {
                HsaError::Status {
                    status, name, text, ..
                } => HsaError::QueueError {
                    during: "a kernel dispatch",
                    status,
                    name,
                    text,
                },
                other => other,
            }),
        }
    }

    /// Waits for a dispatch's completion signal, ending early with the
    /// queue's error if ROCr reports one.
    pub fn wait(&self, done: &Signal, timeout: Duration) -> Result<(), HsaError> {
        done.wait_complete(timeout, "kernel dispatch", || self.error())
    }

    /// The queue's size in packets.
    pub fn size(&self) -> u32 {
        // SAFETY: the queue lives until drop.
        unsafe { (*self.raw).size }
    }

    /// Writes a kernel dispatch packet and rings the doorbell.
    pub fn dispatch(&self, mut packet: sys::KernelDispatchPacket) -> Result<(), HsaError> {
        let add = self.hsa.table.hsa_queue_add_write_index_relaxed.clone()?;
        let ring = self.hsa.table.hsa_signal_store_screlease.clone()?;
        // SAFETY: the queue lives until drop; the slot index is masked to
        // the ring; the header is published last with release ordering, as
        // the AQL protocol requires.
        unsafe {
            let q = &*self.raw;
            let index = add(self.raw, 1);
            let slot = (q.base_address as *mut sys::KernelDispatchPacket)
                .add((index % u64::from(q.size)) as usize);
            let header = packet.header;
            let setup = packet.setup;
            packet.header = sys::PACKET_TYPE_INVALID << sys::PACKET_HEADER_TYPE;
            std::ptr::write_volatile(slot, packet);
            let word = u32::from(header) | (u32::from(setup) << 16);
            (*(slot as *const std::sync::atomic::AtomicU32))
                .store(word, std::sync::atomic::Ordering::Release);
            ring(q.doorbell_signal, i64::try_from(index).unwrap_or(i64::MAX));
        }
        Ok(())
    }
}

release_on_drop!(Queue, hsa.hsa_queue_destroy(raw));

/// A kernel found in an executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    /// The kernel object for dispatch packets.
    pub kernel_object: u64,
    /// Bytes of kernel arguments (explicit and hidden).
    pub kernarg_size: u32,
    /// LDS bytes.
    pub group_segment_size: u32,
    /// Scratch bytes per work-item.
    pub private_segment_size: u32,
}

/// A frozen executable with one code object loaded for one agent.
pub struct Executable {
    hsa: Arc<Hsa>,
    raw: sys::Executable,
    reader: sys::CodeObjectReader,
    agent: Agent,
    _code: Vec<u8>,
}

impl Executable {
    /// Loads `code` (an AMDGPU ELF) for `agent` and freezes it.
    pub fn load(hsa: &Arc<Hsa>, agent: Agent, code: &[u8]) -> Result<Executable, HsaError> {
        let create_reader = hsa
            .table
            .hsa_code_object_reader_create_from_memory
            .clone()?;
        let create = hsa.table.hsa_executable_create_alt.clone()?;
        let load = hsa.table.hsa_executable_load_agent_code_object.clone()?;
        let freeze = hsa.table.hsa_executable_freeze.clone()?;
        let code = code.to_vec();
        let mut exe = Executable {
            hsa: Arc::clone(hsa),
            raw: sys::Executable::default(),
            reader: sys::CodeObjectReader::default(),
            agent,
            _code: code,
        };
        // SAFETY: the code bytes live as long as the executable (`_code`);
        // handles are written by the runtime and released in drop.
        unsafe {
            hsa.check(
                "hsa_code_object_reader_create_from_memory",
                create_reader(exe._code.as_ptr().cast(), exe._code.len(), &mut exe.reader),
            )?;
            hsa.check(
                "hsa_executable_create_alt",
                create(
                    sys::PROFILE_FULL,
                    sys::FLOAT_ROUNDING_MODE_DEFAULT,
                    std::ptr::null(),
                    &mut exe.raw,
                ),
            )?;
            hsa.check(
                "hsa_executable_load_agent_code_object",
                load(
                    exe.raw,
                    agent,
                    exe.reader,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                ),
            )?;
            hsa.check("hsa_executable_freeze", freeze(exe.raw, std::ptr::null()))?;
        }
        Ok(exe)
    }

    /// Looks a kernel up by name (without the `.kd` suffix).
    pub fn kernel(&self, name: &str) -> Result<KernelSymbol, HsaError> {
        let get = self.hsa.table.hsa_executable_get_symbol_by_name.clone()?;
        let info = self.hsa.table.hsa_executable_symbol_get_info.clone()?;
        let cname = CString::new(format!("{name}.kd")).map_err(|_| HsaError::Invalid {
            call: "hsa_executable_get_symbol_by_name",
            reason: format!("kernel name {name:?} contains NUL"),
        })?;
        let mut sym = sys::ExecutableSymbol::default();
        let mut k = KernelSymbol {
            kernel_object: 0,
            kernarg_size: 0,
            group_segment_size: 0,
            private_segment_size: 0,
        };
        // SAFETY: live executable and agent; attribute types per hsa.h
        // (kernel object u64, segment sizes u32).
        unsafe {
            self.hsa.check(
                "hsa_executable_get_symbol_by_name",
                get(self.raw, cname.as_ptr(), &self.agent, &mut sym),
            )?;
            self.hsa.check(
                "hsa_executable_symbol_get_info",
                info(
                    sym,
                    sys::SYMBOL_INFO_KERNEL_OBJECT,
                    (&raw mut k.kernel_object).cast(),
                ),
            )?;
            self.hsa.check(
                "hsa_executable_symbol_get_info",
                info(
                    sym,
                    sys::SYMBOL_INFO_KERNARG_SEGMENT_SIZE,
                    (&raw mut k.kernarg_size).cast(),
                ),
            )?;
            self.hsa.check(
                "hsa_executable_symbol_get_info",
                info(
                    sym,
                    sys::SYMBOL_INFO_GROUP_SEGMENT_SIZE,
                    (&raw mut k.group_segment_size).cast(),
                ),
            )?;
            self.hsa.check(
                "hsa_executable_symbol_get_info",
                info(
                    sym,
                    sys::SYMBOL_INFO_PRIVATE_SEGMENT_SIZE,
                    (&raw mut k.private_segment_size).cast(),
                ),
            )?;
        }
        Ok(k)
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        // SAFETY: released once each, here; zero handles were never created.
        unsafe {
            if self.raw.handle != 0 {
                if let Ok(f) = &self.hsa.table.hsa_executable_destroy {
                    f(self.raw);
                }
            }
            if self.reader.handle != 0 {
                if let Ok(f) = &self.hsa.table.hsa_code_object_reader_destroy {
                    f(self.reader);
                }
            }
        }
    }
}
