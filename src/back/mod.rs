//! Back ends: Program → MSCCL XML, Topology → NCCL topology XML.

pub mod msccl_xml;
pub mod nccl_xml;
