//! Memory placement for the CPU engine on machines with several memory
//! nodes (sockets, or chiplets in NPS modes).
//!
//! Linux puts a page on the node of the CPU that first writes it. The
//! engine's workers each run a contiguous run of threadblocks
//! (`cpu::partition`), which keeps a rank's threadblocks and its FIFO
//! neighbours together, so most of a rank's buffer traffic comes from one
//! worker. With [`Nodes`], worker w of W runs on the CPUs of node
//! ⌊w·K / W⌋ of K, and each rank's buffers are first written (allocated
//! pages faulted in) by a thread on the node of the worker that runs most
//! of that rank's steps at the run's largest size. On one node (or where
//! `/sys` cannot be read) nothing is pinned and the buffers are filled
//! where they are allocated, as before.

use std::path::Path;

/// The CPUs of each memory node, in node order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nodes {
    pub cpus: Vec<Vec<usize>>,
}

/// How `rscc run` places workers and buffers on the CPU backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// By this machine's memory nodes where it has several; nothing where
    /// it has one.
    #[default]
    Auto,
    /// Never pin workers nor place buffers.
    Off,
    /// Treat the CPUs this process may run on as `k` nodes of consecutive
    /// CPUs (testing aid: runs the placement path on a one-node machine).
    #[doc(hidden)]
    Split(usize),
}

impl Placement {
    /// The nodes this placement uses; None where nothing is placed.
    pub fn nodes(self) -> Option<Nodes> {
        match self {
            Placement::Off => None,
            Placement::Auto => Nodes::detect(),
            Placement::Split(k) => {
                let cpus = allowed_cpus()?;
                let k = k.clamp(1, cpus.len().max(1));
                let per = cpus.len().div_ceil(k);
                Some(Nodes {
                    cpus: cpus.chunks(per).map(|c| c.to_vec()).collect(),
                })
            }
        }
    }
}

impl Nodes {
    /// This machine's memory nodes with their CPUs
    /// (`/sys/devices/system/node/node*/cpulist`), or None where it has
    /// fewer than two with CPUs or they cannot be read.
    pub fn detect() -> Option<Nodes> {
        Self::read(Path::new("/sys/devices/system/node"))
    }

    fn read(dir: &Path) -> Option<Nodes> {
        let mut nodes: Vec<(usize, Vec<usize>)> = Vec::new();
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            let name = e.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|s| s.strip_prefix("node"))
                .and_then(|s| s.parse::<usize>().ok())
            else {
                continue;
            };
            let text = std::fs::read_to_string(e.path().join("cpulist")).ok()?;
            let cpus = parse_cpulist(&text)?;
            if !cpus.is_empty() {
                nodes.push((id, cpus));
            }
        }
        nodes.sort();
        (nodes.len() >= 2).then(|| Nodes {
            cpus: nodes.into_iter().map(|n| n.1).collect(),
        })
    }

    /// The node worker `w` of `workers` runs on: contiguous runs of
    /// workers per node, so neighbouring threadblocks share a node too.
    pub fn node_of_worker(&self, w: usize, workers: usize) -> usize {
        w * self.cpus.len() / workers.max(1)
    }

    /// Restrict the calling thread to `node`'s CPUs. False where the OS
    /// refuses (the run goes on unpinned).
    pub fn pin(&self, node: usize) -> bool {
        self.cpus.get(node).is_some_and(|c| pin_to(c))
    }
}

/// A kernel CPU list ("0-3,8,10-11") as CPU numbers; None if malformed.
pub fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

#[cfg(target_os = "linux")]
fn pin_to(cpus: &[usize]) -> bool {
    // SAFETY: cpu_set_t is plain data that CPU_ZERO/CPU_SET initialise;
    // sched_setaffinity(0, …) applies to the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        let mut any = false;
        for &c in cpus.iter().filter(|&&c| c < max) {
            libc::CPU_SET(c, &mut set);
            any = true;
        }
        any && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to(_cpus: &[usize]) -> bool {
    false
}

/// The CPUs this process may run on, in order.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: as in `pin_to`; sched_getaffinity fills the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        let cpus: Vec<usize> = (0..max).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
        (!cpus.is_empty()).then_some(cpus)
    }
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Option<Vec<usize>> {
    None
}

/// Each rank's node: that of the worker which runs the most of the rank's
/// step weight (`weights` per threadblock, `worker` per threadblock,
/// `rank` per threadblock) among `workers` workers.
pub(crate) fn rank_nodes(
    nodes: &Nodes,
    nranks: usize,
    rank: &[usize],
    worker: &[usize],
    weights: &[u64],
    workers: usize,
) -> Vec<usize> {
    let k = nodes.cpus.len();
    let mut load = vec![vec![0u64; k]; nranks];
    for ((&r, &w), &x) in rank.iter().zip(worker).zip(weights) {
        if r < nranks {
            load[r][nodes.node_of_worker(w, workers).min(k - 1)] += x;
        }
    }
    load.iter()
        .map(|l| {
            // The heaviest node; ties to the lowest.
            (0..k).fold(0, |best, i| if l[i] > l[best] { i } else { best })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_as_the_kernel_writes_them() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist("\n"), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a-b"), None);
    }

    #[test]
    fn nodes_are_read_from_sysfs_and_one_node_places_nothing() {
        let dir = std::env::temp_dir().join(format!("rscc-numa-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (n, list) in [(0, "0-1\n"), (1, "2-3\n"), (2, "\n")] {
            let d = dir.join(format!("node{n}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), list).unwrap();
        }
        std::fs::create_dir_all(dir.join("power")).unwrap();
        let got = Nodes::read(&dir).unwrap();
        assert_eq!(got.cpus, vec![vec![0, 1], vec![2, 3]]);
        std::fs::remove_dir_all(dir.join("node1")).unwrap();
        assert_eq!(Nodes::read(&dir), None, "a CPU-less node does not count");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn workers_spread_over_nodes_and_ranks_follow_their_heaviest_worker() {
        let nodes = Nodes {
            cpus: vec![vec![0, 1], vec![2, 3]],
        };
        let on: Vec<usize> = (0..4).map(|w| nodes.node_of_worker(w, 4)).collect();
        assert_eq!(on, vec![0, 0, 1, 1]);
        assert_eq!(nodes.node_of_worker(0, 1), 0);
        // Rank 0's threadblocks on workers 0 and 3 (weights 5 and 1),
        // rank 1's on worker 2 only.
        let got = rank_nodes(&nodes, 2, &[0, 0, 1], &[0, 3, 2], &[5, 1, 4], 4);
        assert_eq!(got, vec![0, 1]);
    }

    #[test]
    fn a_split_machine_has_the_asked_nodes_and_pins() {
        let Some(n) = Placement::Split(2).nodes() else {
            return; // no affinity API here
        };
        assert!(!n.cpus.is_empty() && n.cpus.len() <= 2);
        let all: Vec<usize> = n.cpus.concat();
        assert_eq!(Some(all), allowed_cpus());
        std::thread::spawn(move || assert!(n.pin(n.cpus.len() - 1)))
            .join()
            .unwrap();
        assert_eq!(Placement::Off.nodes(), None);
    }
}
