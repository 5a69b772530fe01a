//! Fuzz targets: every reader of outside input, and the checks behind
//! them, each as one function of bytes that must return without
//! panicking, hanging or allocating without bound, whatever the bytes.
//!
//! The functions hold the properties the fuzzers look for, as assertions:
//! a rejected input gets one line naming the file and the reason; an
//! accepted topology passes the graph checks and survives a JSON round
//! trip; an accepted MSCCL file is written back and read again to the same
//! program; and a program the verifier judges is judged the same way by the
//! CPU executor and the simulator (a verified file completes with correct
//! results, a reported deadlock stalls). A failed assertion is a finding.
//!
//! `fuzz/` drives these under AFL++ (`bench/fuzz.sh TARGET SECONDS`);
//! tests/fuzz_smoke.rs runs every target on its corpus (`fuzz/corpus/`)
//! and a fixed-seed set of mutations of it, and replays every recorded
//! finding (`fuzz/regressions/`). docs/fuzzing.md has the campaign figures
//! and the size limits that keep each target bounded.

use crate::front::import::Format;
use crate::front::import::{self, ImportOptions};
use crate::front::{msccl_xml, topo_json, FrontError};
use crate::ir::Program;
use crate::verify::{verify_all, VerifyOptions};
use std::time::Duration;

/// The name errors must carry.
pub const FILE: &str = "fuzz-input";

