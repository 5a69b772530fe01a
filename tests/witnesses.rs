//! Three witnesses that agree: the symbolic verifier, the CPU executor on
//! real data (two-slot FIFOs, MSCCL's tile and merge rule) and, for every
//! program the verifier accepts, the simulator. Over valid schedules of
//! every op and systematic mutations of them (dropped, duplicated and
//! swapped steps; changed counts, offsets, peers, channels and
//! dependencies):
//! - the verifier accepts → the executor completes with `--check` passing
//!   in every call mode the file declares, and the simulator finishes;
//! - the verifier reports a deadlock (one that does not need MSCCL's split
//!   of multi-chunk steps) → the executor stalls and its watchdog says
//!   where;
//! - the verifier reports a wrong post-condition → the executor's check
//!   fails (or it stalls) in some call mode.
//!
//! A structurally broken mutant is one the runtime's parser or the
//! executor refuses; it is counted, not run. Races and reads of
//! uninitialised scratch may go unseen on one input, so they are counted
//! too.

use rscc::exec::{run_program, ExecError, RunOptions};
use rscc::ir::{Program, Step};
use rscc::verify::{verify_all, VerifyOptions};
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Default)]
struct Tally {
    programs: usize,
    accepted: usize,
    deadlocks: usize,
    split_deadlocks: usize,
    wrong: usize,
    soft: usize,
    structural: usize,
}

enum Outcome {
    Correct,
    Wrong,
    Stalled(String),
    Refused(String),
}

fn execute(p: &Program, inplace: bool, timeout: Duration) -> Outcome {
    let opts = RunOptions {
        sizes: vec![256 * p.nchunksperloop.max(1) as u64],
        iters: 1,
        warmup: 0,
        check: true,
        inplace: Some(inplace),
        fifo_slots: 2,
        stall_timeout: timeout,
        membw_bytes: 0,
        ..RunOptions::default()
    };
    match run_program(p, &opts) {
        Ok(r) if r.rows.iter().all(|x| x.wrong == Some(0)) => Outcome::Correct,
        Ok(_) => Outcome::Wrong,
        Err(ExecError::Stalled(s)) => Outcome::Stalled(format!("{s:?}")),
        Err(e) => Outcome::Refused(e.to_string()),
    }
}

fn modes(p: &Program) -> Vec<bool> {
    let mut v = Vec::new();
    if p.outofplace {
        v.push(false);
    }
    if p.inplace {
        v.push(true);
    }
    v
}

/// Judge `p` with all three and check that they agree.
fn agree(p: &Program, what: &str, t: &mut Tally) {
    t.programs += 1;
    match verify_all(p, &VerifyOptions::default()) {
        Ok(_) => {
            t.accepted += 1;
            for m in modes(p) {
                match execute(p, m, Duration::from_secs(20)) {
                    Outcome::Correct => {}
                    Outcome::Wrong => panic!("{what}: verified, but wrong results (inplace {m})"),
                    Outcome::Stalled(s) => {
                        panic!("{what}: verified, but stalled (inplace {m}): {s}")
                    }
                    Outcome::Refused(e) => panic!("{what}: verified, but refused: {e}"),
                }
            }
            let topo = common_ring(p.ngpus as usize);
            if let Some(topo) = topo {
                rscc::sim::simulate(p, &topo, 1 << 20, &Default::default())
                    .unwrap_or_else(|e| panic!("{what}: verified, but the simulator: {e}"));
            }
        }
        Err(errs) => {
            let e = &errs[0];
            match e.rule {
                "deadlock" if e.msg.contains("MSCCL's split") => t.split_deadlocks += 1,
                "deadlock" => {
                    t.deadlocks += 1;
                    for m in modes(p) {
                        match execute(p, m, Duration::from_millis(300)) {
                            Outcome::Stalled(s) => {
                                assert!(s.contains("rank"), "{what}: a stall names where: {s}")
                            }
                            _ => panic!(
                                "{what}: the verifier says deadlock ({}), the executor completed (inplace {m})",
                                e.msg
                            ),
                        }
                    }
                }
                "postcondition" => {
                    t.wrong += 1;
                    let seen = modes(p).into_iter().any(|m| {
                        match execute(p, m, Duration::from_millis(300)) {
                            Outcome::Wrong | Outcome::Stalled(_) => true,
                            Outcome::Correct => false,
                            Outcome::Refused(r) => {
                                panic!("{what}: structurally sound, but the executor refuses: {r}")
                            }
                        }
                    });
                    assert!(
                        seen,
                        "{what}: the verifier says wrong ({}), the executor's check passed",
                        e.msg
                    );
                }
                "race" | "uninitialised-read" => t.soft += 1,
                _ => t.structural += 1,
            }
        }
    }
}

