//! Topology generators.
