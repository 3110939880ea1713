//! The HIP runtime (`libamdhip64`) and hiprtc.

mod api;
mod error;
pub mod sys;

pub use api::{
    DeviceBuffer, Function, GpuTimer, Hip, HostBuffer, Module, Rtc, Stream, TimedCopy,
    format_version,
};
pub use error::{ERROR_NAMES, HipError, fallback_name};

/// The HIP runtime's sonames, newest first.
pub const LIBRARY: crate::loader::LibrarySpec = crate::loader::LibrarySpec {
    name: "HIP runtime libamdhip64",
    sonames: &[
        "libamdhip64.so",
        "libamdhip64.so.7",
        "libamdhip64.so.6",
        "libamdhip64.so.5",
    ],
};

/// hiprtc's own library (ROCm 6 and later; ROCm 7 has hiprtc only there).
pub const RTC_LIBRARY: crate::loader::LibrarySpec = crate::loader::LibrarySpec {
    name: "HIP runtime compiler libhiprtc",
    sonames: &["libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6"],
};
