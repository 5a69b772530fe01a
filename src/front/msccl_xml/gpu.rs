//! The runtime's parser, per rank: `<gpu>` (chunk counts, dense
//! threadblock ids), `<tb>` (id, peers, channel) and `<step>` (type,
//! buffers, checked offsets, count, the per-channel threadblock limit,
//! reduce fusion and the nop-chain rule), with the checks the runtime's
//! parser makes on each.

use super::lex::{show, Tag, STEP_KEYS};
use super::parser::{Header, Parser};
use crate::front::FrontError;
use crate::ir::msccl::{MAX_SUBS, MAX_TBS_PER_CHANNEL};
use crate::ir::{Buf, Collective, GpuProgram, Runtime, Step, StepKind, Threadblock};
use std::collections::HashMap;

/// `cnt` must be below this (`MSCCL_MAX_COUNT`).
const MAX_COUNT: i64 = crate::ir::msccl::MAX_COUNT as i64;
/// Largest `chan` the parsers accept (`MAXCHANNELS`; 32 itself is out of
/// bounds at run time, which the verifier reports).
const MAX_CHAN: i64 = crate::ir::msccl::MAX_CHANNELS as i64;

impl<'a> Parser<'a> {
    pub(super) fn gpu(&mut self, t: &Tag<'a>, hdr: &Header) -> Result<GpuProgram, FrontError> {
        let [id, ic, oc, sc] = self
            .lx
            .get_all(t, &["id", "i_chunks", "o_chunks", "s_chunks"]);
        let id = self.req_int(t, "id", id, "")?;
        let i_chunks = self.req_int(t, "i_chunks", ic, "")?;
        let o_chunks = self.req_int(t, "o_chunks", oc, "")?;
        let s_chunks = self.req_int(t, "s_chunks", sc, "")?;
        if s_chunks < 0 {
            return Err(self.err(
                t.line,
                "gpu",
                format!("s_chunks={s_chunks} must not be negative"),
            ));
        }
        if hdr.runtime == Runtime::Legacy {
            let in_mult = if hdr.coll == Collective::AllGather {
                hdr.ngpus
            } else {
                1
            };
            let out_mult = if hdr.coll == Collective::ReduceScatter {
                hdr.ngpus
            } else {
                1
            };
            if (i_chunks > 0 && i_chunks * in_mult != hdr.nchunksperloop)
                || (o_chunks > 0 && o_chunks * out_mult != hdr.nchunksperloop)
            {
                return Err(self.err(
                    t.line,
                    "gpu",
                    format!(
                        "i_chunks={i_chunks} / o_chunks={o_chunks} do not match nchunksperloop={} for coll=\"{}\" (the legacy runtime needs i_chunks×{in_mult} and o_chunks×{out_mult} to equal it when they are > 0)",
                        hdr.nchunksperloop, hdr.coll_str
                    ),
                ));
            }
        }
        let gpu = GpuCtx {
            id,
            chunks: [i_chunks, o_chunks, s_chunks],
            line: t.line,
        };
        let max_tb = hdr.runtime.max_tb_id() as i64;
        let mut first_line: HashMap<i64, usize> = HashMap::new();
        let mut send_tbs = [0usize; MAX_CHAN as usize + 1];
        let mut recv_tbs = [0usize; MAX_CHAN as usize + 1];
        let mut tbs: Vec<Threadblock> = Vec::new();
        while let Some(c) = self.lx.child(t)? {
            if c.name != b"tb" {
                self.lx.skip(&c)?;
                continue;
            }
            if tbs.len() == MAX_SUBS {
                return Err(self.err(
                    c.line,
                    "tb",
                    format!("more than {MAX_SUBS} <tb> elements in one <gpu>; the runtime's child table holds {MAX_SUBS}"),
                ));
            }
            let tb = self.tb(&c, hdr, &gpu, max_tb, &mut first_line, &send_tbs, &recv_tbs)?;
            let chan = tb.chan as usize; // checked 0..=32 in tb()
            if tb.send >= 0 {
                send_tbs[chan] += 1;
            }
            if tb.recv >= 0 {
                recv_tbs[chan] += 1;
            }
            tbs.push(tb);
        }
        // Dense ids: the runtime walks ids upward and fails at the first
        // present id whose predecessor is absent.
        let mut present = vec![false; max_tb.max(0) as usize];
        for tb in &tbs {
            present[tb.id as usize] = true;
        }
        for i in 1..present.len() {
            if present[i] && !present[i - 1] {
                let l = first_line.get(&(i as i64)).copied().unwrap_or(t.line);
                return Err(self.err(
                    t.line,
                    "gpu",
                    format!(
                        "threadblock ids on gpu {id} are not dense: id {} is missing but id {i} exists (line {l}); ids must be 0..n-1",
                        i - 1
                    ),
                ));
            }
        }
        tbs.sort_by_key(|tb| tb.id);
        Ok(GpuProgram {
            id,
            i_chunks,
            o_chunks,
            s_chunks,
            tbs,
            line: t.line,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn tb(
        &mut self,
        t: &Tag<'a>,
        hdr: &Header,
        gpu: &GpuCtx,
        max_tb: i64,
        first_line: &mut HashMap<i64, usize>,
        send_tbs: &[usize; MAX_CHAN as usize + 1],
        recv_tbs: &[usize; MAX_CHAN as usize + 1],
    ) -> Result<Threadblock, FrontError> {
        let [id, send, recv, chan] = self.lx.get_all(t, &["id", "send", "recv", "chan"]);
        let id = self.req_int(t, "id", id, "")?;
        let recv = self.req_int(t, "recv", recv, "")?;
        let send = self.req_int(t, "send", send, "")?;
        let chan = self.req_int(t, "chan", chan, "")?;
        let rt = hdr.runtime.name();
        if id < 0 {
            return Err(self.err(
                t.line,
                "tb",
                format!("threadblock id {id} must not be negative"),
            ));
        }
        if id >= max_tb {
            return Err(self.err(
                t.line,
                "tb",
                format!("threadblock id {id} is not below {max_tb}, the {rt} runtime's limit"),
            ));
        }
        if let Some(&l) = first_line.get(&id) {
            return Err(self.err(
                t.line,
                "tb",
                format!(
                    "duplicate threadblock id {id} on gpu {} (first on line {l})",
                    gpu.id
                ),
            ));
        }
        first_line.insert(id, t.line);
        for (what, p) in [("send", send), ("recv", recv)] {
            if p == gpu.id {
                return Err(self.err(
                    t.line,
                    "tb",
                    format!(
                        "{what}={p} is the gpu's own rank; a threadblock cannot talk to itself"
                    ),
                ));
            }
            if p < -1 {
                return Err(self.err(
                    t.line,
                    "tb",
                    format!("{what}={p} must be -1 (none) or a rank"),
                ));
            }
            if hdr.runtime == Runtime::Legacy && p >= hdr.ngpus {
                return Err(self.err(
                    t.line,
                    "tb",
                    format!(
                        "{what}={p} is not below ngpus={}; the legacy runtime rejects it",
                        hdr.ngpus
                    ),
                ));
            }
        }
        if !(0..=MAX_CHAN).contains(&chan) {
            return Err(self.err(
                t.line,
                "tb",
                format!("chan={chan} is outside 0..{MAX_CHAN}"),
            ));
        }
        let mut st = TbState {
            pending_deps: 0,
            fusion: None,
        };
        self.steps.clear();
        while let Some(c) = self.lx.child(t)? {
            if c.name != b"step" {
                self.lx.skip(&c)?;
                continue;
            }
            if self.steps.len() == MAX_SUBS {
                return Err(self.err(
                    c.line,
                    "step",
                    format!("more than {MAX_SUBS} <step> elements in one <tb>; the runtime's child table holds {MAX_SUBS}"),
                ));
            }
            let step = self.step(&c, hdr, gpu, send, recv, chan, send_tbs, recv_tbs, &mut st)?;
            // A <step> with content: the runtime calls a null handler on any
            // child element and crashes; comments are fine.
            if let Some(inner) = self.lx.child(&c)? {
                return Err(self.err(
                    inner.line,
                    &inner.name_str(),
                    "element inside <step>; the runtime crashes on a child element of <step>",
                ));
            }
            self.steps.push(step);
        }
        Ok(Threadblock {
            id,
            send,
            recv,
            chan,
            steps: self.steps.drain(..).collect(),
            line: t.line,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        t: &Tag<'a>,
        hdr: &Header,
        gpu: &GpuCtx,
        send: i64,
        recv: i64,
        chan: i64,
        send_tbs: &[usize; MAX_CHAN as usize + 1],
        recv_tbs: &[usize; MAX_CHAN as usize + 1],
        st: &mut TbState,
    ) -> Result<Step, FrontError> {
        let v = self.lx.step_values(t);
        // Value i of STEP_KEYS as an int: the lexer's reading of a short
        // decimal, or the general one (which says what is wrong).
        let int = |i: usize| match self.lx.decimal(t, i) {
            Some(n) => Ok(n),
            None => self.req_int(t, STEP_KEYS[i], v[i], ""),
        };
        let s = int(0)?;
        let srcoff = int(3)?;
        let srcbuf_v = self.required(t, "srcbuf", v[2], "")?;
        let dstoff = int(5)?;
        let dstbuf_v = self.required(t, "dstbuf", v[4], "")?;
        let cnt = int(6)?;
        let ty = self.required(t, "type", v[1], "")?;
        let depid = int(7)?;
        let deps = int(8)?;
        let hasdep = int(9)?;
        let max_steps = hdr.runtime.max_steps() as i64;
        if !(0..max_steps).contains(&s) {
            return Err(self.err(
                t.line,
                "step",
                format!(
                    "s={s} is outside 0..{} (the {} runtime's step limit is {max_steps})",
                    max_steps - 1,
                    rt_name(hdr.runtime)
                ),
            ));
        }
        let kind = match StepKind::from_bytes(ty) {
            Some(k) => k,
            None if ty == b"ra" => {
                return Err(self.err(
                    t.line,
                    "step",
                    "type=\"ra\": the legacy parser accepts it but its kernel has no code for it (the threadblock just stops), and the executor rejects it",
                ))
            }
            None => {
                return Err(self.err(
                    t.line,
                    "step",
                    format!("unknown step type=\"{}\"; expected s, r, rcs, rrs, rrc, rrcs, cpy, re or nop", show(ty)),
                ))
            }
        };
        let buf = |key: &str, v: &[u8]| {
            Buf::from_bytes(v).ok_or_else(|| {
                self.err(
                    t.line,
                    "step",
                    format!("{key}=\"{}\" is not a buffer; expected i, o or s", show(v)),
                )
            })
        };
        let srcbuf = buf("srcbuf", srcbuf_v)?;
        let dstbuf = buf("dstbuf", dstbuf_v)?;
        if hasdep != 0 && hasdep != 1 {
            return Err(self.err(t.line, "step", format!("hasdep={hasdep} must be 0 or 1")));
        }
        if depid >= 0 {
            st.pending_deps += 1;
        }
        if kind != StepKind::Nop {
            if !(0..MAX_COUNT).contains(&cnt) {
                return Err(self.err(
                    t.line,
                    "step",
                    format!(
                        "cnt={cnt} is outside 0..{} (the runtime's MSCCL_MAX_COUNT is {MAX_COUNT})",
                        MAX_COUNT - 1
                    ),
                ));
            }
            let c = chan as usize;
            if kind.sends() {
                if send < 0 {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("{kind} step sends, but its threadblock has send=-1"),
                    ));
                }
                if send_tbs[c] >= MAX_TBS_PER_CHANNEL {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("too many threadblocks with a send peer on channel {chan}: the runtime allows {MAX_TBS_PER_CHANNEL}"),
                    ));
                }
            }
            if kind.recvs() {
                if recv < 0 {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("{kind} step receives, but its threadblock has recv=-1"),
                    ));
                }
                if recv_tbs[c] >= MAX_TBS_PER_CHANNEL {
                    return Err(self.err(
                        t.line,
                        "step",
                        format!("too many threadblocks with a recv peer on channel {chan}: the runtime allows {MAX_TBS_PER_CHANNEL}"),
                    ));
                }
            }
            let (check_src, check_dst) = parser_checked_fields(kind);
            if check_src {
                self.bounds(t, gpu, "src", srcbuf, srcoff)?;
            }
            if check_dst {
                self.bounds(t, gpu, "dst", dstbuf, dstoff)?;
            }
            // Reduce fusion and the nop-chain rule, as the runtime's parser.
            let continuation = kind == StepKind::Reduce
                && st.fusion == Some((dstbuf, dstoff, srcbuf))
                && depid == -1;
            if !continuation {
                if st.pending_deps > 0 && depid < 0 {
                    return Err(self.err(
                        t.line,
                        "step",
                        "the nop steps before this step carry dependencies, so the step itself must have depid >= 0 (the runtime: \"when there is a chain of dependencies, the last reduction must be a part of the first immediate instruction\")",
                    ));
                }
                st.pending_deps = 0;
            }
            st.fusion = if kind == StepKind::Reduce && hasdep == 0 {
                Some((dstbuf, dstoff, srcbuf))
            } else {
                None
            };
        }
        Ok(Step {
            s,
            kind,
            srcbuf,
            srcoff,
            dstbuf,
            dstoff,
            cnt,
            depid,
            deps,
            hasdep: hasdep == 1,
            line: t.line,
        })
    }

    fn bounds(
        &self,
        t: &Tag<'a>,
        gpu: &GpuCtx,
        which: &str,
        b: Buf,
        off: i64,
    ) -> Result<(), FrontError> {
        let n = gpu.chunks[b as usize];
        if off < -1 || off >= n {
            return Err(self.err(
                t.line,
                "step",
                format!(
                    "{which}off={off} is out of range for buffer {} ({}_chunks={n} on gpu {}, line {}); the runtime's parser requires -1 <= {which}off < {n}",
                    b.letter(),
                    b.letter(),
                    gpu.id,
                    gpu.line
                ),
            ));
        }
        Ok(())
    }
}

