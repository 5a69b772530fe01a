//! The Program IR: exactly MSCCL's execution model. Per rank, threadblocks;
//! per threadblock at most one send peer and one receive peer on one
//! channel, and an ordered list of steps over the `i`/`o`/`s` buffers.
//!
//! Fields keep the raw values of the XML (including `-1` for "none"), so a
//! file written by another tool is represented exactly and the verifier can
//! judge it; lowering fills them the same way.

use std::fmt;

/// The collective a Program implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    ReduceScatter,
    AllGather,
    AllReduce,
}

impl Collective {
    /// nccl-tests' bus-bandwidth factor: busbw = algbw · factor, with
    /// (N−1)/N for reduce-scatter and allgather, 2(N−1)/N for allreduce.
    pub fn busbw_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Collective::ReduceScatter | Collective::AllGather => (n - 1.0) / n,
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
        }
    }
    /// The call's element count (nccl-tests' `count`: recvcount for
    /// reduce-scatter, sendcount for allgather, count for allreduce) for
    /// `size_bytes` of elements of `esize` bytes, nccl-tests' S (the per-rank
    /// input for reduce-scatter, output for allgather).
    pub fn element_count(self, n: usize, size_bytes: u64, esize: usize) -> u64 {
        let elems = size_bytes / esize.max(1) as u64;
        match self {
            Collective::ReduceScatter | Collective::AllGather => elems / n.max(1) as u64,
            Collective::AllReduce => elems,
        }
    }
    pub fn display(self) -> &'static str {
        match self {
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllGather => "allgather",
            Collective::AllReduce => "allreduce",
        }
    }
}

pub use super::msccl::Runtime;

/// NCCL protocol of every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Proto {
    #[default]
    Simple,
    LL,
    LL128,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Simple => "Simple",
            Proto::LL => "LL",
            Proto::LL128 => "LL128",
        }
    }
    pub fn parse(s: &str) -> Option<Proto> {
        match s {
            "Simple" => Some(Proto::Simple),
            "LL" => Some(Proto::LL),
            "LL128" => Some(Proto::LL128),
            _ => None,
        }
    }
}

/// A buffer: input (user send buffer), output (user receive buffer), scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buf {
    Input,
    Output,
    Scratch,
}

impl Buf {
    pub fn letter(self) -> char {
        match self {
            Buf::Input => 'i',
            Buf::Output => 'o',
            Buf::Scratch => 's',
        }
    }
    pub fn parse(s: &str) -> Option<Buf> {
        Buf::from_bytes(s.as_bytes())
    }
    /// [`Buf::parse`] of the bytes of an attribute value.
    pub fn from_bytes(s: &[u8]) -> Option<Buf> {
        match s {
            b"i" => Some(Buf::Input),
            b"o" => Some(Buf::Output),
            b"s" => Some(Buf::Scratch),
            _ => None,
        }
    }
}

