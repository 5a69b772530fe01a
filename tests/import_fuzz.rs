//! Damaged inputs never panic or hang: every importer returns a topology or
//! an error naming the file, whatever is cut, swapped or inserted.

use proptest::prelude::*;
use rscc::front::import::{self, ImportOptions};
use std::path::Path;

fn load(rel: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/real")
            .join(rel),
    )
    .unwrap()
}

const FILES: &[&str] = &[
    "nccl-xml/ibm-cloud-vpc_gx3d-8xH100_topo.xml",
    "nccl-xml/aws-ofi-nccl_p4d-24xl-topo.xml",
    "rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml",
    "nvidia-smi-topo/DGX1-V100-SXM2_8GPU_hybrid-cube-mesh_1xEDR_oneflow-dlperf.txt",
    "nvidia-smi-topo/HGX-A100-SXM4-80GB_8GPU_8xCX-RoCE100G_deepep-issue13.txt",
    "rocm-smi-topo/AMD-8GPU-64GiB_two-4GPU-xGMI-hives_showtopo_unattributed-test-fixture.txt",
];

const TOKENS: &[&str] = &[
    "<",
    ">",
    "\"",
    "'",
    "/>",
    "<!--",
    "\t",
    "\n",
    "0",
    "-1",
    "NV99999",
    "X",
    "SYS",
    "GPU9",
    "fffffff:ff:ff.0",
    "count=\"4000000000\"",
    "speed=\"-5\"",
    "é",
    "</cpu>",
    "<pci>",
];

fn check(text: &str, file: &str) {
    match import::import_text(text, file, &ImportOptions::default()) {
        Ok(r) => {
            assert!(r.topology.num_ranks() >= 1);
            rscc::front::topo_json::validate(&r.topology).unwrap();
        }
        Err(e) => assert!(e.to_string().starts_with(file), "{e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn truncated(fi in 0..FILES.len(), cut in 0.0f64..1.0) {
        let t = load(FILES[fi]);
        let mut at = (t.len() as f64 * cut) as usize;
        while !t.is_char_boundary(at) { at -= 1; }
        check(&t[..at], "cut.txt");
    }

    #[test]
    fn spliced(fi in 0..FILES.len(), pos in 0.0f64..1.0, tok in 0..TOKENS.len(), del in 0usize..40) {
        let t = load(FILES[fi]);
        let mut at = (t.len() as f64 * pos) as usize;
        while !t.is_char_boundary(at) { at -= 1; }
        let mut end = (at + del).min(t.len());
        while !t.is_char_boundary(end) { end -= 1; }
        let s = format!("{}{}{}", &t[..at], TOKENS[tok], &t[end..]);
        check(&s, "spliced.txt");
    }
}
