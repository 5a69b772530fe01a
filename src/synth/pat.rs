//! Rails first (`--algo hier-pat`): a butterfly over the hosts on every
//! rail, then one host-mate hop ([`hier::hier_pat`]). `auto` scores it as
//! one of `hier`'s small-message schedules; by name it is that schedule
//! alone.

use super::hring::reference_groups;
use super::{hier, Context, Offer, SynthError, Synthesizer};
use crate::ir::Spec;

/// The rails-first synthesizer.
pub struct HierPat;

impl Synthesizer for HierPat {
    fn name(&self) -> &'static str {
        "hier-pat"
    }
    fn summary(&self) -> &'static str {
        "rails first: a butterfly over the hosts on every rail, messages of many shards, then one host-mate hop"
    }
    fn in_auto(&self, _ctx: &Context) -> Result<(), String> {
        Err("scored within hier (its small-message schedules)".into())
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let hs = reference_groups("hier-pat", ctx)?;
        let radices = hier::pat_radices(hs.len());
        if radices.is_empty() {
            return Err(SynthError::not_offered(
                "hier-pat",
                format!(
                    "{} hosts do not factor into butterfly radices with at most {} rail peers per GPU (a prime factor above {})",
                    hs.len(),
                    hier::PAT_MAX_PEERS,
                    hier::PAT_MAX_PEERS + 1
                ),
            ));
        }
        let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
        let candidates = radices
            .into_iter()
            .map(|r| {
                let hs = hs.clone();
                Box::new(move || hier::hier_pat(spec, &hs, &r)) as super::Candidate
            })
            .collect();
        Ok(Offer::new(candidates))
    }
}
