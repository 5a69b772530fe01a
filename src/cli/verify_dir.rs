//! `rscc verify DIR/`: what a runtime does with a directory given as
//! `MSCCL_ALGO_DIR`. Per rank count and op found there, a sweep of calls
//! (counts: powers of two and awkward ones, fp32 and bf16, in place and
//! out of place, nBytes up to 4 GiB) says which file serves each call and
//! where the runtime falls back to plain NCCL/RCCL
//! (`verify::selection`); files that no call selects are reported as
//! shadowed, and entries that break the runtime (a non-XML file, a file
//! its parser rejects, on RCCL a step type it does not run) as hazards.

use super::{CliError, CliResult};
use crate::front;
use crate::ir::{Collective, Program, Runtime};
use crate::verify::selection::{accepts, select, sweep_counts, Call, Pick};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Serialize)]
struct Report {
    dir: String,
    runtime: &'static str,
    files: Vec<String>,
    hazards: Vec<String>,
    notes: Vec<String>,
    groups: Vec<Group>,
}

/// One rank count and op.
#[derive(Serialize)]
struct Group {
    ranks: usize,
    op: &'static str,
    calls: usize,
    served: usize,
    /// Per file of the group: (name, calls it serves, calls it would
    /// serve alone).
    per_file: Vec<(String, usize, usize)>,
    /// Calls no file serves.
    fallbacks: Vec<CallOut>,
    /// RCCL: calls several files serve (the filesystem's order decides).
    ambiguous: Vec<CallOut>,
}

#[derive(Serialize, Clone)]
struct CallOut {
    count: u64,
    dtype: &'static str,
    inplace: bool,
    bytes: u64,
}

/// The largest nBytes swept.
const TOP_BYTES: u64 = 4 << 30;

pub fn run(dir: &Path, runtime: Option<Runtime>, json: bool) -> CliResult {
    let rt = runtime.unwrap_or(Runtime::Executor);
    let report = analyze(dir, rt, &[])?;
    let shown = report.dir.clone();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
    } else {
        print_text(&report);
    }
    if report.hazards.is_empty() {
        Ok(())
    } else {
        Err(CliError::check(format!(
            "{shown}: {} entr{} would break the {} runtime",
            report.hazards.len(),
            if report.hazards.len() == 1 {
                "y"
            } else {
                "ies"
            },
            rt.name()
        )))
    }
}

/// What `rscc synth -o DIR/` should say about the directory it wrote
/// `written` into (file names and the programs' headers: every field but
/// `gpus`, which is all selection reads; they are not read back): entries
/// that would break the runtime, and written files that other files of
/// the directory shadow (another machine's, or an earlier run's).
pub(super) fn after_writing(dir: &Path, rt: Runtime, written: &[(String, Program)]) -> Vec<String> {
    let Ok(r) = analyze(dir, rt, written) else {
        return Vec::new();
    };
    let written: Vec<String> = written.iter().map(|(n, _)| n.clone()).collect();
    let mut out: Vec<String> = r
        .hazards
        .iter()
        .map(|h| format!("{}: {h}", r.dir))
        .collect();
    for g in &r.groups {
        let others: Vec<&str> = g
            .per_file
            .iter()
            .filter(|f| !written.contains(&f.0) && f.1 > 0)
            .map(|f| f.0.as_str())
            .collect();
        let hidden: Vec<&str> = g
            .per_file
            .iter()
            .filter(|f| written.contains(&f.0) && f.1 < f.2)
            .map(|f| f.0.as_str())
            .collect();
        if !others.is_empty() && !hidden.is_empty() {
            out.push(format!(
                "{}: the runtime tries {} first for some {}-rank {} calls that {} would serve (files of another machine or run); keep one machine per directory (`rscc verify {}` shows which file serves which call)",
                r.dir,
                others.join(", "),
                g.ranks,
                g.op,
                hidden.join(", "),
                r.dir
            ));
        }
    }
    out
}

