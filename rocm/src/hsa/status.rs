//! HSA status codes: names, errors that carry `hsa_status_string`, and
//! how the runtime is opened and its calls checked.

use super::sys::{self, Table};
use crate::library::{Binding, c_text, without_name};
use crate::loader::{LibrarySpec, MissingSymbol};
use std::ffi::c_char;
use thiserror::Error;

/// HSA status codes and their names: hsa.h `hsa_status_t` and hsa_ext_amd.h
/// `hsa_amd_status_t`. Every entry present in ROCm 5.2.3 is compared with
/// Debian's headers by `rocm/tests/abi.rs`; the rest are listed in
/// [`NEWER_THAN_5_2`] with their source.
pub const STATUS_NAMES: &[(u32, &str)] = &[
    (0x0, "HSA_STATUS_SUCCESS"),
    (0x1, "HSA_STATUS_INFO_BREAK"),
    (0x1000, "HSA_STATUS_ERROR"),
    (0x1001, "HSA_STATUS_ERROR_INVALID_ARGUMENT"),
    (0x1002, "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION"),
    (0x1003, "HSA_STATUS_ERROR_INVALID_ALLOCATION"),
    (0x1004, "HSA_STATUS_ERROR_INVALID_AGENT"),
    (0x1005, "HSA_STATUS_ERROR_INVALID_REGION"),
    (0x1006, "HSA_STATUS_ERROR_INVALID_SIGNAL"),
    (0x1007, "HSA_STATUS_ERROR_INVALID_QUEUE"),
    (0x1008, "HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
    (0x1009, "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT"),
    (0x100A, "HSA_STATUS_ERROR_RESOURCE_FREE"),
    (0x100B, "HSA_STATUS_ERROR_NOT_INITIALIZED"),
    (0x100C, "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW"),
    (0x100D, "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS"),
    (0x100E, "HSA_STATUS_ERROR_INVALID_INDEX"),
    (0x100F, "HSA_STATUS_ERROR_INVALID_ISA"),
    (0x1010, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT"),
    (0x1011, "HSA_STATUS_ERROR_INVALID_EXECUTABLE"),
    (0x1012, "HSA_STATUS_ERROR_FROZEN_EXECUTABLE"),
    (0x1013, "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME"),
    (0x1014, "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED"),
    (0x1015, "HSA_STATUS_ERROR_VARIABLE_UNDEFINED"),
    (0x1016, "HSA_STATUS_ERROR_EXCEPTION"),
    (0x1017, "HSA_STATUS_ERROR_INVALID_ISA_NAME"),
    (0x1018, "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL"),
    (0x1019, "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL"),
    (0x1020, "HSA_STATUS_ERROR_INVALID_FILE"),
    (0x1021, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER"),
    (0x1022, "HSA_STATUS_ERROR_INVALID_CACHE"),
    (0x1023, "HSA_STATUS_ERROR_INVALID_WAVEFRONT"),
    (0x1024, "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP"),
    (0x1025, "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE"),
    (0x1026, "HSA_STATUS_ERROR_FATAL"),
    (0x28, "HSA_STATUS_ERROR_INVALID_MEMORY_POOL"),
    (0x29, "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"),
    (0x2A, "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION"),
    (0x2B, "HSA_STATUS_ERROR_MEMORY_FAULT"),
    (0x2C, "HSA_STATUS_CU_MASK_REDUCED"),
    (0x2D, "HSA_STATUS_ERROR_OUT_OF_REGISTERS"),
    (0x2E, "HSA_STATUS_ERROR_RESOURCE_BUSY"),
    (0x2F, "HSA_STATUS_ERROR_NOT_SUPPORTED"),
];

/// Statuses that ROCm 5.2.3's headers lack, so the header probe cannot check
/// them: hsa_ext_amd.h of ROCm 7.0 added 45 OUT_OF_REGISTERS,
/// 46 RESOURCE_BUSY and 47 NOT_SUPPORTED after 44 CU_MASK_REDUCED.
pub const NEWER_THAN_5_2: &[&str] = &[
    "HSA_STATUS_ERROR_OUT_OF_REGISTERS",
    "HSA_STATUS_ERROR_RESOURCE_BUSY",
    "HSA_STATUS_ERROR_NOT_SUPPORTED",
];

/// The name of an HSA status code.
pub fn status_name(status: u32) -> &'static str {
    Table::status_name(status)
}

impl Binding for Table {
    const LIBRARY: LibrarySpec = super::LIBRARY;
    type Status = sys::Status;
    type Error = HsaError;
    const SUCCESS: sys::Status = sys::STATUS_SUCCESS;
    const STATUS_NAMES: &'static [(sys::Status, &'static str)] = STATUS_NAMES;
    const UNKNOWN_STATUS: &'static str = "unknown HSA status";

    /// INFO_BREAK is how an iteration callback stops early, not a failure.
    fn succeeded(status: sys::Status) -> bool {
        status == sys::STATUS_SUCCESS || status == sys::STATUS_INFO_BREAK
    }

    /// `hsa_status_string`, which writes its text through a pointer.
    #[allow(unsafe_code, reason = "calls hsa_status_string")]
    fn describe(&self, status: sys::Status) -> Option<String> {
        let f = self.hsa_status_string.as_ref().ok()?;
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: hsa_status_string writes a pointer to a static string.
        let rc = unsafe { f(status, &mut text) };
        if rc != sys::STATUS_SUCCESS {
            return None;
        }
        // SAFETY: NULL or NUL-terminated and owned by the runtime.
        unsafe { c_text(text) }
    }

    fn error(&self, call: &'static str, status: sys::Status) -> HsaError {
        let name = status_name(status);
        let text = without_name(&self.describe(status).unwrap_or_default(), name);
        HsaError::Status {
            call,
            status,
            name,
            text,
        }
    }
}

/// A failed HSA call.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HsaError {
    /// The library lacks the symbol.
    #[error(transparent)]
    Missing(#[from] MissingSymbol),
    /// The call returned an error status.
    #[error("{call} failed: {name} (0x{status:x}){}", if text.is_empty() { String::new() } else { format!(": {text}") })]
    Status {
        /// The function called.
        call: &'static str,
        /// The status it returned.
        status: u32,
        /// The status's name.
        name: &'static str,
        /// `hsa_status_string`'s text.
        text: String,
    },
    /// ROCr reported an error through a queue's error callback (a hardware
    /// exception, an illegal instruction, an aperture violation) and
    /// suspended the queue.
    #[error("the GPU raised a queue error during {during}: {name} (0x{status:x}){}", if text.is_empty() { String::new() } else { format!(": {text}") })]
    QueueError {
        /// What was running.
        during: &'static str,
        /// The status the callback received.
        status: u32,
        /// The status's name.
        name: &'static str,
        /// `hsa_status_string`'s text.
        text: String,
    },
    /// The operation ended with its completion signal negative: ROCr's way
    /// of saying an asynchronous copy or dispatch failed.
    #[error(
        "{call} failed: its completion signal ended at {value} (ROCr sets a failed operation's signal negative)"
    )]
    SignalError {
        /// The operation waited for.
        call: &'static str,
        /// The signal's value.
        value: i64,
    },
    /// The call succeeded but its result is unusable.
    #[error("{call}: {reason}")]
    Invalid {
        /// The function called.
        call: &'static str,
        /// What was wrong.
        reason: String,
    },
}

impl HsaError {
    /// The status code, when the call returned one.
    pub fn status(&self) -> Option<u32> {
        match self {
            HsaError::Status { status, .. } | HsaError::QueueError { status, .. } => Some(*status),
            _ => None,
        }
    }
}
