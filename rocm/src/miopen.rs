//! MIOpen (`libMIOpen.so.1`): handles and forward convolutions.

#![allow(
    unsafe_code,
    non_snake_case,
    reason = "the safe face of the MIOpen C API"
)]

use crate::hip::DeviceBuffer;
use crate::library::{Binding, Library};
use crate::loader::{LibrarySpec, MissingSymbol};
use crate::table::{status_binding, symbol_table};
use std::ffi::{c_char, c_void};
use std::sync::Arc;

/// MIOpen's soname (unchanged from ROCm 5 to 7).
pub const LIBRARY: LibrarySpec = LibrarySpec {
    name: "MIOpen libMIOpen",
    sonames: &["libMIOpen.so.1", "libMIOpen.so"],
};

type Status = i32;
type Raw = *mut c_void;

// Values from MIOpen's `include/miopen/miopen.h` (ROCm/MIOpen for ROCm 5.x and
// 6.x, ROCm/rocm-libraries projects/miopen for 7.x), the same in every release
// read. No Debian package carries MIOpen; this is their source.

/// `miopenDataType_t` of the types rocgate uses (miopen.h: miopenHalf 0 and
/// miopenFloat 1 in ROCm 5 to 7; only later values changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataType {
    /// `miopenHalf`.
    Half = 0,
    /// `miopenFloat`.
    Float = 1,
}

/// `miopenConvAlgoPerf_t` (miopen.h, ROCm 5 to 7): a union of the three
/// algorithm enums (4 bytes), `float time`, `size_t memory`: 16 bytes on
/// x86_64.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AlgoPerf {
    /// `fwd_algo`.
    pub algo: i32,
    /// Milliseconds measured by the find.
    pub time: f32,
    /// Workspace bytes.
    pub memory: usize,
}

const _: () = assert!(std::mem::size_of::<AlgoPerf>() == 16);

symbol_table! {
    /// The MIOpen symbols rocgate uses.
    pub struct Table {
        miopenCreate: fn(*mut Raw) -> Status;
        miopenDestroy: fn(Raw) -> Status;
        miopenGetVersion: fn(*mut usize, *mut usize, *mut usize) -> Status;
        miopenGetErrorString: fn(Status) -> *const c_char;
        miopenCreateTensorDescriptor: fn(*mut Raw) -> Status;
        miopenSet4dTensorDescriptor: fn(Raw, i32, i32, i32, i32, i32) -> Status;
        miopenDestroyTensorDescriptor: fn(Raw) -> Status;
        miopenCreateConvolutionDescriptor: fn(*mut Raw) -> Status;
        miopenInitConvolutionDescriptor: fn(Raw, i32, i32, i32, i32, i32, i32, i32) -> Status;
        miopenDestroyConvolutionDescriptor: fn(Raw) -> Status;
        miopenGetConvolutionForwardOutputDim: fn(Raw, Raw, Raw, *mut i32, *mut i32, *mut i32, *mut i32) -> Status;
        miopenConvolutionForwardGetWorkSpaceSize: fn(Raw, Raw, Raw, Raw, Raw, *mut usize) -> Status;
        miopenFindConvolutionForwardAlgorithm: fn(Raw, Raw, *const c_void, Raw, *const c_void, Raw, Raw, *mut c_void, i32, *mut i32, *mut AlgoPerf, *mut c_void, usize, bool) -> Status;
        miopenConvolutionForward: fn(Raw, *const c_void, Raw, *const c_void, Raw, *const c_void, Raw, i32, *const c_void, Raw, *mut c_void, *mut c_void, usize) -> Status;
    }
}

/// Names of `miopenStatus_t` values.
pub fn status_name(s: i32) -> &'static str {
    Table::status_name(s)
}

status_binding!(Table {
    library: LIBRARY,
    describe: miopenGetErrorString,
    names: STATUS_NAMES,
    unknown: "unknown miopenStatus",
});

/// `miopenStatus_t` names from miopen.h.
const STATUS_NAMES: &[(Status, &str)] = &[
    (0, "miopenStatusSuccess"),
    (1, "miopenStatusNotInitialized"),
    (2, "miopenStatusInvalidValue"),
    (3, "miopenStatusBadParm"),
    (4, "miopenStatusAllocFailed"),
    (5, "miopenStatusInternalError"),
    (6, "miopenStatusNotImplemented"),
    (7, "miopenStatusUnknownError"),
    (8, "miopenStatusUnsupportedOp"),
    (9, "miopenStatusGpuOperationsSkipped"),
    (10, "miopenStatusVersionMismatch"),
];

