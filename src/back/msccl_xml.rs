//! MSCCL XML writer (docs/msccl-xml.md; spec: shared/reference/msccl-xml.md
//! §2, §3, §7.1, §11).
//!
//! The output is the strictest form both runtimes read: no declaration, no
//! tabs, one element per line indented by two spaces per level, every
//! attribute always present and double-quoted, numbers in plain decimal,
//! `<step …/>` self-closing, and `s` written as the step's position in its
//! threadblock (the runtime numbers steps by position; `Step::s` is ignored).
//!
//! It writes through a 64 KiB buffer and formats integers by hand, with no
//! allocation per step.

use crate::ir::msccl::MAX_NAME;
use crate::ir::Program;
use std::io::{self, Write};

/// Write `p` as MSCCL XML.
pub fn write<W: Write>(p: &Program, out: W) -> io::Result<()> {
    let mut w = Out {
        buf: Vec::with_capacity(1 << 16),
        out: Some(out),
    };
    emit(p, &mut w)
}

/// The MSCCL XML text of `p`.
pub fn to_string(p: &Program) -> String {
    let mut w: Out<io::Sink> = Out {
        buf: Vec::with_capacity(256 + 112 * p.num_steps() + 40 * p.num_tbs()),
        out: None,
    };
    // Without a writer nothing can fail.
    let _ = emit(p, &mut w);
    // Every byte written is ASCII (clean_name keeps only ASCII).
    String::from_utf8(w.buf).unwrap_or_default()
}

fn emit<W: Write>(p: &Program, w: &mut Out<W>) -> io::Result<()> {
    w.raw(b"<algo name=\"");
    w.raw(&clean_name(&p.name));
    w.raw(b"\" proto=\"");
    w.raw(p.proto.as_str().as_bytes());
    w.raw(b"\"");
    w.attr(b"nchannels", p.nchannels);
    w.attr(b"nchunksperloop", p.nchunksperloop);
    w.attr(b"ngpus", p.ngpus);
    w.raw(b" coll=\"");
    w.raw(p.runtime.coll_str(p.coll).as_bytes());
    w.raw(b"\"");
    w.attr(b"inplace", p.inplace as i64);
    w.attr(b"outofplace", p.outofplace as i64);
    w.attr(b"minBytes", p.min_bytes);
    w.attr(b"maxBytes", p.runtime.written_max_bytes(p.max_bytes));
    w.raw(b">\n");
    // A <gpu> element's text depends on that GPU alone: render batches of
    // them on all cores (in order), then write.
    for batch in p.gpus.chunks(GPU_BATCH) {
        let texts = crate::par::map(batch, |g| {
            let mut o: Out<io::Sink> = Out {
                buf: Vec::with_capacity(
                    64 + g
                        .tbs
                        .iter()
                        .map(|t| 40 + 160 * t.steps.len())
                        .sum::<usize>(),
                ),
                out: None,
            };
            emit_gpu(g, &mut o);
            o.buf
        });
        for t in &texts {
            w.chunk(t)?;
        }
    }
    w.raw(b"</algo>\n");
    w.flush()
}

/// GPUs rendered per parallel batch.
const GPU_BATCH: usize = 64;

/// One `<gpu>` element.
fn emit_gpu(g: &crate::ir::GpuProgram, w: &mut Out<io::Sink>) {
    w.raw(b"  <gpu");
    w.attr(b"id", g.id);
    w.attr(b"i_chunks", g.i_chunks);
    w.attr(b"o_chunks", g.o_chunks);
    w.attr(b"s_chunks", g.s_chunks);
    w.raw(b">\n");
    for tb in &g.tbs {
        w.raw(b"    <tb");
        w.attr(b"id", tb.id);
        w.attr(b"send", tb.send);
        w.attr(b"recv", tb.recv);
        w.attr(b"chan", tb.chan);
        w.raw(b">\n");
        for (pos, s) in tb.steps.iter().enumerate() {
            w.raw(b"      <step");
            w.attr(b"s", pos as i64);
            w.raw(b" type=\"");
            w.raw(s.kind.as_str().as_bytes());
            w.raw(b"\" srcbuf=\"");
            w.raw(&[s.srcbuf.letter() as u8]);
            w.raw(b"\"");
            w.attr(b"srcoff", s.srcoff);
            w.raw(b" dstbuf=\"");
            w.raw(&[s.dstbuf.letter() as u8]);
            w.raw(b"\"");
            w.attr(b"dstoff", s.dstoff);
            w.attr(b"cnt", s.cnt);
            w.attr(b"depid", s.depid);
            w.attr(b"deps", s.deps);
            w.attr(b"hasdep", s.hasdep as i64);
            w.raw(b"/>\n");
        }
        w.raw(b"    </tb>\n");
    }
    w.raw(b"  </gpu>\n");
}

/// The name as written: characters outside `[A-Za-z0-9_.-]` become `_`
/// (the runtime decodes no entities and stops at `"`), cut to 63 characters.
fn clean_name(name: &str) -> Vec<u8> {
    name.chars()
        .take(MAX_NAME)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c as u8
            } else {
                b'_'
            }
        })
        .collect()
}

