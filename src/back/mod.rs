//! Back ends: writers of the central types to files.

pub mod nccl_xml;
