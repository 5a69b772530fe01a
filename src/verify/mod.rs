//! Symbolic verifier over Programs (placeholder signature; the lead is
//! implementing it).

use crate::ir::Program;
use std::fmt;

/// Options beyond what the Program itself states.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Threadblocks per rank allowed (the GPUs' SM count), if known.
    pub max_tbs: Option<usize>,
}

/// The first broken rule, naming rank, threadblock, step and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    pub rule: &'static str,
    pub msg: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.rule, self.msg)
    }
}

impl std::error::Error for VerifyError {}

/// Verify a Program: every MSCCL runtime rule and the collective's
/// post-condition.
pub fn verify(p: &Program, opts: &VerifyOptions) -> Result<(), VerifyError> {
    let _ = (p, opts);
    Ok(())
}
