//! The op the driver builds from the synthesizers' reduce-scatters
//! (docs/architecture.md "The driver"): an allgather is the dual of a
//! reduce-scatter made for the reversed topology, an allreduce the
//! reduce-scatter followed by an allgather over the same chunking.

use super::{compile_one_for, CompileOptions, Mode};
use crate::ir::{Algorithm, Collective, Program, Topology};
use crate::lower::LowerOptions;
use crate::synth::{Algo, Candidate, Context, SynthError, SynthOptions};
use std::borrow::Cow;
use std::cell::LazyCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// An allreduce candidate's reduce-scatter and allgather halves, made on
/// first use by whichever of its two channel forms is built first.
type LazyHalves = LazyCell<(Algorithm, Algorithm), Box<dyn FnOnce() -> (Algorithm, Algorithm)>>;

/// Reduce-scatter and allgather halves of allreduce candidates, with the
/// synthesizer that made them.
pub type MadeHalves = Vec<(Algo, Algorithm, Algorithm)>;

/// What the driver builds and where: the op on `topo`, and the topology
/// the synthesizers make their reduce-scatters for (the reversed one for
/// an allgather, unless it is the same machine).
pub struct Target<'t> {
    pub topo: &'t Topology,
    pub op: Collective,
    synth_topo: Cow<'t, Topology>,
    /// An allreduce on a machine whose links differ by direction: its
    /// allgather halves, made for the reversed machine.
    halves: Option<Arc<Halves>>,
    /// Every allreduce candidate's halves as they are made, whether or not
    /// the allreduce fits ([`Target::made_halves`]).
    made: Arc<Mutex<MadeHalves>>,
    /// The runtime reduces in local passes of its own (no fused steps).
    local_passes: bool,
    /// What the searches' scoring simulated ([`Target::scores`]).
    scores: Arc<Mutex<SearchScores>>,
}

/// The channels an allgather's owner lanes are offered in turn on
/// ([`Target::shaped_with_lanes`]): one (each lane pays its route's α after
/// the one before: wins at 256 MiB and 1 GiB), two (one lane's α passes
/// while the other channel's moves: wins at 16 MiB).
pub const LANE_WAYS: [usize; 2] = [1, 2];

/// Programs a search scored, by [`Program::schedule_digest`] and size:
/// the simulated time and per-rank end times (with the runtime's
/// simulator options, on this target's machine).
pub type SearchScores = HashMap<((u64, u64), u64), (f64, Vec<f64>)>;

/// Allgather halves of allreduces on a machine whose links differ by
/// direction: per synthesizer and chunk count, the dual of the
/// reduce-scatter that synthesizer makes for the reversed machine (made
/// once; `None` where it makes none with that chunk count).
struct Halves {
    rev: Topology,
    opts: CompileOptions,
    made: Mutex<HashMap<(Algo, usize), Option<Algorithm>>>,
}

impl Halves {
    /// The allgather half for reduce-scatter `rs` of `algo`: made for the
    /// reversed machine with `rs`'s chunk count, else `rs`'s own dual.
    fn allgather(&self, algo: Algo, rs: &Algorithm) -> Algorithm {
        let k = rs.spec.chunks();
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        let half = made.entry((algo, k)).or_insert_with(|| {
            let mut o = self.opts.clone();
            o.op = Collective::ReduceScatter;
            o.mode = Mode::One(algo);
            o.synth.chunks = Some(k);
            compile_one_for(&self.rev, algo, &o, Collective::AllGather)
                .ok()
                .map(|c| c.algorithm)
                .filter(|a| a.spec == rs.spec)
        });
        match half {
            Some(h) => h.allgather_dual(),
            None => rs.allgather_dual(),
        }
    }
}