/// The directory's selection report under runtime `rt`; `known` files
/// (names and headers rscc has just written for `rt`) are not read.
fn analyze(dir: &Path, rt: Runtime, known: &[(String, Program)]) -> Result<Report, CliError> {
    if rt == Runtime::Legacy {
        return Err(CliError::input(
            "the legacy runtime reads the files listed in MSCCL_XML_FILES, not a directory; verify them one by one",
        ));
    }
    let shown = dir.display().to_string();
    let rd = std::fs::read_dir(dir)
        .map_err(|e| CliError::input(format!("{shown}: cannot read the directory: {e}")))?;
    let mut names: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    for e in rd {
        let e = e.map_err(|e| CliError::input(format!("{shown}: {e}")))?;
        let name = e.file_name().to_string_lossy().to_string();
        let ft = e
            .file_type()
            .map_err(|err| CliError::input(format!("{shown}/{name}: {err}")))?;
        if ft.is_dir() {
            notes.push(format!(
                "{name}/: a directory; the runtime reads only regular files and links, so its files are not loaded"
            ));
            continue;
        }
        names.push(name);
    }
    // The executor's order: byte-wise by path (std::set<std::string>).
    names.sort();
    let mut hazards = Vec::new();
    let mut progs: Vec<(String, Program)> = Vec::new();
    for name in &names {
        if let Some((_, p)) = known.iter().find(|(n, _)| n == name) {
            progs.push((name.clone(), p.clone()));
            continue;
        }
        let path = dir.join(name);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) => {
                hazards.push(format!("{name}: unreadable ({e})"));
                continue;
            }
        };
        let looks_xml = text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<');
        if !looks_xml {
            hazards.push(format!(
                "{name}: not an MSCCL XML file; the runtime's load pass fails on it (on the executor the first collective then crashes: SIGFPE or an out-of-bounds read, msccl-selection.md §1); keep only algorithm files in the directory"
            ));
            continue;
        }
        match front::msccl_xml::load(&path) {
            Ok(p) => {
                if p.runtime.coll_str(p.coll) != rt.coll_str(p.coll) {
                    hazards.push(format!(
                        "{name}: written for the {} runtime (coll=\"{}\"); the {} runtime's parser rejects it and communicator init fails",
                        p.runtime.name(),
                        p.runtime.coll_str(p.coll),
                        rt.name()
                    ));
                    continue;
                }
                if let Some(k) = p
                    .gpus
                    .iter()
                    .flat_map(|g| g.tbs.iter().flat_map(|t| t.steps.iter()))
                    .map(|s| s.kind)
                    .find(|&k| !rt.runs(k))
                {
                    hazards.push(format!(
                        "{name}: has \"{}\" steps, which the {} runtime does not run: every call that selects it fails",
                        k.as_str(),
                        rt.name()
                    ));
                }
                progs.push((name.clone(), p));
            }
            Err(e) => hazards.push(format!(
                "{name}: the runtime's parser rejects it ({e}); communicator init fails"
            )),
        }
    }
    // Groups: rank counts × ops present.
    let keys: BTreeSet<(i64, &'static str)> = progs
        .iter()
        .map(|(_, p)| (p.ngpus, p.coll.display()))
        .collect();
    let mut groups = Vec::new();
    for (ranks, op) in keys {
        let coll = Collective::parse(op).expect("a collective's own name");
        let members: Vec<usize> = (0..progs.len())
            .filter(|&i| progs[i].1.ngpus == ranks && progs[i].1.coll == coll)
            .collect();
        let files: Vec<&Program> = members.iter().map(|&i| &progs[i].1).collect();
        let ranks = ranks.max(1) as usize;
        let mut per = vec![0usize; files.len()];
        let mut fits = vec![0usize; files.len()];
        let (mut calls, mut served) = (0, 0);
        let (mut fallbacks, mut ambiguous) = (Vec::new(), Vec::new());
        for (dtype, esize) in [("float", 4u64), ("bfloat16", 2)] {
            let probe = Call {
                coll,
                ranks,
                count: 1,
                esize,
                inplace: false,
            };
            let top = TOP_BYTES / probe.bytes().max(1);
            for count in sweep_counts(top) {
                for inplace in [false, true] {
                    let call = Call {
                        count,
                        inplace,
                        ..probe
                    };
                    calls += 1;
                    for (i, f) in files.iter().enumerate() {
                        fits[i] += accepts(rt, f, &call) as usize;
                    }
                    let out = CallOut {
                        count,
                        dtype,
                        inplace,
                        bytes: call.bytes(),
                    };
                    match select(rt, &files, &call) {
                        Pick::File(i) => {
                            per[i] += 1;
                            served += 1;
                        }
                        Pick::Fallback => fallbacks.push(out),
                        Pick::Ambiguous(v) => {
                            for i in v {
                                per[i] += 1;
                            }
                            served += 1;
                            ambiguous.push(out);
                        }
                    }
                }
            }
        }
        groups.push(Group {
            ranks,
            op,
            calls,
            served,
            per_file: members
                .iter()
                .enumerate()
                .map(|(k, &i)| (progs[i].0.clone(), per[k], fits[k]))
                .collect(),
            fallbacks,
            ambiguous,
        });
    }
    Ok(Report {
        dir: shown,
        runtime: rt.name(),
        files: names,
        hazards,
        notes,
        groups,
    })
}

fn print_text(r: &Report) {
    if r.files.is_empty() {
        println!("{}: empty: every call runs plain NCCL/RCCL", r.dir);
    }
    for g in &r.groups {
        println!(
            "{} ({} runtime), {} ranks, {}: {} of {} calls served (counts 2^k and 2^k + 1, 999, 1000, 12345, 300001 up to nBytes 4 GiB; float and bfloat16; in and out of place)",
            r.dir, r.runtime, g.ranks, g.op, g.served, g.calls
        );
        let w = g.per_file.iter().map(|f| f.0.len()).max().unwrap_or(0);
        for (f, n, fits) in &g.per_file {
            let why = if *n > 0 {
                String::new()
            } else if *fits == 0 {
                ": never selected (its chunk count, band or call modes fit no call of the sweep)"
                    .into()
            } else {
                format!(": never selected (shadowed: the files before it take all {fits} calls it would serve)")
            };
            println!("  {f:<w$}  {n:>4} calls{why}");
        }
        if !g.fallbacks.is_empty() {
            let list: Vec<String> = g.fallbacks.iter().take(6).map(call_str).collect();
            println!(
                "  falls back for {} calls, e.g. {}{}",
                g.fallbacks.len(),
                list.join("; "),
                if g.fallbacks.len() > 6 { "; …" } else { "" }
            );
        }
        if !g.ambiguous.is_empty() {
            println!(
                "  {} calls match several files: RCCL reads the directory unsorted, so which one runs depends on the filesystem (e.g. {})",
                g.ambiguous.len(),
                call_str(&g.ambiguous[0])
            );
        }
    }
    for n in &r.notes {
        println!("{}: note: {n}", r.dir);
    }
    for h in &r.hazards {
        eprintln!("{}/{h}", r.dir.trim_end_matches('/'));
    }
}

fn call_str(c: &CallOut) -> String {
    format!(
        "count {} {} {} ({} B)",
        c.count,
        c.dtype,
        if c.inplace {
            "in place"
        } else {
            "out of place"
        },
        c.bytes
    )
}
