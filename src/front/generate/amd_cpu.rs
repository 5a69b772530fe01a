//! AMD and CPU machines: MI300X (a full xGMI mesh, NICs optional) and
//! cpu-shm (ranks of one shared-memory CPU machine).

use super::{
    fixed_count, fmt_num, gpu_count, multi_host, non_negative, positive, unused, Builder,
    GenParams, MAX_MESH,
};
use crate::ir::hardware::{
    known, ALPHA_GPU_LINK_US, ALPHA_NET_US as IB_ALPHA_US, PCIE_ALPHA_US, PCIE_GEN5_X16_GBPS,
};
use crate::ir::{NodeKind, Topology};

/// MI300X: 8 GPUs in a full xGMI mesh (7 links each), NICs optional.
pub fn mi300x(p: &GenParams) -> Result<Topology, String> {
    unused("mi300x", p, true, true, false)?;
    let n = fixed_count("mi300x", p, 8)?;
    let bw = positive("--bw", p.bw_gbps, known("mi300x").link_gbps)?;
    let alpha = non_negative("--alpha", p.alpha_us, ALPHA_GPU_LINK_US)?;
    let nic = positive("--nic-bw", p.nic_gbps, known("mi300x").nic_gbps)?;
    let ib_alpha = non_negative("--ib-alpha", p.ib_alpha_us, IB_ALPHA_US)?;
    let hosts = p.hosts.unwrap_or(1);
    let with_nics = match p.nics {
        Some(x) => x,
        None => hosts > 1,
    };
    if hosts > 1 && !with_nics {
        return Err("mi300x: --hosts > 1 needs the NICs (--nics false was given)".into());
    }
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu_of(r, known("mi300x"))).collect();
    for i in 0..n {
        for j in i + 1..n {
            b.duplex(g[i], g[j], bw, alpha, 1, "xgmi");
        }
    }
    if with_nics {
        for (r, &v) in g.iter().enumerate() {
            let nc = b.node(format!("nic{r}"), NodeKind::Nic, None, None);
            b.duplex(v, nc, PCIE_GEN5_X16_GBPS, PCIE_ALPHA_US, 1, "pcie");
        }
    }
    let nic_text = if with_nics {
        format!(
            "NIC k serves GPU k: one 400G ConnectX-7 per GPU as in RCCL's topo_8p_940 model (topologies.md §2.8), {} GB/s per direction, over PCIe Gen5 x16 at {} GB/s (32 GT/s x 16 x 128/130 / 8), alpha {} us. \
With --hosts H > 1, NIC k of every host links to rail switch rail{{k}} (topologies.md §2.10) at the NIC rate, alpha {} us per NIC <-> rail link (TE-CCL IB alpha, topologies.md §3).",
            fmt_num(nic),
            fmt_num(PCIE_GEN5_X16_GBPS),
            fmt_num(PCIE_ALPHA_US),
            fmt_num(ib_alpha)
        )
    } else {
        "No NICs (generate with --nics true or --hosts H > 1 to add one 400G NIC per GPU)."
            .to_string()
    };
    let desc = format!(
        "MI300X: 8 OAM GPUs (304 CUs each) in a full Infinity Fabric (xGMI) mesh, 7 peer links per GPU (ROCm mi300.md, topologies.md §1, §2.8). \
Per link {} GB/s per direction: the hardware figure of 64 GB/s (128 bidir; 896 bidir aggregate over 7 links), an unconfirmed vendor figure in topologies.md §1, \
chosen over RCCL's tuning-model 48 because absolute limits use hardware figures (topologies.md §1 notes); 7 links = {} GB/s per GPU. \
alpha {} us per link: the references give no xGMI alpha, so TE-CCL's point-to-point NVLink alpha (topologies.md §3) is assumed. {}",
        fmt_num(bw),
        fmt_num(7.0 * bw),
        fmt_num(alpha),
        nic_text
    );
    let t = b.finish("mi300x".into(), desc);
    multi_host(t, p, nic)
}

/// N ranks of one shared-memory CPU machine, fully connected.
pub fn cpu_shm(p: &GenParams) -> Result<Topology, String> {
    unused("cpu-shm", p, false, false, false)?;
    let n = gpu_count("cpu-shm", p, 8, 2, MAX_MESH)?;
    let bw = positive("--bw", p.bw_gbps, 10.0)?;
    let alpha = non_negative("--alpha", p.alpha_us, 0.5)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n)
        .map(|r| b.node(format!("rank{r}"), NodeKind::Gpu, Some(r), None))
        .collect();
    for i in 0..n {
        for j in i + 1..n {
            b.duplex(g[i], g[j], bw, alpha, 1, "shm");
        }
    }
    let desc = format!(
        "{n} ranks of one shared-memory CPU machine (threads of the CPU executor, or MPI processes on one node), modelled as fully connected: \
every rank pair has a 'shm' link of {} GB/s per direction with alpha {} us. These are assumptions, not measurements or figures from the references: \
{} GB/s is about one core's memcpy rate between caches/DRAM, {} us a cache-line handoff plus flag poll; set --bw/--alpha to a measured rate. \
Ranks are 'gpu' nodes only because ranks are GPUs in the format; no SM count is given (no threadblock limit).",
        fmt_num(bw),
        fmt_num(alpha),
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("cpu-shm{n}"), desc))
}
