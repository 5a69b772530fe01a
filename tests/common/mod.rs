//! Test helpers: small topologies built in code, and the shipped
//! topologies with their committed schedules.
#![allow(dead_code)]

use rscc::front::topo_json;
use rscc::ir::{Program, Topology};

/// N GPUs; `edges` are duplex direct links (a, b, count) at 25 GB/s, α 1 µs.
pub fn gpus_with_links(name: &str, n: usize, edges: &[(usize, usize, u32)]) -> Topology {
    let nodes: Vec<String> = (0..n)
        .map(|r| format!(r#"{{"id":"gpu{r}","kind":"gpu","rank":{r}}}"#))
        .collect();
    let links: Vec<String> = edges
        .iter()
        .map(|&(a, b, c)| {
            format!(r#"{{"from":"gpu{a}","to":"gpu{b}","bw_gbps":25,"alpha_us":1,"count":{c},"kind":"nvlink"}}"#)
        })
        .collect();
    let text = format!(
        r#"{{"name":"{name}","nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    topo_json::parse(&text, name).expect("test topology is valid")
}

/// N GPUs in a bidirectional ring.
pub fn ring(n: usize) -> Topology {
    let e: Vec<(usize, usize, u32)> = (0..n).map(|i| (i, (i + 1) % n, 1)).collect();
    gpus_with_links(&format!("ring{n}"), n, if n == 2 { &e[..1] } else { &e })
}

/// N GPUs on one switch with `bw` GB/s ports.
pub fn switch(n: usize, bw: f64) -> Topology {
    let mut nodes: Vec<String> = (0..n)
        .map(|r| format!(r#"{{"id":"gpu{r}","kind":"gpu","rank":{r}}}"#))
        .collect();
    nodes.push(r#"{"id":"sw","kind":"switch"}"#.into());
    let links: Vec<String> = (0..n)
        .map(|r| {
            format!(
                r#"{{"from":"gpu{r}","to":"sw","bw_gbps":{bw},"alpha_us":0.35,"kind":"nvlink"}}"#
            )
        })
        .collect();
    let text = format!(
        r#"{{"name":"switch{n}","nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    topo_json::parse(&text, "switch").expect("test topology is valid")
}

/// DGX-1 hybrid cube-mesh (tools' numbering, synthesis.md §4.1).
pub fn dgx1() -> Topology {
    let m = rscc::front::generate::DGX1_NVLINKS;
    let mut e = Vec::new();
    for (a, row) in m.iter().enumerate() {
        for (b, &c) in row.iter().enumerate() {
            if a < b && c > 0 {
                e.push((a, b, c));
            }
        }
    }
    gpus_with_links("dgx1", 8, &e)
}

/// Every shipped topology (topologies/*.json, sorted by name) with its
/// committed schedule (schedules/<stem>/rs.xml) and the file stem.
pub fn shipped() -> Vec<(String, Topology, Program)> {
    let mut paths: Vec<_> = std::fs::read_dir("topologies")
        .expect("run from the repository root")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let topo = rscc::front::load_topology(&path).expect("shipped topology");
            let xml = format!("schedules/{stem}/rs.xml");
            let text = std::fs::read_to_string(&xml).expect("shipped schedule");
            let prog = rscc::front::msccl_xml::parse(&text, &xml).expect("valid schedule");
            (stem, topo, prog)
        })
        .collect()
}

/// An empty directory for `tag` under the test scratch directory Cargo
/// gives integration tests (target/tmp: `cargo clean` removes it, and
/// nothing is left in the system's temp dir); emptied when taken, so it
/// holds only the latest run's files.
pub fn fresh_dir(tag: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rscc-{tag}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run the rscc binary: (exit code, stdout, stderr).
pub fn rscc(args: &[&str]) -> (i32, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// `rscc topo generate random --seed SEED` written to `dir/fabric-SEED.json`.
pub fn random_fabric(dir: &std::path::Path, seed: u32) -> std::path::PathBuf {
    let f = dir.join(format!("fabric-{seed}.json"));
    let (code, _, err) = rscc(&[
        "topo",
        "generate",
        "random",
        "--seed",
        &seed.to_string(),
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    f
}

/// Wrong elements of one checked CPU run of `p` (a run error fails the
/// test).
pub fn wrong(
    p: &Program,
    inplace: bool,
    dtype: rscc::exec::DType,
    redop: rscc::exec::RedOp,
    sizes: &[u64],
) -> u64 {
    let opts = rscc::exec::RunOptions {
        dtype,
        redop,
        sizes: sizes.to_vec(),
        iters: 1,
        warmup: 0,
        check: true,
        inplace: Some(inplace),
        ..rscc::exec::RunOptions::default()
    };
    let r = rscc::exec::run_program(p, &opts).unwrap_or_else(|e| panic!("{}: {e}", p.name));
    r.rows.iter().map(|x| x.wrong.expect("checked")).sum()
}

/// A generated fabric in memory (`rscc topo generate random --seed SEED`;
/// [`random_fabric`] writes it to a file).
pub fn random_topology(seed: u64) -> Topology {
    rscc::front::generate::generate(
        "random",
        &rscc::front::generate::GenParams {
            seed: Some(seed),
            ..Default::default()
        },
    )
    .unwrap()
}

/// `h` hosts of the generator's `kind` (`rscc topo generate KIND --hosts H`).
pub fn hosts(kind: &str, h: usize) -> Topology {
    rscc::front::generate::generate(
        kind,
        &rscc::front::generate::GenParams {
            hosts: Some(h),
            ..Default::default()
        },
    )
    .unwrap()
}