impl<'t> Target<'t> {
    pub fn new(topo: &'t Topology, opts: &CompileOptions) -> Target<'t> {
        let op = opts.op;
        let symmetric = op == Collective::ReduceScatter || topo.is_symmetric();
        let synth_topo = if op == Collective::AllGather && !symmetric {
            Cow::Owned(topo.reversed())
        } else {
            Cow::Borrowed(topo)
        };
        let halves = (op == Collective::AllReduce && !symmetric).then(|| {
            Arc::new(Halves {
                rev: topo.reversed(),
                opts: opts.clone(),
                made: Mutex::new(HashMap::new()),
            })
        });
        Target {
            topo,
            op,
            synth_topo,
            halves,
            made: Arc::default(),
            local_passes: !opts.lower.runtime.fused_steps(),
            scores: Arc::default(),
        }
    }

    /// The same target, its searches' scoring starting from `known`
    /// (another target's [`Target::scores`] on the same machine and
    /// runtime): a program scored there is not simulated again.
    pub fn knowing(self, known: SearchScores) -> Self {
        *self.scores.lock().unwrap_or_else(|e| e.into_inner()) = known;
        self
    }

    /// Every program the searches scored so far, with its times.
    pub fn scores(&self) -> &Mutex<SearchScores> {
        &self.scores
    }

    /// The distinct (reduce-scatter, allgather) halves of every allreduce
    /// candidate built so far, with their synthesizer: the pairs `auto`
    /// draws on (`compile::auto::paired`), including halves whose own
    /// allreduce did not fit the runtime.
    pub fn made_halves(&self) -> MadeHalves {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: MadeHalves = Vec::new();
        for h in made.iter() {
            if !out.iter().any(|o| o.1 == h.1 && o.2 == h.2) {
                out.push(h.clone());
            }
        }
        out
    }

    /// The synthesizers' request.
    pub fn context(&self, opts: &SynthOptions) -> Result<Context<'_>, SynthError> {
        let mut ctx = Context::new(&self.synth_topo, opts)?;
        ctx.local_passes = self.local_passes;
        ctx.op = self.op;
        Ok(ctx)
    }

    /// `cands` (reduce-scatters of `algo`) made into the op. An allreduce
    /// is offered with its broadcast on channels of its own, then — should
    /// that exceed the runtime's channels — on the reduction's.
    pub fn shaped(&self, algo: Algo, cands: Vec<Candidate>) -> Vec<Candidate> {
        self.shaped_as(algo, cands, true)
    }

    /// [`Target::shaped`], and for an allgather whose first candidate's
    /// dual has owner lanes (`Algorithm::owner_lanes_in_turn`) the same
    /// fallback list again with them in turn on one channel and on two
    /// (`LANE_WAYS`): forms with fewer threadblocks, whose first fit may
    /// be an earlier candidate of the list (16 × DGX-A100's allgather:
    /// `hier`'s graded lanes over a star of all 16 hosts in turn, where on
    /// channels of their own they fit only with radix 2).
    pub fn shaped_with_lanes(&self, algo: Algo, cands: Vec<Candidate>) -> Vec<Vec<Candidate>> {
        if self.op != Collective::AllGather || cands.is_empty() {
            return vec![self.shaped(algo, cands)];
        }
        type Dual = LazyCell<Algorithm, Box<dyn FnOnce() -> Algorithm>>;
        let duals: Vec<Rc<Dual>> = cands
            .into_iter()
            .map(|c| {
                Rc::new(LazyCell::new(
                    Box::new(move || c().allgather_dual()) as Box<dyn FnOnce() -> Algorithm>
                ))
            })
            .collect();
        let mut lists: Vec<Vec<Candidate>> = vec![duals
            .iter()
            .map(|d| -> Candidate {
                let d = d.clone();
                Box::new(move || (*d).clone())
            })
            .collect()];
        for ways in LANE_WAYS {
            if !duals[0].has_owner_lanes(ways) {
                continue;
            }
            lists.push(
                duals
                    .iter()
                    .map(|d| -> Candidate {
                        let d = d.clone();
                        Box::new(move || {
                            let mut a = d.owner_lanes_in_turn(ways).unwrap_or_else(|| (*d).clone());
                            a.name += &format!("-lanes{ways}");
                            a
                        })
                    })
                    .collect(),
            );
        }
        lists
    }

