//! Regression: the schedule emitted for every shipped topology is pinned,
//! both as an insta snapshot and as the committed file in schedules/.
//! Regenerate schedules/ with `RSCC_UPDATE_SCHEDULES=1 cargo test --test
//! schedules` and review snapshot changes with `cargo insta review`.

use rscc::compile::{compile, CompileOptions};
use rscc::verify::{verify, VerifyOptions};
use std::path::Path;

fn shipped() -> Vec<(String, std::path::PathBuf)> {
    let mut v: Vec<_> = std::fs::read_dir("topologies")
        .expect("topologies/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().to_string(), p))
        .collect();
    v.sort();
    assert!(v.len() >= 9, "expected the shipped topologies");
    v
}

fn emit(path: &Path) -> String {
    let topo = rscc::front::load_topology(path).expect("shipped topology loads");
    let c = compile(&topo, &CompileOptions::default()).expect("compiles");
    rscc::back::msccl_xml::to_string(&c.program)
}

#[test]
fn every_shipped_topology_has_its_schedule() {
    let update = std::env::var_os("RSCC_UPDATE_SCHEDULES").is_some();
    let mut stale = Vec::new();
    for (name, path) in shipped() {
        let xml = emit(&path);
        // The emitted text reads back and verifies.
        let p = rscc::front::msccl_xml::parse(&xml, &name).expect("own XML parses");
        verify(&p, &VerifyOptions::default()).expect("own XML verifies");
        let file = Path::new("schedules").join(format!("{name}-rs.xml"));
        if update {
            std::fs::write(&file, &xml).expect("write schedule");
        } else if std::fs::read_to_string(&file).ok().as_deref() != Some(xml.as_str()) {
            stale.push(file.display().to_string());
        }
        insta::assert_snapshot!(format!("{name}-rs"), xml);
    }
    assert!(
        stale.is_empty(),
        "schedules/ differs from what the code emits: {stale:?} (regenerate with RSCC_UPDATE_SCHEDULES=1 cargo test --test schedules)"
    );
}
