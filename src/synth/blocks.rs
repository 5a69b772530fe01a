//! Blocks of consecutive shards (`--algo hier-blocks`): `hier`'s
//! aggregated rails, each aggregator collecting pieces of consecutive
//! shards ([`hier::hier_blocks`]). `auto` scores it as one of `hier`'s
//! small-message schedules; by name it is that schedule alone.

use super::hring::reference_groups;
use super::{hier, Context, Offer, SynthError, Synthesizer};
use crate::ir::Spec;

/// The blocks-of-consecutive-shards synthesizer.
pub struct HierBlocks;

impl Synthesizer for HierBlocks {
    fn name(&self) -> &'static str {
        "hier-blocks"
    }
    fn summary(&self) -> &'static str {
        "hier's aggregated rails over pieces of consecutive shards: few host-mate messages at scale"
    }
    fn in_auto(&self, _ctx: &Context) -> Result<(), String> {
        Err("scored within hier (its small-message schedules)".into())
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let hs = reference_groups("hier-blocks", ctx)?;
        let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
        Ok(Offer::new(vec![
            Box::new(move || hier::hier_blocks(spec, &hs)) as super::Candidate,
        ]))
    }
}
