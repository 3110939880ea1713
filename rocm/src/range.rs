//! An address range in memory a GPU can reach, as the owners of device
//! allocations (HIP buffers, HSA pool memory) expose it.

use std::ffi::c_void;

/// `len` bytes at `ptr`. The owner that derefs to it keeps the memory
/// allocated; the range itself frees nothing.
#[derive(Debug)]
pub struct DeviceRange {
    pub(crate) ptr: *mut c_void,
    pub(crate) len: usize,
}

impl DeviceRange {
    /// The address.
    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
