//! Raw HSA (ROCr) declarations: the types, constants and symbols rocgate
//! uses, from `hsa.h` and `hsa_ext_amd.h` (values stable from ROCm 5 to 7).

#![allow(missing_docs, reason = "names and values mirror hsa.h")]

use crate::table::symbol_table;
use std::ffi::{c_char, c_void};

pub type Status = u32;
pub const STATUS_SUCCESS: Status = 0;
pub const STATUS_INFO_BREAK: Status = 0x1;

macro_rules! handle {
    ($($name:ident),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name { pub handle: u64 }
    )*};
}
handle!(
    Agent,
    Signal,
    MemoryPool,
    Executable,
    ExecutableSymbol,
    CodeObjectReader,
    LoadedCodeObject
);

/// `hsa_queue_t`.
#[repr(C)]
#[derive(Debug)]
pub struct Queue {
    pub queue_type: u32,
    pub features: u32,
    pub base_address: *mut c_void,
    pub doorbell_signal: Signal,
    pub size: u32,
    pub reserved1: u32,
    pub id: u64,
}

/// `hsa_kernel_dispatch_packet_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelDispatchPacket {
    pub header: u16,
    pub setup: u16,
    pub workgroup_size_x: u16,
    pub workgroup_size_y: u16,
    pub workgroup_size_z: u16,
    pub reserved0: u16,
    pub grid_size_x: u32,
    pub grid_size_y: u32,
    pub grid_size_z: u32,
    pub private_segment_size: u32,
    pub group_segment_size: u32,
    pub kernel_object: u64,
    pub kernarg_address: u64,
    pub reserved2: u64,
    pub completion_signal: Signal,
}

// hsa_agent_info_t and hsa_amd_agent_info_t.
pub const AGENT_INFO_NAME: u32 = 0;
pub const AGENT_INFO_VENDOR_NAME: u32 = 1;
pub const AGENT_INFO_WAVEFRONT_SIZE: u32 = 6;
pub const AGENT_INFO_DEVICE: u32 = 17;
pub const AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: u32 = 0xA002;
pub const AMD_AGENT_INFO_BDFID: u32 = 0xA006;
pub const AMD_AGENT_INFO_PRODUCT_NAME: u32 = 0xA009;
pub const AMD_AGENT_INFO_DOMAIN: u32 = 0xA00F;
pub const DEVICE_TYPE_CPU: u32 = 0;
pub const DEVICE_TYPE_GPU: u32 = 1;

pub const SYSTEM_INFO_VERSION_MAJOR: u32 = 0;
pub const SYSTEM_INFO_VERSION_MINOR: u32 = 1;

// hsa_amd_memory_pool_info_t.
pub const POOL_INFO_SEGMENT: u32 = 0;
pub const POOL_INFO_GLOBAL_FLAGS: u32 = 1;
pub const POOL_INFO_SIZE: u32 = 2;
pub const POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
pub const SEGMENT_GLOBAL: u32 = 0;
pub const POOL_FLAG_KERNARG_INIT: u32 = 1;
pub const POOL_FLAG_FINE_GRAINED: u32 = 2;
pub const POOL_FLAG_COARSE_GRAINED: u32 = 4;

pub const QUEUE_TYPE_SINGLE: u32 = 1;
pub const SIGNAL_CONDITION_EQ: u32 = 0;
pub const SIGNAL_CONDITION_LT: u32 = 2;
pub const WAIT_STATE_BLOCKED: u32 = 0;

pub const PROFILE_FULL: u32 = 1;
pub const FLOAT_ROUNDING_MODE_DEFAULT: u32 = 0;
pub const SYMBOL_INFO_KERNEL_OBJECT: u32 = 22;
pub const SYMBOL_INFO_KERNARG_SEGMENT_SIZE: u32 = 11;
pub const SYMBOL_INFO_GROUP_SEGMENT_SIZE: u32 = 13;
pub const SYMBOL_INFO_PRIVATE_SEGMENT_SIZE: u32 = 14;

// AQL packet header fields.
pub const PACKET_TYPE_KERNEL_DISPATCH: u16 = 2;
pub const PACKET_TYPE_INVALID: u16 = 1;
pub const PACKET_HEADER_TYPE: u16 = 0;
pub const PACKET_HEADER_BARRIER: u16 = 8;
pub const PACKET_HEADER_SCACQUIRE_FENCE_SCOPE: u16 = 9;
pub const PACKET_HEADER_SCRELEASE_FENCE_SCOPE: u16 = 11;
pub const FENCE_SCOPE_SYSTEM: u16 = 2;
pub const DISPATCH_SETUP_DIMENSIONS: u16 = 0;