fn rt_name(r: Runtime) -> &'static str {
    r.name()
}

/// Which start offsets the runtime's parser checks per step type (§4).
fn parser_checked_fields(k: StepKind) -> (bool, bool) {
    match k {
        StepKind::Send | StepKind::RecvReduceSend => (true, false),
        StepKind::Recv | StepKind::RecvCopySend => (false, true),
        StepKind::RecvReduceCopy | StepKind::Nop => (false, false),
        StepKind::RecvReduceCopySend | StepKind::Copy | StepKind::Reduce => (true, true),
    }
}

struct GpuCtx {
    id: i64,
    /// i, o, s chunk counts, indexed by `Buf as usize`.
    chunks: [i64; 3],
    line: usize,
}

/// Per-threadblock state of the runtime's parser.
struct TbState {
    /// Dependencies (`depid >= 0`) seen since the last non-fused real step.
    pending_deps: usize,
    /// `(dstbuf, dstoff, srcbuf)` of an `re` the next `re` may fuse with.
    fusion: Option<(Buf, i64, Buf)>,
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::testing::*;

    #[test]
    fn nop_chain_must_end_in_a_dependent_step() {
        let nop = r#"s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0""#;
        let snd = OK_STEP.replace("s=\"0\"", "s=\"1\"");
        let e = err(&gpu0(&format!("{}\n{}", step(nop), step(&snd))));
        assert!(e.contains("line 5") && e.contains("depid >= 0"), "{e}");
    }

