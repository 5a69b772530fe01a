//! MSCCL XML reader.
//!
//! Placeholder in the `boundsim` branch only: the real reader is being
//! written on the `xml` branch with this exact signature; the lead takes
//! that one when merging.

use super::FrontError;
use crate::ir::Program;
use std::path::Path;

/// Read an MSCCL XML file into a Program.
pub fn load(path: &Path) -> Result<Program, FrontError> {
    Err(FrontError::new(
        path.display().to_string(),
        "the MSCCL XML reader is not part of this build yet",
    ))
}
