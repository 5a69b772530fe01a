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
    /// `dst[k] = a[k] ⊕ b[k]` over slices of one length. The plain loop
    /// vectorises for the native types; f16 and bf16 go through f32 in
    /// blocks ([`half_kernel3`]).
    #[inline(always)]
    fn kernel3<O: Op<Self>>(dst: &mut [Self], a: &[Self], b: &[Self]) {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            *d = O::apply(x, y);
        }
    }
    /// `dst[k] = dst[k] ⊕ a[k]` over slices of one length.
    #[inline(always)]
    fn kernel2<O: Op<Self>>(dst: &mut [Self], a: &[Self]) {
        for (d, &x) in dst.iter_mut().zip(a) {
            *d = O::apply(*d, x);
        }
    }
    /// A reduction chain in one pass ([`reduce_chain`]): `acc = xs[0] ⊕
    /// base[k]` (or `dst[k] ⊕ xs[0]` without `base`), then `acc = acc ⊕ x`
    /// for every later `x` in order, stored to `dst[k]`: the results of
    /// [`Elem::kernel3`] then [`Elem::kernel2`] per operand, bit for bit,
    /// with `dst` written once. The native types fuse up to
    /// [`CHAIN_FUSED`] operands per pass; f16 and bf16 run the block
    /// kernels one operand after another.
    #[inline(always)]
    fn kernel_chain<O: Op<Self>>(dst: &mut [Self], base: Option<&[Self]>, xs: &[&[Self]]) {
        chain_fused::<Self, O>(dst, base, xs)
    }
    /// Value of an integer-valued pattern `v` (small, exact in every type).
    fn from_pattern(v: i64) -> Self;
    /// A value no pattern produces, to spot unwritten output.
    fn poison() -> Self;
}

