//! A parallel map over a slice on the machine's cores (std threads only).
//!
//! Used where independent work is large and uniform enough to split:
//! simulating a schedule at several sizes, scoring `auto`'s candidates,
//! lowering ranges of ranks, and the verifier's aliasing modes. Results come
//! back in item order, so output never depends on scheduling.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Worker threads to use: the available cores, at most `items`.
pub fn threads(items: usize) -> usize {
    cores().min(items).max(1)
}

/// The available cores, asked once: the answer reads cgroup files, and
/// the searches ask for every schedule they score (it was a tenth of the
/// gap search's time).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|t| t.get())
            .unwrap_or(1)
    })
}

/// 0..n cut into contiguous ranges, one per thread [`map`] would use, each
/// at least `min_len` long (one range below that): work split by ranks.
pub fn ranges(n: usize, min_len: usize) -> Vec<std::ops::Range<usize>> {
    let parts = threads(n / min_len.max(1));
    let per = n.div_ceil(parts).max(1);
    (0..parts)
        .map(|k| k * per..((k + 1) * per).min(n))
        .collect()
}

/// `items.iter().map(f).collect()`, computed on up to [`threads`] threads
/// that take items one at a time (dynamic balance for uneven items). A
/// panic in `f` propagates to the caller.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let k = threads(items.len());
    if k <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..k)
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= items.len() {
                            return mine;
                        }
                        mine.push((i, f(&items[i])));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Call `f(offset, part)` on contiguous parts of `data` on up to
/// [`threads`] threads, `offset` being the part's start in `data`. Every
/// part's length but the last is a multiple of `unit` (an element of several
/// bytes, say), so `f` never sees a unit split between two parts. Used to
/// fill and check the executors' large host buffers.
pub fn for_parts<T: Send>(data: &mut [T], unit: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let unit = unit.max(1);
    let units = data.len().div_ceil(unit);
    // Parts of at least 64 Ki units: smaller ones cost more to start.
    let k = threads(units.div_ceil(1 << 16));
    let per = units.div_ceil(k) * unit;
    if k <= 1 || per == 0 {
        f(0, data);
        return;
    }
    std::thread::scope(|sc| {
        let f = &f;
        for (i, part) in data.chunks_mut(per).enumerate() {
            sc.spawn(move || f(i * per, part));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_values() {
        let items: Vec<u64> = (0..1000).collect();
        let out = map(&items, |&x| x * x);
        assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert!(map(&[] as &[u64], |&x| x).is_empty());
    }

    #[test]
    fn parts_cover_everything_once_on_unit_boundaries() {
        for (len, unit) in [(0usize, 4usize), (7, 4), (1 << 20, 4), ((1 << 20) + 6, 2)] {
            let mut v = vec![0u32; len];
            for_parts(&mut v, unit, |off, part| {
                assert_eq!(off % unit, 0);
                for (i, x) in part.iter_mut().enumerate() {
                    *x += (off + i) as u32 + 1;
                }
            });
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32 + 1));
        }
    }

    #[test]
    #[should_panic(expected = "boom")]
    fn propagates_panics() {
        let items: Vec<u64> = (0..8).collect();
        map(&items, |&x| {
            if x == 5 {
                panic!("boom");
            }
            x
        });
    }
}