/// A bidirectional NVLink ring of `n` GPUs (routes exist between all
/// pairs), for the simulator.
fn common_ring(n: usize) -> Option<rscc::ir::Topology> {
    let links: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"from":"g{i}","to":"g{}","bw_gbps":25,"alpha_us":1,"kind":"nvlink"}}"#,
                (i + 1) % n
            )
        })
        .take(if n == 2 { 1 } else { n })
        .collect();
    let nodes: Vec<String> = (0..n)
        .map(|r| format!(r#"{{"id":"g{r}","kind":"gpu","rank":{r}}}"#))
        .collect();
    let text = format!(
        r#"{{"name":"r","nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    rscc::front::topo_json::parse(&text, "ring").ok()
}

/// Systematic mutations of rank 0's program (and the peers it names).
fn mutants(p: &Program) -> Vec<(String, Program)> {
    let mut out = Vec::new();
    let g = 0usize;
    for t in 0..p.gpus[g].tbs.len() {
        let n = p.gpus[g].tbs[t].steps.len();
        for s in 0..n {
            let mut m = p.clone();
            m.gpus[g].tbs[t].steps.remove(s);
            renumber(&mut m);
            out.push((format!("tb {t} step {s} dropped"), m));
            let mut m = p.clone();
            let st: Step = m.gpus[g].tbs[t].steps[s].clone();
            m.gpus[g].tbs[t].steps.insert(s, st);
            renumber(&mut m);
            out.push((format!("tb {t} step {s} duplicated"), m));
            if s + 1 < n {
                let mut m = p.clone();
                m.gpus[g].tbs[t].steps.swap(s, s + 1);
                renumber(&mut m);
                out.push((format!("tb {t} steps {s},{} swapped", s + 1), m));
            }
            let mut m = p.clone();
            m.gpus[g].tbs[t].steps[s].cnt += 1;
            out.push((format!("tb {t} step {s} cnt + 1"), m));
            let mut m = p.clone();
            let st = &mut m.gpus[g].tbs[t].steps[s];
            if st.srcoff >= 0 {
                st.srcoff = (st.srcoff + 1) % p.nchunksperloop.max(1);
            }
            out.push((format!("tb {t} step {s} srcoff moved"), m));
            let mut m = p.clone();
            let st = &mut m.gpus[g].tbs[t].steps[s];
            if st.dstoff >= 0 {
                st.dstoff = (st.dstoff + 1) % p.nchunksperloop.max(1);
            }
            out.push((format!("tb {t} step {s} dstoff moved"), m));
            if p.gpus[g].tbs[t].steps[s].depid >= 0 {
                let mut m = p.clone();
                let st = &mut m.gpus[g].tbs[t].steps[s];
                st.depid = -1;
                st.deps = -1;
                out.push((format!("tb {t} step {s} dependency dropped"), m));
            }
        }
        let ng = p.ngpus;
        let mut m = p.clone();
        let tb = &mut m.gpus[g].tbs[t];
        if tb.send >= 0 {
            tb.send = (tb.send + 1) % ng;
            if tb.send == 0 {
                tb.send = 1 % ng;
            }
            out.push((format!("tb {t} send peer retargeted"), m));
        }
        let mut m = p.clone();
        let tb = &mut m.gpus[g].tbs[t];
        if tb.recv >= 0 {
            tb.recv = (tb.recv + 1) % ng;
            if tb.recv == 0 {
                tb.recv = 1 % ng;
            }
            out.push((format!("tb {t} recv peer retargeted"), m));
        }
        let mut m = p.clone();
        m.gpus[g].tbs[t].chan = (m.gpus[g].tbs[t].chan + 1) % p.nchannels.max(1);
        out.push((format!("tb {t} channel changed"), m));
    }
    // The same swap on every rank (pairing intact: only a cycle can break
    // it), e.g. every rank receiving before it sends.
    let longest = p
        .gpus
        .iter()
        .flat_map(|g| g.tbs.iter())
        .map(|t| t.steps.len())
        .max();
    for s in 0..longest.unwrap_or(0).saturating_sub(1) {
        let mut m = p.clone();
        for g in &mut m.gpus {
            for t in &mut g.tbs {
                if s + 1 < t.steps.len() {
                    t.steps.swap(s, s + 1);
                }
            }
        }
        renumber(&mut m);
        out.push((format!("steps {s},{} swapped on every rank", s + 1), m));
    }
    out
}

/// Step indices and dependency targets after a step was inserted or
/// removed keep pointing at positions (deps may now name another step:
/// that is part of the mutation).
fn renumber(p: &mut Program) {
    for g in &mut p.gpus {
        for t in &mut g.tbs {
            for (i, s) in t.steps.iter_mut().enumerate() {
                s.s = i as i64;
            }
        }
    }
}

fn load(f: &str) -> Program {
    rscc::front::msccl_xml::load(Path::new(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

#[test]
fn verifier_executor_and_simulator_agree() {
    let mut t = Tally::default();
    let originals: Vec<(String, Program)> = vec![
        ("builtin ring 4".into(), rscc::exec::builtin::ring(4, 1)),
        ("builtin ring 3x2".into(), rscc::exec::builtin::ring(3, 2)),
        (
            "builtin all-pairs 4".into(),
            rscc::exec::builtin::allpairs(4),
        ),
        ("ring8-rs".into(), load("schedules/ring8/rs.xml")),
        ("ring8-ag".into(), load("schedules/ring8/ag.xml")),
        ("ring8-ar".into(), load("schedules/ring8/ar.xml")),
        ("mi300x-rs (RCCL)".into(), load("schedules/mi300x/rs.xml")),
        (
            "msccl allgather".into(),
            load("tests/data/msccl/ndv5-ag-1k-512k.xml"),
        ),
    ];
    for (name, p) in &originals {
        let before = t.accepted;
        agree(p, name, &mut t);
        assert_eq!(t.accepted, before + 1, "{name} verifies");
        for (what, m) in mutants(p) {
            agree(&m, &format!("{name}: {what}"), &mut t);
        }
    }
    eprintln!("witnesses: {t:?}");
    // The sweep exercises every verdict.
    assert!(t.programs > 300, "{t:?}");
    assert!(
        t.accepted > originals.len() && t.deadlocks > 0 && t.wrong > 0,
        "{t:?}"
    );
}
