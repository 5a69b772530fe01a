//! The MSCCL runtime's rulebook: every limit and encoding rule of the three
//! runtimes that load rscc's files, named once with its source in
//! ../shared/reference/msccl-xml.md (§ numbers below; "selection §" is
//! ../shared/reference/msccl-selection.md) and used by every
//! stage that needs it — lowering keeps programs within them, the verifier
//! judges any program against them, the XML reader rejects what the
//! runtime's parser rejects, the writer encodes size bands with them, and
//! the synthesizers size their candidates by them.
//!
//! | rule | value | § |
//! |---|---|---|
//! | channels per program | [`MAX_CHANNELS`] = 32 | 3, 8.2 |
//! | chunks per step (`cnt`) | below [`MAX_COUNT`] = 72, so at most [`MAX_CNT`] = 71 | 3, 8.2 |
//! | threadblocks with a send (receive) peer per channel | [`MAX_TBS_PER_CHANNEL`] = 32 | 8.2 |
//! | dependency target threadblock id | at most [`MAX_DEP_TARGET_TB`] = 127 (int8) | 8.2 |
//! | parse nodes per rank (1 algo + every gpu + own tbs and steps) | below [`MAX_PARSE_NODES`] = 4096 | 8.1 |
//! | chunk offsets and chunks per loop | at most [`MAX_CHUNKS_PER_LOOP`] = 32767 (int16) | 8.3 |
//! | steps per threadblock | [`Runtime::max_steps`]: 64 executor and RCCL, 256 legacy | 8.2, 9 |
//! | threadblock ids per GPU | below [`Runtime::max_tb_id`]: 1024 executor, 216 legacy, 64 RCCL | 8.2, 9 |
//! | step types that run | [`Runtime::runs`]: all but `ra`; RCCL only `s`, `r`, `re`, `cpy`, `nop` | selection §5 |
//! | `coll` spelling | [`Runtime::coll_str`] | 2, 9 |
//! | size band (`minBytes`/`maxBytes`) | [`Runtime::encode_max_bytes`], [`Runtime::written_max_bytes`], [`Runtime::serves`] | 3.1, 9 |
//! | name | at most [`MAX_NAME`] = 63 characters kept by legacy | 2 |
//! | XML parser: attributes, names, values, children | [`MAX_ATTRS`], [`MAX_NAME_LEN`], [`MAX_VALUE_LEN`], [`MAX_SUBS`] | 8.1 |
//! | `re` fusion: which `re` steps the parser merges into one pass | [`reduce_continuations`], [`MAX_REDUCE_FUSION`] | 6 |
//!
//! And NCCL's buffering that decides how MSCCL splits a step into messages:
//! [`NCCL_BUFFSIZE`], [`NCCL_STEPS`], [`SIMPLE_TILE_BYTES`] (§5.3).

use crate::ir::program::{Buf, Collective, Step, StepKind};

/// Most channels an MSCCL program may use (`MAXCHANNELS`).
pub const MAX_CHANNELS: usize = 32;
/// `cnt` must be below this (`MSCCL_MAX_COUNT`).
pub const MAX_COUNT: usize = 72;
/// Largest `cnt` of a step.
pub const MAX_CNT: usize = MAX_COUNT - 1;
/// Threadblocks with a send (or receive) peer on one channel.
pub const MAX_TBS_PER_CHANNEL: usize = 32;
/// Dependency-target threadblock ids are stored in an int8.
pub const MAX_DEP_TARGET_TB: usize = 127;
/// `MSCCL_MAX_REDUCE_FUSION`: the parser ends a run of fused `re` steps
/// when its count of the threadblock's `re` steps so far reaches this.
pub const MAX_REDUCE_FUSION: usize = 16;
/// The runtime's per-rank node table (`MSCCL_MAX_NODES`): it fails as soon
/// as the table is full and one more node is read, so a rank keeps at most
/// 4095 nodes (1 algo + every `<gpu>` + its own threadblocks and steps).
pub const MAX_PARSE_NODES: usize = 4096;
/// Offsets are int16: most chunks in the full buffer.
pub const MAX_CHUNKS_PER_LOOP: usize = 32767;
/// The longest `name` written; legacy keeps only the first 63 characters.
pub const MAX_NAME: usize = 63;
/// Attribute slots the runtime keeps per element (`MSCCL_MAX_ATTR_COUNT`).
pub const MAX_ATTRS: usize = 16;
/// Longest element or attribute name the runtime reads (`MAX_STR_LEN - 2`).
pub const MAX_NAME_LEN: usize = 253;
/// Longest attribute value that fits the runtime's 256-byte buffer.
pub const MAX_VALUE_LEN: usize = 254;
/// Children per element (`MSCCL_MAX_SUBS`); the executor does not check it
/// and overwrites memory beyond.
pub const MAX_SUBS: usize = 1024;

