//! placeholder

pub mod msccl_xml;
