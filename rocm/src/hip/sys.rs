//! Raw HIP declarations (`hip_runtime_api.h`, `hiprtc.h`); the values used
//! here are the same from ROCm 5.2 to 7.x.

#![allow(
    missing_docs,
    non_snake_case,
    reason = "names and values mirror hip_runtime_api.h"
)]

use crate::table::{c_constants, symbol_table};
use std::ffi::{c_char, c_void};

pub type Error = i32;
pub type Module = *mut c_void;
pub type Function = *mut c_void;
pub type RtcProgram = *mut c_void;
pub type Stream = *mut c_void;
pub type Event = *mut c_void;

c_constants! {
    /// Every value above, by its C name, for the header probe
    /// (`rocm/tests/abi.rs`, against Debian's ROCm 5.2.3 headers; the
    /// `hipDeviceAttribute_t` values were renumbered in ROCm 5.0 and are
    /// unchanged since, through 7.x).
    pub CONSTANTS {
        SUCCESS: Error = "hipSuccess" => 0;
        ERROR_NOT_READY: Error = "hipErrorNotReady" => 600;
        ERROR_PEER_ACCESS_ALREADY_ENABLED: Error = "hipErrorPeerAccessAlreadyEnabled" => 704;
        ATTR_MAX_THREADS_PER_BLOCK: i32 = "hipDeviceAttributeMaxThreadsPerBlock" => 56;
        ATTR_MULTIPROCESSOR_COUNT: i32 = "hipDeviceAttributeMultiprocessorCount" => 63;
        ATTR_TOTAL_GLOBAL_MEM: i32 = "hipDeviceAttributeTotalGlobalMem" => 84;
        ATTR_WARP_SIZE: i32 = "hipDeviceAttributeWarpSize" => 87;
        MEMCPY_HOST_TO_DEVICE: i32 = "hipMemcpyHostToDevice" => 1;
        MEMCPY_DEVICE_TO_HOST: i32 = "hipMemcpyDeviceToHost" => 2;
        HOST_MALLOC_DEFAULT: u32 = "hipHostMallocDefault" => 0;
    }
}

symbol_table! {
    /// The HIP runtime symbols rocgate uses.
    pub struct Table {
        hipInit: fn(u32) -> Error;
        hipGetDeviceCount: fn(*mut i32) -> Error;
        hipRuntimeGetVersion: fn(*mut i32) -> Error;
        hipDriverGetVersion: fn(*mut i32) -> Error;
        hipGetErrorName: fn(Error) -> *const c_char;
        hipGetErrorString: fn(Error) -> *const c_char;
        hipSetDevice: fn(i32) -> Error;
        hipDeviceGetAttribute: fn(*mut i32, i32, i32) -> Error;
        hipDeviceGetName: fn(*mut c_char, i32, i32) -> Error;
        hipDeviceGetPCIBusId: fn(*mut c_char, i32, i32) -> Error;
        hipDeviceTotalMem: fn(*mut usize, i32) -> Error;
        hipDeviceSynchronize: fn() -> Error;
        hipMalloc: fn(*mut *mut c_void, usize) -> Error;
        hipFree: fn(*mut c_void) -> Error;
        hipHostMalloc: fn(*mut *mut c_void, usize, u32) -> Error;
        hipHostFree: fn(*mut c_void) -> Error;
        hipMemcpy: fn(*mut c_void, *const c_void, usize, i32) -> Error;
        hipMemset: fn(*mut c_void, i32, usize) -> Error;
        hipDeviceCanAccessPeer: fn(*mut i32, i32, i32) -> Error;
        hipDeviceEnablePeerAccess: fn(i32, u32) -> Error;
        hipMemcpyPeer: fn(*mut c_void, i32, *const c_void, i32, usize) -> Error;
        hipModuleLoadData: fn(*mut Module, *const c_void) -> Error;
        hipModuleUnload: fn(Module) -> Error;
        hipModuleGetFunction: fn(*mut Function, Module, *const c_char) -> Error;
        hipModuleLaunchKernel: fn(Function, u32, u32, u32, u32, u32, u32, u32, *mut c_void, *mut *mut c_void, *mut *mut c_void) -> Error;
        hipStreamCreate: fn(*mut Stream) -> Error;
        hipStreamDestroy: fn(Stream) -> Error;
        hipStreamSynchronize: fn(Stream) -> Error;
        hipStreamQuery: fn(Stream) -> Error;
        hipMemcpyAsync: fn(*mut c_void, *const c_void, usize, i32, Stream) -> Error;
        hipMemcpyPeerAsync: fn(*mut c_void, i32, *const c_void, i32, usize, Stream) -> Error;
        hipEventCreate: fn(*mut Event) -> Error;
        hipEventDestroy: fn(Event) -> Error;
        hipEventRecord: fn(Event, Stream) -> Error;
        hipEventSynchronize: fn(Event) -> Error;
        hipEventElapsedTime: fn(*mut f32, Event, Event) -> Error;
    }
}

symbol_table! {
    /// The hiprtc symbols rocgate uses (libhiprtc, or libamdhip64 before ROCm 7).
    pub struct RtcTable {
        hiprtcCreateProgram: fn(*mut RtcProgram, *const c_char, *const c_char, i32, *const *const c_char, *const *const c_char) -> i32;
        hiprtcCompileProgram: fn(RtcProgram, i32, *const *const c_char) -> i32;
        hiprtcGetProgramLogSize: fn(RtcProgram, *mut usize) -> i32;
        hiprtcGetProgramLog: fn(RtcProgram, *mut c_char) -> i32;
        hiprtcGetCodeSize: fn(RtcProgram, *mut usize) -> i32;
        hiprtcGetCode: fn(RtcProgram, *mut c_char) -> i32;
        hiprtcDestroyProgram: fn(*mut RtcProgram) -> i32;
        hiprtcGetErrorString: fn(i32) -> *const c_char;
    }
}
