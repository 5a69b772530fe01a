//! MSCCL XML reader and writer against hand-written files
//! (tests/data/xml/), round trips and a property test.

use proptest::prelude::*;
use rscc::back::msccl_xml as writer;
use rscc::front::msccl_xml::{load, parse};
use rscc::ir::{Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock};
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/xml")
        .join(name)
}

fn round_trip(p: &Program) -> Program {
    let text = writer::to_string(p);
    parse(&text, "written.xml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn ring_rs_8_reference_example() {
    let p = load(&data("ring_rs_8.xml")).unwrap();
    assert_eq!(p.name, "rs_ring_8");
    assert_eq!(
        (p.runtime, p.coll, p.proto),
        (Runtime::Executor, Collective::ReduceScatter, Proto::Simple)
    );
    assert_eq!((p.ngpus, p.nchunksperloop, p.nchannels), (8, 8, 1));
    assert!(p.inplace && p.outofplace);
    assert_eq!((p.min_bytes, p.max_bytes), (0, Some(0)));
    assert_eq!(p.gpus.len(), 8);
    for (r, g) in p.gpus.iter().enumerate() {
        let r = r as i64;
        assert_eq!((g.id, g.i_chunks, g.o_chunks, g.s_chunks), (r, 8, 1, 0));
        assert_eq!(g.line, 2 + 12 * r as usize);
        let tb = &g.tbs[0];
        assert_eq!((tb.send, tb.recv, tb.chan), ((r + 1) % 8, (r + 7) % 8, 0));
        let kinds: Vec<&str> = tb.steps.iter().map(|s| s.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["s", "rrs", "rrs", "rrs", "rrs", "rrs", "rrs", "rrc"]
        );
        for (k, s) in tb.steps.iter().enumerate() {
            assert_eq!(s.s, k as i64);
            assert_eq!(s.srcoff, (r - 1 - k as i64).rem_euclid(8));
            assert_eq!(s.line, g.line + 2 + k);
        }
        let last = &tb.steps[7];
        assert_eq!(
            (last.srcbuf, last.dstbuf, last.dstoff),
            (Buf::Input, Buf::Output, 0)
        );
    }
    // The file is in the writer's canonical form: writing gives it back.
    let text = std::fs::read_to_string(data("ring_rs_8.xml")).unwrap();
    assert_eq!(writer::to_string(&p), text);
}

#[test]
fn allpairs_in_place_with_scratch_nops_and_fused_reduces() {
    let p = load(&data("allpairs_rs_4.xml")).unwrap();
    assert!(p.inplace && !p.outofplace);
    assert_eq!(p.nchunksperloop, 16);
    for g in &p.gpus {
        assert_eq!((g.i_chunks, g.o_chunks, g.s_chunks), (16, 0, 12));
        assert_eq!(g.tbs.len(), 4);
        let tb0 = &g.tbs[0];
        assert_eq!((tb0.send, tb0.recv), (-1, -1));
        let kinds: Vec<StepKind> = tb0.steps.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                StepKind::Nop,
                StepKind::Nop,
                StepKind::Reduce,
                StepKind::Reduce,
                StepKind::Reduce
            ]
        );
        assert_eq!(tb0.steps[0].dep(), Some((2, 1)));
        assert_eq!(tb0.steps[1].dep(), Some((3, 1)));
        assert_eq!(tb0.steps[2].dep(), Some((1, 1)));
        assert_eq!(tb0.steps[3].dep(), None);
        assert!(tb0.steps[2..]
            .iter()
            .all(|s| s.dstbuf == Buf::Input && s.dstoff == 4 * g.id && s.cnt == 4));
        for tb in &g.tbs[1..] {
            assert_eq!(tb.send, tb.recv);
            assert!(tb.steps[1].hasdep && tb.steps[1].kind == StepKind::Recv);
        }
    }
    assert_eq!(
        Program::positionless(&round_trip(&p)),
        Program::positionless(&p)
    );
}

/// The writer's output for the msccl-tools-style file and for the lenient
/// file (comments, hex, CRLF, unknown elements gone), pinned.
#[test]
fn written_schedules_snapshot() {
    let p = load(&data("allpairs_rs_4.xml")).unwrap();
    insta::assert_snapshot!("allpairs_rs_4_written", writer::to_string(&p));
    let p = load(&data("lenient.xml")).unwrap();
    insta::assert_snapshot!("lenient_written", writer::to_string(&p));
}