/// Step types (msccl-xml.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// `s`: send src.
    Send,
    /// `r`: receive into dst.
    Recv,
    /// `rcs`: receive into dst and forward.
    RecvCopySend,
    /// `rrs`: receive, reduce with src, send (nothing written locally).
    RecvReduceSend,
    /// `rrc`: receive, dst = x ⊕ src.
    RecvReduceCopy,
    /// `rrcs`: receive, dst = x ⊕ src, send it.
    RecvReduceCopySend,
    /// `cpy`: dst = src.
    Copy,
    /// `re`: dst = dst ⊕ src.
    Reduce,
    /// `nop`: only waits on its dependency.
    Nop,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Send => "s",
            StepKind::Recv => "r",
            StepKind::RecvCopySend => "rcs",
            StepKind::RecvReduceSend => "rrs",
            StepKind::RecvReduceCopy => "rrc",
            StepKind::RecvReduceCopySend => "rrcs",
            StepKind::Copy => "cpy",
            StepKind::Reduce => "re",
            StepKind::Nop => "nop",
        }
    }
    pub fn parse(s: &str) -> Option<StepKind> {
        StepKind::from_bytes(s.as_bytes())
    }
    /// [`StepKind::parse`] of the bytes of an attribute value.
    pub fn from_bytes(s: &[u8]) -> Option<StepKind> {
        Some(match s {
            b"s" => StepKind::Send,
            b"r" => StepKind::Recv,
            b"rcs" => StepKind::RecvCopySend,
            b"rrs" => StepKind::RecvReduceSend,
            b"rrc" => StepKind::RecvReduceCopy,
            b"rrcs" => StepKind::RecvReduceCopySend,
            b"cpy" => StepKind::Copy,
            b"re" => StepKind::Reduce,
            b"nop" => StepKind::Nop,
            _ => return None,
        })
    }
    /// Sends over the TB's send connection.
    pub fn sends(self) -> bool {
        matches!(
            self,
            StepKind::Send
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopySend
        )
    }
    /// Receives over the TB's receive connection.
    pub fn recvs(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
        )
    }
    /// Reads the local `src` range at run time.
    pub fn reads_src(self) -> bool {
        matches!(
            self,
            StepKind::Send
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }
    /// Reads the local `dst` range at run time (only `re`).
    pub fn reads_dst(self) -> bool {
        matches!(self, StepKind::Reduce)
    }
    /// Writes the local `dst` range at run time.
    pub fn writes_dst(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }
    /// Applies the reduction operator.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Reduce
        )
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `<step>`. Offsets, peers and dependencies keep the XML's raw integer
/// values; `-1` means "unused"/"none".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Step {
    /// The `s` attribute as written (the runtime uses the position instead).
    pub s: i64,
    pub kind: StepKind,
    pub srcbuf: Buf,
    pub srcoff: i64,
    pub dstbuf: Buf,
    pub dstoff: i64,
    pub cnt: i64,
    /// Threadblock (same GPU) this step waits for, or -1.
    pub depid: i64,
    /// Step position in `depid` to wait for, or -1.
    pub deps: i64,
    /// Some other step waits on this one: publish progress after it.
    pub hasdep: bool,
    /// 1-based line in the source file, when read from one (for messages).
    pub line: usize,
}

impl Step {
    /// A step with the unused-field convention of msccl-xml.md §3.5.
    pub fn new(kind: StepKind) -> Self {
        Step {
            s: 0,
            kind,
            srcbuf: Buf::Input,
            srcoff: -1,
            dstbuf: Buf::Output,
            dstoff: -1,
            cnt: 1,
            depid: -1,
            deps: -1,
            hasdep: false,
            line: 0,
        }
    }
    pub fn src(mut self, buf: Buf, off: usize) -> Self {
        self.srcbuf = buf;
        self.srcoff = off as i64;
        self
    }
    pub fn dst(mut self, buf: Buf, off: usize) -> Self {
        self.dstbuf = buf;
        self.dstoff = off as i64;
        self
    }
    pub fn count(mut self, cnt: usize) -> Self {
        self.cnt = cnt as i64;
        self
    }
    pub fn dep(&self) -> Option<(usize, usize)> {
        if self.depid >= 0 && self.deps >= 0 {
            Some((self.depid as usize, self.deps as usize))
        } else {
            None
        }
    }
}

/// One `<tb>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Threadblock {
    pub id: i64,
    /// Rank this TB sends to, or -1.
    pub send: i64,
    /// Rank this TB receives from, or -1.
    pub recv: i64,
    pub chan: i64,
    pub steps: Vec<Step>,
    pub line: usize,
}

impl Threadblock {
    pub fn send_peer(&self) -> Option<usize> {
        (self.send >= 0).then_some(self.send as usize)
    }
    pub fn recv_peer(&self) -> Option<usize> {
        (self.recv >= 0).then_some(self.recv as usize)
    }
}

/// One `<gpu>`: a rank's buffers and threadblocks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GpuProgram {
    pub id: i64,
    pub i_chunks: i64,
    pub o_chunks: i64,
    pub s_chunks: i64,
    pub tbs: Vec<Threadblock>,
    pub line: usize,
}

impl GpuProgram {
    pub fn chunks(&self, b: Buf) -> i64 {
        match b {
            Buf::Input => self.i_chunks,
            Buf::Output => self.o_chunks,
            Buf::Scratch => self.s_chunks,
        }
    }
}

