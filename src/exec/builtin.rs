//! Built-in reduce-scatter Programs for any N, used by `rscc run --builtin`
//! (the peer comparison in bench/) and by the tests:
//! - `ring`: msccl-xml.md §7.1 generalised to N ranks and `nch` channels;
//!   never writes `i`, so valid in place and out of place. On a
//!   shared-memory machine it moves the least memory traffic: every input
//!   byte is read once, partial sums travel through cache-resident FIFOs,
//!   every output byte is written once ((N+1)·S in all).
//! - `allpairs`: the msccl-tools `reducescatter_allpairs.py` shape (§7.2):
//!   in place only, scratch buffer, multi-chunk steps, a nop chain and a
//!   run of fusable `re` steps.

use crate::ir::{
    Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock,
};

fn program(
    name: String,
    n: usize,
    c: usize,
    nch: usize,
    inplace: bool,
    outofplace: bool,
) -> Program {
    Program {
        name,
        proto: Proto::Simple,
        coll: Collective::ReduceScatter,
        runtime: Runtime::Executor,
        nchannels: nch as i64,
        nchunksperloop: c as i64,
        ngpus: n as i64,
        inplace,
        outofplace,
        min_bytes: 0,
        max_bytes: Some(0),
        gpus: Vec::new(),
    }
}

fn numbered(mut steps: Vec<Step>) -> Vec<Step> {
    for (k, s) in steps.iter_mut().enumerate() {
        s.s = k as i64;
    }
    steps
}

/// Ring reduce-scatter over `n ≥ 2` ranks with `nch ≥ 1` channels
/// (nchunksperloop = n·nch; channel h handles chunk h of every block).
pub fn ring(n: usize, nch: usize) -> Program {
    let nch = nch.max(1);
    let mut p = program(format!("rs_ring_{n}x{nch}"), n, n * nch, nch, true, true);
    for r in 0..n {
        let mut tbs = Vec::new();
        for h in 0..nch {
            let blk = |k: usize| ((r + 2 * n - 1 - k) % n) * nch + h;
            let mut steps = Vec::new();
            if n == 1 {
                steps.push(
                    Step::new(StepKind::Copy)
                        .src(Buf::Input, h)
                        .dst(Buf::Output, h),
                );
            } else {
                steps.push(
                    Step::new(StepKind::Send)
                        .src(Buf::Input, blk(0))
                        .dst(Buf::Input, blk(0)),
                );
                for k in 1..n - 1 {
                    steps.push(
                        Step::new(StepKind::RecvReduceSend)
                            .src(Buf::Input, blk(k))
                            .dst(Buf::Input, blk(k)),
                    );
                }
                steps.push(
                    Step::new(StepKind::RecvReduceCopy)
                        .src(Buf::Input, r * nch + h)
                        .dst(Buf::Output, h),
                );
            }
            tbs.push(Threadblock {
                id: h as i64,
                send: if n > 1 { ((r + 1) % n) as i64 } else { -1 },
                recv: if n > 1 { ((r + n - 1) % n) as i64 } else { -1 },
                chan: h as i64,
                steps: numbered(steps),
                line: 0,
            });
        }
        p.gpus.push(GpuProgram {
            id: r as i64,
            i_chunks: (n * nch) as i64,
            o_chunks: nch as i64,
            s_chunks: 0,
            tbs,
            line: 0,
        });
    }
    p
}

/// Position of the receive in the peer threadblock of `r` for peer `q`.
fn recv_pos(r: usize, q: usize) -> i64 {
    if r < q {
        1
    } else {
        0
    }
}

/// msccl-tools-style all-pairs reduce-scatter for `n ≥ 2` ranks: in place,
/// nchunksperloop = n², blocks of n chunks, peers' contributions received
/// into scratch, then reduced into `i[r·n …]` by TB 0 after a nop chain.
pub fn allpairs(n: usize) -> Program {
    let n = n.max(2);
    let c = n * n;
    let mut p = program(format!("rs_allpairs_{n}"), n, c, 1, true, false);
    for r in 0..n {
        let peers: Vec<usize> = (0..n).filter(|&q| q != r).collect();
        let mut tbs = Vec::new();
        // TB 0: the local reduction.
        let mut steps = Vec::new();
        for (j, _) in peers.iter().enumerate().skip(1) {
            let mut nop = Step::new(StepKind::Nop).count(0);
            nop.depid = j as i64 + 1;
            nop.deps = recv_pos(r, peers[j]);
            steps.push(nop);
        }
        for (j, _) in peers.iter().enumerate() {
            let mut re = Step::new(StepKind::Reduce)
                .src(Buf::Scratch, j * n)
                .dst(Buf::Input, r * n)
                .count(n);
            if j == 0 {
                re.depid = 1;
                re.deps = recv_pos(r, peers[0]);
            }
            steps.push(re);
        }
        tbs.push(Threadblock {
            id: 0,
            send: -1,
            recv: -1,
            chan: 0,
            steps: numbered(steps),
            line: 0,
        });
        for (j, &q) in peers.iter().enumerate() {
            let send = Step::new(StepKind::Send)
                .src(Buf::Input, q * n)
                .dst(Buf::Scratch, 0)
                .count(n);
            let mut recv = Step::new(StepKind::Recv)
                .src(Buf::Input, r * n)
                .dst(Buf::Scratch, j * n)
                .count(n);
            recv.hasdep = true;
            tbs.push(Threadblock {
                id: j as i64 + 1,
                send: q as i64,
                recv: q as i64,
                chan: 0,
                // Lower rank sends first, higher rank receives first: every
                // send/receive pair is a rendezvous, so this is deadlock-free
                // for any FIFO depth.
                steps: numbered(if r < q {
                    vec![send, recv]
                } else {
                    vec![recv, send]
                }),
                line: 0,
            });
        }
        p.gpus.push(GpuProgram {
            id: r as i64,
            i_chunks: c as i64,
            o_chunks: 0,
            s_chunks: ((n - 1) * n) as i64,
            tbs,
            line: 0,
        });
    }
    p
}
