//! The burn-in's GEMM: an fp16 GEMM through rocBLAS (`rocblas_gemm_ex`,
//! fp32 compute) of [`M`] x [`N`] by [`K`], the matrix cores' work and the
//! heaviest power draw a GPU sees; RVS's MI300X GEMM stress is of a like
//! size (4864 x 4096 x 8192).
//!
//! Its inputs are multiples of 1/4 in [-4, 4]: every product is a multiple
//! of 1/16 of at most 16, and every sum of [`K`] of them a multiple of 1/16
//! under 2^16, which fp32 holds exactly (2^16 / 2^-4 = 2^20 < 2^24). So
//! every partial sum is exact and the result is the same in any summation
//! order: on any kernel rocBLAS picks, any GPU, with split-K atomics or
//! without; and the CPU computes sampled elements bit for bit. Atomics are
//! still forbidden where rocBLAS offers it (`rocblas_set_atomics_mode`), so
//! the kernel is the same every call.

use super::{Product, checksum, mix};
use rocgate_rocm::hip::{DeviceBuffer, Hip, HipError};
use rocgate_rocm::rocblas::{BlasError, BlasHandle, DataType, Rocblas};
use std::sync::Arc;

/// Rows of op(A) and C: 64 MiB of A, 32 MiB of B and 64 MiB of C; about
/// 0.28 TFLOP per call, 0.3-0.5 ms on an MI300X (an estimate until
/// measured).
pub(super) const M: usize = 8192;
/// Columns of B and C.
pub(super) const N: usize = 4096;
/// The length of every sum.
pub(super) const K: usize = 4096;
/// The seeds of A and B.
const SEED_A: u32 = 0x6e33_a001;
const SEED_B: u32 = 0x6e33_b002;

/// The GEMM's buffers on the GPU and what the CPU expects of it.
pub(super) struct Gemm {
    handle: BlasHandle,
    /// Kept for the GEMM's life: rocBLAS reads them every call.
    a: DeviceBuffer,
    b: DeviceBuffer,
    c: DeviceBuffer,
    /// Sampled elements of C (row, column) and their fp16 bits.
    expected: Vec<((usize, usize), u16)>,
    /// Whether atomics could be forbidden, or why not.
    pub atomics: Result<(), String>,
}

/// Why the GEMM could not be set up: the burn-in runs without it and says so.
pub(super) enum Unavailable {
    /// rocBLAS did not load, or its handle could not be made.
    Library(String),
    /// The GPU has no room for the matrices.
    Memory(HipError),
    /// An upload failed: the GPU itself.
    Hip(HipError),
}

impl Gemm {
    /// A handle on the current device and the matrices uploaded.
    pub(super) fn new(hip: &Arc<Hip>, blas: &Arc<Rocblas>) -> Result<Gemm, Unavailable> {
        let handle = BlasHandle::new(blas)
            .map_err(|e| Unavailable::Library(format!("rocblas_create_handle: {e}")))?;
        let atomics = handle.forbid_atomics().map_err(|e| e.to_string());
        let alloc =
            |elements: usize| DeviceBuffer::new(hip, elements * 2).map_err(Unavailable::Memory);
        let (a, b, c) = (alloc(M * K)?, alloc(K * N)?, alloc(M * N)?);
        a.upload(&matrix(SEED_A, M * K)).map_err(Unavailable::Hip)?;
        b.upload(&matrix(SEED_B, K * N)).map_err(Unavailable::Hip)?;
        c.fill(0).map_err(Unavailable::Hip)?;
        Ok(Gemm {
            handle,
            a,
            b,
            c,
            expected: expected(),
            atomics,
        })
    }

    /// One GEMM, C = A^T * B ("TN": A is stored `K x M`, so every sum
    /// reads a column of each, as rocBLAS's fastest kernels do), queued on
    /// the device.
    pub(super) fn launch(&self) -> Result<(), BlasError> {
        self.handle.gemm(
            DataType::F16,
            (M as i32, N as i32, K as i32),
            true,
            &self.a,
            &self.b,
            &self.c,
        )
    }

    /// C's checksum and the sampled elements that differ from the CPU's,
    /// read into `host` (of [`C_BYTES`]) once the device is idle.
    pub(super) fn result(&self, host: &mut [u8]) -> Result<Product, HipError> {
        self.c.download(host)?;
        let wrong = self
            .expected
            .iter()
            .filter_map(|&((i, j), want)| {
                let at = (i + j * M) * 2;
                let got = host
                    .get(at..at + 2)
                    .map_or(!want, |w| u16::from_le_bytes([w[0], w[1]]));
                (got != want).then(|| {
                    format!("C[{i},{j}] is fp16 0x{got:04x} where the CPU computes 0x{want:04x}")
                })
            })
            .collect();
        Ok(Product {
            checksum: checksum(host),
            wrong,
        })
    }
}

/// Element `i` of the matrix of `seed`, in quarters: -16..=16.
fn quarters(seed: u32, i: usize) -> i32 {
    let x = mix(seed ^ (i as u32)) ^ mix((i >> 32) as u32 ^ seed.rotate_left(7));
    (x % 33) as i32 - 16
}

/// The bytes of C.
pub(super) const C_BYTES: usize = M * N * 2;

/// A column-major fp16 matrix of `elements` [`quarters`] / 4, as bytes.
fn matrix(seed: u32, elements: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(elements * 2);
    for i in 0..elements {
        let v = half::f16::from_f32(quarters(seed, i) as f32 / 4.0);
        bytes.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    bytes
}

/// The elements checked on the CPU: the corners, the middle of each edge
/// and the centre.
fn sampled() -> Vec<(usize, usize)> {
    let rows = [0, M / 2, M - 1];
    let cols = [0, N / 2, N - 1];
    rows.iter()
        .flat_map(|&i| cols.iter().map(move |&j| (i, j)))
        .collect()
}

/// The CPU's fp16 bits of the sampled elements: exact sums in sixteenths,
/// rounded to fp16 once, as the GPU's fp32 result is.
fn expected() -> Vec<((usize, usize), u16)> {
    sampled()
        .into_iter()
        .map(|(i, j)| {
            let sixteenths: i64 = (0..K)
                .map(|p| {
                    i64::from(quarters(SEED_A, p + i * K)) * i64::from(quarters(SEED_B, p + j * K))
                })
                .sum();
            let value = sixteenths as f32 / 16.0;
            ((i, j), half::f16::from_f32(value).to_bits())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_quarters_within_four_and_not_all_alike() {
        let q: Vec<i32> = (0..10_000).map(|i| quarters(SEED_A, i)).collect();
        assert!(q.iter().all(|v| (-16..=16).contains(v)));
        let distinct: std::collections::BTreeSet<_> = q.iter().collect();
        assert_eq!(distinct.len(), 33, "every quarter from -4 to 4 appears");
        assert_ne!(quarters(SEED_A, 5), quarters(SEED_B, 5));
    }

    #[test]
    fn every_sum_is_exact_in_fp32() {
        // The largest sum in sixteenths, over the fp32 mantissa.
        let largest = K as i64 * 16 * 16;
        assert!(largest < 1 << 24);
    }

    #[test]
    fn the_sampled_elements_are_nine_distinct_points_with_their_fp16_sums() {
        let e = expected();
        assert_eq!(e.len(), 9);
        let points: std::collections::BTreeSet<_> = e.iter().map(|(p, _)| *p).collect();
        assert_eq!(points.len(), 9);
        // An fp16 of a sum of 8192 products of quarters is finite.
        assert!(
            e.iter()
                .all(|(_, bits)| half::f16::from_bits(*bits).is_finite())
        );
    }
}
