//! MSCCL XML reader.
//!
//! STAND-IN in the `exec` branch: the real reader (every rule of
//! reference/msccl-xml.md §2–§3) is being written on another branch with
//! this exact signature, and the lead keeps that one. This version reads
//! well-formed files into a Program so that `rscc run FILE.xml` and the
//! executor's XML tests work meanwhile; it checks attribute presence and
//! syntax only.

use super::FrontError;
use crate::ir::{
    Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock,
};
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use std::collections::HashMap;
use std::path::Path;

/// Read an MSCCL XML file into a Program.
pub fn load(path: &Path) -> Result<Program, FrontError> {
    let name = path.display().to_string();
    let text = super::read_text(path)?;
    parse(&text, &name)
}

fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Attrs {
    elem: String,
    line: usize,
    map: HashMap<String, String>,
}

impl Attrs {
    fn new(e: &BytesStart, line: usize, file: &str) -> Result<Attrs, FrontError> {
        let elem = String::from_utf8_lossy(e.name().as_ref()).into_owned();
        let mut map = HashMap::new();
        for a in e.attributes() {
            let a = a.map_err(|x| FrontError::new(file, format!("line {line}: <{elem}>: {x}")))?;
            let k = String::from_utf8_lossy(a.key.as_ref()).into_owned();
            let v = a
                .unescape_value()
                .map_err(|x| FrontError::new(file, format!("line {line}: <{elem}> {k}: {x}")))?
                .into_owned();
            map.insert(k, v);
        }
        Ok(Attrs { elem, line, map })
    }
    fn err(&self, file: &str, msg: impl std::fmt::Display) -> FrontError {
        FrontError::new(file, format!("line {}: <{}>: {msg}", self.line, self.elem))
    }
    fn str(&self, file: &str, k: &str) -> Result<&str, FrontError> {
        self.map
            .get(k)
            .map(|s| s.as_str())
            .ok_or_else(|| self.err(file, format!("missing attribute {k}")))
    }
    fn int(&self, file: &str, k: &str) -> Result<i64, FrontError> {
        let s = self.str(file, k)?;
        s.trim()
            .parse()
            .map_err(|_| self.err(file, format!("{k}=\"{s}\" is not an integer")))
    }
    fn buf(&self, file: &str, k: &str) -> Result<Buf, FrontError> {
        let s = self.str(file, k)?;
        Buf::parse(s).ok_or_else(|| self.err(file, format!("{k}=\"{s}\" is not i, o or s")))
    }
}

/// Parse MSCCL XML text (`file` names it in messages).
pub fn parse(text: &str, file: &str) -> Result<Program, FrontError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().trim_text(true);
    let mut prog: Option<Program> = None;
    loop {
        let pos = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let ev = reader
            .read_event()
            .map_err(|e| FrontError::new(file, format!("line {}: {e}", line_of(text, pos))))?;
        let e = match ev {
            Event::Start(e) | Event::Empty(e) => e,
            Event::Eof => break,
            _ => continue,
        };
        let line = line_of(text, pos);
        let a = Attrs::new(&e, line, file)?;
        match a.elem.as_str() {
            "algo" => {
                let coll = match a.str(file, "coll")? {
                    "reducescatter" | "reduce_scatter" => Collective::ReduceScatter,
                    "allgather" => Collective::AllGather,
                    "allreduce" => Collective::AllReduce,
                    c => return Err(a.err(file, format!("coll=\"{c}\" is not supported"))),
                };
                let proto =
                    Proto::parse(a.str(file, "proto")?).ok_or_else(|| a.err(file, "bad proto"))?;
                let runtime = if a.str(file, "coll")? == "reduce_scatter" {
                    Runtime::Legacy
                } else {
                    Runtime::Executor
                };
                prog = Some(Program {
                    name: a.str(file, "name")?.to_string(),
                    proto,
                    coll,
                    runtime,
                    nchannels: a.int(file, "nchannels")?,
                    nchunksperloop: a.int(file, "nchunksperloop")?,
                    ngpus: a.int(file, "ngpus")?,
                    inplace: a.int(file, "inplace")? == 1,
                    outofplace: a.map.get("outofplace").is_none_or(|v| v.trim() == "1"),
                    min_bytes: a
                        .map
                        .get("minBytes")
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0),
                    max_bytes: a.map.get("maxBytes").and_then(|v| v.trim().parse().ok()),
                    gpus: Vec::new(),
                });
            }
            "gpu" => {
                let p = prog
                    .as_mut()
                    .ok_or_else(|| a.err(file, "<gpu> outside <algo>"))?;
                p.gpus.push(GpuProgram {
                    id: a.int(file, "id")?,
                    i_chunks: a.int(file, "i_chunks")?,
                    o_chunks: a.int(file, "o_chunks")?,
                    s_chunks: a.int(file, "s_chunks")?,
                    tbs: Vec::new(),
                    line,
                });
            }
            "tb" => {
                let g = prog
                    .as_mut()
                    .and_then(|p| p.gpus.last_mut())
                    .ok_or_else(|| a.err(file, "<tb> outside <gpu>"))?;
                g.tbs.push(Threadblock {
                    id: a.int(file, "id")?,
                    send: a.int(file, "send")?,
                    recv: a.int(file, "recv")?,
                    chan: a.int(file, "chan")?,
                    steps: Vec::new(),
                    line,
                });
            }
            "step" => {
                let t = prog
                    .as_mut()
                    .and_then(|p| p.gpus.last_mut())
                    .and_then(|g| g.tbs.last_mut())
                    .ok_or_else(|| a.err(file, "<step> outside <tb>"))?;
                let ty = a.str(file, "type")?;
                let kind = StepKind::parse(ty)
                    .ok_or_else(|| a.err(file, format!("unknown step type \"{ty}\"")))?;
                let hasdep = match a.int(file, "hasdep")? {
                    0 => false,
                    1 => true,
                    v => return Err(a.err(file, format!("hasdep=\"{v}\" is not 0 or 1"))),
                };
                t.steps.push(Step {
                    s: a.int(file, "s")?,
                    kind,
                    srcbuf: a.buf(file, "srcbuf")?,
                    srcoff: a.int(file, "srcoff")?,
                    dstbuf: a.buf(file, "dstbuf")?,
                    dstoff: a.int(file, "dstoff")?,
                    cnt: a.int(file, "cnt")?,
                    depid: a.int(file, "depid")?,
                    deps: a.int(file, "deps")?,
                    hasdep,
                    line,
                });
            }
            _ => {}
        }
    }
    prog.ok_or_else(|| FrontError::new(file, "no <algo> element"))
}