    #[test]
    fn checked_offsets_and_peers() {
        let e = err(&gpu0(&step(
            &OK_STEP.replace("srcoff=\"1\"", "srcoff=\"2\""),
        )));
        assert!(e.contains("srcoff=2 is out of range"), "{e}");
        // rrc's fields are not checked by the parser.
        let rrc = OK_STEP
            .replace("type=\"s\"", "type=\"rrc\"")
            .replace("srcoff=\"1\"", "srcoff=\"9\"");
        parse(&gpu0(&step(&rrc)), "t.xml").unwrap();
        let t = gpu0(&step(OK_STEP)).replace("send=\"1\"", "send=\"-1\"");
        assert!(err(&t).contains("send=-1"));
        let t = gpu0(&step(OK_STEP)).replace("send=\"1\"", "send=\"0\"");
        assert!(err(&t).contains("own rank"));
        let t = gpu0(&step(OK_STEP)).replace("chan=\"0\"", "chan=\"33\"");
        assert!(err(&t).contains("chan=33"));
    }

    #[test]
    fn step_children_crash_the_runtime() {
        let t = gpu0(&format!("      <step {OK_STEP}><x/></step>"));
        assert!(err(&t).contains("inside <step>"));
        let t = gpu0(&format!("      <step {OK_STEP}><!-- fine --></step>"));
        parse(&t, "t.xml").unwrap();
    }

