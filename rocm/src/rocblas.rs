//! rocBLAS (`librocblas`): handles and GEMMs.

#![allow(unsafe_code, reason = "the safe face of the rocBLAS C API")]
#![allow(non_snake_case, reason = "C names")]

use crate::hip::DeviceBuffer;
use crate::library::{Binding, Library, buffer_text};
use crate::loader::LibrarySpec;
use crate::table::{release_on_drop, status_binding, symbol_table};
use std::ffi::{c_char, c_void};
use std::sync::Arc;

/// rocBLAS's sonames: ROCm 7 (.5), 6 (.4), 5.6/5.7 (.3), 5.0-5.5 (.0).
pub const LIBRARY: LibrarySpec = LibrarySpec {
    name: "rocBLAS librocblas",
    sonames: &[
        "librocblas.so",
        "librocblas.so.5",
        "librocblas.so.4",
        "librocblas.so.3",
        "librocblas.so.0",
    ],
};

// Values from rocBLAS `library/include/internal/rocblas-types.h` (ROCm/rocBLAS
// for ROCm 4.x to 6.x, ROCm/rocm-libraries projects/rocblas for 7.x), the
// same in every release read. No Debian package carries rocBLAS, so the
// header probe cannot check them; this is their source.
type Status = i32;
type RawHandle = *mut c_void;
/// `rocblas_operation_none`.
const OPERATION_NONE: i32 = 111;
/// `rocblas_operation_transpose`.
const OPERATION_TRANSPOSE: i32 = 112;
/// `rocblas_gemm_algo_standard`.
const ALGO_STANDARD: i32 = 0;
/// `rocblas_atomics_not_allowed` of `rocblas_atomics_mode` (rocblas-types.h;
/// `rocblas_atomics_allowed` is 1). `rocblas_set_atomics_mode` exists from
/// rocBLAS 2.28 (ROCm 3.8); the default is allowed through rocBLAS 4.x
/// (ROCm 6.x) and not allowed from 5.0 (ROCm 7.0).
const ATOMICS_NOT_ALLOWED: i32 = 0;

/// The C signature of a GEMM of one element type (`rocblas_sgemm`,
/// `rocblas_dgemm`).
type TypedGemm<T> = unsafe extern "C" fn(
    RawHandle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const T,
    *const T,
    i32,
    *const T,
    i32,
    *const T,
    *mut T,
    i32,
) -> Status;

/// `rocblas_datatype` of the types rocgate uses (rocblas-types.h, unchanged
/// from ROCm 4 to 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataType {
    /// `rocblas_datatype_f16_r`.
    F16 = 150,
    /// `rocblas_datatype_f32_r`.
    F32 = 151,
    /// `rocblas_datatype_f64_r`.
    F64 = 152,
    /// `rocblas_datatype_bf16_r`.
    Bf16 = 168,
}

symbol_table! {
    /// The rocBLAS symbols rocgate uses.
    pub struct Table {
        rocblas_create_handle: fn(*mut RawHandle) -> Status;
        rocblas_destroy_handle: fn(RawHandle) -> Status;
        rocblas_get_version_string_size: fn(*mut usize) -> Status;
        rocblas_get_version_string: fn(*mut c_char, usize) -> Status;
        rocblas_status_to_string: fn(Status) -> *const c_char;
        rocblas_sgemm: fn(RawHandle, i32, i32, i32, i32, i32, *const f32, *const f32, i32, *const f32, i32, *const f32, *mut f32, i32) -> Status;
        rocblas_dgemm: fn(RawHandle, i32, i32, i32, i32, i32, *const f64, *const f64, i32, *const f64, i32, *const f64, *mut f64, i32) -> Status;
        rocblas_gemm_ex: fn(RawHandle, i32, i32, i32, i32, i32, *const c_void, *const c_void, i32, i32, *const c_void, i32, i32, *const c_void, *const c_void, i32, i32, *mut c_void, i32, i32, i32, i32, i32, u32) -> Status;
        rocblas_set_atomics_mode: fn(RawHandle, i32) -> Status;
    }
}

