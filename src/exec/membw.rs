//! Memory bandwidth of this machine, measured STREAM-style: `a[k] += b[k]`
//! over f32 arrays much larger than the caches, split over all cores.
//! Bytes moved per pass = 3 × array bytes (read a, read b, write a). The
//! pass is the executor's own `re` kernel ([`reduce2`] for f32 sum), so B
//! and the executor use the same instructions.

use super::elem::{reduce2, Sum};
use std::time::Instant;

/// `a += b` with the executor's kernel.
pub fn add_assign(a: &mut [f32], b: &[f32]) {
    reduce2::<f32, Sum>(a, b)
}

/// Best of `reps` passes over two arrays of `bytes` bytes each, in GB/s.
pub fn measure(bytes: usize, reps: usize) -> f64 {
    let n = (bytes / 4).max(1024);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let mut a = vec![1.0f32; n];
    let b = vec![0.5f32; n];
    let per = n.div_ceil(threads);
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for (ca, cb) in a.chunks_mut(per).zip(b.chunks(per)) {
                s.spawn(move || add_assign(ca, cb));
            }
        });
        best = best.min(t0.elapsed().as_secs_f64());
    }
    std::hint::black_box(&a);
    3.0 * (n * 4) as f64 / best / 1e9
}

#[cfg(test)]
mod tests {
    #[test]
    fn measures_something_positive() {
        let bw = super::measure(1 << 20, 2);
        assert!(bw.is_finite() && bw > 0.0);
    }
}
