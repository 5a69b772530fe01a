//! `random`: a fabric drawn from a seed, for testing synthesizers on
//! machines nobody fitted them to. The seed picks one of six shapes and
//! every count and rate in it:
//!
//! | shape | what |
//! |---|---|
//! | mesh | 4–12 GPUs, a random spanning chain plus random pairs, 1–4 links of 25/50/100 GB/s per pair |
//! | star | 4–16 GPUs on one switch, each port 50/100/200/450 GB/s |
//! | pcie | two CPU sockets (40 GB/s apart), 1–2 PCIe switches each, 1–4 GPUs per switch at 16 or 32 GB/s |
//! | hosts | 2–4 hosts of 2–8 GPUs (switch or mesh inside), joined through a network switch by per-GPU NICs, NICs shared by two GPUs, or GPUs linked straight to it |
//! | torus | a 2–4 × 2–4 torus of 50 GB/s links, each dropped with probability 0.2 unless that disconnects it |
//! | mixture | a mesh host and a switch host joined by 25 GB/s NICs |
//!
//! α: 0.7 µs on GPU links and switch ports, 1 µs on PCIe and CPU links,
//! 5 µs on network links (the generic kinds' and DGX kinds' figures,
//! docs/topology-format.md). Same seed, same fabric.

use super::{unused, Builder, GenParams};
use crate::ir::{NodeKind, Topology};
use petgraph::graph::NodeIndex;

const ALPHA_GPU: f64 = 0.7;
const ALPHA_PCIE: f64 = 1.0;
const ALPHA_NET: f64 = 5.0;

/// The shapes, in the order the seed picks them.
pub const SHAPES: &[&str] = &["mesh", "star", "pcie", "hosts", "torus", "mixture"];

/// splitmix64: small, seedable, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.range(0, xs.len() - 1)]
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// A fabric drawn from `--seed` (default 0). Other parameters do not apply.
pub fn random(p: &GenParams) -> Result<Topology, String> {
    unused("random", p, false, false, false)?;
    if p.gpus.is_some() || p.bw_gbps.is_some() || p.alpha_us.is_some() {
        return Err("random draws its GPU count and rates from --seed; --gpus, --bw and --alpha do not apply".into());
    }
    let seed = p.seed.unwrap_or(0);
    let mut r = Rng(seed);
    let shape = SHAPES[r.range(0, SHAPES.len() - 1)];
    let mut b = Builder::new();
    let mut gpus = Vec::new();
    let what = match shape {
        "mesh" => mesh(&mut b, &mut r, &mut gpus, None),
        "star" => star(&mut b, &mut r, &mut gpus, None),
        "pcie" => pcie(&mut b, &mut r, &mut gpus),
        "hosts" => hosts(&mut b, &mut r, &mut gpus),
        "torus" => torus(&mut b, &mut r, &mut gpus),
        _ => {
            let a = mesh(&mut b, &mut r, &mut gpus, Some("h0"));
            let first = gpus.len();
            let c = star(&mut b, &mut r, &mut gpus, Some("h1"));
            let net = b.node("net".into(), NodeKind::Switch, None, None);
            for (i, &g) in gpus.clone().iter().enumerate() {
                let host = if i < first { "h0" } else { "h1" };
                let nic = b.node(format!("{host}-nic{i}"), NodeKind::Nic, None, None);
                b.g[nic].host = Some(host.into());
                b.duplex(g, nic, 32.0, ALPHA_PCIE, 1, "pcie");
                b.duplex(nic, net, 25.0, ALPHA_NET, 1, "ib");
            }
            format!("{a}; {c}; every GPU has a 25 GB/s NIC to one network switch")
        }
    };
    Ok(b.finish(
        format!("random{seed}"),
        format!("random fabric, seed {seed}, shape {shape}: {what}. Drawn by rscc's random generator (src/front/generate/random.rs) for tests."),
    ))
}