    /// [`Target::shaped`]; with `pair` false, an allreduce's halves are not
    /// among those `auto` pairs ([`Target::made_halves`]): a candidate
    /// built for some sizes only (`Searched::below`) is scored as its own
    /// allreduce there, and pairing its halves would simulate them at
    /// every size.
    pub fn shaped_as(&self, algo: Algo, cands: Vec<Candidate>, pair: bool) -> Vec<Candidate> {
        let op = self.op;
        match op {
            Collective::ReduceScatter => cands,
            Collective::AllGather => cands
                .into_iter()
                .map(|c| -> Candidate { Box::new(move || c().allgather_dual()) })
                .collect(),
            Collective::AllReduce => {
                let mut out: Vec<Candidate> = Vec::with_capacity(2 * cands.len());
                for c in cands {
                    // Both forms share the halves, made by whichever is
                    // built first.
                    let made = self.halves.clone();
                    let record = pair.then(|| self.made.clone());
                    let halves: Rc<LazyHalves> = Rc::new(LazyCell::new(Box::new(move || {
                        let rs = c();
                        let ag = match &made {
                            Some(h) => h.allgather(algo, &rs),
                            None => rs.allgather_dual(),
                        };
                        if let Some(record) = &record {
                            record.lock().unwrap_or_else(|e| e.into_inner()).push((
                                algo,
                                rs.clone(),
                                ag.clone(),
                            ));
                        }
                        (rs, ag)
                    })));
                    // The broadcast on channels of its own, else on the
                    // reduction's (`auto` also scores it folded onto
                    // fewer of its own where it lands there), else, around
                    // rings, going on around them on the reduction's
                    // threadblocks (`Algorithm::allgather_along`).
                    for separate in [true, false] {
                        let halves = halves.clone();
                        out.push(Box::new(move || {
                            let (rs, ag) = &**halves;
                            let own = if separate { ag.num_channels() } else { 0 };
                            Algorithm::allreduce_on(rs, ag, own)
                        }));
                    }
                    out.push(Box::new(move || {
                        let (rs, ag) = &**halves;
                        match rs.allgather_along() {
                            Some(along) => {
                                let mut x = Algorithm::allreduce_on(rs, &along, 0);
                                x.name = format!("{}-along", rs.name);
                                x
                            }
                            // Not around rings: the shared form again,
                            // which first_fit has already refused.
                            None => Algorithm::allreduce_on(rs, ag, 0),
                        }
                    }));
                }
                out
            }
        }
    }
}

/// Lower reduce-scatter `a` made into `op` (a search's score): an
/// allreduce with its broadcast on channels of its own, else on the
/// reduction's where that exceeds the runtime's channels.
pub(crate) fn lower_shaped(
    op: Collective,
    a: &Algorithm,
    lopts: &LowerOptions,
) -> Result<Program, crate::lower::LowerError> {
    match op {
        Collective::ReduceScatter => crate::lower::lower(a, lopts),
        Collective::AllGather => crate::lower::lower(&a.allgather_dual(), lopts),
        Collective::AllReduce => {
            let ag = a.allgather_dual();
            let own = ag.num_channels();
            match crate::lower::lower(&Algorithm::allreduce_on(a, &ag, own), lopts) {
                Err(e) if e.is_limit() => {
                    crate::lower::lower(&Algorithm::allreduce_on(a, &ag, 0), lopts)
                }
                r => r,
            }
        }
    }
}

/// Reduce-scatter `a` made into `op`: itself, its allgather dual, or the
/// allreduce that runs it and then its dual. (A search's score uses this
/// for allreduce on every machine; the driver's candidates on a machine
/// whose links differ by direction take their allgather half from the
/// reversed machine instead, [`Target::shaped`].)
pub fn shape(op: Collective, a: Algorithm) -> Algorithm {
    match op {
        Collective::ReduceScatter => a,
        Collective::AllGather => a.allgather_dual(),
        Collective::AllReduce => {
            let ag = a.allgather_dual();
            Algorithm::allreduce(&a, &ag)
        }
    }
}
