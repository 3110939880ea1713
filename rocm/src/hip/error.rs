//! HIP and hiprtc errors, named by `hipGetErrorName` and worded by
//! `hipGetErrorString` and `hiprtcGetErrorString`.

use super::sys::{self, RtcTable, Table};
use crate::library::{Binding, status_text, without_name};
use crate::loader::{LibrarySpec, MissingSymbol};
use crate::table::describe_with;
use thiserror::Error;

/// A failed HIP call.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HipError {
    /// The library lacks the symbol.
    #[error(transparent)]
    Missing(#[from] MissingSymbol),
    /// The call returned an error code.
    #[error("{call} failed: {name} ({code}){}", if text.is_empty() { String::new() } else { format!(": {text}") })]
    Code {
        /// The function called.
        call: &'static str,
        /// `hipError_t`.
        code: i32,
        /// `hipGetErrorName`.
        name: String,
        /// `hipGetErrorString`.
        text: String,
    },
    /// hiprtc failed.
    #[error("{call} failed: {text} ({code}){}", if log.is_empty() { String::new() } else { format!("\n{log}") })]
    Rtc {
        /// The function called.
        call: &'static str,
        /// `hiprtcResult`.
        code: i32,
        /// `hiprtcGetErrorString`.
        text: String,
        /// The compile log.
        log: String,
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

impl HipError {
    /// The `hipError_t`, when the call returned one.
    pub fn code(&self) -> Option<i32> {
        match self {
            HipError::Code { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// `hipError_t` values rocgate names when the library cannot (it is
/// missing), checked against Debian's ROCm 5.2.3 headers by
/// `rocm/tests/abi.rs`; the values are unchanged through ROCm 7.
pub const ERROR_NAMES: &[(i32, &str)] = &[
    (0, "hipSuccess"),
    (1, "hipErrorInvalidValue"),
    (2, "hipErrorOutOfMemory"),
    (3, "hipErrorNotInitialized"),
    (35, "hipErrorInsufficientDriver"),
    (98, "hipErrorInvalidDeviceFunction"),
    (100, "hipErrorNoDevice"),
    (101, "hipErrorInvalidDevice"),
    (200, "hipErrorInvalidImage"),
    (209, "hipErrorNoBinaryForGpu"),
    (214, "hipErrorECCNotCorrectable"),
    (217, "hipErrorPeerAccessUnsupported"),
    (400, "hipErrorInvalidHandle"),
    (500, "hipErrorNotFound"),
    (600, "hipErrorNotReady"),
    (700, "hipErrorIllegalAddress"),
    (704, "hipErrorPeerAccessAlreadyEnabled"),
    (705, "hipErrorPeerAccessNotEnabled"),
    (719, "hipErrorLaunchFailure"),
    (999, "hipErrorUnknown"),
];

/// The name of a `hipError_t` when the library cannot say (it is missing).
pub fn fallback_name(code: i32) -> &'static str {
    Table::status_name(code)
}

impl Binding for Table {
    const LIBRARY: LibrarySpec = super::LIBRARY;
    type Status = sys::Error;
    type Error = HipError;
    const SUCCESS: sys::Error = sys::SUCCESS;
    const STATUS_NAMES: &'static [(sys::Error, &'static str)] = ERROR_NAMES;
    const UNKNOWN_STATUS: &'static str = "hipError (unknown code)";

    describe_with!(hipGetErrorString);

    fn error(&self, call: &'static str, code: sys::Error) -> HipError {
        let name = status_text(&self.hipGetErrorName, code)
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| fallback_name(code).to_string());
        let text = without_name(&self.describe(code).unwrap_or_default(), &name);
        HipError::Code {
            call,
            code,
            name,
            text,
        }
    }
}

/// hiprtc is checked like the runtime, but its `hiprtcResult` is worded by
/// `hiprtcGetErrorString` alone: its messages never carried a name.
impl Binding for RtcTable {
    const LIBRARY: LibrarySpec = super::RTC_LIBRARY;
    type Status = i32;
    type Error = HipError;
    const SUCCESS: i32 = 0;
    const STATUS_NAMES: &'static [(i32, &'static str)] = &[];
    const UNKNOWN_STATUS: &'static str = "hiprtcResult";

    describe_with!(hiprtcGetErrorString);

    fn error(&self, call: &'static str, code: i32) -> HipError {
        HipError::Rtc {
            call,
            code,
            text: self.describe(code).unwrap_or_default(),
            log: String::new(),
        }
    }
}
