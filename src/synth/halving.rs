//! Hierarchical recursive halving (`--algo hier-halving`), a reference
//! for `hier`: its host-mate phase, then per shard the rail tree in which
//! the host at relative position r sends to r with its highest set bit
//! cleared — a recursive-halving reduce-scatter over the hosts
//! ([`hier::hier_halving`]). `auto` does not score it: bench/cluster.sh
//! prints it beside `auto`.

use super::hring::reference_groups;
use super::{hier, ready, Context, Offer, SynthError, Synthesizer};
use crate::ir::Spec;

/// The hierarchical recursive-halving synthesizer.
pub struct HierHalving;

impl Synthesizer for HierHalving {
    fn name(&self) -> &'static str {
        "hier-halving"
    }
    fn summary(&self) -> &'static str {
        "reference: host-mates to the rail aggregator, then recursive halving on each rail"
    }
    fn in_auto(&self, _ctx: &Context) -> Result<(), String> {
        Err("by name only: a reference algorithm (bench/cluster.sh)".into())
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let hs = reference_groups("hier-halving", ctx)?;
        let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
        Ok(Offer::new(vec![ready(hier::hier_halving(spec, &hs))]))
    }
}
