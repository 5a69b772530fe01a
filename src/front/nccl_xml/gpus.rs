//! The GPUs found in the tree: the check that there is one, their rank
//! order (ranks, dev numbers or PCI bus ids, host by host), the per-link
//! fabric bandwidth and architecture each GPU's model gives, and their node
//! names by rank.

use super::xml::Element;
use super::{norm_busid, Walk};
use crate::front::builder::{gbps, ImportOptions};
use crate::front::FrontError;
use crate::ir::hardware::{nvlink_per_link, xgmi_per_link};
use crate::ir::NodeKind;

/// Refuse a file without GPUs, saying why when it can.
pub(super) fn require_gpus(w: &Walk, root: &Element, file: &str) -> Result<(), FrontError> {
    let ferr = |m: String| FrontError::new(file, m);
    if w.gpus.is_empty() {
        let bare = root
            .children
            .iter()
            .flat_map(|c| c.children.iter())
            .any(|p| p.name == "pci" && p.attr("class").is_none());
        return Err(ferr(format!(
            "line {}: no GPUs: no <gpu> element and no <pci> with a GPU class (0x03xxxx / 0x12xxxx){}; \
             rscc needs at least one GPU",
            root.line,
            if bare { "; the file lists bare PCI bus ids without class attributes, so device kinds are unknown" } else { "" }
        )));
    }
    Ok(())
}

/// The rank order: the indices into `w.gpus` of the GPUs that become ranks,
/// rank 0 first.
pub(super) fn ranks(w: &mut Walk, multi: bool, file: &str) -> Result<Vec<usize>, FrontError> {
    let ferr = |m: String| FrontError::new(file, m);
    // Ranks.
    let any_ranked = w.gpus.iter().any(|g| g.rank.is_some());
    let mut order: Vec<usize> = (0..w.gpus.len()).collect();
    let mut keep: Vec<usize>;
    if any_ranked {
        keep = order
            .iter()
            .copied()
            .filter(|&i| w.gpus[i].rank.is_some())
            .collect();
        for i in order.iter().filter(|&&i| w.gpus[i].rank.is_none()) {
            let g = &w.gpus[*i];
            w.warnings.push(format!(
                "line {}: GPU {} has no rank attribute and is skipped (NCCL skips it too)",
                g.line,
                g.busid.clone().unwrap_or_default()
            ));
            // Keep the graph shape (it still forwards over PCIe) but it is no rank.
            let (node, id) = (
                g.node,
                format!("unranked-gpu@{}", g.busid.clone().unwrap_or_default()),
            );
            w.b.g[node].kind = NodeKind::Switch;
            w.b.rename(node, &id);
        }
        keep.sort_by_key(|&i| (w.gpus[i].rank, i));
        for pair in keep.windows(2) {
            let (a, b) = (&w.gpus[pair[0]], &w.gpus[pair[1]]);
            if a.rank == b.rank && a.host == b.host {
                return Err(ferr(format!(
                    "line {}: <gpu rank=\"{}\"> repeats the rank of the GPU at line {}",
                    b.line,
                    b.rank.unwrap_or(0),
                    a.line
                )));
            }
        }
        if multi {
            keep.sort_by_key(|&i| (w.gpus[i].host, w.gpus[i].rank, i));
        }
        let dense = keep
            .iter()
            .enumerate()
            .all(|(k, &i)| w.gpus[i].rank == Some(k as i64));
        if !dense && !multi {
            w.warnings
                .push("ranks in the file are not 0..N-1; renumbered in rank order".into());
        }
        if multi {
            w.assumptions.insert(
                "multi-host file: ranks numbered host by host (host_hash order), by rank within each host".into(),
            );
        }
    } else if w.gpus.iter().all(|g| g.dev.is_some()) {
        order.sort_by_key(|&i| (w.gpus[i].host, w.gpus[i].dev, i));
        keep = order;
        w.assumptions
            .insert("no rank attributes: GPUs ranked in dev order".into());
    } else {
        order.sort_by_key(|&i| (w.gpus[i].host, w.gpus[i].busid.clone(), i));
        keep = order;
        w.assumptions.insert(
            "no rank attributes: GPUs ranked in PCI bus id order (the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use)".into(),
        );
    }
    Ok(keep)
}