/// A fuzz target: its name, entry and corpus.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// The corpus it starts from: `fuzz/corpus/<corpus>/`, one per input
    /// format (the checks behind the MSCCL reader share its corpus).
    pub corpus: &'static str,
    /// Readers are fast and get ≥ 10⁷ executions per campaign; the checks
    /// behind them get time instead.
    pub reader: bool,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "topo-json",
        run: topo_json_target,
        corpus: "topo-json",
        reader: true,
    },
    Target {
        name: "nccl-xml",
        run: nccl_xml_target,
        corpus: "nccl-xml",
        reader: true,
    },
    Target {
        name: "nvidia-smi",
        run: nvidia_smi_target,
        corpus: "nvidia-smi",
        reader: true,
    },
    Target {
        name: "rocm-smi",
        run: rocm_smi_target,
        corpus: "rocm-smi",
        reader: true,
    },
    Target {
        name: "msccl-xml",
        run: msccl_xml_target,
        corpus: "msccl-xml",
        reader: true,
    },
    Target {
        name: "verify",
        run: verify_target,
        corpus: "msccl-xml",
        reader: false,
    },
    Target {
        name: "run",
        run: run_target,
        corpus: "msccl-xml",
        reader: false,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Input as the CLI reads it: bytes that are not UTF-8 are refused before
/// any reader sees them (`front::read_text`), so the readers get text.
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A rejection must be one line that names the file.
fn check_error(e: &FrontError) {
    let s = e.to_string();
    assert!(
        s.starts_with(FILE),
        "an error that does not name the file: {s:?}"
    );
    assert!(!s.contains('\n'), "an error of more than one line: {s:?}");
    assert!(!e.msg.trim().is_empty(), "an error without a reason: {s:?}");
}

fn check_topology(t: &crate::ir::Topology) {
    assert!(t.num_ranks() >= 1, "a topology without ranks was accepted");
    if let Err(e) = topo_json::validate(t) {
        panic!("an accepted topology fails the graph checks: {e}");
    }
    let json = topo_json::to_json(t);
    match topo_json::parse(&json, "round-trip") {
        Ok(u) => {
            assert_eq!(
                u.num_ranks(),
                t.num_ranks(),
                "the JSON round trip changed the ranks"
            );
            assert_eq!(
                u.graph.edge_count(),
                t.graph.edge_count(),
                "the JSON round trip changed the links"
            );
        }
        Err(e) => panic!("an accepted topology's own JSON is refused: {e}\n{json}"),
    }
}

fn import_as(data: &[u8], format: Option<Format>) {
    let Some(s) = text(data) else { return };
    let opts = ImportOptions {
        format,
        ..ImportOptions::default()
    };
    match import::import_text(s, FILE, &opts) {
        Ok(r) => check_topology(&r.topology),
        Err(e) => check_error(&e),
    }
}

fn topo_json_target(data: &[u8]) {
    let Some(s) = text(data) else { return };
    match topo_json::parse(s, FILE) {
        Ok(t) => check_topology(&t),
        Err(e) => check_error(&e),
    }
}

fn nccl_xml_target(data: &[u8]) {
    // NCCL's and RCCL's dialects share the reader; detection picks by the
    // version and elements, as `rscc topo import` does.
    let format = match text(data).and_then(import::detect) {
        Some(Format::RcclXml) => Format::RcclXml,
        _ => Format::NcclXml,
    };
    import_as(data, Some(format));
}

fn nvidia_smi_target(data: &[u8]) {
    import_as(data, Some(Format::NvidiaSmi));
}

fn rocm_smi_target(data: &[u8]) {
    import_as(data, Some(Format::RocmSmi));
}

/// Parse an MSCCL file; an accepted one is written back and read again to
/// the same program.
fn parse_program(data: &[u8]) -> Option<Program> {
    let s = text(data)?;
    match msccl_xml::parse(s, FILE) {
        Ok(p) => {
            let xml = crate::back::msccl_xml::to_string(&p);
            match msccl_xml::parse(&xml, "round-trip") {
                Ok(q) => {
                    let (p, q) = (comparable(&p), comparable(&q));
                    if q != p {
                        let (a, b) = (format!("{p:#?}"), format!("{q:#?}"));
                        let d = a.lines().zip(b.lines()).find(|(x, y)| x != y);
                        panic!("the written file reads back as another program: {d:?}");
                    }
                }
                Err(e) => panic!("an accepted program's own XML is refused: {e}\n{xml}"),
            }
            Some(p)
        }
        Err(e) => {
            check_error(&e);
            None
        }
    }
}

/// `p` without what a round trip may change without changing the file's
/// meaning: source lines, the `s` attributes (the runtime uses positions;
/// the writer writes them), the name (the writer keeps only characters
/// every runtime's file name and log take) and an absent `maxBytes`
/// (written as the runtime's default).
fn comparable(p: &Program) -> Program {
    let mut p = p.positionless();
    p.name.clear();
    p.max_bytes = Some(p.runtime.written_max_bytes(p.max_bytes));
    p
}

fn msccl_xml_target(data: &[u8]) {
    parse_program(data);
}

/// Programs the checks behind the reader take on: within what a small
/// machine runs in bounded time (the reader itself takes any size the
/// runtime's parser does).
fn small(p: &Program) -> bool {
    p.ngpus as usize <= 16 && p.num_tbs() <= 256 && p.num_steps() <= 4096
}

fn verify_target(data: &[u8]) {
    let Some(p) = parse_program(data) else { return };
    if !small(&p) {
        return;
    }
    let opts = VerifyOptions::default();
    let verdict = verify_all(&p, &opts);
    if let Ok(rep) = &verdict {
        assert_eq!(rep.ranks, p.gpus.len());
        // A verified program simulates on any machine with its ranks.
        if p.ngpus >= 2 {
            let topo = ring(p.ngpus as usize);
            if let Err(e) = crate::sim::simulate(&p, &topo, 1 << 20, &Default::default()) {
                panic!("verified, but the simulator refuses: {e}");
            }
        }
    }
    // Both runtimes' judgements exist and the structural phase agrees with
    // the whole verdict.
    for rt in crate::ir::Runtime::ALL {
        let o = VerifyOptions {
            runtime: Some(rt),
            ..opts.clone()
        };
        let s = crate::verify::structural(&p, &o);
        if rt == p.runtime && verdict.is_ok() {
            assert!(
                s.is_empty(),
                "verified, but its own runtime's rules fail: {s:?}"
            );
        }
    }
}

/// The verifier and the CPU executor agree: a verified program completes
/// with correct results in every call mode it declares; one the verifier
/// says deadlocks stalls, and the watchdog says where.
fn run_target(data: &[u8]) {
    let Some(p) = parse_program(data) else { return };
    if !(p.ngpus <= 8 && p.num_tbs() <= 64 && p.num_steps() <= 1024) {
        return;
    }
    let modes: Vec<bool> = [(p.outofplace, false), (p.inplace, true)]
        .into_iter()
        .filter_map(|(declared, m)| declared.then_some(m))
        .collect();
    match verify_all(&p, &VerifyOptions::default()) {
        Ok(_) => {
            for m in modes {
                match execute(&p, m, Duration::from_secs(10)) {
                    Ok(true) => {}
                    Ok(false) => panic!("verified, but wrong results (in place: {m})"),
                    Err(e) => panic!("verified, but the executor: {e} (in place: {m})"),
                }
            }
        }
        Err(errs) if errs[0].rule == "deadlock" && !errs[0].msg.contains("MSCCL's split") => {
            for m in modes {
                match execute(&p, m, Duration::from_millis(200)) {
                    Err(crate::exec::ExecError::Stalled(s)) => {
                        assert!(
                            format!("{s:?}").contains("rank"),
                            "a stall that names no rank"
                        )
                    }
                    other => panic!(
                        "the verifier says deadlock ({}), the executor: {:?}",
                        errs[0].msg,
                        other.map_err(|e| e.to_string())
                    ),
                }
            }
        }
        Err(_) => {}
    }
}

/// One checked run at a small size: Ok(true) when every row is correct.
fn execute(p: &Program, inplace: bool, timeout: Duration) -> Result<bool, crate::exec::ExecError> {
    let opts = crate::exec::RunOptions {
        sizes: vec![64 * p.nchunksperloop.max(1) as u64],
        iters: 1,
        warmup: 0,
        check: true,
        inplace: Some(inplace),
        fifo_slots: 2,
        stall_timeout: timeout,
        membw_bytes: 0,
        ..crate::exec::RunOptions::default()
    };
    let r = crate::exec::run_program(p, &opts)?;
    Ok(r.rows.iter().all(|x| x.wrong == Some(0)))
}

/// A ring of `n` ≥ 2 GPUs (the generator's): routes between all pairs.
fn ring(n: usize) -> crate::ir::Topology {
    let params = crate::front::generate::GenParams {
        gpus: Some(n),
        ..Default::default()
    };
    crate::front::generate::generate("ring", &params).expect("a ring topology")
}
