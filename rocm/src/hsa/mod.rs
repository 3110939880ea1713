//! ROCr/HSA: `libhsa-runtime64.so.1`.

mod api;
pub mod status;
pub mod sys;

pub use api::{
    AgentInfo, DeviceKind, Executable, Hsa, KernelSymbol, PoolInfo, PoolMemory, Queue, Signal,
};
pub use status::{HsaError, status_name};

/// The HSA runtime's sonames.
pub const LIBRARY: crate::loader::LibrarySpec = crate::loader::LibrarySpec {
    name: "ROCr runtime libhsa-runtime64",
    sonames: &["libhsa-runtime64.so.1", "libhsa-runtime64.so"],
};
