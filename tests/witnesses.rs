//! Three witnesses that agree: the symbolic verifier, the CPU executor on
//! real data (two-slot FIFOs, MSCCL's tile and merge rule) and, for every
//! program the verifier accepts, the simulator. Over valid schedules of
//! every op — every shipped schedule, the other tools' files, and (in the
//! release sweep) every `--algo` on every shipped and imported topology —
//! and systematic mutations of them (dropped, duplicated and swapped
//! steps; changed counts, offsets, peers, channels and dependencies):
//! - the verifier accepts → the executor completes with `--check` passing
//!   in every call mode the file declares, and the simulator finishes;
//! - the verifier reports a deadlock → the executor stalls and its
//!   watchdog says where; a deadlock that needs MSCCL's split of
//!   multi-chunk steps is run at a size where MSCCL splits them (every
//!   chunk above half the Simple tile), and must stall there, and below
//!   it (no other rule broken) must run correct;
//! - the verifier reports a wrong post-condition → the executor's check
//!   fails (or it stalls) in some call mode.
//!
//! A structurally broken mutant is one the runtime's parser or the
//! executor refuses; it is counted, not run. Races and reads of
//! uninitialised scratch may go unseen on one input, so they are counted
//! too.
//!
//! The release sweep (`every_algo_on_every_topology_agrees`, ignored in
//! the debug suite) is the benchmark of docs/benchmarks.md "Three
//! witnesses": `cargo test --release --test witnesses -- --ignored
//! --nocapture`; it writes bench/results/witnesses.json.

use rscc::exec::{run_program, ExecError, RunOptions};
use rscc::ir::{Program, Step};
use rscc::verify::{verify_all, VerifyOptions};
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Default, serde::Serialize)]
struct Tally {
    programs: usize,
    accepted: usize,
    deadlocks: usize,
    /// Deadlocks that need MSCCL's split of multi-chunk steps, each run
    /// at a size where it splits.
    split_deadlocks: usize,
    wrong: usize,
    soft: usize,
    structural: usize,
    /// Accepted programs also run where MSCCL splits their multi-chunk
    /// steps, and those whose buffers there exceed the cap.
    split_runs: usize,
    split_too_big: usize,
    /// Structurally broken only by writing the input buffer, and correct
    /// (verifier and executor) once the input may be overwritten.
    input_writers: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.programs += o.programs;
        self.accepted += o.accepted;
        self.deadlocks += o.deadlocks;
        self.split_deadlocks += o.split_deadlocks;
        self.wrong += o.wrong;
        self.soft += o.soft;
        self.structural += o.structural;
        self.input_writers += o.input_writers;
        self.split_runs += o.split_runs;
        self.split_too_big += o.split_too_big;
    }
}

enum Outcome {
    Correct,
    Wrong,
    Stalled(String),
    Refused(String),
}

/// 256 bytes per chunk: every step one call, several elements per chunk.
fn small_size(p: &Program) -> u64 {
    256 * p.nchunksperloop.max(1) as u64
}

/// Bytes per rank at which no multi-chunk step of `p` merges into one
/// call: every chunk above half MSCCL's Simple tile (exec::plan's
/// tile_and_merge, the rule the verifier's split check assumes).
fn split_size(p: &Program) -> u64 {
    (rscc::ir::msccl::SIMPLE_TILE_BYTES / 2 + 4) * p.nchunksperloop.max(1) as u64
}

/// Bytes of buffers the executor allocates for `p` at `size` per rank.
fn buffer_bytes(p: &Program, size: u64) -> u64 {
    let chunk = size / p.nchunksperloop.max(1) as u64;
    p.gpus
        .iter()
        .map(|g| (g.i_chunks.max(0) + g.o_chunks.max(0) + g.s_chunks.max(0)) as u64 * chunk)
        .sum()
}

