//! The symbolic verifier (DESIGN.md "Verifier"; msccl-xml.md §8, §11).
//!
//! `verify` proves, for a Program, every rule the MSCCL runtimes rely on
//! (structure, limits, connection pairing, dependency rules) and then runs
//! the Program symbolically — each buffer slot holding the multiset of
//! `(rank, input chunk)` contributions it sums — in an order consistent with
//! program order, dependencies and send/receive pairing (treated as a
//! rendezvous), checking for deadlock, reads of never-written slots, races
//! between threadblocks and, at the end, the collective's post-condition in
//! every aliasing mode the file declares.
//!
//! Every error names the rule broken and the rank / threadblock / step.

pub mod selection;
mod structure;
mod symbolic;

use crate::ir::{Location, Program};
use std::fmt;

/// Options beyond what the Program itself states.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Threadblocks per rank allowed (the GPUs' SM count), if known.
    pub max_tbs: Option<usize>,
    /// Judge the file as if the input buffer of an out-of-place call were
    /// writable (the `input-write` rule off): whether a file that writes
    /// `i` computes the right result otherwise.
    pub input_writable: bool,
    /// Judge for this runtime's rules (None: the runtime the file's
    /// `coll` spelling names): its step and threadblock limits and what
    /// its `maxBytes` means; a file in the other runtime's dialect breaks
    /// `runtime` (that runtime's parser rejects its `coll` spelling).
    pub runtime: Option<crate::ir::Runtime>,
}

/// A broken rule. `rule` is a short stable name (see docs/verifier.md);
/// `at` is where, when the rule concerns one threadblock or step (the
/// message names it too).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VerifyError {
    pub rule: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Location>,
    #[serde(rename = "message")]
    pub msg: String,
}

impl VerifyError {
    pub(crate) fn new(rule: &'static str, msg: impl Into<String>) -> Self {
        VerifyError {
            rule,
            at: None,
            msg: msg.into(),
        }
    }
    pub(crate) fn located(rule: &'static str, at: Location, msg: impl Into<String>) -> Self {
        VerifyError {
            rule,
            at: Some(at),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.rule, self.msg)
    }
}

impl std::error::Error for VerifyError {}

/// The broken rules of a verification, each once: how often it broke and
/// where first (the first few errors in full).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleGroup {
    pub rule: &'static str,
    pub count: usize,
    pub first: Vec<VerifyError>,
}

/// How many errors of a rule [`group`] keeps in full.
pub const FIRST_ERRORS: usize = 3;

/// `errs` grouped by rule, rules in the order they first appear.
pub fn group(errs: &[VerifyError]) -> Vec<RuleGroup> {
    let mut out: Vec<RuleGroup> = Vec::new();
    for e in errs {
        match out.iter_mut().find(|g| g.rule == e.rule) {
            Some(g) => {
                g.count += 1;
                if g.first.len() < FIRST_ERRORS {
                    g.first.push(e.clone());
                }
            }
            None => out.push(RuleGroup {
                rule: e.rule,
                count: 1,
                first: vec![e.clone()],
            }),
        }
    }
    out
}

/// For a file whose only broken rule is `input-write`: its verification
/// with the input buffer writable — Ok when it is otherwise correct.
/// None when other rules are broken too.
pub fn if_input_writable(
    p: &Program,
    errs: &[VerifyError],
    opts: &VerifyOptions,
) -> Option<Result<VerifyReport, Vec<VerifyError>>> {
    if errs.is_empty() || errs.iter().any(|e| e.rule != "input-write") {
        return None;
    }
    let relaxed = VerifyOptions {
        input_writable: true,
        ..opts.clone()
    };
    Some(verify_all(p, &relaxed))
}

/// What a successful verification established.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    pub ranks: usize,
    pub threadblocks: usize,
    pub steps: usize,
    /// Aliasing modes proven correct: "out-of-place", "in-place".
    pub modes: Vec<&'static str>,
}

/// Verify a Program; the first broken rule is returned.
pub fn verify(p: &Program, opts: &VerifyOptions) -> Result<VerifyReport, VerifyError> {
    verify_all(p, opts).map_err(|mut v| v.swap_remove(0))
}