#[test]
fn legacy_reduce_scatter() {
    let p = load(&data("legacy_ring_rs_4.xml")).unwrap();
    assert_eq!(
        (p.runtime, p.coll, p.proto),
        (Runtime::Legacy, Collective::ReduceScatter, Proto::LL)
    );
    assert_eq!((p.min_bytes, p.max_bytes), (0, None));
    assert!(p.inplace && !p.outofplace, "legacy outofplace = !inplace");
    // A legacy file without maxBytes is written with legacy's own default,
    // so it keeps its meaning (0 would mean "never selected").
    let text = writer::to_string(&p);
    assert!(text.contains("coll=\"reduce_scatter\"") && text.contains("maxBytes=\"134217728\""));
    let mut back = round_trip(&p);
    assert_eq!(back.max_bytes, Some(1 << 27));
    back.max_bytes = None;
    assert_eq!(Program::positionless(&back), Program::positionless(&p));
}

#[test]
fn lenient_forms_the_runtime_accepts() {
    let raw = std::fs::read_to_string(data("lenient.xml")).unwrap();
    assert!(
        raw.contains("\r\n"),
        "lenient.xml must keep its CRLF line ends"
    );
    let p = load(&data("lenient.xml")).unwrap();
    assert_eq!(p.proto, Proto::LL128);
    assert_eq!(p.nchannels, 1, "0x1 is hex");
    assert_eq!(p.min_bytes, 8, "010 is octal");
    assert_eq!(p.max_bytes, Some(4096), "trailing junk is ignored");
    assert_eq!(p.gpus.len(), 2);
    let g0 = &p.gpus[0];
    assert_eq!(
        g0.line, 7,
        "CRLF line ends and multi-line comments keep lines right"
    );
    let s = &g0.tbs[0].steps;
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].srcoff, s[0].line), (1, 10));
    assert_eq!(
        (s[1].kind, s[1].cnt, s[1].line),
        (StepKind::RecvReduceCopy, 1, 11)
    );
    let g1 = &p.gpus[1];
    assert_eq!(
        g1.tbs[0].steps.len(),
        2,
        "unknown <extra/> inside <tb> is skipped"
    );
    assert_eq!(g1.tbs[0].steps[0].cnt, 1, "01 is octal 1");
    // Written back, the file is canonical and reads the same.
    let text = writer::to_string(&p);
    assert!(!text.contains('\r') && !text.contains("<!--") && !text.contains("notes"));
    assert_eq!(
        Program::positionless(&round_trip(&p)),
        Program::positionless(&p)
    );
}

#[test]
fn unknown_values_are_rejected() {
    let text = std::fs::read_to_string(data("ring_rs_2.xml")).unwrap();
    load(&data("ring_rs_2.xml")).unwrap();
    let cases = [
        (
            "proto=\"Simple\"",
            "proto=\"simple\"",
            "unknown proto=\"simple\"",
        ),
        (
            "coll=\"reducescatter\"",
            "coll=\"ReduceScatter\"",
            "unknown coll=\"ReduceScatter\"",
        ),
        (
            "coll=\"reducescatter\"",
            "coll=\"alltoall\"",
            "does not handle",
        ),
        ("type=\"rrc\"", "type=\"rr\"", "unknown step type=\"rr\""),
        ("cnt=\"1\"", "cnt=\"72\"", "cnt=72 is outside 0..71"),
        ("<step s=\"1\"", "<step s=\"64\"", "s=64 is outside 0..63"),
        ("send=\"1\"", "send=\"-2\"", "send=-2 must be -1"),
        ("chan=\"0\"", "chan=\"33\"", "chan=33 is outside 0..32"),
        (
            " maxBytes=\"0\"",
            "",
            "missing required attribute maxBytes (the executor runtime requires it",
        ),
    ];
    for (from, to, reason) in cases {
        let bad = text.replacen(from, to, 1);
        let e = parse(&bad, "x.xml").expect_err(to).to_string();
        assert!(e.contains(reason), "{to}: {e}");
        assert!(e.starts_with("x.xml: line "), "{e}");
    }
    // chan="32" passes the parser (the verifier reports it); s=64 is fine for legacy.
    parse(&text.replacen("chan=\"0\"", "chan=\"32\"", 1), "x.xml").unwrap();
    let legacy = text
        .replacen("coll=\"reducescatter\"", "coll=\"reduce_scatter\"", 1)
        .replacen("<step s=\"1\"", "<step s=\"200\"", 1);
    assert_eq!(
        parse(&legacy, "x.xml").unwrap().gpus[0].tbs[0].steps[1].s,
        200
    );
}

