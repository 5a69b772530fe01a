//! The runtime's parser, document level: the `<algo>` root and its header
//! attributes as each runtime reads them (`mscclGetAlgoFromXmlFile` for the
//! executor, `mscclGetAlgoFromXMLAndSetAlgo` for legacy), the count of
//! `<gpu>` children, what may follow `</algo>`, and the per-rank
//! parse-node limit. The `<gpu>`, `<tb>` and `<step>` elements are read
//! in `gpu`.

use super::lex::{show, strtol, Kind, Lexer, Tag};
use crate::front::FrontError;
use crate::ir::msccl::{MAX_ATTRS, MAX_PARSE_NODES as MAX_NODES, MAX_SUBS};
use crate::ir::{Collective, Program, Proto, Runtime, Step};
use std::collections::HashMap;
use std::fmt;

// ---------------------------------------------------------------------------
// The runtime's parser.

pub(super) struct Parser<'a> {
    pub(super) lx: Lexer<'a>,
    /// How the `<gpu>` elements may be read on several cores.
    pub(super) split: super::split::Split,
    /// Steps of the threadblock being read; moved out in one exact-size
    /// allocation per threadblock (growing each TB's Vec would copy every
    /// step about twice).
    pub(super) steps: Vec<Step>,
}

/// The `<algo>` header, as far as the `<gpu>` checks need it.
pub(super) struct Header {
    pub(super) runtime: Runtime,
    pub(super) coll: Collective,
    pub(super) coll_str: &'static str,
    pub(super) ngpus: i64,
    pub(super) nchunksperloop: i64,
}

const EXECUTOR_COLLS: [(&str, Collective); 3] = [
    ("reducescatter", Collective::ReduceScatter),
    ("allreduce", Collective::AllReduce),
    ("allgather", Collective::AllGather),
];
const OTHER_COLLS: [&str; 9] = [
    "reduce",
    "broadcast",
    "alltoall",
    "send",
    "recv",
    "gather",
    "scatter",
    "alltoallv",
    "custom",
];

impl<'a> Parser<'a> {
    pub(super) fn err(&self, line: usize, elem: &str, msg: impl fmt::Display) -> FrontError {
        self.lx.err(line, elem, msg)
    }

    fn missing(&self, tag: &Tag<'a>, key: &str, why: &str) -> FrontError {
        let e = tag.name_str();
        match self.lx.slot_beyond(tag, key) {
            Some(n) => self.err(
                tag.line,
                &e,
                format!(
                    "required attribute {key} is attribute number {n}; the runtime keeps only the first {MAX_ATTRS} (every extra space uses one too), so it reports {key} as not found"
                ),
            ),
            None => self.err(tag.line, &e, format!("missing required attribute {key}{why}")),
        }
    }

