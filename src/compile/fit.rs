//! First fit: a synthesizer's candidates in order, the first that lowers
//! within the runtime's limits (and the GPUs' SM count) and passes the
//! verifier. A candidate the verifier rejects is never emitted; the next
//! one is tried and the reason kept in [`Compiled::fallbacks`].

use super::{CompileError, CompileOptions, Compiled};
use crate::ir::msccl::MAX_TBS_PER_CHANNEL;
use crate::ir::{Program, Topology};
use crate::lower::{self, LowerError};
use crate::synth::{Algo, Candidate};
use crate::verify::{self, VerifyOptions, VerifyReport};

/// The first of `cands` that fits. With `limited`, a candidate that
/// deadlocks only once MSCCL splits its multi-chunk steps is taken with
/// `maxBytes` set to where the split starts (and `max_size` saying so).
pub fn first_fit(
    topo: &Topology,
    algo: Algo,
    cands: Vec<Candidate>,
    opts: &CompileOptions,
    limited: bool,
) -> Result<Compiled, CompileError> {
    let lopts = opts.lower_options(topo, algo, false);
    let fused = opts.lower_options(topo, algo, true);
    let vopts = VerifyOptions {
        max_tbs: Some(opts.tb_budget(topo)),
        ..VerifyOptions::default()
    };
    let mut fallbacks = Vec::new();
    // The binding limit of the threadblock budget `m`, the hard ones
    // first: only the default budget is one --max-tbs can raise.
    let limit = |m: usize| match topo.min_sms() {
        _ if opts.max_tbs == Some(m) => format!("the requested {m} (--max-tbs)"),
        Some(s) if s as usize == m => format!("the GPU's {m} SMs"),
        _ if opts.lower.runtime.max_tb_id() == m => {
            format!("the {} runtime's {m}", opts.lower.runtime.name())
        }
        Some(s) => {
            format!("{m}, half the GPU's {s} SMs (the default budget; --max-tbs raises it)")
        }
        None => format!("the budget of {m}"),
    };
    // The form refused last: a fallback list may end on a form it has
    // already tried (`Target::shaped`), which is not tried again.
    let mut refused: Option<crate::ir::Algorithm> = None;
    for cand in cands {
        let alg = cand();
        if refused.as_ref() == Some(&alg) {
            continue;
        }
        match fit_one(&alg, &vopts, &lopts, &fused, limited, &limit)? {
            Ok((program, report, max_size)) => {
                return Ok(Compiled {
                    algo,
                    algorithm: alg,
                    program,
                    report,
                    fallbacks,
                    max_size,
                    band_only: false,
                    scored: 0..u64::MAX,
                })
            }
            Err(why) => {
                fallbacks.push(why);
                refused = Some(alg);
            }
        }
    }
    Err(CompileError::NoFit {
        algo: algo.name(),
        reasons: fallbacks,
    })
}

/// A candidate's program, the verifier's report and the size limit it
/// runs safely up to.
type Fitted = (Program, VerifyReport, Option<u64>);

/// Lower and verify one candidate: its program, the verifier's report and
/// the size limit it runs safely up to, or why it does not fit (`Err` only
/// for an invalid algorithm).
fn fit_one(
    alg: &crate::ir::Algorithm,
    vopts: &VerifyOptions,
    lopts: &lower::LowerOptions,
    fused: &lower::LowerOptions,
    limited: bool,
    limit: &dyn Fn(usize) -> String,
) -> Result<Result<Fitted, String>, CompileError> {
    // What cannot fit is not lowered (at 1024 ranks a lowering moves
    // millions of steps).
    let least = alg.least_needs();
    if let Some(m) = vopts.max_tbs.filter(|&m| least.threadblocks > m) {
        return Ok(Err(format!(
            "{}: at least {} threadblocks per rank exceed {}",
            alg.name,
            least.threadblocks,
            limit(m)
        )));
    }
    if least.peers_per_channel > MAX_TBS_PER_CHANNEL {
        return Ok(Err(format!(
            "{}: a rank has {} peers in one direction on one channel, each a threadblock of its own (at most {MAX_TBS_PER_CHANNEL})",
            alg.name, least.peers_per_channel
        )));
    }
    let lopts = if alg.spec.is_fused() { fused } else { lopts };
    let program = match lower::lower(alg, lopts) {
        Ok(p) => p,
        Err(LowerError::Threadblocks { at_least, max }) => {
            return Ok(Err(format!(
                "{}: at least {at_least} threadblocks per rank exceed {}",
                alg.name,
                limit(max)
            )))
        }
        Err(LowerError::Algorithm(m)) => {
            return Err(CompileError::Internal(format!(
                "{} is not a valid algorithm: {m}",
                alg.name
            )))
        }
        Err(e) => return Ok(Err(format!("{}: {}", alg.name, limits_reason(&e)))),
    };
    if let Some(m) = vopts.max_tbs.filter(|&m| program.max_tbs_per_rank() > m) {
        return Ok(Err(format!(
            "{}: {} threadblocks per rank exceed {}",
            alg.name,
            program.max_tbs_per_rank(),
            limit(m)
        )));
    }
    Ok(match verify::verify(&program, vopts) {
        Ok(r) => Ok((program, r, None)),
        Err(e) => match size_limited(program, vopts, limited, &e) {
            Some((p, r, m)) => Ok((p, r, Some(m))),
            None => Err(format!("{}: rejected by the verifier: {e}", alg.name)),
        },
    })
}

/// A lowering error's reason without its "exceeds MSCCL limits: " head
/// (the fallback list says which candidate it was).
fn limits_reason(e: &LowerError) -> String {
    let m = e.to_string();
    m.strip_prefix("exceeds MSCCL limits: ")
        .unwrap_or(&m)
        .to_string()
}

/// A program the verifier rejected for a deadlock, made safe by a
/// `maxBytes` that keeps every multi-chunk step one message (when
/// `allowed`, the deadlock needs the split, and the program's own
/// `maxBytes` does not already forbid larger sizes).
fn size_limited(
    mut program: Program,
    vopts: &VerifyOptions,
    allowed: bool,
    e: &verify::VerifyError,
) -> Option<(Program, VerifyReport, u64)> {
    if !allowed || e.rule != "deadlock" {
        return None;
    }
    let limit = verify::one_message_up_to(&program)?;
    let limit = match program.max_bytes {
        Some(m) if m > 0 => limit.min(m as u64),
        _ => limit,
    };
    if (limit as i64) < program.min_bytes.max(1) {
        return None;
    }
    program.max_bytes = Some(limit as i64);
    let report = verify::verify(&program, vopts).ok()?;
    Some((program, report, limit))
}