// ---------------------------------------------------------------------------
// Property test: random small Programs the runtime's parser accepts survive
// write → parse unchanged (apart from `line` and `s`).

/// xorshift64*, enough for building test programs from a seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in lo..hi (hi exclusive, hi > lo).
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo) as u64) as i64
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

const KINDS: [StepKind; 9] = [
    StepKind::Send,
    StepKind::Recv,
    StepKind::RecvCopySend,
    StepKind::RecvReduceSend,
    StepKind::RecvReduceCopy,
    StepKind::RecvReduceCopySend,
    StepKind::Copy,
    StepKind::Reduce,
    StepKind::Nop,
];

fn random_program(seed: u64) -> Program {
    let mut r = Rng(seed | 1);
    let (runtime, coll) = match r.range(0, 4) {
        0 => (Runtime::Executor, Collective::ReduceScatter),
        1 => (Runtime::Executor, Collective::AllGather),
        2 => (Runtime::Executor, Collective::AllReduce),
        _ => (Runtime::Legacy, Collective::ReduceScatter),
    };
    let ngpus = r.range(1, 5);
    let k = r.range(1, 4);
    let c = ngpus * k;
    let nchannels = r.range(1, 4);
    let inplace = r.coin();
    let min_bytes = r.range(0, 1000);
    let alphabet = b"abcXYZ019_.-";
    let name: String = (0..r.range(0, 12))
        .map(|_| alphabet[r.range(0, alphabet.len() as i64) as usize] as char)
        .collect();
    let mut gpus = Vec::new();
    for id in 0..ngpus {
        // Legacy checks i/o chunk counts against nchunksperloop when > 0.
        let (i_full, o_full) = match coll {
            Collective::ReduceScatter => (c, k),
            Collective::AllGather => (k, c),
            Collective::AllReduce => (c, c),
        };
        let i_chunks = if r.coin() { i_full } else { 0 };
        let o_chunks = if r.coin() { o_full } else { 0 };
        let s_chunks = r.range(0, 5);
        let chunks = |b: Buf| match b {
            Buf::Input => i_chunks,
            Buf::Output => o_chunks,
            Buf::Scratch => s_chunks,
        };
        let mut tbs = Vec::new();
        for tid in 0..r.range(0, 4) {
            let peer = |r: &mut Rng| {
                let p = r.range(-1, ngpus);
                if p == id {
                    -1
                } else {
                    p
                }
            };
            let send = peer(&mut r);
            let recv = peer(&mut r);
            let mut steps = Vec::new();
            for _ in 0..r.range(0, 7) {
                let mut kind = KINDS[r.range(0, 9) as usize];
                if (kind.sends() && send < 0) || (kind.recvs() && recv < 0) {
                    kind = StepKind::Copy;
                }
                let mut s = Step::new(kind);
                let bufs = [Buf::Input, Buf::Output, Buf::Scratch];
                s.srcbuf = bufs[r.range(0, 3) as usize];
                s.dstbuf = bufs[r.range(0, 3) as usize];
                // In range for the checked fields (-1 always is).
                s.srcoff = r.range(-1, chunks(s.srcbuf).max(0));
                s.dstoff = r.range(-1, chunks(s.dstbuf).max(0));
                s.cnt = if kind == StepKind::Nop {
                    r.range(-1, 3)
                } else {
                    r.range(0, 72)
                };
                if r.coin() {
                    s.depid = r.range(0, 4);
                    s.deps = r.range(0, 7);
                }
                s.hasdep = r.coin();
                s.s = r.range(0, 64);
                steps.push(s);
            }
            repair_dependency_chains(&mut steps);
            tbs.push(Threadblock {
                id: tid,
                send,
                recv,
                chan: r.range(0, nchannels),
                steps,
                line: 0,
            });
        }
        gpus.push(GpuProgram {
            id,
            i_chunks,
            o_chunks,
            s_chunks,
            tbs,
            line: 0,
        });
    }
    Program {
        name,
        proto: [Proto::Simple, Proto::LL, Proto::LL128][r.range(0, 3) as usize],
        coll,
        runtime,
        nchannels,
        nchunksperloop: c,
        ngpus,
        inplace,
        outofplace: if runtime == Runtime::Legacy {
            !inplace
        } else {
            r.coin()
        },
        min_bytes,
        max_bytes: Some(min_bytes + r.range(0, 1 << 20)),
        gpus,
    }
}

