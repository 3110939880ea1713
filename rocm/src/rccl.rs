//! RCCL (`librccl.so.1`): communicators and all-reduce.

#![allow(
    unsafe_code,
    non_snake_case,
    reason = "the safe face of the RCCL C API"
)]

use crate::hip::{DeviceBuffer, Stream};
use crate::library::{Binding, Library};
use crate::loader::{LibrarySpec, MissingSymbol};
use crate::table::{describe_with, symbol_table};
use std::ffi::{c_char, c_void};
use std::sync::Arc;
use thiserror::Error;

/// RCCL's soname.
pub const LIBRARY: LibrarySpec = LibrarySpec {
    name: "RCCL librccl",
    sonames: &["librccl.so.1", "librccl.so"],
};

// Values from RCCL's `src/nccl.h.in` (ROCm/rccl for ROCm 3.x to 6.x,
// ROCm/rocm-systems projects/rccl for 7.x). RCCL's additions (bfloat16 9,
// fp8 10/11) come after ncclFloat32 and never moved it. No Debian package
// carries RCCL; this is their source.
type Result_ = i32;
type RawComm = *mut c_void;
/// `ncclFloat32`.
const FLOAT32: i32 = 7;
/// `ncclSum`.
const SUM: i32 = 0;
/// `ncclInProgress`: absent from the RCCL of ROCm 3/4 (whose results stop at
/// 5), present in 6.3 and 7.x; an older RCCL never returns it.
const IN_PROGRESS: i32 = 7;

symbol_table! {
    /// The RCCL symbols rocgate uses.
    pub struct Table {
        ncclGetVersion: fn(*mut i32) -> Result_;
        ncclGetErrorString: fn(Result_) -> *const c_char;
        ncclCommInitAll: fn(*mut RawComm, i32, *const i32) -> Result_;
        ncclAllReduce: fn(*const c_void, *mut c_void, usize, i32, i32, RawComm, *mut c_void) -> Result_;
        ncclGroupStart: fn() -> Result_;
        ncclGroupEnd: fn() -> Result_;
        ncclCommDestroy: fn(RawComm) -> Result_;
        ncclCommAbort: fn(RawComm) -> Result_;
        ncclCommGetAsyncError: fn(RawComm, *mut Result_) -> Result_;
    }
}

/// Names of `ncclResult_t` values (nccl.h.in: 0 to 7 through ROCm 7).
pub fn result_name(r: i32) -> &'static str {
    Table::status_name(r)
}

impl Binding for Table {
    const LIBRARY: LibrarySpec = LIBRARY;
    type Status = Result_;
    type Error = RcclError;
    const SUCCESS: Result_ = 0;
    const STATUS_NAMES: &'static [(Result_, &'static str)] = &[
        (0, "ncclSuccess"),
        (1, "ncclUnhandledCudaError"),
        (2, "ncclSystemError"),
        (3, "ncclInternalError"),
        (4, "ncclInvalidArgument"),
        (5, "ncclInvalidUsage"),
        (6, "ncclRemoteError"),
        (IN_PROGRESS, "ncclInProgress"),
    ];
    const UNKNOWN_STATUS: &'static str = "unknown ncclResult";

    describe_with!(ncclGetErrorString);

    fn error(&self, call: &'static str, code: Result_) -> RcclError {
        RcclError::Code {
            call,
            code,
            name: result_name(code),
            text: self.describe(code).unwrap_or_default(),
        }
    }
}

/// A failed RCCL call.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RcclError {
    /// The library lacks the symbol.
    #[error(transparent)]
    Missing(#[from] MissingSymbol),
    /// The call returned an error.
    #[error("{call} failed: {name} ({code}){}", if text.is_empty() { String::new() } else { format!(": {text}") })]
    Code {
        /// The function.
        call: &'static str,
        /// `ncclResult_t`.
        code: i32,
        /// Its name.
        name: &'static str,
        /// `ncclGetErrorString`.
        text: String,
    },
    /// Arguments rocgate refused to pass.
    #[error("{call}: {reason}")]
    Invalid {
        /// The function.
        call: &'static str,
        /// Why.
        reason: String,
    },
}

/// `ncclGetVersion`'s number as text: 21805 is 2.18.5, 2804 is 2.8.4.
pub fn format_version(code: i32) -> String {
    let div = if code >= 10_000 { 10_000 } else { 1_000 };
    format!("{}.{}.{}", code / div, (code % div) / 100, code % 100)
}

