//! The verifier rejects each classic mistake, naming the rule (one test per
//! mutation of a valid schedule).
mod common;

use rscc::compile::{compile, CompileOptions};
use rscc::ir::{Algorithm, Buf, Program, Spec, StepKind, Transfer};
use rscc::lower::{lower, LowerOptions};
use rscc::verify::{verify, VerifyOptions};

fn ring8() -> Program {
    compile(
        &common::ring(8),
        &CompileOptions::algo(rscc::synth::Algo::Ring, Some(1)),
    )
    .expect("ring compiles")
    .program
}

/// Direct reduce-scatter on 3 ranks: everyone sends straight to the owner,
/// so the owner reduces in two threadblocks joined by a dependency.
fn direct3() -> Program {
    let spec = Spec::reduce_scatter(3, 1);
    let mut transfers = Vec::new();
    for c in 0..3 {
        for (k, src) in (0..3).filter(|&s| s != c).enumerate() {
            transfers.push(Transfer {
                step: k,
                chunk: c,
                src,
                dst: c,
                channel: 0,
            });
        }
    }
    let alg = Algorithm {
        name: "direct".into(),
        spec,
        transfers,
        bcast: Vec::new(),
    };
    lower(&alg, &LowerOptions::default()).expect("lowers")
}

fn rule(p: &Program) -> (String, String) {
    match verify(p, &VerifyOptions::default()) {
        Ok(_) => ("ok".into(), String::new()),
        Err(e) => (e.rule.to_string(), e.msg),
    }
}

/// The root's two receive-reduce steps of chunk 0 in `direct3`: (tb, step)
/// of the one with the dependency, and its target.
fn dep_pair(p: &Program) -> ((usize, usize), (usize, usize)) {
    for (ti, t) in p.gpus[0].tbs.iter().enumerate() {
        for (si, s) in t.steps.iter().enumerate() {
            if let Some((d, ds)) = s.dep() {
                return ((ti, si), (d, ds));
            }
        }
    }
    panic!("direct3 has no dependency")
}

#[test]
fn originals_verify() {
    assert_eq!(rule(&ring8()).0, "ok");
    assert_eq!(rule(&direct3()).0, "ok");
}

#[test]
fn deleted_step() {
    let mut p = ring8();
    p.gpus[0].tbs[0].steps.remove(2);
    for (i, s) in p.gpus[0].tbs[0].steps.iter_mut().enumerate() {
        s.s = i as i64;
    }
    let (r, m) = rule(&p);
    assert_eq!(r, "pairing", "{m}");
}

#[test]
fn swapped_receive_peer() {
    let mut p = ring8();
    let t = &mut p.gpus[3].tbs[0];
    t.recv = (t.recv + 1) % 8;
    if t.recv == 3 {
        t.recv = 5;
    }
    let (r, m) = rule(&p);
    assert_eq!(r, "pairing", "{m}");
    assert!(m.contains("rank 3"), "{m}");
}

#[test]
fn cnt_changed_on_one_side() {
    let mut p = ring8();
    // A send whose offset leaves room for cnt 2.
    let st = p.gpus[0].tbs[0]
        .steps
        .iter_mut()
        .find(|s| s.kind.sends() && s.srcoff < 7)
        .expect("a send");
    st.cnt = 2;
    let (r, m) = rule(&p);
    assert_eq!(r, "pairing", "{m}");
    assert!(m.contains("cnt"), "{m}");
}

#[test]
fn offset_out_of_range() {
    let mut p = ring8();
    p.gpus[2].tbs[0].steps[1].srcoff = 8;
    let (r, m) = rule(&p);
    assert_eq!(r, "range", "{m}");
    assert!(m.contains("rank 2 tb 0 step 1"), "{m}");
}

#[test]
fn missing_hasdep() {
    let mut p = direct3();
    let (_, (dt, ds)) = dep_pair(&p);
    p.gpus[0].tbs[dt].steps[ds].hasdep = false;
    let (r, m) = rule(&p);
    assert_eq!(r, "hasdep", "{m}");
}

