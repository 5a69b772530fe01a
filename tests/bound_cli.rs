//! `rscc bound` end to end: JSON keys, exact fractions, exit codes.

mod common;

use common::rscc;

use std::path::PathBuf;

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-bound-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn ring_json(n: usize, bw: f64) -> String {
    let nodes: Vec<String> = (0..n)
        .map(|r| format!(r#"{{"id":"g{r}","kind":"gpu","rank":{r}}}"#))
        .collect();
    let links: Vec<String> = (0..n)
        .map(|r| {
            format!(
                r#"{{"from":"g{r}","to":"g{}","bw_gbps":{bw},"alpha_us":1,"kind":"nvlink"}}"#,
                (r + 1) % n
            )
        })
        .collect();
    format!(
        r#"{{"name":"ring{n}","nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    )
}

#[test]
fn json_report() {
    let p = write("ring8.json", &ring_json(8, 25.0));
    let (code, out, err) = rscc(&[
        "bound",
        "--topo",
        p.to_str().unwrap(),
        "--op",
        "reduce-scatter",
        "--size",
        "1G",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["op"], "reduce-scatter");
    assert_eq!(v["ranks"], 8);
    assert_eq!(v["x_star"]["fraction"], "7/50");
    assert!((v["x_star"]["float"].as_f64().unwrap() - 0.14).abs() < 1e-12);
    assert!((v["algbw_limit_gbps"].as_f64().unwrap() - 400.0 / 7.0).abs() < 1e-9);
    assert_eq!(v["min_steps"], 4);
    let cut = &v["binding_cut"];
    let inside = cut["inside"].as_array().unwrap().len();
    let outside = cut["outside"].as_array().unwrap().len();
    assert_eq!(inside + outside, 8);
    let tb = v["time_bound_us"].as_f64().unwrap();
    assert!((tb - (1u64 << 30) as f64 / 8.0 * 0.14 / 1e3).abs() < 1e-6);
    assert!(v["alpha_bound_us"].as_f64().unwrap() >= tb);
}

#[test]
fn table_report() {
    let p = write("ring4.json", &ring_json(4, 25.0));
    let (code, out, _) = rscc(&["bound", "--topo", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("3/50"), "{out}");
    assert!(out.contains("66.67 GB/s"), "{out}");
    assert!(out.contains("binding cut"), "{out}");
}

#[test]
fn bad_input_exits_2() {
    let p = write("ring4b.json", &ring_json(4, 25.0));
    let (code, _, err) = rscc(&["bound", "--topo", "/nonexistent/x.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/x.json"), "{err}");
    let (code, _, err) = rscc(&["bound", "--topo", p.to_str().unwrap(), "--op", "alltoall"]);
    assert_eq!(code, 2);
    assert!(err.contains("alltoall"), "{err}");
    let (code, _, err) = rscc(&["bound", "--topo", p.to_str().unwrap(), "--size", "12Q"]);
    assert_eq!(code, 2);
    assert!(err.contains("12Q"), "{err}");
    // A topology where rank 1 cannot reach anyone.
    let island = r#"{"name":"i","nodes":[{"id":"a","kind":"gpu","rank":0},{"id":"b","kind":"gpu","rank":1}],"links":[]}"#;
    let p = write("island.json", island);
    let (code, _, err) = rscc(&["bound", "--topo", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
}

/// The routing-model bound: on Rome Vega20 the cut bound counts PCIe and
/// socket paths between the xGMI islands at once, which single routes
/// cannot use, so the tree-packing certificate is above x* and binds; on
/// DGX-1 single routes carry x* and it equals it.
#[test]
fn route_bound_binds_where_single_routes_cannot_carry_the_cut() {
    let rome = "tests/data/real/rccl-xml/rccl_topo_8p_rome_Vega20-gfx906_8GPU_Rome.xml";
    let (code, out, _) = rscc(&["bound", "--topo", rome, "--json", "--size", "1G"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rb = &v["route_bound"];
    assert_eq!(rb["binds"], true, "{out}");
    let over = rb["over_x_star"].as_f64().unwrap();
    assert!(over > 1.06 && over < 1.07, "{over}");
    let t = rb["time_bound_us"].as_f64().unwrap();
    assert!((t / v["time_bound_us"].as_f64().unwrap() - over).abs() < 1e-9);
    let (code, out, _) = rscc(&["bound", "--topo", "topologies/dgx1-v100.json"]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.starts_with("route bound")).unwrap();
    assert!(
        line.contains("1.0000 x*") && !line.contains("binds"),
        "{line}"
    );
}

/// The allreduce's routing-model bound is the joint packing's certificate
/// (reduction and broadcast trees packed on the links together): on
/// random fabric 5 (GPU 2 on one 16 GB/s PCIe link) it is 4/3 of the
/// allreduce cut bound (0.4167 against 0.3125 per unit of shard) and
/// binds; on DGX-1 it equals the bound.
#[test]
fn the_allreduce_route_bound_is_the_joint_packings() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-bound-ar");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("random5.json");
    let (code, _, err) = rscc(&[
        "topo",
        "generate",
        "random",
        "--seed",
        "5",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = rscc(&[
        "bound",
        "--topo",
        f.to_str().unwrap(),
        "--op",
        "allreduce",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rb = &v["route_bound"];
    assert_eq!(rb["binds"], true, "{out}");
    let over = rb["over_x_star"].as_f64().unwrap();
    assert!((over - 4.0 / 3.0).abs() < 1e-3, "{over}");
    let (code, out, _) = rscc(&[
        "bound",
        "--topo",
        "topologies/dgx1-v100.json",
        "--op",
        "allreduce",
    ]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.starts_with("route bound")).unwrap();
    assert!(
        line.contains("1.0000 x*") && !line.contains("binds"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