/// Per-GPU model facts, indexed like `w.gpus`: the per-link NVLink/xGMI
/// bandwidth (GB/s) and the architecture name.
pub(super) fn model_facts(
    w: &mut Walk,
    keep: &[usize],
    opts: &ImportOptions,
) -> (Vec<f64>, Vec<String>) {
    // Per-GPU model facts.
    let mut link_bw: Vec<f64> = vec![0.0; w.gpus.len()];
    let mut arch: Vec<String> = vec![String::new(); w.gpus.len()];
    for &i in keep {
        let g = &w.gpus[i];
        let amd = g.gcn.is_some() || g.links.iter().any(|(_, f)| *f == "xgmi");
        let (bw, what): (f64, String) = if let Some(m) = opts.gpu {
            (m.link_gbps, format!("--gpu {}", m.name))
        } else if amd {
            match g.gcn.as_deref().and_then(xgmi_per_link) {
                Some((b, w)) => (b, w.to_string()),
                None => (
                    46.0,
                    format!(
                        "unknown AMD GPU (gcn {:?}): MI100 figure assumed",
                        g.gcn.as_deref().unwrap_or("missing")
                    ),
                ),
            }
        } else {
            match g.sm.and_then(nvlink_per_link) {
                Some((b, w)) => (b, w.to_string()),
                None => (
                    25.0,
                    format!(
                        "sm {} unknown: NVLink 25 GB/s per link assumed",
                        g.sm.map(|s| s.to_string())
                            .unwrap_or_else(|| "missing".into())
                    ),
                ),
            }
        };
        link_bw[i] = bw;
        arch[i] = match (&g.gcn, g.sm) {
            (Some(c), _) => {
                if c.starts_with("gfx") {
                    c.clone()
                } else {
                    format!("gfx{c}")
                }
            }
            (None, Some(s)) => format!("sm{s}"),
            (None, None) => "unknown".into(),
        };
        let own = g.busid.as_deref().unwrap_or("");
        if g.links
            .iter()
            .any(|(el, f)| *f != "c2c" && el.attr("target").map(norm_busid).as_deref() != Some(own))
        {
            w.assumptions.insert(format!(
                "{} per-link bandwidth {} GB/s per direction: hardware figure ({what}; topologies.md §1), not NCCL's model value",
                if amd { "xGMI" } else { "NVLink" },
                gbps(bw)
            ));
        }
    }
    (link_bw, arch)
}

/// Name the GPU nodes by rank (and give them the `--gpu` model's SMs).
pub(super) fn name_by_rank(w: &mut Walk, keep: &[usize], opts: &ImportOptions) {
    // Name GPUs by rank.
    for (r, &i) in keep.iter().enumerate() {
        let n = w.gpus[i].node;
        w.b.g[n].rank = Some(r);
        let id = format!("{}gpu{r}", w.prefix(w.gpus[i].host));
        w.b.rename(n, &id);
        if let Some(m) = opts.gpu {
            w.b.g[n].sms = Some(m.sms);
            w.b.g[n].mem_gbps = Some(m.mem_gbps);
        } else if let Some(x) = w.gpus[i]
            .gcn
            .as_deref()
            .and_then(crate::ir::hardware::xgmi_gen)
        {
            // An AMD GPU's memory from its architecture (RCCL charges local
            // passes against it).
            w.b.g[n].mem_gbps = Some(x.mem_gbps);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::imp;

    #[test]
    fn unranked_gpus_are_skipped_when_others_have_ranks() {
        let t = r#"<system version="1"><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="90" rank="0"/></pci>
<pci busid="0000:02:00.0" class="0x030200"/>
<pci busid="0000:03:00.0" class="0x030200"><gpu dev="2" sm="90" rank="5"/></pci>
</cpu></system>"#;
        let r = imp(t).unwrap();
        assert_eq!(r.topology.num_ranks(), 2);
        assert_eq!(r.gpus[1].busid.as_deref(), Some("0000:03:00.0"));
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("line 3") && w.contains("no rank")));
        assert!(r.warnings.iter().any(|w| w.contains("renumbered")));
        let t2 = t.replace("rank=\"5\"", "rank=\"0\"");
        let e = imp(&t2).unwrap_err();
        assert!(
            e.msg.contains("line 4") && e.msg.contains("repeats the rank"),
            "{e}"
        );
    }
}
