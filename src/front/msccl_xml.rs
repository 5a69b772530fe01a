//! MSCCL XML reader.
