//! Element types, reduction operators, the data kernels and the input
//! pattern used by `--check`.
//!
//! Everything here is monomorphised per (dtype, redop), so the hot loops are
//! plain slice loops the compiler vectorises (see docs/executor.md).

use half::{bf16, f16};
use std::fmt;

/// Data types the executor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    Bf16,
    I32,
    I64,
    U8,
}

impl DType {
    pub const ALL: [DType; 7] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::Bf16,
        DType::I32,
        DType::I64,
        DType::U8,
    ];
    /// nccl-tests' spelling.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F64 => "double",
            DType::F16 => "half",
            DType::Bf16 => "bfloat16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
        }
    }
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::F16 | DType::Bf16 => 2,
            DType::U8 => 1,
        }
    }
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "f32" | "float" | "float32" => DType::F32,
            "f64" | "double" | "float64" => DType::F64,
            "f16" | "half" | "float16" => DType::F16,
            "bf16" | "bfloat16" => DType::Bf16,
            "i32" | "int32" | "int" => DType::I32,
            "i64" | "int64" => DType::I64,
            "u8" | "uint8" => DType::U8,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reduction operators (the ones MSCCL schedules: Sum, Prod, Max, Min).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl RedOp {
    pub const ALL: [RedOp; 4] = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min];
    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
        }
    }
    pub fn parse(s: &str) -> Option<RedOp> {
        Some(match s.to_ascii_lowercase().as_str() {
            "sum" => RedOp::Sum,
            "prod" => RedOp::Prod,
            "max" => RedOp::Max,
            "min" => RedOp::Min,
            _ => return None,
        })
    }
}

impl fmt::Display for RedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An element type. Integer arithmetic wraps (as on the GPU).
pub trait Elem: Copy + Send + Sync + Default + PartialOrd + 'static {
    const DTYPE: DType;
    /// True for floating-point types (checked with a tolerance).
    const FLOAT: bool;
    /// Unit roundoff of the type (0 for integers).
    const EPS: f64;
    fn add(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    /// The larger (NaN-free inputs; `b` on ties or NaN).
    #[inline(always)]
    fn max(a: Self, b: Self) -> Self {
        if a > b {
            a
        } else {
            b
        }
    }
    /// The smaller (`b` on ties or NaN).
    #[inline(always)]
    fn min(a: Self, b: Self) -> Self {
        if a < b {
            a
        } else {
            b
        }
    }
    fn to_f64(self) -> f64;
    /// Value of an integer-valued pattern `v` (small, exact in every type).
    fn from_pattern(v: i64) -> Self;
    /// A value no pattern produces, to spot unwritten output.
    fn poison() -> Self;
}

macro_rules! float_elem {
    ($t:ty, $d:expr, $eps:expr, $from:expr, $to:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $d;
            const FLOAT: bool = true;
            const EPS: f64 = $eps;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            fn from_pattern(v: i64) -> Self {
                ($from)(v as f64)
            }
            fn poison() -> Self {
                ($from)(-12345.5)
            }
        }
    };
}

float_elem!(
    f32,
    DType::F32,
    f32::EPSILON as f64 / 2.0,
    |x: f64| x as f32,
    |x: f32| x as f64
);
float_elem!(f64, DType::F64, f64::EPSILON / 2.0, |x: f64| x, |x: f64| x);
float_elem!(f16, DType::F16, 4.8828125e-4, f16::from_f64, |x: f16| x
    .to_f64());
float_elem!(bf16, DType::Bf16, 3.90625e-3, bf16::from_f64, |x: bf16| x
    .to_f64());

macro_rules! int_elem {
    ($t:ty, $d:expr) => {
        impl Elem for $t {
            const DTYPE: DType = $d;
            const FLOAT: bool = false;
            const EPS: f64 = 0.0;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_pattern(v: i64) -> Self {
                v as $t
            }
            fn poison() -> Self {
                // Patterns are small non-negative values; the poison is not.
                (-77i64) as $t
            }
        }
    };
}

int_elem!(i32, DType::I32);
int_elem!(i64, DType::I64);
int_elem!(u8, DType::U8);

/// A reduction operator as a type, so kernels monomorphise per op.
pub trait Op<T: Elem>: Copy + Send + Sync + 'static {
    const OP: RedOp;
    fn apply(a: T, b: T) -> T;
}

#[derive(Clone, Copy)]
pub struct Sum;
#[derive(Clone, Copy)]
pub struct Prod;
#[derive(Clone, Copy)]
pub struct Max;
#[derive(Clone, Copy)]
pub struct Min;

impl<T: Elem> Op<T> for Sum {
    const OP: RedOp = RedOp::Sum;
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        T::add(a, b)
    }
}
impl<T: Elem> Op<T> for Prod {
    const OP: RedOp = RedOp::Prod;
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        T::mul(a, b)
    }
}
impl<T: Elem> Op<T> for Max {
    const OP: RedOp = RedOp::Max;
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        T::max(a, b)
    }
}
impl<T: Elem> Op<T> for Min {
    const OP: RedOp = RedOp::Min;
    #[inline(always)]
    fn apply(a: T, b: T) -> T {
        T::min(a, b)
    }
}

/// `dst[k] = a[k] ⊕ b[k]` (the slices never overlap).
#[inline(never)]
pub fn reduce3<T: Elem, O: Op<T>>(dst: &mut [T], a: &[T], b: &[T]) {
    let n = dst.len().min(a.len()).min(b.len());
    let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
    for k in 0..n {
        dst[k] = O::apply(a[k], b[k]);
    }
}