/// Output buffer; with a writer it is handed over every 64 KiB, without
/// one it collects the whole text.
struct Out<W: Write> {
    buf: Vec<u8>,
    out: Option<W>,
}

impl<W: Write> Out<W> {
    #[inline]
    fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// ` key="n"`.
    #[inline]
    fn attr(&mut self, key: &[u8], n: i64) {
        self.buf.push(b' ');
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(b"=\"");
        let mut tmp = [0u8; 20];
        self.buf.extend_from_slice(fmt_i64(n, &mut tmp));
        self.buf.push(b'"');
    }

    /// Append a rendered piece: with a writer, the buffer then the piece go
    /// straight out (no copy of the piece).
    fn chunk(&mut self, piece: &[u8]) -> io::Result<()> {
        match &mut self.out {
            Some(out) => {
                out.write_all(&self.buf)?;
                self.buf.clear();
                out.write_all(piece)
            }
            None => {
                self.buf.extend_from_slice(piece);
                Ok(())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(out) => {
                out.write_all(&self.buf)?;
                self.buf.clear();
                out.flush()
            }
            None => Ok(()),
        }
    }
}

/// Plain decimal, no leading zeros, `-` for negatives.
fn fmt_i64(n: i64, tmp: &mut [u8; 20]) -> &[u8] {
    let neg = n < 0;
    let mut u = n.unsigned_abs();
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        tmp[i] = b'-';
    }
    &tmp[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Buf, Collective, GpuProgram, Proto, Runtime, Step, StepKind, Threadblock};

    fn ring_rank0() -> Program {
        let mut steps = vec![Step::new(StepKind::Send)
            .src(Buf::Input, 7)
            .dst(Buf::Input, 7)];
        for c in (1..=6).rev() {
            steps.push(
                Step::new(StepKind::RecvReduceSend)
                    .src(Buf::Input, c)
                    .dst(Buf::Input, c),
            );
        }
        steps.push(
            Step::new(StepKind::RecvReduceCopy)
                .src(Buf::Input, 0)
                .dst(Buf::Output, 0),
        );
        for s in &mut steps {
            s.s = 99; // ignored: the writer uses the position
        }
        Program {
            name: "rs_ring_8".into(),
            proto: Proto::Simple,
            coll: Collective::ReduceScatter,
            runtime: Runtime::Executor,
            nchannels: 1,
            nchunksperloop: 8,
            ngpus: 8,
            inplace: true,
            outofplace: true,
            min_bytes: 0,
            max_bytes: Some(0),
            gpus: vec![GpuProgram {
                id: 0,
                i_chunks: 8,
                o_chunks: 1,
                s_chunks: 0,
                tbs: vec![Threadblock {
                    id: 0,
                    send: 1,
                    recv: 7,
                    chan: 0,
                    steps,
                    line: 0,
                }],
                line: 0,
            }],
        }
    }

    #[test]
    fn matches_the_reference_example() {
        let text = to_string(&ring_rank0());
        let want = r#"<algo name="rs_ring_8" proto="Simple" nchannels="1" nchunksperloop="8" ngpus="8" coll="reducescatter" inplace="1" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="8" o_chunks="1" s_chunks="0">
    <tb id="0" send="1" recv="7" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="7" dstbuf="i" dstoff="7" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrs" srcbuf="i" srcoff="6" dstbuf="i" dstoff="6" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="rrs" srcbuf="i" srcoff="5" dstbuf="i" dstoff="5" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="3" type="rrs" srcbuf="i" srcoff="4" dstbuf="i" dstoff="4" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="4" type="rrs" srcbuf="i" srcoff="3" dstbuf="i" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="5" type="rrs" srcbuf="i" srcoff="2" dstbuf="i" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="6" type="rrs" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="7" type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"#;
        assert_eq!(text, want);
        assert!(!text.contains('\t'));
    }

    #[test]
    fn numbers_names_and_legacy_max_bytes() {
        let mut tmp = [0u8; 20];
        assert_eq!(fmt_i64(0, &mut tmp), b"0");
        assert_eq!(fmt_i64(-1, &mut tmp), b"-1");
        assert_eq!(fmt_i64(i64::MIN, &mut tmp), b"-9223372036854775808");
        assert_eq!(fmt_i64(i64::MAX, &mut tmp), b"9223372036854775807");
        assert_eq!(clean_name("a b\"c<é"), b"a_b_c__".to_vec());
        assert_eq!(clean_name(&"x".repeat(100)).len(), MAX_NAME);
        let mut p = ring_rank0();
        p.runtime = Runtime::Legacy;
        p.max_bytes = None;
        let text = to_string(&p);
        assert!(text.starts_with(r#"<algo name="rs_ring_8" proto="Simple" nchannels="1" nchunksperloop="8" ngpus="8" coll="reduce_scatter" inplace="1" outofplace="1" minBytes="0" maxBytes="134217728">"#), "{text}");
        p.runtime = Runtime::Executor;
        assert!(to_string(&p).contains("maxBytes=\"0\""));
    }

    #[test]
    fn write_propagates_io_errors() {
        struct Fail;
        impl Write for Fail {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        assert!(write(&ring_rank0(), Fail).is_err());
    }
}
