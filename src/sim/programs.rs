//! Reference Programs built in code: the ring and direct (all-pairs)
//! reduce-scatters used as baselines, oracles and benchmarks.

use crate::ir::{
    Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock,
};

fn program(name: String, n: usize, chunks: usize, gpus: Vec<GpuProgram>) -> Program {
    Program {
        name,
        proto: Proto::Simple,
        coll: Collective::ReduceScatter,
        runtime: Runtime::Executor,
        nchannels: 1,
        nchunksperloop: chunks as i64,
        ngpus: n as i64,
        inplace: true,
        outofplace: true,
        min_bytes: 0,
        max_bytes: Some(0),
        gpus,
    }
}

fn numbered(mut steps: Vec<Step>) -> Vec<Step> {
    for (i, s) in steps.iter_mut().enumerate() {
        s.s = i as i64;
    }
    steps
}

/// The ring reduce-scatter of msccl-xml.md §7.1 on `n` ranks: rank r has
/// one threadblock sending to r+1 and receiving from r−1; step k names
/// chunk (r−1−k) mod n: first `s`, then `rrs`, last `rrc` i → `o[0]`.
/// `None` for n < 2.
pub fn ring_reduce_scatter(n: usize) -> Option<Program> {
    if n < 2 {
        return None;
    }
    let gpus = (0..n)
        .map(|r| {
            let chunk = |k: usize| (r + 2 * n - 1 - k) % n;
            let mut steps = Vec::with_capacity(n);
            steps.push(
                Step::new(StepKind::Send)
                    .src(Buf::Input, chunk(0))
                    .dst(Buf::Input, chunk(0)),
            );
            for k in 1..n - 1 {
                steps.push(
                    Step::new(StepKind::RecvReduceSend)
                        .src(Buf::Input, chunk(k))
                        .dst(Buf::Input, chunk(k)),
                );
            }
            steps.push(
                Step::new(StepKind::RecvReduceCopy)
                    .src(Buf::Input, r)
                    .dst(Buf::Output, 0),
            );
            GpuProgram {
                id: r as i64,
                i_chunks: n as i64,
                o_chunks: 1,
                s_chunks: 0,
                tbs: vec![Threadblock {
                    id: 0,
                    send: ((r + 1) % n) as i64,
                    recv: ((r + n - 1) % n) as i64,
                    chan: 0,
                    steps: numbered(steps),
                    line: 0,
                }],
                line: 0,
            }
        })
        .collect();
    Some(program(format!("rs_ring_{n}"), n, n, gpus))
}

/// A direct (all-pairs) reduce-scatter on `n` ranks: on rank r, threadblock
/// j+1 (one per peer p) sends `i[p]` to p and receives p's `i[r]` into `s[j]`;
/// threadblock 0 copies `i[r]` to `o[0]` and adds each `s[j]` once its receive
/// is done (one dependency per `re`). `None` for n < 2.
pub fn direct_reduce_scatter(n: usize) -> Option<Program> {
    if n < 2 {
        return None;
    }
    let gpus = (0..n)
        .map(|r| {
            let peers: Vec<usize> = (0..n).filter(|&p| p != r).collect();
            let mut tbs = Vec::with_capacity(n);
            let mut red = vec![Step::new(StepKind::Copy)
                .src(Buf::Input, r)
                .dst(Buf::Output, 0)];
            for (j, _) in peers.iter().enumerate() {
                let mut st = Step::new(StepKind::Reduce)
                    .src(Buf::Scratch, j)
                    .dst(Buf::Output, 0);
                st.depid = (j + 1) as i64;
                st.deps = 1;
                red.push(st);
            }
            tbs.push(Threadblock {
                id: 0,
                send: -1,
                recv: -1,
                chan: 0,
                steps: numbered(red),
                line: 0,
            });
            for (j, &p) in peers.iter().enumerate() {
                let mut rcv = Step::new(StepKind::Recv)
                    .src(Buf::Input, r)
                    .dst(Buf::Scratch, j);
                rcv.hasdep = true;
                tbs.push(Threadblock {
                    id: (j + 1) as i64,
                    send: p as i64,
                    recv: p as i64,
                    chan: 0,
                    steps: numbered(vec![
                        Step::new(StepKind::Send)
                            .src(Buf::Input, p)
                            .dst(Buf::Input, p),
                        rcv,
                    ]),
                    line: 0,
                });
            }
            GpuProgram {
                id: r as i64,
                i_chunks: n as i64,
                o_chunks: 1,
                s_chunks: (n - 1) as i64,
                tbs,
                line: 0,
            }
        })
        .collect();
    Some(program(format!("rs_direct_{n}"), n, n, gpus))
}