#[test]
fn dependency_cycle() {
    let mut p = direct3();
    let ((wt, ws), (dt, ds)) = dep_pair(&p);
    // Make the target also wait for the waiter.
    p.gpus[0].tbs[dt].steps[ds].depid = wt as i64;
    p.gpus[0].tbs[dt].steps[ds].deps = ws as i64;
    p.gpus[0].tbs[wt].steps[ws].hasdep = true;
    let (r, m) = rule(&p);
    assert_eq!(r, "deadlock", "{m}");
}

#[test]
fn chunk_reduced_twice() {
    let mut p = ring8();
    // Rank 0 adds its own input chunk 0 into its output once more.
    let t = &mut p.gpus[0].tbs[0];
    let mut extra = rscc::ir::Step::new(StepKind::Reduce)
        .src(Buf::Input, 0)
        .dst(Buf::Output, 0);
    extra.s = t.steps.len() as i64;
    t.steps.push(extra);
    p.inplace = false;
    let (r, m) = rule(&p);
    assert_eq!(r, "postcondition", "{m}");
    assert!(m.contains("reduced twice"), "{m}");
}

#[test]
fn chunk_never_reduced() {
    let mut p = ring8();
    // The owner's final receive-reduce-copy becomes a plain receive.
    let last = p.gpus[5].tbs[0]
        .steps
        .iter_mut()
        .find(|s| s.kind == StepKind::RecvReduceCopy && s.dstbuf == Buf::Output)
        .expect("the owner's final rrc");
    last.kind = StepKind::Recv;
    let (r, m) = rule(&p);
    assert_eq!(r, "postcondition", "{m}");
    assert!(m.contains("never reduced"), "{m}");
    assert!(m.contains("rank 5"), "{m}");
}

#[test]
fn two_threadblocks_write_one_slot_without_dependency() {
    let mut p = direct3();
    let ((wt, ws), (dt, ds)) = dep_pair(&p);
    p.gpus[0].tbs[wt].steps[ws].depid = -1;
    p.gpus[0].tbs[wt].steps[ws].deps = -1;
    p.gpus[0].tbs[dt].steps[ds].hasdep = false;
    let (r, m) = rule(&p);
    assert_eq!(r, "race", "{m}");
}

#[test]
fn receive_send_cycle_is_a_deadlock() {
    // Every rank's first step becomes a receive-reduce-send: nobody starts.
    let mut p = ring8();
    for g in &mut p.gpus {
        g.tbs[0].steps[0].kind = StepKind::RecvReduceSend;
        g.tbs[0].steps.pop();
    }
    let (r, m) = rule(&p);
    assert!(r == "deadlock" || r == "pairing", "{r}: {m}");
}

#[test]
fn uninitialised_scratch_read() {
    let mut p = ring8();
    assert_eq!(
        p.gpus[1].s_chunks, 0,
        "a single ring fuses into rrs and needs no scratch"
    );
    p.gpus[1].s_chunks = 1;
    p.gpus[1].tbs[0].steps[0].srcbuf = Buf::Scratch;
    p.gpus[1].tbs[0].steps[0].srcoff = 0;
    let (r, m) = rule(&p);
    assert_eq!(r, "uninitialised-read", "{m}");
}

#[test]
fn input_written_out_of_place() {
    let mut p = ring8();
    let last = p.gpus[4].tbs[0]
        .steps
        .iter_mut()
        .find(|s| s.kind == StepKind::RecvReduceCopy)
        .expect("an rrc");
    last.dstbuf = Buf::Input;
    last.dstoff = 4;
    let (r, m) = rule(&p);
    assert_eq!(r, "input-write", "{m}");
}

#[test]
fn too_many_steps_for_the_executor() {
    let mut p = ring8();
    let t = &mut p.gpus[0].tbs[0];
    while t.steps.len() <= 64 {
        let mut n = rscc::ir::Step::new(StepKind::Nop);
        n.s = t.steps.len() as i64;
        t.steps.push(n);
    }
    let (r, m) = rule(&p);
    assert_eq!(r, "step-count", "{m}");
}