/// Whether MSCCL would split some multi-chunk step of `p` at a size the
/// file allows (maxBytes does not keep every call within one Simple
/// tile), so that the run at [`split_size`] is one the file must survive.
fn splits(p: &Program) -> bool {
    // None: no step moves more than one chunk.
    rscc::verify::one_message_up_to(p)
        .is_some_and(|up_to| !matches!(p.max_bytes, Some(m) if m > 0 && (m as u64) <= up_to))
}

fn execute(p: &Program, inplace: bool, size: u64, timeout: Duration) -> Outcome {
    let opts = RunOptions {
        sizes: vec![size],
        iters: 1,
        warmup: 0,
        check: true,
        inplace: Some(inplace),
        fifo_slots: 2,
        stall_timeout: timeout,
        membw_bytes: 0,
        ..RunOptions::default()
    };
    match run_program(p, &opts) {
        Ok(r) if r.rows.iter().all(|x| x.wrong == Some(0)) => Outcome::Correct,
        Ok(_) => Outcome::Wrong,
        Err(ExecError::Stalled(s)) => Outcome::Stalled(format!("{s:?}")),
        Err(e) => Outcome::Refused(e.to_string()),
    }
}

fn modes(p: &Program) -> Vec<bool> {
    let mut v = Vec::new();
    if p.outofplace {
        v.push(false);
    }
    if p.inplace {
        v.push(true);
    }
    v
}

/// The executor must stall on `p` in some declared call mode at `size`,
/// and its watchdog must name a rank.
fn must_stall(p: &Program, what: &str, why: &str, size: u64) {
    for m in modes(p) {
        match execute(p, m, size, Duration::from_millis(300)) {
            Outcome::Stalled(s) => assert!(s.contains("rank"), "{what}: a stall names where: {s}"),
            _ => panic!(
                "{what}: the verifier says deadlock ({why}), the executor completed at {size} B (inplace {m})"
            ),
        }
    }
}

/// Judge `p` with all three and check that they agree. The simulator runs
/// on `topo`, or on a ring of the program's ranks.
/// The executor also runs an accepted file at [`split_size`] while its
/// buffers there take at most `split_cap` bytes.
fn agree(
    p: &Program,
    what: &str,
    topo: Option<&rscc::ir::Topology>,
    split_cap: u64,
    t: &mut Tally,
) {
    t.programs += 1;
    match verify_all(p, &VerifyOptions::default()) {
        Ok(_) => {
            t.accepted += 1;
            // Every step one call; and, where the file allows sizes at
            // which MSCCL splits its multi-chunk steps, one such size.
            let mut sizes = vec![small_size(p)];
            if splits(p) && buffer_bytes(p, split_size(p)) <= split_cap {
                sizes.push(split_size(p));
                t.split_runs += 1;
            } else if splits(p) {
                t.split_too_big += 1;
            }
            for size in sizes {
                for m in modes(p) {
                    match execute(p, m, size, Duration::from_secs(20)) {
                        Outcome::Correct => {}
                        Outcome::Wrong => {
                            panic!("{what}: verified, but wrong results at {size} B (inplace {m})")
                        }
                        Outcome::Stalled(s) => {
                            panic!("{what}: verified, but stalled at {size} B (inplace {m}): {s}")
                        }
                        Outcome::Refused(e) => panic!("{what}: verified, but refused: {e}"),
                    }
                }
            }
            let ring;
            let topo = match topo {
                Some(t) => Some(t),
                None => {
                    ring = common_ring(p.ngpus as usize);
                    ring.as_ref()
                }
            };
            if let Some(topo) = topo {
                rscc::sim::simulate(p, topo, 1 << 20, &Default::default())
                    .unwrap_or_else(|e| panic!("{what}: verified, but the simulator: {e}"));
            }
        }
        Err(errs) => {
            let e = &errs[0];
            match e.rule {
                "deadlock" if e.msg.contains("MSCCL's split") => {
                    t.split_deadlocks += 1;
                    must_stall(p, what, &e.msg, split_size(p));
                    // Below the split each step is one message: with no
                    // other broken rule, the file runs correct there.
                    if errs
                        .iter()
                        .all(|e| e.rule == "deadlock" && e.msg.contains("MSCCL's split"))
                    {
                        for m in modes(p) {
                            assert!(
                                matches!(
                                    execute(p, m, small_size(p), Duration::from_secs(20)),
                                    Outcome::Correct
                                ),
                                "{what}: deadlocks only once split, but not correct unsplit (inplace {m})"
                            );
                        }
                    }
                }
                "deadlock" => {
                    t.deadlocks += 1;
                    must_stall(p, what, &e.msg, small_size(p));
                }
                "postcondition" => {
                    t.wrong += 1;
                    let seen = modes(p).into_iter().any(|m| {
                        match execute(p, m, small_size(p), Duration::from_millis(300)) {
                            Outcome::Wrong | Outcome::Stalled(_) => true,
                            Outcome::Correct => false,
                            Outcome::Refused(r) => {
                                panic!("{what}: structurally sound, but the executor refuses: {r}")
                            }
                        }
                    });
                    assert!(
                        seen,
                        "{what}: the verifier says wrong ({}), the executor's check passed",
                        e.msg
                    );
                }
                "race" | "uninitialised-read" => t.soft += 1,
                _ => t.structural += 1,
            }
        }
    }
}

