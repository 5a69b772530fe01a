//! `rscc topo import` / `rscc topo export` end to end: outputs, messages
//! and exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn rscc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rscc"))
}

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real")
        .join(rel)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-import-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn import_writes_json_and_reports_on_stderr() {
    let out = tmp("h100.json");
    let o = rscc()
        .args(["topo", "import"])
        .arg(data("nccl-xml/ibm-cloud-vpc_gx3d-8xH100_topo.xml"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("8 GPUs, 8 NICs"), "{err}");
    assert!(
        err.contains("assumed: NVLink per-link bandwidth 25 GB/s"),
        "{err}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let gpus = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "gpu")
        .count();
    assert_eq!(gpus, 8);
}

#[test]
fn hosts_and_gpu_options() {
    let o = rscc()
        .args(["topo", "import", "--gpu", "b200", "--hosts", "4", "--json"])
        .arg(data(
            "nvidia-smi-topo/GCP-A4-B200_8GPU_8xRoCE_google-dranet-gke-rdma.txt",
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let topo: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let gpus = topo["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "gpu")
        .count();
    assert_eq!(gpus, 32);
    let rep: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(rep["gpus"][0]["link_gbps"], 50.0);
    assert!(rep["assumptions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a.as_str().unwrap().contains("rail")));
}

#[test]
fn refusals_exit_2_and_name_the_file() {
    for (f, why) in [
        ("nccl-xml/aws-ofi-nccl_g5.48xl-topo.xml", "no GPUs"),
        ("nccl-xml/azure-azhpc-images_ncv4-graph.xml", "graph file"),
    ] {
        let o = rscc()
            .args(["topo", "import"])
            .arg(data(f))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{f}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(why) && err.contains(f.rsplit('/').next().unwrap()),
            "{err}"
        );
    }
    let o = rscc()
        .args(["topo", "import", "--gpu", "k80"])
        .arg(data(
            "nvidia-smi-topo/GCP-A4-B200_8GPU_8xRoCE_google-dranet-gke-rdma.txt",
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = rscc()
        .args(["topo", "import", "--hosts", "2"])
        .arg(data(
            "rocm-smi-topo/MI210_4GPU_xGMI-bridge_showtopo_archer2-gpu-docs.txt",
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let junk = tmp("junk.txt");
    std::fs::write(&junk, "hello\nworld\n").unwrap();
    let o = rscc().args(["topo", "import"]).arg(&junk).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unrecognised topology format"));
}

#[test]
fn export_then_import_through_the_cli() {
    let x = tmp("mi300x.xml");
    let o = rscc()
        .args(["topo", "export", "--format", "nccl-xml"])
        .arg(data(
            "rccl-xml/rccl_topo_8p_940_MI300X-gfx942_8GPU_8xCX7-400G.xml",
        ))
        .arg("-o")
        .arg(&x)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = rscc()
        .args(["topo", "import", "--json"])
        .arg(&x)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(rep["format"], "rccl-xml");
    for g in rep["gpus"].as_array().unwrap() {
        assert_eq!(g["fabric_links"], 7);
        assert_eq!(g["link_gbps"], 64.0);
    }
}

/// An rscc JSON host whose NICs hang off PCIe only (no network link:
/// topologies/dgx-a100.json) has no NIC speed to join hosts at: `--hosts`
/// asks for `--nic-gbps` (exit 2, naming the file and the NIC) instead of
/// writing rails of 0 GB/s that `synth` then refuses; with it, the joined
/// machine synthesizes.
#[test]
fn hosts_of_a_json_machine_need_a_nic_speed() {
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/dgx-a100.json");
    let out = tmp("a100x2.json");
    let o = rscc()
        .args(["topo", "import", "--hosts", "2", "-o"])
        .arg(&out)
        .arg(&topo)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("dgx-a100.json") && err.contains("nic0") && err.contains("--nic-gbps"),
        "{err}"
    );
    let o = rscc()
        .args(["topo", "import", "--hosts", "2", "--nic-gbps", "25", "-o"])
        .arg(&out)
        .arg(&topo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = rscc()
        .args(["synth", "--algo", "hier", "--topo"])
        .arg(&out)
        .args(["-o"])
        .arg(tmp("a100x2.xml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
