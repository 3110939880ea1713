//! Raw HSA (ROCr) declarations: the types, constants and symbols rocgate
//! uses, from `hsa.h` and `hsa_ext_amd.h` (values stable from ROCm 5 to 7;
//! `rocm/tests/abi.rs` compares every one with Debian's ROCm 5.2.3 headers).

#![allow(missing_docs, reason = "names and values mirror hsa.h")]

use crate::table::{c_constants, c_layouts, symbol_table};
use std::ffi::{c_char, c_void};

pub type Status = u32;

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

c_constants! {
    /// Every enum value above, by its C name, for the header probe.
    pub CONSTANTS {
        STATUS_SUCCESS: Status = "HSA_STATUS_SUCCESS" => 0;
        STATUS_INFO_BREAK: Status = "HSA_STATUS_INFO_BREAK" => 0x1;
        // hsa_agent_info_t and hsa_amd_agent_info_t.
        AGENT_INFO_NAME: u32 = "HSA_AGENT_INFO_NAME" => 0;
        AGENT_INFO_VENDOR_NAME: u32 = "HSA_AGENT_INFO_VENDOR_NAME" => 1;
        AGENT_INFO_WAVEFRONT_SIZE: u32 = "HSA_AGENT_INFO_WAVEFRONT_SIZE" => 6;
        AGENT_INFO_DEVICE: u32 = "HSA_AGENT_INFO_DEVICE" => 17;
        AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: u32 = "HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT" => 0xA002;
        AMD_AGENT_INFO_BDFID: u32 = "HSA_AMD_AGENT_INFO_BDFID" => 0xA006;
        AMD_AGENT_INFO_PRODUCT_NAME: u32 = "HSA_AMD_AGENT_INFO_PRODUCT_NAME" => 0xA009;
        AMD_AGENT_INFO_DOMAIN: u32 = "HSA_AMD_AGENT_INFO_DOMAIN" => 0xA00F;
        // hsa_device_type_t (AIE = 3 is listed in NEWER_THAN_5_2).
        DEVICE_TYPE_CPU: u32 = "HSA_DEVICE_TYPE_CPU" => 0;
        DEVICE_TYPE_GPU: u32 = "HSA_DEVICE_TYPE_GPU" => 1;
        DEVICE_TYPE_DSP: u32 = "HSA_DEVICE_TYPE_DSP" => 2;
        SYSTEM_INFO_VERSION_MAJOR: u32 = "HSA_SYSTEM_INFO_VERSION_MAJOR" => 0;
        SYSTEM_INFO_VERSION_MINOR: u32 = "HSA_SYSTEM_INFO_VERSION_MINOR" => 1;
        // hsa_amd_memory_pool_info_t and its flags.
        POOL_INFO_SEGMENT: u32 = "HSA_AMD_MEMORY_POOL_INFO_SEGMENT" => 0;
        POOL_INFO_GLOBAL_FLAGS: u32 = "HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS" => 1;
        POOL_INFO_SIZE: u32 = "HSA_AMD_MEMORY_POOL_INFO_SIZE" => 2;
        POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = "HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED" => 5;
        SEGMENT_GLOBAL: u32 = "HSA_AMD_SEGMENT_GLOBAL" => 0;
        POOL_FLAG_KERNARG_INIT: u32 = "HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT" => 1;
        POOL_FLAG_FINE_GRAINED: u32 = "HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED" => 2;
        POOL_FLAG_COARSE_GRAINED: u32 = "HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED" => 4;
        QUEUE_TYPE_SINGLE: u32 = "HSA_QUEUE_TYPE_SINGLE" => 1;
        SIGNAL_CONDITION_EQ: u32 = "HSA_SIGNAL_CONDITION_EQ" => 0;
        SIGNAL_CONDITION_NE: u32 = "HSA_SIGNAL_CONDITION_NE" => 1;
        SIGNAL_CONDITION_LT: u32 = "HSA_SIGNAL_CONDITION_LT" => 2;
        SIGNAL_CONDITION_GTE: u32 = "HSA_SIGNAL_CONDITION_GTE" => 3;
        WAIT_STATE_BLOCKED: u32 = "HSA_WAIT_STATE_BLOCKED" => 0;
        PROFILE_FULL: u32 = "HSA_PROFILE_FULL" => 1;
        FLOAT_ROUNDING_MODE_DEFAULT: u32 = "HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT" => 0;
        SYMBOL_INFO_KERNEL_OBJECT: u32 = "HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT" => 22;
        SYMBOL_INFO_KERNARG_SEGMENT_SIZE: u32 = "HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE" => 11;
        SYMBOL_INFO_GROUP_SEGMENT_SIZE: u32 = "HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE" => 13;
        SYMBOL_INFO_PRIVATE_SEGMENT_SIZE: u32 = "HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE" => 14;
        // AQL packet header fields.
        PACKET_TYPE_KERNEL_DISPATCH: u16 = "HSA_PACKET_TYPE_KERNEL_DISPATCH" => 2;
        PACKET_TYPE_INVALID: u16 = "HSA_PACKET_TYPE_INVALID" => 1;
        PACKET_HEADER_TYPE: u16 = "HSA_PACKET_HEADER_TYPE" => 0;
        PACKET_HEADER_BARRIER: u16 = "HSA_PACKET_HEADER_BARRIER" => 8;
        PACKET_HEADER_SCACQUIRE_FENCE_SCOPE: u16 = "HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE" => 9;
        PACKET_HEADER_SCRELEASE_FENCE_SCOPE: u16 = "HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE" => 11;
        FENCE_SCOPE_SYSTEM: u16 = "HSA_FENCE_SCOPE_SYSTEM" => 2;
        DISPATCH_SETUP_DIMENSIONS: u16 = "HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS" => 0;
    }
}

