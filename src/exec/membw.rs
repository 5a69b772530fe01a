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

/// Two arrays of the measurement's size, allocated and first touched once,
/// so that a run can sample the bandwidth right before and right after
/// each timed phase: on a shared machine it moves with the neighbours'
/// load, and a figure taken seconds away from the phase it is compared
/// with is another machine's.
pub struct Bandwidth {
    a: Vec<f32>,
    b: Vec<f32>,
}

impl Bandwidth {
    /// Arrays of `bytes` bytes each (at least 4 KiB).
    pub fn new(bytes: usize) -> Self {
        let n = (bytes / 4).max(1024);
        let mut bw = Bandwidth {
            a: vec![0.0f32; n],
            b: vec![0.0f32; n],
        };
        // First touch on the threads that will run the passes.
        let per = n.div_ceil(super::cores());
        std::thread::scope(|s| {
            for (ca, cb) in bw.a.chunks_mut(per).zip(bw.b.chunks_mut(per)) {
                s.spawn(move || {
                    ca.fill(1.0);
                    cb.fill(0.5);
                });
            }
        });
        bw
    }

    /// Best of `reps` passes, in GB/s.
    pub fn sample(&mut self, reps: usize) -> f64 {
        let n = self.a.len();
        let per = n.div_ceil(super::cores());
        let mut best = f64::INFINITY;
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for (ca, cb) in self.a.chunks_mut(per).zip(self.b.chunks(per)) {
                    s.spawn(move || add_assign(ca, cb));
                }
            });
            best = best.min(t0.elapsed().as_secs_f64());
        }
        std::hint::black_box(&self.a);
        3.0 * (n * 4) as f64 / best / 1e9
    }
}

/// Best of `reps` passes over two arrays of `bytes` bytes each, in GB/s.
pub fn measure(bytes: usize, reps: usize) -> f64 {
    Bandwidth::new(bytes).sample(reps)
}

#[cfg(test)]
mod tests {
    #[test]
    fn measures_something_positive() {
        let bw = super::measure(1 << 20, 2);
        assert!(bw.is_finite() && bw > 0.0);
        let mut b = super::Bandwidth::new(1 << 20);
        let (x, y) = (b.sample(1), b.sample(2));
        assert!(x.is_finite() && x > 0.0 && y.is_finite() && y > 0.0);
    }
}
