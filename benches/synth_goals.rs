//! Issue-2/4 goals, measured side by side in one run (release build):
//! `cargo bench --bench synth_goals` prints a table and writes
//! target/bench-synth-goals.json.
//!
//! Per shipped topology: synthesis time of `--algo auto`, the simulated
//! time at 1 GiB over the bound T*, the worst ratio auto/ring over
//! 1 KiB … 4 GiB (must be ≤ 1), and the worst ratio to the α-aware bound at
//! ≤ 64 KiB. Then synthesis time at 64 and 256 GPUs (8 and 32 hosts of
//! dgx-h100), and emit + verify of the 1024-GPU ring.

use rscc::bound;
use rscc::compile::{self, CompileOptions};
use rscc::front::generate::{generate, GenParams};
use rscc::ir::Collective;
use rscc::sim::{simulate, SimOptions};
use rscc::synth::Algo;
use std::time::Instant;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn main() {
    let mut json = Vec::new();
    let sizes: Vec<u64> = (0..12).map(|i| 1024u64 << (2 * i)).collect();
    let so = SimOptions::default();
    println!(
        "{:<12} {:>6} {:>10} {:>10} {:>12} {:>14} {:>14} {:>14} {:>16}",
        "topology",
        "ranks",
        "synth_s",
        "winner@1G",
        "T1G/T*",
        "max auto/ring",
        "max ≤16K/LB",
        "max small/LB",
        "max small/LB5.3"
    );
    let mut names: Vec<_> = std::fs::read_dir("topologies")
        .expect("run from the repository root")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    for path in names {
        let topo = rscc::front::load_topology(&path).expect("shipped topology");
        let t0 = Instant::now();
        let sel =
            compile::auto(&topo, &CompileOptions::default(), &sizes, &so, None).expect("auto");
        let synth_s = t0.elapsed().as_secs_f64();
        let b = bound::bandwidth_bound(&topo, Collective::ReduceScatter).expect("bound");
        let ring = sel
            .candidates
            .iter()
            .position(|c| c.algo == Algo::Ring)
            .expect("ring");
        let mut worst_vs_ring: f64 = 0.0;
        let mut worst_small: f64 = 0.0;
        let mut worst_16k: f64 = 0.0;
        let mut worst_small_sf: f64 = 0.0;
        let mut t1g = 0.0;
        let mut w1g = String::new();
        for (si, &s) in sel.sizes.iter().enumerate() {
            let w = sel.winners[si];
            let t = sel.times_us[w][si];
            worst_vs_ring = worst_vs_ring.max(t / sel.times_us[ring][si]);
            if s <= 64 << 10 {
                let lb = bound::alpha_bound_with(&b, &topo, s).expect("alpha bound");
                worst_small = worst_small.max(t / lb);
                if s <= 16 << 10 {
                    worst_16k = worst_16k.max(t / lb);
                }
                let sf = bound::store_forward_shard_us(&topo, s).expect("§5.3 figure");
                worst_small_sf = worst_small_sf.max(t / lb.max(sf));
            }
            if s == 1 << 30 {
                t1g = t / bound::time_bound_us(&b, s);
                w1g = sel.candidates[w].algorithm.name.clone();
            }
        }
        println!(
            "{:<12} {:>6} {:>10.3} {:>10} {:>12.4} {:>14.4} {:>14.4} {:>14.4} {:>16.4}",
            topo.name,
            topo.num_ranks(),
            synth_s,
            w1g,
            t1g,
            worst_vs_ring,
            worst_16k,
            worst_small,
            worst_small_sf
        );
        json.push(serde_json::json!({
            "topology": topo.name, "ranks": topo.num_ranks(), "synth_s": synth_s,
            "winner_1g": w1g, "t_1g_over_tstar": t1g, "max_auto_over_ring": worst_vs_ring,
            "max_16k_over_alpha_bound": worst_16k,
            "max_small_over_alpha_bound": worst_small,
            "max_small_over_alpha_bound_or_sf53": worst_small_sf,
        }));
    }
    println!();
    println!(
        "{:<28} {:>6} {:>10} {:>12}",
        "scale", "ranks", "seconds", "peak RSS MiB"
    );
    for hosts in [8usize, 32] {
        let topo = generate(
            "dgx-h100",
            &GenParams {
                hosts: Some(hosts),
                ..Default::default()
            },
        )
        .expect("generate");
        let t0 = Instant::now();
        let sel =
            compile::auto(&topo, &CompileOptions::default(), &sizes, &so, None).expect("auto");
        let s = t0.elapsed().as_secs_f64();
        let label = format!("auto dgx-h100 x{hosts}");
        println!(
            "{:<28} {:>6} {:>10.2} {:>12.0}",
            label,
            topo.num_ranks(),
            s,
            peak_rss_mib()
        );
        json.push(
            serde_json::json!({"case": label, "ranks": topo.num_ranks(), "seconds": s,
            "candidates": sel.candidates.len(), "peak_rss_mib": peak_rss_mib()}),
        );
    }
    // 1024-GPU ring: synthesize + lower + verify, then write the XML.
    let topo = generate(
        "ring",
        &GenParams {
            gpus: Some(1024),
            ..Default::default()
        },
    )
    .expect("ring 1024");
    // Median of three runs (the machine is shared and noisy). The XML goes
    // to a file through a BufWriter, as `rscc synth -o` writes it.
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let t0 = Instant::now();
        let c = compile::compile(&topo, &CompileOptions::algo(Algo::Ring, None)).expect("compile");
        let t_compile = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let path = std::path::Path::new("target/bench-ring1024.xml");
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
        rscc::back::msccl_xml::write(&c.program, &mut w).expect("write");
        std::io::Write::flush(&mut w).expect("flush");
        drop(w);
        let t_write = t1.elapsed().as_secs_f64();
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let _ = std::fs::remove_file(path);
        let t2 = Instant::now();
        let r = rscc::verify::verify(&c.program, &Default::default()).expect("verifies");
        let t_verify = t2.elapsed().as_secs_f64();
        runs.push((
            t_compile + t_write,
            t_compile,
            t_write,
            t_verify,
            bytes,
            r.steps,
        ));
        last = Some(c);
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (t_total, t_compile, t_write, t_verify, bytes, steps) = runs[1];
    let c = last.expect("three runs");
    let t3 = Instant::now();
    let sim = simulate(&c.program, &topo, 1 << 30, &so).expect("sim");
    let t_sim = t3.elapsed().as_secs_f64();
    println!(
        "{:<28} {:>6} {:>10.3}   (median of 3; synth+lower+verify {:.3} s, of which verify {:.3} s; write {:.3} s, {} MB, {} steps; simulate 1 GiB {:.3} s -> {:.0} us)",
        "ring 1024: emit + verify",
        1024,
        t_total,
        t_compile,
        t_verify,
        t_write,
        bytes / 1_000_000,
        steps,
        t_sim,
        sim.time_us
    );
    json.push(
        serde_json::json!({"case": "ring1024", "emit_s": t_total, "compile_s": t_compile, "verify_s": t_verify,
        "write_s": t_write, "xml_bytes": bytes, "steps": steps, "simulate_1g_s": t_sim}),
    );
    let _ = std::fs::create_dir_all("target");
    let _ = std::fs::write(
        "target/bench-synth-goals.json",
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    );
    println!("\nwrote target/bench-synth-goals.json");
}