/// The runtime rejects a real step after `nop`s with dependencies unless
/// the step has `depid >= 0` itself (fused `re` continuations excepted).
fn repair_dependency_chains(steps: &mut [Step]) {
    let mut pending = 0;
    let mut fusion = None;
    for s in steps.iter_mut() {
        if s.depid >= 0 {
            pending += 1;
        }
        if s.kind == StepKind::Nop {
            continue;
        }
        let cont = s.kind == StepKind::Reduce
            && fusion == Some((s.dstbuf, s.dstoff, s.srcbuf))
            && s.depid == -1;
        if !cont {
            if pending > 0 && s.depid < 0 {
                s.depid = 0;
                s.deps = 0;
            }
            pending = 0;
        }
        fusion =
            (s.kind == StepKind::Reduce && !s.hasdep).then_some((s.dstbuf, s.dstoff, s.srcbuf));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn write_then_parse_is_identity(seed in any::<u64>()) {
        let p = random_program(seed);
        let text = writer::to_string(&p);
        let back = parse(&text, "prop.xml").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(Program::positionless(&back), Program::positionless(&p));
        // And the text is a fixed point.
        prop_assert_eq!(writer::to_string(&back), text);
    }
}

/// 1M steps written and parsed; run with
/// `cargo test --release --test xml_reader -- --ignored --nocapture`.
#[test]
#[ignore]
fn speed_one_million_steps() {
    // 300 ranks × 60 TBs × 56 steps = 1 008 000 steps; per rank
    // 1 + 300 + 60 + 3360 = 3721 nodes, under the runtime's limit.
    let (ranks, tbs, steps) = (300i64, 60i64, 56usize);
    let gpus = (0..ranks)
        .map(|id| GpuProgram {
            id,
            i_chunks: ranks,
            o_chunks: 1,
            s_chunks: 0,
            tbs: (0..tbs)
                .map(|t| Threadblock {
                    id: t,
                    send: (id + 1) % ranks,
                    recv: (id + ranks - 1) % ranks,
                    chan: t % 32,
                    steps: (0..steps)
                        .map(|k| {
                            Step::new(if k == 0 {
                                StepKind::Send
                            } else {
                                StepKind::RecvReduceSend
                            })
                            .src(Buf::Input, k % ranks as usize)
                            .dst(Buf::Input, k % ranks as usize)
                        })
                        .collect(),
                    line: 0,
                })
                .collect(),
            line: 0,
        })
        .collect();
    let p = Program {
        name: "big".into(),
        proto: Proto::Simple,
        coll: Collective::ReduceScatter,
        runtime: Runtime::Executor,
        nchannels: 32,
        nchunksperloop: ranks,
        ngpus: ranks,
        inplace: true,
        outofplace: true,
        min_bytes: 0,
        max_bytes: Some(0),
        gpus,
    };
    let t = std::time::Instant::now();
    let cpu_w = cpu_seconds();
    let mut buf = Vec::new();
    writer::write(&p, &mut buf).unwrap();
    let tw = t.elapsed();
    let cpu_w = cpu_seconds().zip(cpu_w).map(|(b, a)| b - a);
    let t = std::time::Instant::now();
    let text = writer::to_string(&p);
    let ts = t.elapsed();
    let t = std::time::Instant::now();
    let cpu = cpu_seconds();
    let back = parse(&text, "big.xml").unwrap();
    let tp = t.elapsed();
    let cpu = cpu_seconds().zip(cpu).map(|(b, a)| b - a);
    assert_eq!(back.num_steps(), p.num_steps());
    println!(
        "{} steps, {:.1} MB: write {:?} (CPU {:?} s; to_string {:?}), parse {:?} (CPU {:?} s)",
        p.num_steps(),
        text.len() as f64 / 1e6,
        tw,
        cpu_w,
        ts,
        tp,
        cpu
    );
}

/// This process's user + system CPU time from /proc (Linux), in seconds;
/// the machine is shared, so wall time alone overstates.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
