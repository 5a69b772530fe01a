//! Generic kinds: ring, line, fully-connected and switch, N GPUs with
//! one link bandwidth and α (`--bw`, `--alpha`), shaped as SCCL's generic
//! topologies.

use super::{
    fmt_num, gpu_count, non_negative, positive, unused, Builder, GenParams, MAX_MESH, MAX_RANKS,
};
use crate::ir::{NodeKind, Topology};

const GENERIC_GBPS: f64 = 25.0;
const GENERIC_ALPHA_US: f64 = 1.0;
const GENERIC_SOURCE: &str = "Defaults 25 GB/s per direction per link (one NVLink 2/3/4 link, topologies.md §1) and α 1 µs; both can be set with --bw/--alpha. Shape as in SCCL's generic topologies (msccl-tools msccl/topologies/generic.py, synthesis.md §4.3).";

fn generic_links(p: &GenParams) -> Result<(f64, f64), String> {
    Ok((
        positive("--bw", p.bw_gbps, GENERIC_GBPS)?,
        non_negative("--alpha", p.alpha_us, GENERIC_ALPHA_US)?,
    ))
}

/// N GPUs in a bidirectional ring: gpu i ↔ gpu i+1 mod N (one link per
/// neighbour pair; with N = 2 a single duplex link).
pub fn ring(p: &GenParams) -> Result<Topology, String> {
    unused("ring", p, false, false, true)?;
    let n = gpu_count("ring", p, 8, 2, MAX_RANKS)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    let pairs = if n == 2 { 1 } else { n };
    for i in 0..pairs {
        b.duplex(g[i], g[(i + 1) % n], bw, alpha, 1, "nvlink");
    }
    let desc = format!(
        "{n} GPUs in a bidirectional ring, gpu i <-> gpu i+1 mod {n}, one {} GB/s link per neighbour pair per direction, alpha {} us. {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("ring{n}"), desc))
}

/// N GPUs in a line: gpu i ↔ gpu i+1 for i < N−1.
pub fn line(p: &GenParams) -> Result<Topology, String> {
    unused("line", p, false, false, true)?;
    let n = gpu_count("line", p, 8, 2, MAX_RANKS)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    for i in 0..n - 1 {
        b.duplex(g[i], g[i + 1], bw, alpha, 1, "nvlink");
    }
    let desc = format!(
        "{n} GPUs in a line, gpu i <-> gpu i+1, one {} GB/s link per neighbour pair per direction, alpha {} us. {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("line{n}"), desc))
}

/// N GPUs with one direct link between every pair.
pub fn fully_connected(p: &GenParams) -> Result<Topology, String> {
    unused("fully-connected", p, false, false, true)?;
    let n = gpu_count("fully-connected", p, 8, 2, MAX_MESH)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    for i in 0..n {
        for j in i + 1..n {
            b.duplex(g[i], g[j], bw, alpha, 1, "nvlink");
        }
    }
    let desc = format!(
        "{n} GPUs fully connected, one {} GB/s link per pair per direction, alpha {} us. {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("fully-connected{n}"), desc))
}

/// N GPUs on one switch vertex; `--bw` is each GPU's port bandwidth.
pub fn switch(p: &GenParams) -> Result<Topology, String> {
    unused("switch", p, false, false, true)?;
    let n = gpu_count("switch", p, 8, 2, MAX_RANKS)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    let sw = b.node("switch".into(), NodeKind::Switch, None, None);
    for &v in &g {
        b.duplex(v, sw, bw, alpha, 1, "nvlink");
    }
    let desc = format!(
        "{n} GPUs on one switch (forwards, never reduces), one {} GB/s port per GPU per direction, alpha {} us per GPU <-> switch link (2x per GPU-to-GPU route). {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("switch{n}"), desc))
}
