//! CPU references for the math-library checks, computed once per size per
//! process (with rayon) and shared by every data type: the inputs are small
//! integers, so one fp64 reference is exact for fp64, fp32, fp16 and bf16.

use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The element types the math checks use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// IEEE double.
    F64,
    /// IEEE single.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F64 => 8,
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }

    /// The name used in metrics and thresholds (`fp32`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F64 => "fp64",
            Dtype::F32 => "fp32",
            Dtype::F16 => "fp16",
            Dtype::Bf16 => "bf16",
        }
    }

    /// Little-endian bytes of `values` in this type.
    pub fn encode(self, values: &[f64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * self.size());
        for &v in values {
            match self {
                Dtype::F64 => out.extend_from_slice(&v.to_le_bytes()),
                Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
                Dtype::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
                Dtype::Bf16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            }
        }
        out
    }

    /// Values from little-endian bytes of this type.
    pub fn decode(self, bytes: &[u8]) -> Vec<f64> {
        bytes
            .chunks_exact(self.size())
            .map(|c| match self {
                Dtype::F64 => f64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
                Dtype::F32 => f64::from(f32::from_le_bytes(c.try_into().unwrap_or([0; 4]))),
                Dtype::F16 => half::f16::from_le_bytes([c[0], c[1]]).to_f64(),
                Dtype::Bf16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            })
            .collect()
    }
}

/// Deterministic small integers in -2..=2 (a linear congruential sequence).
pub fn small_ints(seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((x >> 33) % 5) as f64 - 2.0
        })
        .collect()
}

type Cache = Mutex<HashMap<String, Arc<Vec<f64>>>>;

fn cached(key: String, compute: impl FnOnce() -> Vec<f64>) -> Arc<Vec<f64>> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(v) = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
    {
        return Arc::clone(v);
    }
    let v = Arc::new(compute());
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key, Arc::clone(&v));
    v
}

/// The operands of an `m x k` by `k x n` GEMM, column-major.
pub fn gemm_inputs(m: usize, n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    (small_ints(1, m * k), small_ints(2, k * n))
}

/// `C = A * B` for [`gemm_inputs`], column-major `m x n`.
pub fn gemm(m: usize, n: usize, k: usize) -> Arc<Vec<f64>> {
    cached(format!("gemm {m}x{n}x{k}"), || {
        let (a, b) = gemm_inputs(m, n, k);
        let mut c = vec![0.0; m * n];
        c.par_chunks_mut(m).enumerate().for_each(|(j, col)| {
            for (p, bv) in b[j * k..(j + 1) * k].iter().enumerate() {
                if *bv != 0.0 {
                    let a_col = &a[p * m..(p + 1) * m];
                    for (ci, av) in col.iter_mut().zip(a_col) {
                        *ci += av * bv;
                    }
                }
            }
        });
        c
    })
}

/// Shape of a 2-D convolution (NCHW input, KCRS filters, square padding and stride).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvShape {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height and width.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub k: usize,
    /// Filter height and width.
    pub r: usize,
    /// Padding.
    pub pad: usize,
    /// Stride.
    pub stride: usize,
}

impl ConvShape {
    /// Output height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        (
            (self.h + 2 * self.pad - self.r) / self.stride + 1,
            (self.w + 2 * self.pad - self.r) / self.stride + 1,
        )
    }

    /// Input and filter values.
    pub fn inputs(&self) -> (Vec<f64>, Vec<f64>) {
        (
            small_ints(3, self.n * self.c * self.h * self.w),
            small_ints(4, self.k * self.c * self.r * self.r),
        )
    }
}

/// Direct convolution (cross-correlation, as MIOpen's miopenConvolution mode).
pub fn conv2d(s: ConvShape) -> Arc<Vec<f64>> {
    cached(format!("conv {s:?}"), || {
        let (x, w) = s.inputs();
        let (oh, ow) = s.out_hw();
        let mut y = vec![0.0; s.n * s.k * oh * ow];
        y.par_chunks_mut(oh * ow)
            .enumerate()
            .for_each(|(nk, plane)| {
                let (n, k) = (nk / s.k, nk % s.k);
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = 0.0;
                        for c in 0..s.c {
                            for ry in 0..s.r {
                                for rx in 0..s.r {
                                    let iy = (oy * s.stride + ry) as isize - s.pad as isize;
                                    let ix = (ox * s.stride + rx) as isize - s.pad as isize;
                                    if iy < 0 || ix < 0 || iy >= s.h as isize || ix >= s.w as isize
                                    {
                                        continue;
                                    }
                                    acc += x
                                        [((n * s.c + c) * s.h + iy as usize) * s.w + ix as usize]
                                        * w[((k * s.c + c) * s.r + ry) * s.r + rx];
                                }
                            }
                        }
                        plane[oy * ow + ox] = acc;
                    }
                }
            });
        y
    })
}

/// The largest `|got - want| / max|want|`, and its index.
pub fn max_relative_error(got: &[f64], want: &[f64]) -> (f64, usize) {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1.0);
    got.iter()
        .zip(want)
        .enumerate()
        .map(|(i, (g, w))| ((g - w).abs() / scale, i))
        .fold((0.0, 0), |best, cur| {
            if cur.0 > best.0 || cur.0.is_nan() {
                cur
            } else {
                best
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_matches_a_naive_product_and_is_cached() {
        let (m, n, k) = (5, 3, 4);
        let (a, b) = gemm_inputs(m, n, k);
        let c = gemm(m, n, k);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|p| a[p * m + i] * b[j * k + p]).sum();
                assert_eq!(c[j * m + i], want);
            }
        }
        assert!(Arc::ptr_eq(&c, &gemm(m, n, k)));
    }

    #[test]
    fn conv_of_a_one_filter_copies_the_input() {
        let s = ConvShape {
            n: 1,
            c: 1,
            h: 4,
            w: 4,
            k: 1,
            r: 1,
            pad: 0,
            stride: 1,
        };
        let (x, w) = s.inputs();
        let y = conv2d(s);
        for i in 0..16 {
            assert_eq!(y[i], x[i] * w[0]);
        }
        assert_eq!(
            ConvShape {
                h: 16,
                w: 16,
                r: 3,
                pad: 1,
                ..s
            }
            .out_hw(),
            (16, 16)
        );
    }

    #[test]
    fn dtypes_round_trip_small_integers() {
        let v = small_ints(9, 64);
        for d in [Dtype::F64, Dtype::F32, Dtype::F16, Dtype::Bf16] {
            assert_eq!(d.decode(&d.encode(&v)), v, "{d:?}");
        }
    }

    #[test]
    fn relative_error_finds_the_worst_element_and_nan() {
        assert_eq!(max_relative_error(&[1.0, 2.5, 3.0], &[1.0, 2.0, 4.0]).1, 2);
        assert_eq!(max_relative_error(&[f64::NAN, 2.0], &[1.0, 2.0]).1, 0);
    }
}