/// Names of `rocblas_status` values, for when the library cannot say.
pub fn status_name(s: i32) -> &'static str {
    Table::status_name(s)
}

status_binding!(Table {
    library: LIBRARY,
    describe: rocblas_status_to_string,
    names: STATUS_NAMES,
    unknown: "unknown rocblas_status",
});

/// `rocblas_status` names from rocblas-types.h; 14 excluded_from_build and
/// 15 arch_mismatch exist from ROCm 5.7/6.0, nothing beyond 15 through 7.x.
const STATUS_NAMES: &[(Status, &str)] = &[
    (0, "rocblas_status_success"),
    (1, "rocblas_status_invalid_handle"),
    (2, "rocblas_status_not_implemented"),
    (3, "rocblas_status_invalid_pointer"),
    (4, "rocblas_status_invalid_size"),
    (5, "rocblas_status_memory_error"),
    (6, "rocblas_status_internal_error"),
    (7, "rocblas_status_perf_degraded"),
    (8, "rocblas_status_size_query_mismatch"),
    (9, "rocblas_status_size_increased"),
    (10, "rocblas_status_size_unchanged"),
    (11, "rocblas_status_invalid_value"),
    (12, "rocblas_status_continue"),
    (13, "rocblas_status_check_numerics_fail"),
    (14, "rocblas_status_excluded_from_build"),
    (15, "rocblas_status_arch_mismatch"),
];

/// A failed rocBLAS call; its status is a `rocblas_status`.
pub type BlasError = crate::library::StatusError;

/// An opened rocBLAS.
pub type Rocblas = Library<Table>;

impl Rocblas {
    /// `rocblas_get_version_string`.
    pub fn version(&self) -> Result<String, BlasError> {
        let size = self.table.rocblas_get_version_string_size.clone()?;
        let get = self.table.rocblas_get_version_string.clone()?;
        let mut len = 0usize;
        // SAFETY: writes a size, then at most `len` bytes.
        self.check("rocblas_get_version_string_size", unsafe { size(&mut len) })?;
        let mut buf = vec![0u8; len.clamp(1, 4096)];
        self.check("rocblas_get_version_string", unsafe {
            get(buf.as_mut_ptr().cast(), buf.len())
        })?;
        Ok(buffer_text(&buf).trim().to_string())
    }
}

/// A rocBLAS handle (`rocblas_handle`) on the device current when it was
/// made, destroyed on drop.
pub struct BlasHandle {
    blas: Arc<Rocblas>,
    raw: RawHandle,
}

impl BlasHandle {
    /// `rocblas_create_handle`.
    pub fn new(blas: &Arc<Rocblas>) -> Result<BlasHandle, BlasError> {
        let raw = blas.create("rocblas_create_handle", &blas.table.rocblas_create_handle)?;
        Ok(BlasHandle {
            blas: Arc::clone(blas),
            raw,
        })
    }

    /// `rocblas_set_atomics_mode(handle, rocblas_atomics_not_allowed)`:
    /// kernels that would sum partial results with atomics (Tensile's
    /// split-K) are not chosen, so a GEMM's reduction order, and so its
    /// bits, are the same every call.
    pub fn forbid_atomics(&self) -> Result<(), BlasError> {
        let f = self.blas.table.rocblas_set_atomics_mode.clone()?;
        // SAFETY: a live handle and a rocblas_atomics_mode value.
        self.blas.check("rocblas_set_atomics_mode", unsafe {
            f(self.raw, ATOMICS_NOT_ALLOWED)
        })
    }