    #[test]
    fn per_channel_and_children_limits() {
        // 33 threadblocks with a send peer on channel 0, each sending.
        let tbs: Vec<String> = (0..33)
            .map(|t| {
                format!(
                    "    <tb id=\"{t}\" send=\"1\" recv=\"-1\" chan=\"0\">\n{}\n    </tb>",
                    step(OK_STEP)
                )
            })
            .collect();
        let text = doc(&format!(
            "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"1\" s_chunks=\"0\">\n{}\n  </gpu>",
            tbs.join("\n")
        ));
        let e = err(&text);
        assert!(
            e.contains("too many threadblocks with a send peer on channel 0"),
            "{e}"
        );
        assert!(e.contains(&format!("line {}", 2 + 32 * 3 + 2)), "{e}");
        parse(
            &text.replace(
                "<tb id=\"32\" send=\"1\" recv=\"-1\" chan=\"0\">",
                "<tb id=\"32\" send=\"1\" recv=\"-1\" chan=\"1\">",
            ),
            "t.xml",
        )
        .unwrap();
        // More than 1024 steps in one threadblock.
        let steps: Vec<String> = (0..1025).map(|_| step(OK_STEP)).collect();
        assert!(err(&gpu0(&steps.join("\n"))).contains("more than 1024 <step>"));
    }
}