/// A whole `<algo>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Program {
    pub name: String,
    pub proto: Proto,
    pub coll: Collective,
    pub runtime: Runtime,
    pub nchannels: i64,
    pub nchunksperloop: i64,
    pub ngpus: i64,
    pub inplace: bool,
    pub outofplace: bool,
    pub min_bytes: i64,
    /// `maxBytes`; `None` when the (legacy) file omits it.
    pub max_bytes: Option<i64>,
    pub gpus: Vec<GpuProgram>,
}

impl Program {
    /// A copy of everything but the GPUs' threadblocks: what a runtime's
    /// selection reads (op, ranks, chunks, call modes, size band).
    pub fn header(&self) -> Program {
        Program {
            name: self.name.clone(),
            gpus: Vec::new(),
            ..*self
        }
    }

    /// Every step of every threadblock of every rank, in file order.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.gpus
            .iter()
            .flat_map(|g| g.tbs.iter().flat_map(|t| t.steps.iter()))
    }
    /// This program without what only its file position decides: source
    /// lines, and `s` attributes (the runtime uses a step's position, and
    /// the writer writes the position).
    pub fn positionless(&self) -> Program {
        let mut p = self.clone();
        for g in &mut p.gpus {
            g.line = 0;
            for t in &mut g.tbs {
                t.line = 0;
                for (i, s) in t.steps.iter_mut().enumerate() {
                    s.line = 0;
                    s.s = i as i64;
                }
            }
        }
        p
    }
    /// Whether `other` is the same schedule: equal in everything but its
    /// name and size window (`minBytes`, `maxBytes`), which the simulator
    /// does not read.
    pub fn same_schedule(&self, other: &Program) -> bool {
        self.schedule_header() == other.schedule_header() && self.gpus == other.gpus
    }

    /// A hash of what [`Program::same_schedule`] compares.
    pub fn schedule_hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.schedule_header().hash(&mut h);
        self.gpus.hash(&mut h);
        h.finish()
    }

    /// A 128-bit digest of what [`Program::same_schedule`] compares (two
    /// independent hashes), to tell schedules apart without keeping them:
    /// two different schedules share one with a chance of about 2⁻¹²⁸.
    pub fn schedule_digest(&self) -> (u64, u64) {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        self.schedule_header().hash(&mut h);
        self.gpus.hash(&mut h);
        (self.schedule_hash(), h.finish())
    }

    /// The attributes of `<algo>` that [`Program::same_schedule`]
    /// compares.
    #[allow(clippy::type_complexity)]
    fn schedule_header(&self) -> (Proto, Collective, Runtime, i64, i64, i64, bool, bool) {
        (
            self.proto,
            self.coll,
            self.runtime,
            self.nchannels,
            self.nchunksperloop,
            self.ngpus,
            self.inplace,
            self.outofplace,
        )
    }

    pub fn num_steps(&self) -> usize {
        self.gpus
            .iter()
            .flat_map(|g| g.tbs.iter())
            .map(|t| t.steps.len())
            .sum()
    }
    pub fn num_tbs(&self) -> usize {
        self.gpus.iter().map(|g| g.tbs.len()).sum()
    }
    /// Largest number of threadblocks on one rank.
    pub fn max_tbs_per_rank(&self) -> usize {
        self.gpus.iter().map(|g| g.tbs.len()).max().unwrap_or(0)
    }
    /// Whether the runtime would use this file for a call of `bytes`
    /// (nccl-tests' S) by its [minBytes, maxBytes] window
    /// ([`Runtime::serves`]).
    pub fn serves(&self, bytes: u64) -> bool {
        self.runtime.serves(self.min_bytes, self.max_bytes, bytes)
    }

    /// The factor NCCL's `count` must have for the runtime to take this
    /// file (`count × sizeMultiplier` a multiple of C, msccl-selection.md
    /// §2): C / R for reduce-scatter (recvcount) and allgather
    /// (sendcount), C for allreduce (count); 1 serves every count.
    pub fn count_divisor(&self) -> i64 {
        match self.coll {
            Collective::AllReduce => self.nchunksperloop,
            _ => self.chunks_per_shard(),
        }
    }

    /// Chunks per rank's output shard (C / R for reduce-scatter).
    pub fn chunks_per_shard(&self) -> i64 {
        if self.ngpus > 0 {
            self.nchunksperloop / self.ngpus
        } else {
            0
        }
    }
}
