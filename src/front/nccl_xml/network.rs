//! The NICs: one report entry per NIC node (its ports' names and total
//! speed, or a default for NICs known only by PCI class), and, in a
//! multi-host file, the network switch that joins the hosts' NICs.

use super::Walk;
use crate::front::builder::{gbps, ImportOptions, NicInfo};
use crate::ir::hardware::ALPHA_NET_US;
use crate::ir::NodeKind;
use std::collections::BTreeSet;

/// The NICs' report entries; joins the hosts of a multi-host file
/// (`nhosts` of them) through one network switch when every host has a NIC.
pub(super) fn nics(w: &mut Walk, opts: &ImportOptions, multi: bool, nhosts: usize) -> Vec<NicInfo> {
    // NICs.
    let mut nics = Vec::new();
    for (n, ports, host) in &w.nics {
        let (mbps, names): (f64, Vec<String>) = if ports.is_empty() {
            let d = opts.nic_gbps.map(|g| g * 8000.0).unwrap_or(100_000.0);
            (d, vec![w.b.g[*n].id.clone()])
        } else {
            (
                ports.iter().map(|p| p.mbps).sum(),
                ports.iter().map(|p| p.name.clone()).collect(),
            )
        };
        nics.push(NicInfo {
            node: *n,
            node_id: w.b.g[*n].id.clone(),
            ports: names.len(),
            names,
            gbps: mbps / 8000.0,
            host: w.host(*host),
        });
    }
    if w.unknown_nic_speed > 0 {
        w.assumptions.insert(format!(
            "{} NIC(s) known only by PCI class (no <net>): {} GB/s assumed{}",
            w.unknown_nic_speed,
            gbps(opts.nic_gbps.unwrap_or(12.5)),
            if opts.nic_gbps.is_some() {
                " (--nic-gbps)"
            } else {
                " (100 Gb/s; pass --nic-gbps)"
            }
        ));
    }
    // Multi-host: join the hosts' NICs through one network switch.
    if multi {
        let hosts_with_nic: BTreeSet<usize> = w.nics.iter().map(|(_, _, h)| *h).collect();
        if hosts_with_nic.len() == nhosts {
            let sw = w.b.node("net", NodeKind::Switch, None);
            for ni in &nics {
                w.b.duplex(ni.node, sw, ni.gbps, ALPHA_NET_US, 1, "ib");
            }
            w.assumptions.insert(
                "multi-host file: hosts joined by one network switch over every NIC at the NIC's speed".into(),
            );
        }
    }
    nics
}