pub type AgentCallback = unsafe extern "C" fn(Agent, *mut c_void) -> Status;
pub type PoolCallback = unsafe extern "C" fn(MemoryPool, *mut c_void) -> Status;
pub type QueueErrorCallback = Option<unsafe extern "C" fn(Status, *mut Queue, *mut c_void)>;

symbol_table! {
    /// The HSA symbols rocgate uses.
    pub struct Table {
        hsa_init: fn() -> Status;
        hsa_shut_down: fn() -> Status;
        hsa_status_string: fn(Status, *mut *const c_char) -> Status;
        hsa_system_get_info: fn(u32, *mut c_void) -> Status;
        hsa_iterate_agents: fn(AgentCallback, *mut c_void) -> Status;
        hsa_agent_get_info: fn(Agent, u32, *mut c_void) -> Status;
        hsa_amd_agent_iterate_memory_pools: fn(Agent, PoolCallback, *mut c_void) -> Status;
        hsa_amd_memory_pool_get_info: fn(MemoryPool, u32, *mut c_void) -> Status;
        hsa_amd_memory_pool_allocate: fn(MemoryPool, usize, u32, *mut *mut c_void) -> Status;
        hsa_amd_memory_pool_free: fn(*mut c_void) -> Status;
        hsa_amd_agents_allow_access: fn(u32, *const Agent, *const u32, *const c_void) -> Status;
        hsa_amd_memory_async_copy: fn(*mut c_void, Agent, *const c_void, Agent, usize, u32, *const Signal, Signal) -> Status;
        hsa_queue_create: fn(Agent, u32, u32, QueueErrorCallback, *mut c_void, u32, u32, *mut *mut Queue) -> Status;
        hsa_queue_destroy: fn(*mut Queue) -> Status;
        hsa_queue_add_write_index_relaxed: fn(*const Queue, u64) -> u64;
        hsa_signal_create: fn(i64, u32, *const Agent, *mut Signal) -> Status;
        hsa_signal_destroy: fn(Signal) -> Status;
        hsa_signal_store_relaxed: fn(Signal, i64) -> ();
        hsa_signal_store_screlease: fn(Signal, i64) -> ();
        hsa_signal_load_relaxed: fn(Signal) -> i64;
        hsa_signal_wait_scacquire: fn(Signal, u32, i64, u64, u32) -> i64;
        hsa_code_object_reader_create_from_memory: fn(*const c_void, usize, *mut CodeObjectReader) -> Status;
        hsa_code_object_reader_destroy: fn(CodeObjectReader) -> Status;
        hsa_executable_create_alt: fn(u32, u32, *const c_char, *mut Executable) -> Status;
        hsa_executable_load_agent_code_object: fn(Executable, Agent, CodeObjectReader, *const c_char, *mut LoadedCodeObject) -> Status;
        hsa_executable_freeze: fn(Executable, *const c_char) -> Status;
        hsa_executable_destroy: fn(Executable) -> Status;
        hsa_executable_get_symbol_by_name: fn(Executable, *const c_char, *const Agent, *mut ExecutableSymbol) -> Status;
        hsa_executable_symbol_get_info: fn(ExecutableSymbol, u32, *mut c_void) -> Status;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_hsa_h() {
        assert_eq!(std::mem::size_of::<Queue>(), 40);
        assert_eq!(std::mem::offset_of!(Queue, doorbell_signal), 16);
        assert_eq!(std::mem::offset_of!(Queue, size), 24);
        assert_eq!(std::mem::size_of::<KernelDispatchPacket>(), 64);
        assert_eq!(std::mem::offset_of!(KernelDispatchPacket, grid_size_x), 12);
        assert_eq!(
            std::mem::offset_of!(KernelDispatchPacket, kernel_object),
            32
        );
        assert_eq!(
            std::mem::offset_of!(KernelDispatchPacket, kernarg_address),
            40
        );
        assert_eq!(
            std::mem::offset_of!(KernelDispatchPacket, completion_signal),
            56
        );
    }
}
