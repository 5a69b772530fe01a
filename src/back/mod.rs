//! Back ends: Program → files (MSCCL XML).

pub mod msccl_xml;