/// A failed MIOpen call; its status is a `miopenStatus_t`.
pub type MiopenError = crate::library::StatusError;

/// An [`Owned`] MIOpen object made by `$create` and released by `$destroy`,
/// both looked up in `$lib`'s table; errors name `$create`.
macro_rules! owned {
    ($lib:expr, $create:ident, $destroy:ident) => {
        Owned::create(
            &$lib,
            stringify!($create),
            &$lib.table.$create,
            &$lib.table.$destroy,
        )
    };
}

/// An opened MIOpen.
pub type Miopen = Library<Table>;

impl Miopen {
    /// `miopenGetVersion` as `major.minor.patch`.
    pub fn version(&self) -> Result<String, MiopenError> {
        let f = self.table.miopenGetVersion.clone()?;
        let (mut a, mut b, mut c) = (0usize, 0usize, 0usize);
        // SAFETY: writes three size_t.
        self.check("miopenGetVersion", unsafe { f(&mut a, &mut b, &mut c) })?;
        Ok(format!("{a}.{b}.{c}"))
    }
}

/// Owns a descriptor or handle and its destroy function.
struct Owned {
    raw: Raw,
    destroy: Option<unsafe extern "C" fn(Raw) -> Status>,
}

impl Owned {
    /// Makes an object with `create`, the table's function named `call`,
    /// owned from then on and destroyed with `destroy` (when the library
    /// has it).
    fn create(
        lib: &Miopen,
        call: &'static str,
        create: &Result<unsafe extern "C" fn(*mut Raw) -> Status, MissingSymbol>,
        destroy: &Result<unsafe extern "C" fn(Raw) -> Status, MissingSymbol>,
    ) -> Result<Owned, MiopenError> {
        Ok(Owned {
            raw: lib.create(call, create)?,
            destroy: destroy.clone().ok(),
        })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let (Some(f), false) = (self.destroy, self.raw.is_null()) {
            // SAFETY: destroyed once, here.
            unsafe { f(self.raw) };
        }
    }
}

/// A MIOpen handle on the device current when it was made.
pub struct MiopenHandle {
    lib: Arc<Miopen>,
    raw: Owned,
}

/// One convolution's result.
#[derive(Clone, Debug)]
pub struct ConvRun {
    /// The algorithm the find picked.
    pub algo: i32,
    /// Its time according to the find, in ms.
    pub find_ms: f32,
}

impl MiopenHandle {
    /// `miopenCreate`.
    pub fn new(lib: &Arc<Miopen>) -> Result<MiopenHandle, MiopenError> {
        Ok(MiopenHandle {
            raw: owned!(lib, miopenCreate, miopenDestroy)?,
            lib: Arc::clone(lib),
        })
    }

    fn tensor(&self, ty: DataType, dims: [usize; 4]) -> Result<Owned, MiopenError> {
        let t = &self.lib.table;
        let set = t.miopenSet4dTensorDescriptor.clone()?;
        let owned = owned!(
            self.lib,
            miopenCreateTensorDescriptor,
            miopenDestroyTensorDescriptor
        )?;
        let d = dims.map(|x| i32::try_from(x).unwrap_or(i32::MAX));
        // SAFETY: sets the descriptor just made.
        self.lib.check("miopenSet4dTensorDescriptor", unsafe {
            set(owned.raw, ty as i32, d[0], d[1], d[2], d[3])
        })?;
        Ok(owned)
    }