    /// `C = op(A) * B` for column-major `m x k` (`k x m` stored, when
    /// `transpose_a`) by `k x n` matrices of `ty` in device buffers (fp32
    /// via `rocblas_sgemm`, fp64 via `rocblas_dgemm`, fp16 and bf16 via
    /// `rocblas_gemm_ex` with fp32 compute).
    pub fn gemm(
        &self,
        ty: DataType,
        (m, n, k): (i32, i32, i32),
        transpose_a: bool,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &DeviceBuffer,
    ) -> Result<(), BlasError> {
        let (op_a, lda) = if transpose_a {
            (OPERATION_TRANSPOSE, k)
        } else {
            (OPERATION_NONE, m)
        };
        let elem = match ty {
            DataType::F16 | DataType::Bf16 => 2,
            DataType::F32 => 4,
            DataType::F64 => 8,
        };
        let need = |rows: i32, cols: i32| {
            usize::try_from(rows).unwrap_or(0) * usize::try_from(cols).unwrap_or(0) * elem
        };
        if m <= 0
            || n <= 0
            || k <= 0
            || a.len() < need(m, k)
            || b.len() < need(k, n)
            || c.len() < need(m, n)
        {
            return Err(BlasError::Invalid {
                call: "gemm",
                reason: format!("buffers too small for {m}x{n}x{k}"),
            });
        }
        let (pa, pb, pc) = (a.ptr(), b.ptr(), c.ptr());
        // SAFETY: device buffers large enough for the shapes (checked above);
        // alpha and beta are host scalars of the compute type.
        unsafe {
            match ty {
                DataType::F32 => {
                    let f = self.blas.table.rocblas_sgemm.clone()?;
                    self.typed_gemm("rocblas_sgemm", f, op_a, (m, n, k), lda, (pa, pb, pc))
                }
                DataType::F64 => {
                    let f = self.blas.table.rocblas_dgemm.clone()?;
                    self.typed_gemm("rocblas_dgemm", f, op_a, (m, n, k), lda, (pa, pb, pc))
                }
                DataType::F16 | DataType::Bf16 => {
                    let f = self.blas.table.rocblas_gemm_ex.clone()?;
                    let (alpha, beta) = (1.0f32, 0.0f32);
                    let t = ty as i32;
                    let compute = DataType::F32 as i32;
                    self.blas.check(
                        "rocblas_gemm_ex",
                        f(
                            self.raw,
                            op_a,
                            OPERATION_NONE,
                            m,
                            n,
                            k,
                            (&raw const alpha).cast(),
                            pa,
                            t,
                            lda,
                            pb,
                            t,
                            k,
                            (&raw const beta).cast(),
                            pc,
                            t,
                            m,
                            pc,
                            t,
                            m,
                            compute,
                            ALGO_STANDARD,
                            0,
                            0,
                        ),
                    )
                }
            }
        }
    }
}

impl BlasHandle {
    /// `C = op(A) * B` through a GEMM of one element type (`rocblas_sgemm`,
    /// `rocblas_dgemm`): the two differ only in the type of the matrices and
    /// of alpha (1) and beta (0).
    ///
    /// # Safety
    /// `pa`, `pb` and `pc` are device buffers large enough for the shapes.
    #[allow(clippy::too_many_arguments, reason = "the GEMM's own arguments")]
    unsafe fn typed_gemm<T: From<u8>>(
        &self,
        call: &'static str,
        f: TypedGemm<T>,
        op_a: i32,
        (m, n, k): (i32, i32, i32),
        lda: i32,
        (pa, pb, pc): (*mut c_void, *mut c_void, *mut c_void),
    ) -> Result<(), BlasError> {
        let (alpha, beta) = (T::from(1), T::from(0));
        // SAFETY: per the contract; alpha and beta are host scalars of `T`.
        let status = unsafe {
            f(
                self.raw,
                op_a,
                OPERATION_NONE,
                m,
                n,
                k,
                &alpha,
                pa.cast(),
                lda,
                pb.cast(),
                k,
                &beta,
                pc.cast(),
                m,
            )
        };
        self.blas.check(call, status)
    }
}

release_on_drop!(BlasHandle, blas.rocblas_destroy_handle(raw));