/// `dst[k] = dst[k] ⊕ a[k]` (the slices never overlap).
#[inline(never)]
pub fn reduce2<T: Elem, O: Op<T>>(dst: &mut [T], a: &[T]) {
    let n = dst.len().min(a.len());
    let (dst, a) = (&mut dst[..n], &a[..n]);
    for k in 0..n {
        dst[k] = O::apply(dst[k], a[k]);
    }
}

/// `dst[k] = dst[k] ⊕ dst[k]` (a step whose source is its destination).
#[inline(never)]
pub fn reduce_self<T: Elem, O: Op<T>>(dst: &mut [T]) {
    for d in dst.iter_mut() {
        *d = O::apply(*d, *d);
    }
}

/// The input pattern: element `idx` of rank `rank`'s input buffer.
///
/// Values are small integers so that every dtype represents them exactly:
/// - sum: 0..=3 (sums of 16 ranks stay exact even in bf16/u8);
/// - prod: 1 or 2 with few 2s, and -1 never, so products stay exact
///   (integers wrap, which is exact too);
/// - max/min: 0..=100, ties are bit-identical.
pub fn pattern(op: RedOp, rank: usize, idx: usize) -> i64 {
    // A cheap integer hash of (rank, idx).
    let mut h = (idx as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((rank as u64 + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    match op {
        RedOp::Sum => (h % 4) as i64,
        RedOp::Prod => {
            if h.is_multiple_of(8) {
                2
            } else {
                1
            }
        }
        RedOp::Max | RedOp::Min => (h % 101) as i64,
    }
}

/// Reference reduction of one output element, computed independently of
/// the schedule: fold the pattern over ranks 0..n in rank order, in the
/// element type's own arithmetic. Returns the value and Σ|x| (for the
/// float tolerance).
pub fn reference<T: Elem, O: Op<T>>(nranks: usize, idx: usize) -> (T, f64) {
    let mut acc = T::from_pattern(pattern(O::OP, 0, idx));
    let mut mag = acc.to_f64().abs();
    for r in 1..nranks {
        let x = T::from_pattern(pattern(O::OP, r, idx));
        mag += x.to_f64().abs();
        acc = O::apply(acc, x);
    }
    (acc, mag)
}

/// Is `got` acceptable for the reference `want`? Integers, max and min are
/// bit-exact. Floats: |got − want| ≤ 2·(n−1)·eps·Σ|x| for sum, and
/// ≤ 2·(n−1)·eps·|want| for prod (error bounds of any summation/product
/// order, doubled for the reference's own rounding).
pub fn accept<T: Elem>(op: RedOp, nranks: usize, got: T, want: T, mag: f64) -> bool {
    if got == want {
        return true;
    }
    if !T::FLOAT || matches!(op, RedOp::Max | RedOp::Min) {
        return false;
    }
    let (g, w) = (got.to_f64(), want.to_f64());
    if !g.is_finite() || !w.is_finite() {
        return false;
    }
    let k = 2.0 * (nranks.max(2) - 1) as f64 * T::EPS;
    let tol = match op {
        RedOp::Sum => k * mag,
        _ => k * w.abs(),
    };
    (g - w).abs() <= tol
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_compute_elementwise() {
        let a = [1.0f32, 2.0, 3.0];
        let b = [4.0f32, -5.0, 6.0];
        let mut d = [0.0f32; 3];
        reduce3::<f32, Sum>(&mut d, &a, &b);
        assert_eq!(d, [5.0, -3.0, 9.0]);
        reduce2::<f32, Max>(&mut d, &a);
        assert_eq!(d, [5.0, 2.0, 9.0]);
        reduce_self::<f32, Prod>(&mut d);
        assert_eq!(d, [25.0, 4.0, 81.0]);
        let mut u = [250u8, 3];
        reduce2::<u8, Sum>(&mut u, &[10, 4]);
        assert_eq!(u, [4, 7]);
    }

    #[test]
    fn reference_matches_patterns() {
        for op in RedOp::ALL {
            for idx in 0..50 {
                let xs: Vec<i64> = (0..5).map(|r| pattern(op, r, idx)).collect();
                let want = match op {
                    RedOp::Sum => xs.iter().sum::<i64>(),
                    RedOp::Prod => xs.iter().product::<i64>(),
                    RedOp::Max => *xs.iter().max().unwrap_or(&0),
                    RedOp::Min => *xs.iter().min().unwrap_or(&0),
                };
                let got = match op {
                    RedOp::Sum => reference::<i64, Sum>(5, idx).0,
                    RedOp::Prod => reference::<i64, Prod>(5, idx).0,
                    RedOp::Max => reference::<i64, Max>(5, idx).0,
                    RedOp::Min => reference::<i64, Min>(5, idx).0,
                };
                assert_eq!(got, want, "{op} idx {idx}");
            }
        }
    }

    #[test]
    fn tolerance_rejects_real_errors() {
        assert!(accept::<f32>(RedOp::Sum, 4, 10.000001, 10.0, 10.0));
        assert!(!accept::<f32>(RedOp::Sum, 4, 10.5, 10.0, 10.0));
        assert!(!accept::<f32>(RedOp::Max, 4, 10.000001, 10.0, 10.0));
        assert!(!accept::<i32>(RedOp::Sum, 4, 11, 10, 10.0));
        assert!(!accept::<f32>(RedOp::Sum, 4, f32::NAN, 10.0, 10.0));
        assert!(!accept::<f16>(
            RedOp::Sum,
            4,
            f16::poison(),
            f16::from_f64(3.0),
            3.0
        ));
    }

    #[test]
    fn dtype_and_redop_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()), Some(d));
        }
        for o in RedOp::ALL {
            assert_eq!(RedOp::parse(o.name()), Some(o));
        }
        assert_eq!(DType::parse("f32"), Some(DType::F32));
        assert_eq!(DType::parse("complex"), None);
    }
}
