//! A synthesizer's [`Search`] run with the driver's score: each plan is
//! lowered with the request's options and simulated at the search's size
//! (per-rank end times); a plan over the GPU's SM count scores above every
//! plan within it, by its excess, and one that cannot be lowered, ∞. The
//! budget is `--evals` schedules, else the search's own [`Budget`] (so the
//! same input gives the same schedule on any machine), and `--time-limit`.
//! The search's candidates then take the first-fit path every candidate
//! takes.

use super::{fit, CompileError, CompileOptions, Target, Yield};
use crate::ir::Algorithm;
use crate::sim::{self, SimOptions};
use crate::synth::{Algo, Budget, Search, SynthOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub(crate) fn run(
    t: &Target,
    sopts: &SynthOptions,
    algo: Algo,
    search: Box<dyn Search>,
    opts: &CompileOptions,
) -> Result<Yield, CompileError> {
    let topo = t.topo;
    let op = t.op;
    // An allgather plan's broadcast is scored block by block (an
    // allreduce's by path, its default): with runs by edge, the plan that
    // wins at the search's size can lose at the sizes around it (the
    // 8-GCD gfx90a dump's allgather: 1 MiB 90.4 → 84.5 % of the bound),
    // and `auto` scores the plan the search keeps in every form.
    let mut lopts = opts.lower_options(topo, algo, false);
    if op == crate::ir::Collective::AllGather {
        lopts.bcast_runs = false;
    }
    let sms = Some(opts.tb_budget(topo));
    let simopts = SimOptions::for_runtime(opts.lower.runtime);
    let size = search.score_size();
    let Budget { evals, steps } = search.budget();
    // Program steps lowered so far, counted as fused steps: the default
    // budget's measure of work.
    let work = AtomicUsize::new(0);
    let score = |a: &Algorithm| -> Result<Vec<f64>, f64> {
        let p = super::lower_shaped(op, a, &lopts).map_err(|_| f64::INFINITY)?;
        let steps = if lopts.runtime.fused_steps() {
            p.num_steps()
        } else {
            crate::lower::fused_len(&p)
        };
        work.fetch_add(steps, Ordering::Relaxed);
        if let Some(m) = sms.filter(|&m| p.max_tbs_per_rank() > m) {
            return Err((p.max_tbs_per_rank() - m) as f64);
        }
        // A program scored before (by another search, or a selection
        // before this one) is not simulated again.
        let key = (p.schedule_digest(), size);
        let scores = t.scores();
        let known = scores
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some((_, ends)) = known {
            return Ok(ends);
        }
        let r = sim::simulate(&p, topo, size, &simopts).map_err(|_| f64::INFINITY)?;
        scores
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (r.time_us, r.rank_end_us.clone()));
        Ok(r.rank_end_us)
    };
    // The request's checks bound the limit, so the deadline cannot overflow.
    let deadline = Instant::now() + Duration::from_secs_f64(sopts.time_limit_s);
    let asked = sopts.evals;
    let stop = |spent: usize| {
        let spent_all = match asked {
            Some(e) => spent >= e,
            None => spent >= evals || work.load(Ordering::Relaxed) >= steps,
        };
        spent_all || Instant::now() >= deadline
    };
    let found = search.run(&stop, &score);
    let main = fit::first_fit(topo, algo, t.shaped(algo, found.candidates), opts, true)?;
    // Extras are offered only where they fit; those for some sizes, scored
    // only there.
    let mut extras = Vec::new();
    for c in found.extras {
        match fit::first_fit(topo, algo, t.shaped(algo, vec![c]), opts, true) {
            Ok(c) => extras.push(c),
            Err(e) if e.is_request() => {}
            Err(e) => return Err(e),
        }
    }
    for (c, sizes) in found.below {
        match fit::first_fit(topo, algo, t.shaped_as(algo, vec![c], false), opts, true) {
            Ok(c) => extras.push(super::Compiled { scored: sizes, ..c }),
            Err(e) if e.is_request() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Yield { main, extras })
}