    pub(super) fn required(
        &self,
        tag: &Tag<'a>,
        key: &str,
        v: Option<&'a [u8]>,
        why: &str,
    ) -> Result<&'a [u8], FrontError> {
        v.ok_or_else(|| self.missing(tag, key, why))
    }

    /// A C `int` attribute (`strtol` then truncated to 32 bits by the
    /// runtime; rscc rejects values that would be truncated).
    pub(super) fn int(&self, tag: &Tag<'a>, key: &str, v: &[u8]) -> Result<i64, FrontError> {
        let (n, _) = strtol(v);
        if n < i32::MIN as i64 || n > i32::MAX as i64 {
            return Err(self.err(
                tag.line,
                &tag.name_str(),
                format!(
                    "{key}=\"{}\" does not fit the runtime's 32-bit int",
                    show(v)
                ),
            ));
        }
        Ok(n)
    }

    pub(super) fn req_int(
        &self,
        tag: &Tag<'a>,
        key: &str,
        v: Option<&'a [u8]>,
        why: &str,
    ) -> Result<i64, FrontError> {
        let v = self.required(tag, key, v, why)?;
        self.int(tag, key, v)
    }

    pub(super) fn document(mut self) -> Result<Program, FrontError> {
        let Some(root) = self.lx.next()? else {
            return Err(self.err(
                self.lx.line,
                "",
                "no <algo> element: the file is empty or holds only comments",
            ));
        };
        if root.kind == Kind::Close || root.name != b"algo" {
            let shown = if root.kind == Kind::Close {
                format!("/{}", root.name_str())
            } else {
                root.name_str()
            };
            return Err(self.err(
                root.line,
                &shown,
                "the first element must be <algo> (the executor reads the first element's attributes as the algorithm's, whatever its name)",
            ));
        }
        let (mut program, hdr) = self.algo(&root)?;
        let mut counted_gpus = 0usize;
        if let Some(read) = super::split::gpus(&self, &root, &hdr) {
            counted_gpus = read.gpus.len();
            program.gpus = read.gpus;
            self.lx.pos = read.pos;
            self.lx.line = read.line;
        } else {
            self.children(&root, &hdr, &mut program, &mut counted_gpus)?;
        }
        self.lx.after_root = true;
        while let Some(t) = self.lx.next()? {
            if t.kind == Kind::Close {
                return Err(self.err(
                    t.line,
                    &format!("/{}", t.name_str()),
                    "closing tag with no open element (after </algo>)",
                ));
            }
            // Only the first <algo> counts; later elements are read and
            // skipped, as the runtime does.
            self.lx.skip(&t)?;
        }
        self.node_limit(&program, counted_gpus)?;
        Ok(program)
    }

    /// The children of `root` in one pass: `<gpu>` elements into
    /// `program` (counted in `counted`), others skipped.
    fn children(
        &mut self,
        root: &Tag<'a>,
        hdr: &Header,
        program: &mut Program,
        counted: &mut usize,
    ) -> Result<(), FrontError> {
        while let Some(t) = self.lx.child(root)? {
            if t.name == b"gpu" {
                *counted += 1;
                if *counted > MAX_SUBS {
                    return Err(self.err(
                        t.line,
                        "gpu",
                        format!("more than {MAX_SUBS} <gpu> elements; the runtime's child table holds {MAX_SUBS}"),
                    ));
                }
                let g = self.gpu(&t, hdr)?;
                program.gpus.push(g);
            } else {
                self.lx.skip(&t)?;
            }
        }
        Ok(())
    }

    /// The runtime keeps, per rank, 1 (algo) + every <gpu> + that rank's
    /// <tb>s and <step>s in a 4096-entry table and fails when it is full
    /// and another node is read, which always happens.
    fn node_limit(&self, p: &Program, ngpu_elems: usize) -> Result<(), FrontError> {
        let mut per_rank: HashMap<i64, usize> = HashMap::new();
        for g in &p.gpus {
            let steps: usize = g.tbs.iter().map(|t| t.steps.len()).sum();
            *per_rank.entry(g.id).or_insert(0) += g.tbs.len() + steps;
        }
        for g in &p.gpus {
            let own = per_rank.get(&g.id).copied().unwrap_or(0);
            let n = 1 + ngpu_elems + own;
            if n >= MAX_NODES {
                return Err(self.err(
                    g.line,
                    "gpu",
                    format!(
                        "rank {} needs {n} parse nodes (1 algo + {ngpu_elems} gpu + {own} tb and step); the runtime's table holds {MAX_NODES} and fails once it is full, so at most {}",
                        g.id,
                        MAX_NODES - 1
                    ),
                ));
            }
        }
        Ok(())
    }

    fn algo(&self, t: &Tag<'a>) -> Result<(Program, Header), FrontError> {
        let [name, proto, nchannels, nchunksperloop, ngpus, coll, inplace, outofplace, min_bytes, max_bytes, nthreads] =
            self.lx.get_all(
                t,
                &[
                    "name",
                    "proto",
                    "nchannels",
                    "nchunksperloop",
                    "ngpus",
                    "coll",
                    "inplace",
                    "outofplace",
                    "minBytes",
                    "maxBytes",
                    "nthreads",
                ],
            );
        let coll_v = self.required(t, "coll", coll, "")?;
        let (coll, runtime, coll_str) = if coll_v == b"reduce_scatter" {
            (Collective::ReduceScatter, Runtime::Legacy, "reduce_scatter")
        } else if let Some(&(s, c)) = EXECUTOR_COLLS.iter().find(|(s, _)| s.as_bytes() == coll_v) {
            (c, Runtime::Executor, s)
        } else if OTHER_COLLS.iter().any(|s| s.as_bytes() == coll_v) {
            return Err(self.err(
                t.line,
                "algo",
                format!(
                    "coll=\"{}\" is an MSCCL collective rscc does not handle; rscc reads reducescatter (executor), reduce_scatter (legacy), allgather and allreduce",
                    show(coll_v)
                ),
            ));
        } else {
            return Err(self.err(
                t.line,
                "algo",
                format!(
                    "unknown coll=\"{}\"; expected reducescatter (executor), reduce_scatter (legacy), allgather or allreduce (exact case)",
                    show(coll_v)
                ),
            ));
        };
        let why = match runtime {
            Runtime::Executor | Runtime::Rccl => {
                format!(" (the executor runtime requires it; coll=\"{coll_str}\")")
            }
            Runtime::Legacy => {
                " (the legacy runtime requires it; coll=\"reduce_scatter\")".to_string()
            }
        };
        let why = why.as_str();
        let legacy = runtime == Runtime::Legacy;
        let name = if legacy {
            Some(self.required(t, "name", name, why)?)
        } else {
            name
        };
        let ngpus = self.req_int(t, "ngpus", ngpus, why)?;
        let nchunksperloop = self.req_int(t, "nchunksperloop", nchunksperloop, why)?;
        let nchannels = self.req_int(t, "nchannels", nchannels, why)?;
        let proto_v = self.required(t, "proto", proto, why)?;
        let proto = std::str::from_utf8(proto_v)
            .ok()
            .and_then(Proto::parse)
            .ok_or_else(|| {
                self.err(
                    t.line,
                    "algo",
                    format!(
                        "unknown proto=\"{}\"; expected Simple, LL or LL128 (exact case)",
                        show(proto_v)
                    ),
                )
            })?;
        let inplace = self.req_int(t, "inplace", inplace, why)? != 0;
        let (min_bytes, max_bytes, outofplace) = if legacy {
            let min = match min_bytes {
                Some(v) => strtol(v).0,
                None => 0,
            };
            let max = max_bytes.map(|v| strtol(v).0);
            let eff_max = max.unwrap_or(1 << 27);
            if min > eff_max {
                return Err(self.err(
                    t.line,
                    "algo",
                    format!("minBytes={min} is greater than maxBytes={eff_max}; the legacy runtime rejects it"),
                ));
            }
            if min < 0 {
                return Err(self.err(
                    t.line,
                    "algo",
                    format!("minBytes={min} is negative; the legacy runtime rejects it"),
                ));
            }
            if eff_max < 0 {
                return Err(self.err(
                    t.line,
                    "algo",
                    format!("maxBytes={eff_max} is negative; the legacy runtime rejects it"),
                ));
            }
            if let Some(v) = nthreads {
                let n = self.int(t, "nthreads", v)?;
                if n % 32 != 0 {
                    return Err(self.err(
                        t.line,
                        "algo",
                        format!(
                            "nthreads={n} is not a multiple of 32; the legacy runtime rejects it"
                        ),
                    ));
                }
            }
            // Legacy never reads outofplace: a file is used for calls whose
            // in-place-ness equals `inplace`.
            (min, max, !inplace)
        } else {
            let min = strtol(self.required(t, "minBytes", min_bytes, why)?).0;
            let max = strtol(self.required(t, "maxBytes", max_bytes, why)?).0;
            let oop = self.req_int(t, "outofplace", outofplace, why)? != 0;
            (min, Some(max), oop)
        };
        let name = name
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        let program = Program {
            name,
            proto,
            coll,
            runtime,
            nchannels,
            nchunksperloop,
            ngpus,
            inplace,
            outofplace,
            min_bytes,
            max_bytes,
            gpus: Vec::new(),
        };
        let hdr = Header {
            runtime,
            coll,
            coll_str,
            ngpus,
            nchunksperloop,
        };
        Ok((program, hdr))
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::super::testing::*;
    use crate::ir::{Collective, Runtime, StepKind};

    #[test]
    fn minimal_file_parses() {
        let p = parse(&gpu0(&step(OK_STEP)), "t.xml").unwrap();
        assert_eq!(p.runtime, Runtime::Executor);
        assert_eq!(p.coll, Collective::ReduceScatter);
        assert_eq!(p.gpus.len(), 1);
        assert_eq!(p.gpus[0].line, 2);
        assert_eq!(p.gpus[0].tbs[0].line, 3);
        let s = &p.gpus[0].tbs[0].steps[0];
        assert_eq!(s.line, 4);
        assert_eq!(s.kind, StepKind::Send);
        assert_eq!((s.srcoff, s.depid, s.deps), (1, -1, -1));
    }

    #[test]
    fn node_limit() {
        // 1 algo + 1 gpu + 4 tb + 4090 steps = 4096 nodes: rejected.
        let many = |n: usize| {
            let tbs: Vec<String> = (0..4)
                .map(|t| {
                    let k = n / 4 + usize::from(t < n % 4);
                    let s: Vec<String> = (0..k).map(|_| step(OK_STEP)).collect();
                    format!(
                        "    <tb id=\"{t}\" send=\"1\" recv=\"1\" chan=\"0\">\n{}\n    </tb>",
                        s.join("\n")
                    )
                })
                .collect();
            doc(&format!(
                "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"1\" s_chunks=\"0\">\n{}\n  </gpu>",
                tbs.join("\n")
            ))
        };
        let e = err(&many(4090));
        assert!(e.contains("4096 parse nodes"), "{e}");
        parse(&many(4089), "t.xml").unwrap();
    }

    #[test]
    fn legacy_only_checks() {
        let legacy = |extra: &str, gpu_attrs: &str| {
            gpu0(&step(OK_STEP))
                .replace(
                    "coll=\"reducescatter\"",
                    &format!("coll=\"reduce_scatter\"{extra}"),
                )
                .replace(" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\"", "")
                .replace("i_chunks=\"2\" o_chunks=\"1\"", gpu_attrs)
        };
        let ok = "i_chunks=\"2\" o_chunks=\"1\"";
        parse(&legacy("", ok), "t.xml").unwrap();
        parse(
            &legacy(" nthreads=\"64\" minBytes=\"5\" maxBytes=\"5\"", ok),
            "t.xml",
        )
        .unwrap();
        assert!(
            err(&legacy(" minBytes=\"6\" maxBytes=\"5\"", ok)).contains("greater than maxBytes")
        );
        assert!(err(&legacy(" minBytes=\"-1\"", ok)).contains("negative"));
        assert!(err(&legacy(" nthreads=\"33\"", ok)).contains("multiple of 32"));
        // o_chunks × ngpus must be nchunksperloop when > 0; 0 is not checked.
        assert!(err(&legacy("", "i_chunks=\"2\" o_chunks=\"2\""))
            .contains("do not match nchunksperloop"));
        parse(&legacy("", "i_chunks=\"2\" o_chunks=\"0\""), "t.xml").unwrap();
        // The executor checks none of these.
        let exec = gpu0(&step(OK_STEP)).replace("o_chunks=\"1\"", "o_chunks=\"2\"");
        parse(&exec.replace("minBytes=\"0\"", "minBytes=\"9\""), "t.xml").unwrap();
    }

    #[test]
    fn legacy_dialect() {
        let t = gpu0(&step(OK_STEP))
            .replace("coll=\"reducescatter\"", "coll=\"reduce_scatter\"")
            .replace(" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\"", "");
        let p = parse(&t, "t.xml").unwrap();
        assert_eq!(p.runtime, Runtime::Legacy);
        assert_eq!(p.max_bytes, None);
        assert!(p.inplace && !p.outofplace);
        assert!(err(&t.replace("name=\"t\" ", "")).contains("missing required attribute name"));
        assert!(err(&t.replace("send=\"1\"", "send=\"2\"")).contains("not below ngpus"));
        // Executor requires outofplace.
        let t = gpu0(&step(OK_STEP)).replace(" outofplace=\"1\"", "");
        assert!(err(&t).contains("missing required attribute outofplace"));
    }
}