    /// A forward convolution of `x` (NCHW `x_dims`) with `w` (KCRS
    /// `w_dims`) into `y`, with square `pad` and `stride`: MIOpen's find
    /// picks the algorithm, then the forward runs it.
    #[allow(
        clippy::too_many_arguments,
        reason = "a convolution has that many parts"
    )]
    pub fn conv_forward(
        &self,
        ty: DataType,
        x_dims: [usize; 4],
        w_dims: [usize; 4],
        pad: usize,
        stride: usize,
        x: &DeviceBuffer,
        w: &DeviceBuffer,
        y: &DeviceBuffer,
        workspace: impl Fn(usize) -> Result<DeviceBuffer, String>,
    ) -> Result<ConvRun, MiopenError> {
        let t = &self.lib.table;
        let elem = if ty == DataType::Half { 2 } else { 4 };
        let xd = self.tensor(ty, x_dims)?;
        let wd = self.tensor(ty, w_dims)?;
        let init = t.miopenInitConvolutionDescriptor.clone()?;
        let conv = owned!(
            self.lib,
            miopenCreateConvolutionDescriptor,
            miopenDestroyConvolutionDescriptor
        )?;
        let (p, s) = (
            i32::try_from(pad).unwrap_or(0),
            i32::try_from(stride).unwrap_or(1),
        );
        // SAFETY: mode 0 = miopenConvolution; dilation 1.
        self.lib.check("miopenInitConvolutionDescriptor", unsafe {
            init(conv.raw, 0, p, p, s, s, 1, 1)
        })?;
        let out = t.miopenGetConvolutionForwardOutputDim.clone()?;
        let mut o = [0i32; 4];
        // SAFETY: writes four ints.
        self.lib
            .check("miopenGetConvolutionForwardOutputDim", unsafe {
                out(
                    conv.raw, xd.raw, wd.raw, &mut o[0], &mut o[1], &mut o[2], &mut o[3],
                )
            })?;
        let y_dims = o.map(|v| usize::try_from(v).unwrap_or(0));
        let need = |d: [usize; 4]| d.iter().product::<usize>() * elem;
        if x.len() < need(x_dims) || w.len() < need(w_dims) || y.len() < need(y_dims) {
            return Err(MiopenError::Invalid {
                call: "miopenConvolutionForward",
                reason: format!("buffers too small for x {x_dims:?}, w {w_dims:?}, y {y_dims:?}"),
            });
        }
        let yd = self.tensor(ty, y_dims)?;
        let ws_size = t.miopenConvolutionForwardGetWorkSpaceSize.clone()?;
        let mut ws_len = 0usize;
        // SAFETY: note MIOpen's order: w before x.
        self.lib
            .check("miopenConvolutionForwardGetWorkSpaceSize", unsafe {
                ws_size(self.raw.raw, wd.raw, xd.raw, conv.raw, yd.raw, &mut ws_len)
            })?;
        let ws = if ws_len > 0 {
            Some(workspace(ws_len).map_err(|reason| MiopenError::Invalid {
                call: "workspace allocation",
                reason,
            })?)
        } else {
            None
        };
        let (ws_ptr, ws_len) = ws
            .as_ref()
            .map_or((std::ptr::null_mut(), 0), |b| (b.ptr(), b.len()));
        let find = t.miopenFindConvolutionForwardAlgorithm.clone()?;
        let mut perf = [AlgoPerf::default(); 4];
        let mut found = 0i32;
        // SAFETY: device buffers sized above; perf holds 4 entries.
        self.lib
            .check("miopenFindConvolutionForwardAlgorithm", unsafe {
                find(
                    self.raw.raw,
                    xd.raw,
                    x.ptr(),
                    wd.raw,
                    w.ptr(),
                    conv.raw,
                    yd.raw,
                    y.ptr(),
                    4,
                    &mut found,
                    perf.as_mut_ptr(),
                    ws_ptr,
                    ws_len,
                    false,
                )
            })?;
        let Some(best) = perf
            .get(..usize::try_from(found).unwrap_or(0).min(4))
            .and_then(|p| p.first())
            .copied()
        else {
            return Err(MiopenError::Invalid {
                call: "miopenFindConvolutionForwardAlgorithm",
                reason: "found no algorithm".into(),
            });
        };
        let fwd = t.miopenConvolutionForward.clone()?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: as for the find; alpha and beta are host floats.
        self.lib.check("miopenConvolutionForward", unsafe {
            fwd(
                self.raw.raw,
                (&raw const alpha).cast(),
                xd.raw,
                x.ptr(),
                wd.raw,
                w.ptr(),
                conv.raw,
                best.algo,
                (&raw const beta).cast(),
                yd.raw,
                y.ptr(),
                ws_ptr,
                ws_len,
            )
        })?;
        Ok(ConvRun {
            algo: best.algo,
            find_ms: best.time,
        })
    }
}