/// A bidirectional NVLink ring of `n` GPUs (routes exist between all
/// pairs), for the simulator.
fn common_ring(n: usize) -> Option<rscc::ir::Topology> {
    let links: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"from":"g{i}","to":"g{}","bw_gbps":25,"alpha_us":1,"kind":"nvlink"}}"#,
                (i + 1) % n
            )
        })
        .take(if n == 2 { 1 } else { n })
        .collect();
    let nodes: Vec<String> = (0..n)
        .map(|r| format!(r#"{{"id":"g{r}","kind":"gpu","rank":{r}}}"#))
        .collect();
    let text = format!(
        r#"{{"name":"r","nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    rscc::front::topo_json::parse(&text, "ring").ok()
}

/// Systematic mutations of rank 0's program (and the peers it names), and
/// swaps on every rank; every `every`-th of them, each cloned only when
/// taken and handed to `visit` at once, so that large programs do not
/// hold thousands of copies.
fn mutants(p: &Program, every: usize, visit: &mut dyn FnMut(&str, &Program)) {
    let every = every.max(1);
    let mut seen = 0usize;
    let mut take = |what: String, f: &dyn Fn(&mut Program) -> bool| {
        let i = seen;
        seen += 1;
        if i.is_multiple_of(every) {
            let mut m = p.clone();
            if f(&mut m) {
                visit(&what, &m);
            }
        }
    };
    let g = 0usize;
    let nc = p.nchunksperloop.max(1);
    let ng = p.ngpus;
    for t in 0..p.gpus[g].tbs.len() {
        let n = p.gpus[g].tbs[t].steps.len();
        for s in 0..n {
            take(format!("tb {t} step {s} dropped"), &|m| {
                m.gpus[g].tbs[t].steps.remove(s);
                renumber(m);
                true
            });
            take(format!("tb {t} step {s} duplicated"), &|m| {
                let st: Step = m.gpus[g].tbs[t].steps[s].clone();
                m.gpus[g].tbs[t].steps.insert(s, st);
                renumber(m);
                true
            });
            if s + 1 < n {
                take(format!("tb {t} steps {s},{} swapped", s + 1), &|m| {
                    m.gpus[g].tbs[t].steps.swap(s, s + 1);
                    renumber(m);
                    true
                });
            }
            take(format!("tb {t} step {s} cnt + 1"), &|m| {
                m.gpus[g].tbs[t].steps[s].cnt += 1;
                true
            });
            take(format!("tb {t} step {s} srcoff moved"), &|m| {
                let st = &mut m.gpus[g].tbs[t].steps[s];
                if st.srcoff >= 0 {
                    st.srcoff = (st.srcoff + 1) % nc;
                }
                true
            });
            take(format!("tb {t} step {s} dstoff moved"), &|m| {
                let st = &mut m.gpus[g].tbs[t].steps[s];
                if st.dstoff >= 0 {
                    st.dstoff = (st.dstoff + 1) % nc;
                }
                true
            });
            if p.gpus[g].tbs[t].steps[s].depid >= 0 {
                take(format!("tb {t} step {s} dependency dropped"), &|m| {
                    let st = &mut m.gpus[g].tbs[t].steps[s];
                    st.depid = -1;
                    st.deps = -1;
                    true
                });
            }
        }
        take(format!("tb {t} send peer retargeted"), &|m| {
            let tb = &mut m.gpus[g].tbs[t];
            if tb.send < 0 {
                return false;
            }
            tb.send = (tb.send + 1) % ng;
            if tb.send == 0 {
                tb.send = 1 % ng;
            }
            true
        });
        take(format!("tb {t} recv peer retargeted"), &|m| {
            let tb = &mut m.gpus[g].tbs[t];
            if tb.recv < 0 {
                return false;
            }
            tb.recv = (tb.recv + 1) % ng;
            if tb.recv == 0 {
                tb.recv = 1 % ng;
            }
            true
        });
        take(format!("tb {t} channel changed"), &|m| {
            m.gpus[g].tbs[t].chan = (m.gpus[g].tbs[t].chan + 1) % p.nchannels.max(1);
            true
        });
    }
    // The same swap on every rank (pairing intact: only a cycle can break
    // it), e.g. every rank receiving before it sends.
    let longest = p
        .gpus
        .iter()
        .flat_map(|g| g.tbs.iter())
        .map(|t| t.steps.len())
        .max();
    for s in 0..longest.unwrap_or(0).saturating_sub(1) {
        take(format!("steps {s},{} swapped on every rank", s + 1), &|m| {
            for g in &mut m.gpus {
                for t in &mut g.tbs {
                    if s + 1 < t.steps.len() {
                        t.steps.swap(s, s + 1);
                    }
                }
            }
            renumber(m);
            true
        });
    }
}

/// Step indices and dependency targets after a step was inserted or
/// removed keep pointing at positions (deps may now name another step:
/// that is part of the mutation).
fn renumber(p: &mut Program) {
    for g in &mut p.gpus {
        for t in &mut g.tbs {
            for (i, s) in t.steps.iter_mut().enumerate() {
                s.s = i as i64;
            }
        }
    }
}

fn load(f: &str) -> Program {
    rscc::front::msccl_xml::load(Path::new(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

/// Split-size runs in the debug suite: buffers of at most 256 MiB.
const CI_SPLIT_CAP: u64 = 256 << 20;

/// `p` and its mutants (every `every`-th of them) judged by all three.
fn with_mutants(
    name: &str,
    p: &Program,
    topo: Option<&rscc::ir::Topology>,
    every: usize,
    split_cap: u64,
    t: &mut Tally,
) {
    agree(p, name, topo, split_cap, t);
    mutants(p, every, &mut |what, m| {
        agree(m, &format!("{name}: {what}"), topo, split_cap, t)
    });
}

#[test]
fn verifier_executor_and_simulator_agree() {
    let mut t = Tally::default();
    let originals: Vec<(String, Program)> = vec![
        ("builtin ring 4".into(), rscc::exec::builtin::ring(4, 1)),
        ("builtin ring 3x2".into(), rscc::exec::builtin::ring(3, 2)),
        (
            "builtin all-pairs 4".into(),
            rscc::exec::builtin::allpairs(4),
        ),
        ("ring8-rs".into(), load("schedules/ring8/rs.xml")),
        ("ring8-ag".into(), load("schedules/ring8/ag.xml")),
        ("ring8-ar".into(), load("schedules/ring8/ar.xml")),
        ("mi300x-rs (RCCL)".into(), load("schedules/mi300x/rs.xml")),
        (
            "msccl allgather".into(),
            load("tests/data/msccl/ndv5-ag-1k-512k.xml"),
        ),
        (
            "msccl-tools all-pairs up to 8 MiB".into(),
            load("tests/data/xml/allpairs_rs_4_8mib.xml"),
        ),
    ];
    for (name, p) in &originals {
        let before = t.accepted;
        with_mutants(name, p, None, 1, CI_SPLIT_CAP, &mut t);
        assert!(t.accepted > before, "{name} verifies");
    }
    eprintln!("witnesses: {t:?}");
    // The sweep exercises every verdict.
    assert!(t.programs > 300, "{t:?}");
    assert!(
        t.accepted > originals.len() && t.deadlocks > 0 && t.wrong > 0,
        "{t:?}"
    );
}

/// Every XML file directly in `dir`, sorted.
fn xml_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "xml"))
        .collect();
    v.sort();
    v
}

/// Every shipped schedule (simulated on its own machine) and every file
/// from other tools in the tests' data: the shipped ones verify and run
/// correct; msccl-tools' all-pairs reduce-scatter, which the verifier says
/// deadlocks once MSCCL splits its `cnt` = 4 steps (above 8 MiB per rank),
/// stalls in the executor at such a size; the out-of-place ring that
/// writes partial sums into its input verifies with the input writable,
/// and then computes the right result.
#[test]
fn every_shipped_and_foreign_file_agrees() {
    let mut t = Tally::default();
    let mut shipped = 0;
    let mut machines: Vec<_> = std::fs::read_dir("schedules")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    machines.sort();
    for dir in &machines {
        let machine = dir.file_name().unwrap().to_string_lossy().to_string();
        let topo = rscc::front::load_topology(Path::new(&format!("topologies/{machine}.json")))
            .unwrap_or_else(|e| panic!("{machine}: {e}"));
        let mut files = xml_files(&dir.to_string_lossy());
        if dir.join("extra").is_dir() {
            files.extend(xml_files(&dir.join("extra").to_string_lossy()));
        }
        for f in files {
            let name = f.display().to_string();
            let before = t.accepted;
            agree(&load(&name), &name, Some(&topo), CI_SPLIT_CAP, &mut t);
            assert_eq!(t.accepted, before + 1, "{name} verifies");
            shipped += 1;
        }
    }
    assert!(shipped >= 29, "{shipped} shipped files");
    let mut foreign = 0;
    for dir in ["tests/data/msccl", "tests/data/xml", "tests/data/exec"] {
        for f in xml_files(dir) {
            let name = f.display().to_string();
            let p = load(&name);
            let before = t.structural;
            agree(&p, &name, None, CI_SPLIT_CAP, &mut t);
            foreign += 1;
            if t.structural > before {
                // Broken only by writing its input: judged again with the
                // input writable, it must then compute the right result.
                let errs = verify_all(&p, &VerifyOptions::default()).unwrap_err();
                if errs.iter().all(|e| e.rule == "input-write") {
                    let writable = VerifyOptions {
                        input_writable: true,
                        ..VerifyOptions::default()
                    };
                    if verify_all(&p, &writable).is_ok() {
                        t.input_writers += 1;
                        for m in modes(&p) {
                            assert!(
                                matches!(
                                    execute(&p, m, small_size(&p), Duration::from_secs(20)),
                                    Outcome::Correct
                                ),
                                "{name}: correct with its input writable, but not in the executor (inplace {m})"
                            );
                        }
                    }
                }
            }
        }
    }
    eprintln!("shipped {shipped}, foreign {foreign}: {t:?}");
    assert!(t.split_deadlocks >= 1 && t.input_writers >= 1, "{t:?}");
}

/// The release sweep: every synthesizer (`--algo`) for every op on every
/// shipped topology and every imported dump in tests/data/real, compiled
/// as `rscc synth` compiles it (the topology's default runtime: RCCL files
/// for AMD GPUs), judged by all three with the schedule simulated on its
/// own machine, and every 8th mutant of each (`sccl`, the exact search,
/// with a 5 s limit per instance). Prints the tally and writes
/// bench/results/witnesses.json.
#[test]
#[ignore = "release sweep: cargo test --release --test witnesses -- --ignored --nocapture"]
fn every_algo_on_every_topology_agrees() {
    use rscc::compile::{compile, CompileOptions};
    use rscc::ir::Collective;
    use rscc::synth::Algo;
    let started = std::time::Instant::now();
    let mut topos: Vec<std::path::PathBuf> = std::fs::read_dir("topologies")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    for d in ["nccl-xml", "rccl-xml", "nvidia-smi-topo", "rocm-smi-topo"] {
        let dir = Path::new("tests/data/real").join(d);
        topos.extend(
            std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "tsv")),
        );
    }
    topos.sort();
    let mut total = Tally::default();
    let (mut machines, mut schedules, mut not_applicable) = (0, 0, 0);
    let mut rows = Vec::new();
    for path in &topos {
        let Ok(topo) = rscc::front::load_topology(path) else {
            continue; // a dump the importer refuses (tests/import_real.rs)
        };
        if topo.num_ranks() < 2 {
            continue;
        }
        machines += 1;
        let t0 = std::time::Instant::now();
        let mut tally = Tally::default();
        let mut compiled = 0;
        for op in [
            Collective::ReduceScatter,
            Collective::AllGather,
            Collective::AllReduce,
        ] {
            for algo in Algo::all() {
                let mut o = CompileOptions::algo(algo, None);
                o.op = op;
                o.lower.runtime = topo.default_runtime();
                o.lower.inplace = true;
                o.lower.outofplace = true;
                o.lower.max_bytes = o.lower.runtime.encode_max_bytes(None);
                // The exact SCCL-model search (by name only) gets 5 s, not
                // its default 30, per instance.
                o.synth.time_limit_s = 5.0;
                let c = match compile(&topo, &o) {
                    Ok(c) => c,
                    Err(e) if e.is_request() => {
                        not_applicable += 1;
                        continue;
                    }
                    Err(e) => panic!("{} {op:?} {}: {e}", path.display(), algo.name()),
                };
                let name = format!("{} {op:?} {}", path.display(), algo.name());
                let before = tally.accepted;
                with_mutants(&name, &c.program, Some(&topo), 8, 2 << 30, &mut tally);
                assert!(
                    tally.accepted > before,
                    "{name}: compile emitted it, so it verifies"
                );
                compiled += 1;
            }
        }
        schedules += compiled;
        let secs = t0.elapsed().as_secs_f64();
        eprintln!(
            "{}: {} ranks, {compiled} schedules, {} programs judged, {secs:.1} s",
            path.display(),
            topo.num_ranks(),
            tally.programs
        );
        rows.push(serde_json::json!({
            "topology": path.display().to_string(),
            "ranks": topo.num_ranks(),
            "schedules": compiled,
            "tally": &tally,
            "seconds": secs,
        }));
        total.add(&tally);
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "witnesses sweep: {machines} machines, {schedules} schedules ({not_applicable} algo x op pairs do not apply), {secs:.0} s: {total:?}"
    );
    let json = serde_json::json!({
        "machines": machines,
        "schedules": schedules,
        "not_applicable": not_applicable,
        "total": &total,
        "seconds": secs,
        "per_topology": rows,
    });
    std::fs::create_dir_all("bench/results").unwrap();
    std::fs::write(
        "bench/results/witnesses.json",
        serde_json::to_string_pretty(&json).unwrap() + "\n",
    )
    .unwrap();
    assert!(
        machines >= 40 && schedules >= 300,
        "{machines} machines, {schedules} schedules"
    );
    assert!(
        total.deadlocks + total.split_deadlocks > 0 && total.wrong > 0,
        "{total:?}"
    );
}
