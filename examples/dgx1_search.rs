//! Issue 4 evidence: how close tree schedules of the shapes `tree` can
//! build get to the valid α-aware bound on DGX-1 at 16 / 32 / 64 KiB.
//! Searches class weights (`HopGraph::weighted`: 3–9 classes of 1–4 chunks,
//! every non-decreasing vector) or, with the argument `pieced`, pieced
//! members (`HopGraph::pieced`, 1–8 members, ten piece sets); each is
//! lowered, kept if it fits DGX-1's 80 SMs, verified (a rejected one is
//! listed with the rule) and simulated. Prints the best 25 at 64 KiB.
//!
//!   cargo run --release --example dgx1_search [pieced]

use rscc::front::generate::{generate, GenParams};
use rscc::ir::{Algorithm, Collective};
use rscc::lower::{lower, LowerOptions};
use rscc::sim::{simulate, SimOptions};
use rscc::synth::tree::HopGraph;
use rscc::verify::{verify, VerifyOptions};

/// Every non-decreasing vector over 1..=4 of length 3..=max_len.
fn weight_vectors(cur: &mut Vec<usize>, max_len: usize, out: &mut Vec<Vec<usize>>) {
    if cur.len() >= 3 {
        out.push(cur.clone());
    }
    if cur.len() == max_len {
        return;
    }
    for w in *cur.last().unwrap_or(&1)..=4 {
        cur.push(w);
        weight_vectors(cur, max_len, out);
        cur.pop();
    }
}

fn main() {
    let topo = generate("dgx1-v100", &GenParams::default()).expect("dgx1-v100");
    let g = HopGraph::new(&topo).expect("DGX-1 has a hop graph");
    let bw = rscc::bound::bandwidth_bound(&topo, Collective::ReduceScatter).expect("bound");
    let lt = rscc::bound::latency_terms(&topo).expect("latency terms");
    let sizes = [16u64 << 10, 32 << 10, 64 << 10];
    let bounds: Vec<f64> = sizes.iter().map(|&s| lt.bound_us(&bw, s)).collect();
    let vopts = VerifyOptions {
        max_tbs: topo.min_sms().map(|s| s as usize),
        ..VerifyOptions::default()
    };
    let mut cands: Vec<(String, Algorithm)> = Vec::new();
    if std::env::args().nth(1).as_deref() == Some("pieced") {
        let sets: [&[usize]; 10] = [
            &[1, 2],
            &[1, 2, 3],
            &[1, 2, 3, 4],
            &[1, 1, 2],
            &[1, 2, 2],
            &[1, 3],
            &[2, 3],
            &[1, 2, 4],
            &[1, 1, 2, 2],
            &[1, 2, 3, 4, 5],
        ];
        for k in 1..=8 {
            for p in sets {
                cands.push((format!("pieced {k} × {p:?}"), g.pieced(k, p)));
            }
        }
    } else {
        let mut ws = Vec::new();
        weight_vectors(&mut Vec::new(), 9, &mut ws);
        for w in ws {
            cands.push((format!("weights {w:?}"), g.weighted(&w)));
        }
    }
    let total = cands.len();
    let mut rows: Vec<(f64, String)> = Vec::new();
    for (name, a) in cands {
        let Ok(p) = lower(&a, &LowerOptions::default()) else {
            continue;
        };
        let tbs = p.max_tbs_per_rank();
        if tbs > 80 {
            continue;
        }
        let verdict = match verify(&p, &vopts) {
            Ok(_) => "verified".to_string(),
            Err(e) => format!("rejected: {}", e.rule),
        };
        let r: Vec<f64> = sizes
            .iter()
            .zip(&bounds)
            .map(|(&s, b)| {
                simulate(&p, &topo, s, &SimOptions::default())
                    .map_or(f64::INFINITY, |r| r.time_us / b)
            })
            .collect();
        rows.push((
            r[2],
            format!(
                "{name:34} {:.3} {:.3} {:.3}  {tbs:>2} TBs  {verdict}",
                r[0], r[1], r[2]
            ),
        ));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!("{total} candidates; bound {bounds:.3?} µs; × bound at 16 / 32 / 64 KiB:");
    for (_, line) in rows.iter().take(25) {
        println!("{line}");
    }
}
