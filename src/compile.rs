//! The driver: synthesize → lower → verify, the one path every emitted
//! schedule takes. Nothing leaves here unverified.

use crate::ir::{Algorithm, Program, Proto, Runtime, Topology};
use crate::lower::{self, LowerError, LowerOptions};
use crate::synth::{self, Algo};
use crate::verify::{self, VerifyOptions, VerifyReport};
use std::fmt;

#[derive(Debug, Clone)]
pub struct CompileOptions {
    pub algo: Algo,
    /// Chunks per shard; None lets the synthesizer choose.
    pub chunks: Option<usize>,
    pub proto: Proto,
    pub runtime: Runtime,
    pub inplace: bool,
    pub outofplace: bool,
    pub min_bytes: i64,
    pub max_bytes: i64,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            algo: Algo::Ring,
            chunks: None,
            proto: Proto::Simple,
            runtime: Runtime::Executor,
            inplace: true,
            outofplace: true,
            min_bytes: 0,
            max_bytes: 0,
        }
    }
}

/// A verified schedule and where it came from.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub algorithm: Algorithm,
    pub program: Program,
    pub report: VerifyReport,
    /// Candidates dropped for exceeding runtime limits, with the reason.
    pub fallbacks: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum CompileError {
    /// The request cannot be met (bad options, impossible limits).
    Request(String),
    /// rscc produced a schedule its own verifier rejects: a bug.
    Internal(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Request(m) => f.write_str(m),
            CompileError::Internal(m) => write!(f, "internal error (please report): {m}"),
        }
    }
}

impl std::error::Error for CompileError {}

/// Synthesize, lower and verify a reduce-scatter for `topo`.
pub fn compile(topo: &Topology, opts: &CompileOptions) -> Result<Compiled, CompileError> {
    let cands =
        synth::candidates(topo, opts.algo, opts.chunks).map_err(|e| CompileError::Request(e.0))?;
    let lopts = LowerOptions {
        name: format!(
            "rscc_{}_{}_{}",
            opts.algo.name(),
            sanitize(&topo.name),
            topo.num_ranks()
        ),
        proto: opts.proto,
        runtime: opts.runtime,
        inplace: opts.inplace,
        outofplace: opts.outofplace,
        min_bytes: opts.min_bytes,
        max_bytes: opts.max_bytes,
    };
    let vopts = VerifyOptions {
        max_tbs: topo.min_sms().map(|s| s as usize),
    };
    let mut fallbacks = Vec::new();
    for alg in cands {
        match lower::lower(&alg, &lopts) {
            Ok(program) => {
                if let Some(m) = vopts.max_tbs {
                    if program.max_tbs_per_rank() > m {
                        fallbacks.push(format!(
                            "{}: {} threadblocks per rank exceed the GPU's {m} SMs",
                            alg.name,
                            program.max_tbs_per_rank()
                        ));
                        continue;
                    }
                }
                let report = verify::verify(&program, &vopts).map_err(|e| {
                    CompileError::Internal(format!("{} failed verification: {e}", alg.name))
                })?;
                return Ok(Compiled {
                    algorithm: alg,
                    program,
                    report,
                    fallbacks,
                });
            }
            Err(LowerError::Limits(m)) => fallbacks.push(format!("{}: {m}", alg.name)),
            Err(LowerError::Algorithm(m)) => {
                return Err(CompileError::Internal(format!(
                    "{} is not a valid algorithm: {m}",
                    alg.name
                )))
            }
        }
    }
    Err(CompileError::Request(format!(
        "no candidate fits the runtime's limits: {}",
        fallbacks.join("; ")
    )))
}

/// Keep names to [A-Za-z0-9_.-] (msccl-xml.md §2).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}