/// `HSA_DEVICE_TYPE_AIE`: hsa.h of ROCm 7.0 adds it after DSP for the NPU of
/// Ryzen AI hosts (the XDNA driver), so ROCm 5.2.3's headers cannot confirm it.
pub const DEVICE_TYPE_AIE: u32 = 3;

/// C names the header probe skips because ROCm 5.2.3's headers predate them.
pub const NEWER_THAN_5_2: &[&str] = &["HSA_DEVICE_TYPE_AIE"];

c_layouts! {
    /// Struct sizes and field offsets (`(struct, field or "sizeof", bytes)`),
    /// for the header probe.
    pub LAYOUTS {
        "hsa_queue_t" = Queue {
            "type" => queue_type,
            "features" => features,
            "base_address" => base_address,
            "doorbell_signal" => doorbell_signal,
            "size" => size,
            "reserved1" => reserved1,
            "id" => id,
        };
        "hsa_kernel_dispatch_packet_t" = KernelDispatchPacket {
            "header" => header,
            "setup" => setup,
            "workgroup_size_x" => workgroup_size_x,
            "workgroup_size_y" => workgroup_size_y,
            "workgroup_size_z" => workgroup_size_z,
            "reserved0" => reserved0,
            "grid_size_x" => grid_size_x,
            "grid_size_y" => grid_size_y,
            "grid_size_z" => grid_size_z,
            "private_segment_size" => private_segment_size,
            "group_segment_size" => group_segment_size,
            "kernel_object" => kernel_object,
            "kernarg_address" => kernarg_address,
            "reserved2" => reserved2,
            "completion_signal" => completion_signal,
        };
        "hsa_agent_t" = Agent {};
        "hsa_signal_t" = Signal {};
        "hsa_amd_memory_pool_t" = MemoryPool {};
        "hsa_executable_t" = Executable {};
        "hsa_executable_symbol_t" = ExecutableSymbol {};
        "hsa_code_object_reader_t" = CodeObjectReader {};
        "hsa_loaded_code_object_t" = LoadedCodeObject {};
    }
}

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
    fn the_layout_table_has_each_structs_size_then_its_fields() {
        assert_eq!(LAYOUTS.len(), 31);
        assert_eq!(LAYOUTS[0], ("hsa_queue_t", "sizeof", 40));
        assert_eq!(LAYOUTS[2], ("hsa_queue_t", "features", 4));
        assert!(LAYOUTS.contains(&("hsa_kernel_dispatch_packet_t", "kernel_object", 32)));
        assert_eq!(
            LAYOUTS.last(),
            Some(&("hsa_loaded_code_object_t", "sizeof", 8))
        );
    }

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