/// An opened RCCL.
pub type Rccl = Library<Table>;

impl Rccl {
    /// `ncclGetVersion`, formatted.
    pub fn version(&self) -> Result<String, RcclError> {
        let f = self.table.ncclGetVersion.clone()?;
        let mut v = 0;
        // SAFETY: writes one int.
        self.check("ncclGetVersion", unsafe { f(&mut v) })?;
        Ok(format_version(v))
    }
}

/// Communicators over a set of HIP devices, destroyed (or aborted) on drop.
pub struct Comms {
    rccl: Arc<Rccl>,
    raw: Vec<RawComm>,
    aborted: bool,
}

impl Comms {
    /// `ncclCommInitAll` over HIP device indices `devices`.
    pub fn init_all(rccl: &Arc<Rccl>, devices: &[i32]) -> Result<Comms, RcclError> {
        let f = rccl.table.ncclCommInitAll.clone()?;
        let mut raw = vec![std::ptr::null_mut(); devices.len()];
        let n = i32::try_from(devices.len()).unwrap_or(0);
        // SAFETY: `raw` holds one slot per device.
        rccl.check("ncclCommInitAll", unsafe {
            f(raw.as_mut_ptr(), n, devices.as_ptr())
        })?;
        Ok(Comms {
            rccl: Arc::clone(rccl),
            raw,
            aborted: false,
        })
    }

    /// Enqueues a sum all-reduce of `count` floats per device, as one group:
    /// `send[i]`/`recv[i]`/`streams[i]` belong to device i of the communicators.
    pub fn all_reduce_f32(
        &self,
        count: usize,
        send: &[DeviceBuffer],
        recv: &[DeviceBuffer],
        streams: &[Stream],
    ) -> Result<(), RcclError> {
        let n = self.raw.len();
        if send.len() != n
            || recv.len() != n
            || streams.len() != n
            || send.iter().chain(recv).any(|b| b.len() < count * 4)
        {
            return Err(RcclError::Invalid {
                call: "ncclAllReduce",
                reason: format!(
                    "need {n} send and receive buffers of {} bytes and {n} streams",
                    count * 4
                ),
            });
        }
        let start = self.rccl.table.ncclGroupStart.clone()?;
        let end = self.rccl.table.ncclGroupEnd.clone()?;
        let reduce = self.rccl.table.ncclAllReduce.clone()?;
        // SAFETY: buffers and streams are live and sized (checked above).
        unsafe {
            self.rccl.check("ncclGroupStart", start())?;
            for i in 0..n {
                let rc = reduce(
                    send[i].ptr(),
                    recv[i].ptr(),
                    count,
                    FLOAT32,
                    SUM,
                    self.raw[i],
                    streams[i].raw(),
                );
                if rc != 0 {
                    let _ = end();
                    return self.rccl.check("ncclAllReduce", rc);
                }
            }
            let rc = end();
            if rc != IN_PROGRESS {
                self.rccl.check("ncclGroupEnd", rc)?;
            }
        }
        Ok(())
    }

    /// The first asynchronous error any communicator reports.
    pub fn async_error(&self) -> Result<(), RcclError> {
        let f = self.rccl.table.ncclCommGetAsyncError.clone()?;
        for &c in &self.raw {
            let mut state = 0;
            // SAFETY: a live communicator.
            self.rccl
                .check("ncclCommGetAsyncError", unsafe { f(c, &mut state) })?;
            if state != 0 && state != IN_PROGRESS {
                return self.rccl.check("ncclCommGetAsyncError (async)", state);
            }
        }
        Ok(())
    }

    /// Aborts every communicator (for a collective that does not finish).
    pub fn abort(&mut self) {
        if let Ok(f) = &self.rccl.table.ncclCommAbort {
            for &c in &self.raw {
                // SAFETY: aborted once; drop then skips destroy.
                unsafe { f(c) };
            }
        }
        self.aborted = true;
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        if self.aborted {
            return;
        }
        if let Ok(f) = &self.rccl.table.ncclCommDestroy {
            for &c in &self.raw {
                // SAFETY: destroyed once, here.
                unsafe { f(c) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_decode_both_encodings() {
        assert_eq!(super::format_version(21805), "2.18.5");
        assert_eq!(super::format_version(2804), "2.8.4");
    }
}