/// Verify a Program, returning every structural violation found (the
/// symbolic phase runs only when the structure is sound, and stops at its
/// first failure).
pub fn verify_all(p: &Program, opts: &VerifyOptions) -> Result<VerifyReport, Vec<VerifyError>> {
    let errs = structural(p, opts);
    prove(p, errs)
}

/// [`verify_all`] given `structural(p, opts)`'s errors: those, or when
/// there are none the symbolic phase's verdict (for callers that judge
/// several runtimes' rules and need not check one of them twice).
pub fn prove(p: &Program, structural: Vec<VerifyError>) -> Result<VerifyReport, Vec<VerifyError>> {
    if !structural.is_empty() {
        return Err(structural);
    }
    let modes = symbolic::run(p).map_err(|e| vec![e])?;
    Ok(VerifyReport {
        ranks: p.gpus.len(),
        threadblocks: p.num_tbs(),
        steps: p.num_steps(),
        modes,
    })
}

/// The rules that need no execution: the runtime's dialect (when
/// `opts.runtime` names another) and the structural rulebook. Cheap: what
/// a verdict per runtime needs, the symbolic phase being the same for
/// all.
pub fn structural(p: &Program, opts: &VerifyOptions) -> Vec<VerifyError> {
    let runtime = opts.runtime.unwrap_or(p.runtime);
    structural_for(p, opts, &[runtime]).swap_remove(0)
}

/// [`structural`] for each of `runtimes` (in place of `opts.runtime`),
/// the rules that do not depend on the runtime checked once.
pub fn structural_for(
    p: &Program,
    opts: &VerifyOptions,
    runtimes: &[crate::ir::Runtime],
) -> Vec<Vec<VerifyError>> {
    let shared = structure::check_for(p, opts, runtimes);
    runtimes
        .iter()
        .zip(shared)
        .map(|(&runtime, rest)| {
            let mut errs = Vec::new();
            // RCCL's parser is the executor's: the two share their spelling.
            if p.runtime.coll_str(p.coll) != runtime.coll_str(p.coll) {
                errs.push(VerifyError::new(
                    "runtime",
                    format!(
                        "coll=\"{}\" is the {} runtime's spelling; the {} runtime's parser rejects it (it reads coll=\"{}\")",
                        p.runtime.coll_str(p.coll),
                        p.runtime.name(),
                        runtime.name(),
                        runtime.coll_str(p.coll)
                    ),
                ));
            }
            if runtime == crate::ir::Runtime::Legacy && p.max_bytes == Some(0) {
                errs.push(VerifyError::new(
                    "bytes-window",
                    "maxBytes 0 means \"never\" to the legacy runtime (its bound is exclusive): it never selects the file",
                ));
            }
            errs.extend(rest);
            errs
        })
        .collect()
}

/// The largest message size (nccl-tests' S, as `maxBytes` counts it) at
/// which MSCCL moves every multi-chunk step of `p` as one message, or None
/// when no step moves more than one chunk. A schedule that deadlocks only
/// once those steps are split (docs/verifier.md) is safe with `maxBytes`
/// at most this.
pub fn one_message_up_to(p: &Program) -> Option<u64> {
    match symbolic::one_message_up_to(p) {
        (1, _) => None,
        (_, s) => Some(s),
    }
}

impl VerifyError {
    pub(crate) fn with_at(mut self, at: Option<Location>) -> Self {
        self.at = at;
        self
    }
}

/// The location of step `step` of threadblock position `tb` of
/// `p.gpus[gpu]`.
pub(crate) fn location(p: &Program, gpu: usize, tb: usize, step: usize) -> Option<Location> {
    let g = p.gpus.get(gpu)?;
    let t = g.tbs.get(tb)?;
    Some(Location {
        rank: usize::try_from(g.id).ok(),
        tb: Some(t.id),
        step: Some(step),
        line: t.steps.get(step).map_or(t.line, |s| s.line),
    })
}

/// "rank R tb T step S (line L)" for messages.
pub(crate) fn at(p: &Program, rank: usize, tb: usize, step: usize) -> String {
    let line = p
        .gpus
        .get(rank)
        .and_then(|g| g.tbs.get(tb))
        .and_then(|t| t.steps.get(step))
        .map(|s| s.line)
        .unwrap_or(0);
    if line > 0 {
        format!("rank {rank} tb {tb} step {step} (line {line})")
    } else {
        format!("rank {rank} tb {tb} step {step}")
    }
}