fn add_gpu(b: &mut Builder, gpus: &mut Vec<NodeIndex>, host: Option<&str>) -> NodeIndex {
    let g = b.gpu(gpus.len(), None);
    if let Some(h) = host {
        b.g[g].id = format!("{h}-gpu{}", gpus.len());
        b.g[g].host = Some(h.into());
    }
    gpus.push(g);
    g
}

fn mesh(b: &mut Builder, r: &mut Rng, gpus: &mut Vec<NodeIndex>, host: Option<&str>) -> String {
    let n = r.range(4, 12);
    let g: Vec<_> = (0..n).map(|_| add_gpu(b, gpus, host)).collect();
    let mut pairs = 0;
    let mut link = |b: &mut Builder, r: &mut Rng, x: NodeIndex, y: NodeIndex| {
        let bw = r.pick(&[25.0, 50.0, 100.0]);
        let count = r.range(1, 4) as u32;
        b.duplex(x, y, bw, ALPHA_GPU, count, "nvlink");
        pairs += 1;
    };
    for i in 1..n {
        link(b, r, g[i - 1], g[i]);
    }
    let p = r.pick(&[0.2, 0.4, 0.7]);
    for i in 0..n {
        for j in i + 2..n {
            if r.chance(p) {
                link(b, r, g[i], g[j]);
            }
        }
    }
    format!("{n} GPUs in a mesh of {pairs} linked pairs")
}

fn star(b: &mut Builder, r: &mut Rng, gpus: &mut Vec<NodeIndex>, host: Option<&str>) -> String {
    let n = r.range(4, 16);
    let sw = b.node(
        format!(
            "{}switch",
            host.map(|h| format!("{h}-")).unwrap_or_default()
        ),
        NodeKind::Switch,
        None,
        None,
    );
    b.g[sw].host = host.map(Into::into);
    for _ in 0..n {
        let g = add_gpu(b, gpus, host);
        let bw = r.pick(&[50.0, 100.0, 200.0, 450.0]);
        b.duplex(g, sw, bw, ALPHA_GPU, 1, "nvswitch");
    }
    format!("{n} GPUs on one switch with unequal ports")
}

fn pcie(b: &mut Builder, r: &mut Rng, gpus: &mut Vec<NodeIndex>) -> String {
    let cpus: Vec<_> = (0..2)
        .map(|i| b.node(format!("cpu{i}"), NodeKind::Cpu, None, None))
        .collect();
    b.duplex(cpus[0], cpus[1], 40.0, ALPHA_PCIE, 1, "upi");
    let mut switches = 0;
    for &c in &cpus {
        for _ in 0..r.range(1, 2) {
            let sw = b.node(
                format!("pcie-switch{switches}"),
                NodeKind::Switch,
                None,
                None,
            );
            switches += 1;
            let bw = r.pick(&[16.0, 32.0]);
            b.duplex(sw, c, bw, ALPHA_PCIE, 1, "pcie");
            for _ in 0..r.range(1, 4) {
                let g = add_gpu(b, gpus, None);
                b.duplex(g, sw, bw, ALPHA_PCIE, 1, "pcie");
            }
        }
    }
    format!(
        "{} GPUs under {switches} PCIe switches on two sockets",
        gpus.len()
    )
}