/// NCCL's default connection buffer (NCCL_BUFFSIZE), bytes.
pub const NCCL_BUFFSIZE: u64 = 4 << 20;
/// NCCL's buffer slots per connection (NCCL_STEPS).
pub const NCCL_STEPS: u32 = 8;
/// MSCCL's Simple-protocol tile: MSCCL_CHUNKSTEPS = NCCL_STEPS / 2 buffer
/// steps of NCCL_BUFFSIZE / NCCL_STEPS, 2 MiB. A multi-chunk step is one
/// message only while its chunks fit in one; the simulator, the verifier's
/// buffering model and `flow`'s chunk count all use it.
pub const SIMPLE_TILE_BYTES: u64 = (NCCL_STEPS as u64 / 2) * (NCCL_BUFFSIZE / NCCL_STEPS as u64);

/// The legacy runtime's `maxBytes` when the attribute is absent (128 MiB).
/// Written for a legacy Program whose `max_bytes` is `None`, because a
/// written `0` would mean "never selected" to legacy.
pub const LEGACY_DEFAULT_MAX_BYTES: i64 = 1 << 27;
/// The legacy `maxBytes` rscc writes for "no upper limit" (exclusive):
/// 1 TiB.
pub const LEGACY_UNBOUNDED_MAX_BYTES: i64 = 1 << 40;

/// Per step of one threadblock: whether the runtime's parser merges it into
/// the `re` before it (every runtime's parser: `continuationOfReductions`).
/// A `re` continues the previous one when that one was a `re` with the
/// same `dstbuf`, `dstoff` and `srcbuf` and `hasdep = 0`, this one has
/// `depid = -1`, and that one was not the threadblock's
/// [`MAX_REDUCE_FUSION`]-th `re` (the parser compares its running count
/// for equality, so only the first such run is cut); a `nop` between them
/// does not break the run, any other step does. The merged transfer computes
/// `dst ⊕= src₁ ⊕ … ⊕ src_k` in one pass (k + 2 passes over the bytes
/// instead of 3k), with the last step's `cnt` for all of them.
pub fn reduce_continuations<'a>(steps: impl IntoIterator<Item = &'a Step>) -> Vec<bool> {
    let mut out = Vec::new();
    let mut open: Option<(Buf, i64, Buf)> = None;
    let mut reductions = 0usize;
    for s in steps {
        match s.kind {
            StepKind::Nop => out.push(false),
            StepKind::Reduce => {
                let key = (s.dstbuf, s.dstoff, s.srcbuf);
                out.push(open == Some(key) && s.depid == -1);
                reductions += 1;
                open = (!s.hasdep && reductions != MAX_REDUCE_FUSION).then_some(key);
            }
            _ => {
                out.push(false);
                open = None;
            }
        }
    }
    out
}

/// Which MSCCL runtime a file targets (§1, §9; selection §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Runtime {
    /// Azure/msccl-executor-nccl (current).
    #[default]
    Executor,
    /// microsoft/msccl (NCCL 2.12 fork).
    Legacy,
    /// ROCm/rccl's MSCCL executor: the executor's parser and file dialect
    /// with RCCL's limits (64 threadblocks and steps) and its reduced
    /// kernel set (selection §5).
    Rccl,
}