macro_rules! float_elem {
    ($t:ty, $d:expr, $eps:expr, $from:expr, $to:expr) => {
        float_elem!($t, $d, $eps, $from, $to, {});
    };
    ($t:ty, $d:expr, $eps:expr, $from:expr, $to:expr, { $($kernels:item)* }) => {
        impl Elem for $t {
            const DTYPE: DType = $d;
            const FLOAT: bool = true;
            const EPS: f64 = $eps;
            $($kernels)*
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
/// f16 and bf16: the element type plus block kernels through f32.
macro_rules! half_elem {
    ($t:ty, $d:expr, $eps:expr) => {
        float_elem!($t, $d, $eps, <$t>::from_f64, |x: $t| x.to_f64(), {
            #[inline(always)]
            fn kernel3<O: Op<Self>>(dst: &mut [Self], a: &[Self], b: &[Self]) {
                half_kernel3(O::OP, dst, a, b)
            }
            #[inline(always)]
            fn kernel2<O: Op<Self>>(dst: &mut [Self], a: &[Self]) {
                half_kernel2(O::OP, dst, a)
            }
            #[inline(always)]
            fn kernel_chain<O: Op<Self>>(dst: &mut [Self], base: Option<&[Self]>, xs: &[&[Self]]) {
                chain_in_turn::<Self, O>(dst, base, xs)
            }
        });
    };
}

half_elem!(f16, DType::F16, 4.8828125e-4);
half_elem!(bf16, DType::Bf16, 3.90625e-3);

/// Elements per f32 block of the half-precision kernels (two 2 KiB
/// stack buffers: L1-resident).
const HALF_BLOCK: usize = 512;

/// Operands a native chain kernel reads in one pass: a core streams from
/// that many buffers at once (more reads in flight than one stream's
/// prefetch keeps), and the accumulator is written once. On a 2-core VM
/// the C floor (bench/direct_rs.c) runs an 8- and 16-rank reduce-scatter
/// 1.18–1.26× faster with four operands per pass than with one; eight,
/// tried in the executor, showed no gain (docs/executor.md).
pub const CHAIN_FUSED: usize = 4;

/// [`Elem::kernel_chain`] for the native types: [`CHAIN_FUSED`] operands
/// per pass, each pass one loop the compiler vectorises.
#[inline(always)]
fn chain_fused<T: Elem, O: Op<T>>(dst: &mut [T], base: Option<&[T]>, xs: &[&[T]]) {
    let n = dst.len();
    let mut base = base.map(|b| &b[..n]);
    for g in xs.chunks(CHAIN_FUSED) {
        let a = &g[0][..n];
        // `acc` at element k before this pass's operands.
        macro_rules! pass {
            ($($x:ident),*) => {{
                $(let $x = &$x[..n];)*
                match base.take() {
                    Some(b) => {
                        for k in 0..n {
                            let v = O::apply(a[k], b[k]);
                            $(let v = O::apply(v, $x[k]);)*
                            dst[k] = v;
                        }
                    }
                    None => {
                        for k in 0..n {
                            let v = O::apply(dst[k], a[k]);
                            $(let v = O::apply(v, $x[k]);)*
                            dst[k] = v;
                        }
                    }
                }
            }};
        }
        match *g {
            [_] => pass!(),
            [_, x1] => pass!(x1),
            [_, x1, x2] => pass!(x1, x2),
            [_, x1, x2, x3] => pass!(x1, x2, x3),
            _ => unreachable!("chunks of at most CHAIN_FUSED = 4"),
        }
    }
}

/// [`Elem::kernel_chain`] one operand at a time with the type's own
/// kernels (f16 and bf16, whose block kernels round every step).
#[inline(always)]
fn chain_in_turn<T: Elem, O: Op<T>>(dst: &mut [T], base: Option<&[T]>, xs: &[&[T]]) {
    for (j, x) in xs.iter().enumerate() {
        match base.filter(|_| j == 0) {
            Some(b) => T::kernel3::<O>(dst, x, b),
            None => T::kernel2::<O>(dst, x),
        }
    }
}

/// `x[k] = x[k] ⊕ y[k]` in f32, as `Elem::{add, mul, max, min}` define ⊕
/// (`x` wins a comparison only when strictly larger/smaller).
#[inline(always)]
fn f32_combine(op: RedOp, x: &mut [f32], y: &[f32]) {
    match op {
        RedOp::Sum => x.iter_mut().zip(y).for_each(|(a, &b)| *a += b),
        RedOp::Prod => x.iter_mut().zip(y).for_each(|(a, &b)| *a *= b),
        RedOp::Max => x
            .iter_mut()
            .zip(y)
            .for_each(|(a, &b)| *a = if *a > b { *a } else { b }),
        RedOp::Min => x
            .iter_mut()
            .zip(y)
            .for_each(|(a, &b)| *a = if *a < b { *a } else { b }),
    }
}

/// Block conversions between a 16-bit float and f32, exactly as `half`'s
/// scalar ones.
pub trait Widen: Sized {
    fn widen(src: &[Self], dst: &mut [f32]);
    fn narrow(src: &[f32], dst: &mut [Self]);
}

/// f16: `half`'s slice conversions (F16C instructions where the CPU has
/// them, chosen at run time).
impl Widen for f16 {
    fn widen(src: &[Self], dst: &mut [f32]) {
        use half::slice::HalfFloatSliceExt;
        src.convert_to_f32_slice(dst)
    }
    fn narrow(src: &[f32], dst: &mut [Self]) {
        use half::slice::HalfFloatSliceExt;
        dst.convert_from_f32_slice(src)
    }
}

/// bf16: `half`'s rules (NaN keeps its payload with the quiet bit set;
/// round to nearest, ties to even) written without branches, so the loops
/// vectorise.
impl Widen for bf16 {
    #[inline(always)]
    fn widen(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            let i = s.to_bits() as u32;
            let nan = ((i & 0x7fff) > 0x7f80) as u32;
            *d = f32::from_bits((i | nan << 6) << 16);
        }
    }
    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [Self]) {
        for (d, s) in dst.iter_mut().zip(src) {
            let x = s.to_bits();
            let nan = (x & 0x7fff_ffff) > 0x7f80_0000;
            let hi = (x >> 16) as u16;
            let up = ((x & 0x8000) != 0 && (x & 0x1_7fff) != 0) as u16;
            *d = bf16::from_bits(if nan { hi | 0x40 } else { hi.wrapping_add(up) });
        }
    }
}

/// `dst = a ⊕ b` for f16/bf16 through f32 blocks ([`Widen`]).
/// Bit-identical to the element-wise operators: `half` computes `a ⊕ b`
/// as `from_f32(to_f32(a) ⊕ to_f32(b))`, and its order is f32's.
#[inline(always)]
pub fn half_kernel3<H: Widen>(op: RedOp, dst: &mut [H], a: &[H], b: &[H]) {
    let mut x = [0f32; HALF_BLOCK];
    let mut y = [0f32; HALF_BLOCK];
    for ((d, a), b) in dst
        .chunks_mut(HALF_BLOCK)
        .zip(a.chunks(HALF_BLOCK))
        .zip(b.chunks(HALF_BLOCK))
    {
        let m = d.len().min(a.len()).min(b.len());
        H::widen(&a[..m], &mut x[..m]);
        H::widen(&b[..m], &mut y[..m]);
        f32_combine(op, &mut x[..m], &y[..m]);
        H::narrow(&x[..m], &mut d[..m]);
    }
}

/// `dst = dst ⊕ a` for f16/bf16 (see [`half_kernel3`]).
#[inline(always)]
pub fn half_kernel2<H: Widen>(op: RedOp, dst: &mut [H], a: &[H]) {
    let mut x = [0f32; HALF_BLOCK];
    let mut y = [0f32; HALF_BLOCK];
    for (d, a) in dst.chunks_mut(HALF_BLOCK).zip(a.chunks(HALF_BLOCK)) {
        let m = d.len().min(a.len());
        H::widen(&d[..m], &mut x[..m]);
        H::widen(&a[..m], &mut y[..m]);
        f32_combine(op, &mut x[..m], &y[..m]);
        H::narrow(&x[..m], &mut d[..m]);
    }
}

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

/// Whether this CPU runs the AVX2 builds of the kernels (checked once;
/// the standard library caches the CPUID result).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// `dst[k] = a[k] ⊕ b[k]` (the slices never overlap). The loop is built
/// twice, for the x86-64 baseline (SSE2) and with AVX2, chosen at run
/// time.
#[inline(never)]
pub fn reduce3<T: Elem, O: Op<T>>(dst: &mut [T], a: &[T], b: &[T]) {
    let n = dst.len().min(a.len()).min(b.len());
    let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { reduce3_avx2::<T, O>(dst, a, b) };
    }
    T::kernel3::<O>(dst, a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn reduce3_avx2<T: Elem, O: Op<T>>(dst: &mut [T], a: &[T], b: &[T]) {
    T::kernel3::<O>(dst, a, b)
}

/// `dst[k] = dst[k] ⊕ a[k]` (the slices never overlap); built like
/// [`reduce3`].
#[inline(never)]
pub fn reduce2<T: Elem, O: Op<T>>(dst: &mut [T], a: &[T]) {
    let n = dst.len().min(a.len());
    let (dst, a) = (&mut dst[..n], &a[..n]);
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { reduce2_avx2::<T, O>(dst, a) };
    }
    T::kernel2::<O>(dst, a)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn reduce2_avx2<T: Elem, O: Op<T>>(dst: &mut [T], a: &[T]) {
    T::kernel2::<O>(dst, a)
}

/// A chain of reductions into `dst` in one pass where the type allows
/// ([`Elem::kernel_chain`]): `dst = ((x0 ⊕ base) ⊕ x1) ⊕ …`, or
/// `((dst ⊕ x0) ⊕ x1) ⊕ …` without `base` — what a `reduce3` then
/// `reduce2` per operand compute, bit for bit. `xs` is not empty, no
/// slice overlaps `dst`, and all are as long as `dst`. Built like
/// [`reduce3`].
#[inline(never)]
pub fn reduce_chain<T: Elem, O: Op<T>>(dst: &mut [T], base: Option<&[T]>, xs: &[&[T]]) {
    debug_assert!(!xs.is_empty(), "a chain has at least one operand");
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { reduce_chain_avx2::<T, O>(dst, base, xs) };
    }
    T::kernel_chain::<O>(dst, base, xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn reduce_chain_avx2<T: Elem, O: Op<T>>(dst: &mut [T], base: Option<&[T]>, xs: &[&[T]]) {
    T::kernel_chain::<O>(dst, base, xs)
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

#[cfg(test)]
mod kernel_tests {
    use super::*;

    /// The block kernels of f16/bf16 give exactly the element-wise
    /// operators' bits, on values of every magnitude, with ties, zeros of
    /// both signs and blocks of every length.
    fn same_bits<H: Elem>(vals: impl Fn(u64) -> H, bits: impl Fn(H) -> u16) {
        let n = 3 * HALF_BLOCK + 17;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let a: Vec<H> = (0..n).map(|_| vals(next())).collect();
        let b: Vec<H> = (0..n)
            .map(|i| if i % 7 == 0 { a[i] } else { vals(next()) })
            .collect();
        fn check<H: Elem, O: Op<H>>(a: &[H], b: &[H], bits: &impl Fn(H) -> u16) {
            let mut d = vec![H::default(); a.len()];
            reduce3::<H, O>(&mut d, a, b);
            let mut e = a.to_vec();
            reduce2::<H, O>(&mut e, b);
            for k in 0..a.len() {
                let want = bits(O::apply(a[k], b[k]));
                assert_eq!(bits(d[k]), want, "{:?} reduce3 at {k}", O::OP);
                assert_eq!(bits(e[k]), want, "{:?} reduce2 at {k}", O::OP);
            }
        }
        check::<H, Sum>(&a, &b, &bits);
        check::<H, Prod>(&a, &b, &bits);
        check::<H, Max>(&a, &b, &bits);
        check::<H, Min>(&a, &b, &bits);
    }

    #[test]
    fn half_block_kernels_match_the_elementwise_operators() {
        // Finite values only (no NaN: Max/Min of NaN are defined by the
        // comparison, equal either way, but NaN payloads may differ).
        let finite = |r: u64, exp_mask: u16| {
            let b = r as u16;
            if b & exp_mask == exp_mask {
                b & !0x4000
            } else {
                b
            }
        };
        same_bits::<f16>(|r| f16::from_bits(finite(r, 0x7c00)), |x| x.to_bits());
        same_bits::<bf16>(|r| bf16::from_bits(finite(r, 0x7f80)), |x| x.to_bits());
    }

    /// A chain in one pass is the chain one operand at a time, bit for
    /// bit: every dtype and redop, 1–9 operands (several passes of
    /// `CHAIN_FUSED`), with and without a base, odd lengths.
    #[test]
    fn a_chain_in_one_pass_is_the_chain_in_turn() {
        fn check<T: Elem, O: Op<T>>(vals: &impl Fn(u64) -> T, bits: &impl Fn(T) -> u64) {
            let n = 1000 + 13;
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let ops: Vec<Vec<T>> = (0..10)
                .map(|_| (0..n).map(|_| vals(next())).collect())
                .collect();
            for k in 1..=9 {
                for with_base in [false, true] {
                    let (base, xs) = ops.split_at(1);
                    let xs: Vec<&[T]> = xs[..k].iter().map(|v| v.as_slice()).collect();
                    let base = with_base.then_some(base[0].as_slice());
                    let mut want: Vec<T> = ops[9].clone();
                    for (j, x) in xs.iter().enumerate() {
                        match base.filter(|_| j == 0) {
                            Some(b) => reduce3::<T, O>(&mut want, x, b),
                            None => reduce2::<T, O>(&mut want, x),
                        }
                    }
                    let mut got: Vec<T> = ops[9].clone();
                    reduce_chain::<T, O>(&mut got, base, &xs);
                    for e in 0..n {
                        assert_eq!(
                            bits(got[e]),
                            bits(want[e]),
                            "{:?} {:?}: {k} operands, base {with_base}, element {e}",
                            T::DTYPE,
                            O::OP
                        );
                    }
                }
            }
        }
        fn all<T: Elem>(vals: impl Fn(u64) -> T, bits: impl Fn(T) -> u64) {
            check::<T, Sum>(&vals, &bits);
            check::<T, Prod>(&vals, &bits);
            check::<T, Max>(&vals, &bits);
            check::<T, Min>(&vals, &bits);
        }
        // Values of mixed magnitude and sign, so that the order of the
        // additions shows in the rounding.
        let float = |r: u64| {
            ((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2f64.powi((r % 40) as i32 - 20)
        };
        all::<f32>(|r| float(r) as f32, |x| x.to_bits() as u64);
        all::<f64>(float, |x| x.to_bits());
        all::<f16>(|r| f16::from_f64(float(r) * 1e-3), |x| x.to_bits() as u64);
        all::<bf16>(|r| bf16::from_f64(float(r)), |x| x.to_bits() as u64);
        all::<i32>(|r| r as i32, |x| x as u32 as u64);
        all::<i64>(|r| r as i64, |x| x as u64);
        all::<u8>(|r| r as u8, |x| x as u64);
    }

    /// The branch-free bf16 conversions are `half`'s, NaN included.
    #[test]
    fn bf16_block_conversions_match_half() {
        let all: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
        let mut w = vec![0f32; all.len()];
        bf16::widen(&all, &mut w);
        for (h, f) in all.iter().zip(&w) {
            assert_eq!(f.to_bits(), h.to_f32().to_bits(), "{:#x}", h.to_bits());
        }
        let fs: Vec<f32> = (0..200_000u32)
            .map(|k| f32::from_bits(k.wrapping_mul(0x9e37_79b1) ^ (k << 3)))
            .chain([
                0.0,
                -0.0,
                f32::INFINITY,
                f32::NAN,
                f32::MAX,
                1.0 + f32::EPSILON,
            ])
            .collect();
        let mut n = vec![bf16::ZERO; fs.len()];
        bf16::narrow(&fs, &mut n);
        for (f, h) in fs.iter().zip(&n) {
            assert_eq!(
                h.to_bits(),
                bf16::from_f32(*f).to_bits(),
                "{:#x}",
                f.to_bits()
            );
        }
    }
}