fn hosts(b: &mut Builder, r: &mut Rng, gpus: &mut Vec<NodeIndex>) -> String {
    let h = r.range(2, 4);
    let per = r.range(2, 8);
    let inside = r.pick(&["switch", "mesh"]);
    let net_kind = r.pick(&[
        "per-GPU NICs",
        "shared NICs",
        "GPUs straight to the network switch",
    ]);
    let nic_bw = r.pick(&[25.0, 50.0]);
    let net = b.node("net".into(), NodeKind::Switch, None, None);
    for k in 0..h {
        let host = format!("h{k}");
        let g: Vec<_> = (0..per).map(|_| add_gpu(b, gpus, Some(&host))).collect();
        if inside == "switch" {
            let sw = b.node(format!("{host}-switch"), NodeKind::Switch, None, None);
            b.g[sw].host = Some(host.clone());
            for &x in &g {
                b.duplex(x, sw, 200.0, ALPHA_GPU, 1, "nvswitch");
            }
        } else {
            for i in 0..per {
                for j in i + 1..per {
                    b.duplex(g[i], g[j], 50.0, ALPHA_GPU, 1, "xgmi");
                }
            }
        }
        for (i, &x) in g.iter().enumerate() {
            match net_kind {
                "per-GPU NICs" => {
                    let nic = b.node(format!("{host}-nic{i}"), NodeKind::Nic, None, None);
                    b.g[nic].host = Some(host.clone());
                    b.duplex(x, nic, 32.0, ALPHA_PCIE, 1, "pcie");
                    b.duplex(nic, net, nic_bw, ALPHA_NET, 1, "ib");
                }
                "shared NICs" => {
                    let id = format!("{host}-nic{}", i / 2);
                    let nic = match b.g.node_indices().find(|&n| b.g[n].id == id) {
                        Some(n) => n,
                        None => {
                            let nic = b.node(id, NodeKind::Nic, None, None);
                            b.g[nic].host = Some(host.clone());
                            b.duplex(nic, net, nic_bw, ALPHA_NET, 1, "ib");
                            nic
                        }
                    };
                    b.duplex(x, nic, 32.0, ALPHA_PCIE, 1, "pcie");
                }
                _ => b.duplex(x, net, nic_bw, ALPHA_NET, 1, "ethernet"),
            }
        }
    }
    format!("{h} hosts of {per} GPUs ({inside} inside), {net_kind} at {nic_bw} GB/s")
}

fn torus(b: &mut Builder, r: &mut Rng, gpus: &mut Vec<NodeIndex>) -> String {
    let (x, y) = (r.range(2, 4), r.range(2, 4));
    let g: Vec<_> = (0..x * y).map(|_| add_gpu(b, gpus, None)).collect();
    let mut edges = Vec::new();
    for i in 0..x {
        for j in 0..y {
            let a = i * y + j;
            for c in [((i + 1) % x) * y + j, i * y + (j + 1) % y] {
                let e = (a.min(c), a.max(c));
                if e.0 != e.1 && !edges.contains(&e) {
                    edges.push(e);
                }
            }
        }
    }
    // Drop links at random while the torus stays connected.
    let mut keep = vec![true; edges.len()];
    for k in 0..edges.len() {
        if r.chance(0.2) {
            keep[k] = false;
            if !connected(x * y, &edges, &keep) {
                keep[k] = true;
            }
        }
    }
    let mut links = 0;
    for (k, &(a, c)) in edges.iter().enumerate() {
        if keep[k] {
            b.duplex(g[a], g[c], 50.0, ALPHA_GPU, 1, "nvlink");
            links += 1;
        }
    }
    format!(
        "a {x} x {y} torus with {links} of its {} links",
        edges.len()
    )
}

fn connected(n: usize, edges: &[(usize, usize)], keep: &[bool]) -> bool {
    let mut seen = vec![false; n];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(v) = stack.pop() {
        for (k, &(a, c)) in edges.iter().enumerate() {
            if keep[k] {
                for (p, q) in [(a, c), (c, a)] {
                    if p == v && !seen[q] {
                        seen[q] = true;
                        stack.push(q);
                    }
                }
            }
        }
    }
    seen.into_iter().all(|s| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_is_drawn_and_valid() {
        let mut shapes = std::collections::HashSet::new();
        for seed in 0..60 {
            let p = GenParams {
                seed: Some(seed),
                ..GenParams::default()
            };
            let t = random(&p).unwrap();
            crate::front::topo_json::validate(&t).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert!(t.num_ranks() >= 2, "seed {seed}");
            shapes.insert(
                t.description
                    .split("shape ")
                    .nth(1)
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap()
                    .to_string(),
            );
            // Same seed, same fabric.
            assert_eq!(
                crate::front::topo_json::to_json(&t),
                crate::front::topo_json::to_json(&random(&p).unwrap())
            );
        }
        assert_eq!(shapes.len(), SHAPES.len(), "{shapes:?}");
    }
}
