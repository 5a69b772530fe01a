//! MSCCL XML reader.
//!
//! STUB in the `exec` branch: the real reader is being written on another
//! branch with this exact signature; the lead keeps that one.

use super::FrontError;
use crate::ir::Program;
use std::path::Path;

/// Read an MSCCL XML file into a Program.
pub fn load(path: &Path) -> Result<Program, FrontError> {
    Err(FrontError::new(
        path.display().to_string(),
        "the MSCCL XML reader is not available in this build (stub)",
    ))
}