impl Runtime {
    pub const ALL: [Runtime; 3] = [Runtime::Executor, Runtime::Legacy, Runtime::Rccl];
    /// Its name in messages and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Executor => "executor",
            Runtime::Legacy => "legacy",
            Runtime::Rccl => "rccl",
        }
    }
    /// Steps per threadblock the runtime's parser accepts (RCCL hard-codes
    /// `MSCCL_MAX_NUM_STEPS` = 64 in its `msccl_struct.h`).
    pub fn max_steps(self) -> usize {
        match self {
            Runtime::Executor | Runtime::Rccl => 64,
            Runtime::Legacy => 256,
        }
    }
    /// Threadblock ids per GPU the parser accepts (exclusive bound; RCCL's
    /// `MSCCL_MAX_NUM_THREAD_BLOCKS` is 64).
    pub fn max_tb_id(self) -> usize {
        match self {
            Runtime::Executor => 1024,
            Runtime::Legacy => 216,
            Runtime::Rccl => 64,
        }
    }
    /// Whether a step of this kind runs. RCCL builds only the reduced MSCCL
    /// kernels (since ROCm/rccl#1005): a file with any `rrc`, `rrs`, `rcs`
    /// or `rrcs` loads, and every launch that selects it fails with
    /// `ncclInternalError` (selection §5, `setup.cc:429-438`).
    pub fn runs(self, k: StepKind) -> bool {
        match self {
            Runtime::Executor | Runtime::Legacy => true,
            Runtime::Rccl => !matches!(
                k,
                StepKind::RecvReduceCopy
                    | StepKind::RecvReduceSend
                    | StepKind::RecvCopySend
                    | StepKind::RecvReduceCopySend
            ),
        }
    }
    /// Whether the runtime fuses receives with reductions and sends (every
    /// step kind runs), so lowering may emit `rrc`/`rrs`/`rcs`/`rrcs`.
    pub fn fused_steps(self) -> bool {
        self != Runtime::Rccl
    }
    /// The `coll` attribute string.
    pub fn coll_str(self, c: Collective) -> &'static str {
        match (self, c) {
            (Runtime::Executor | Runtime::Rccl, Collective::ReduceScatter) => "reducescatter",
            (Runtime::Legacy, Collective::ReduceScatter) => "reduce_scatter",
            (_, Collective::AllGather) => "allgather",
            (_, Collective::AllReduce) => "allreduce",
        }
    }
    /// The `maxBytes` to write for a band that ends at `max` ≥ 1 bytes
    /// (inclusive; None: no upper limit). The executor reads `maxBytes`
    /// inclusively with 0 meaning "no limit"; legacy reads it exclusively,
    /// and 0 would mean "never".
    pub fn encode_max_bytes(self, max: Option<u64>) -> i64 {
        match (max, self) {
            (None, Runtime::Executor | Runtime::Rccl) => 0,
            (None, Runtime::Legacy) => LEGACY_UNBOUNDED_MAX_BYTES,
            (Some(m), Runtime::Executor | Runtime::Rccl) => m as i64,
            (Some(m), Runtime::Legacy) => m as i64 + 1,
        }
    }
    /// The `maxBytes` attribute of a program whose `max_bytes` is `max`
    /// (None: the attribute was absent).
    pub fn written_max_bytes(self, max: Option<i64>) -> i64 {
        match (max, self) {
            (Some(m), _) => m,
            (None, Runtime::Executor | Runtime::Rccl) => 0,
            (None, Runtime::Legacy) => LEGACY_DEFAULT_MAX_BYTES,
        }
    }
    /// Whether a file with this band serves a call of `bytes` (nccl-tests'
    /// S) as far as the band decides.
    pub fn serves(self, min_bytes: i64, max_bytes: Option<i64>, bytes: u64) -> bool {
        let b = bytes as i128;
        if b < min_bytes as i128 {
            return false;
        }
        match (self, max_bytes) {
            (Runtime::Executor | Runtime::Rccl, None | Some(0)) => true,
            (Runtime::Executor | Runtime::Rccl, Some(m)) => b <= m as i128,
            (Runtime::Legacy, m) => b < m.unwrap_or(LEGACY_DEFAULT_MAX_BYTES) as i128,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_fusion_follows_the_parser() {
        use crate::ir::Buf::{Output, Scratch};
        let re = |src: usize| Step::new(StepKind::Reduce).src(Scratch, src).dst(Output, 0);
        let mut waiting = re(3);
        waiting.depid = 1;
        waiting.deps = 0;
        let mut published = re(4);
        published.hasdep = true;
        let steps = vec![
            re(0),                                   // starts a run
            re(1),                                   // continues it
            Step::new(StepKind::Nop),                // does not break it
            re(2),                                   // continues it
            waiting,                                 // waits: starts a new run
            published,                               // continues, then ends it (hasdep)
            re(5),                                   // new run
            Step::new(StepKind::Recv),               // breaks the run
            re(6),                                   // new run
            re(7).dst(Output, 1),                    // other dst: new run
            re(8).src(Buf::Input, 0).dst(Output, 1), // other src buffer
        ];
        let want = [
            false, true, false, true, false, true, false, false, false, false, false,
        ];
        assert_eq!(reduce_continuations(&steps), want);
        // The threadblock's 16th re ends its run, once.
        let many: Vec<Step> = (0..40).map(re).collect();
        let got = reduce_continuations(&many);
        let starts: Vec<usize> = (0..40).filter(|&i| !got[i]).collect();
        assert_eq!(starts, vec![0, MAX_REDUCE_FUSION]);
    }

    #[test]
    fn bands_round_trip_through_both_encodings() {
        for rt in Runtime::ALL {
            for max in [None, Some(1023u64), Some(1 << 30)] {
                let m = rt.encode_max_bytes(max);
                let top = max.unwrap_or(1 << 39);
                assert!(rt.serves(0, Some(m), top), "{rt:?} {max:?}");
                if let Some(x) = max {
                    assert!(!rt.serves(0, Some(m), x + 1), "{rt:?} {max:?}");
                }
            }
        }
        assert_eq!(SIMPLE_TILE_BYTES, 2 << 20);
        assert_eq!(MAX_CNT, 71);
    }
}
