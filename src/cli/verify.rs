//! `rscc verify`: check an MSCCL XML file (rscc's or another tool's).

use super::synth::RuntimeArg;
use super::{CliError, CliResult};
use crate::front;
use crate::ir::Runtime;
use crate::verify::{
    group, if_input_writable, prove, structural, structural_for, RuleGroup, VerifyError,
    VerifyOptions, VerifyReport,
};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "Exit codes: 0 valid, 1 invalid, 2 unreadable. With a directory: which file the runtime selects for each call of a sweep, where it falls back, and entries that would break it (exit 1).\n\nExample:\n  rscc verify rs.xml --topo topologies/dgx-h100.json\n  rscc verify other-tool.xml --json\n  rscc verify algos/ --runtime rccl"
)]
pub struct VerifyArgs {
    /// MSCCL XML file, or a directory to check as an MSCCL_ALGO_DIR.
    pub file: PathBuf,
    /// Topology the file targets: checks the rank count and the GPUs' SM
    /// count (threadblocks per rank).
    #[arg(long)]
    pub topo: Option<PathBuf>,
    /// Judge for one runtime's rules (steps and threadblocks per runtime,
    /// the `coll` spelling, what maxBytes means). Default: the runtime the
    /// file's `coll` names, and a line saying which runtimes accept it.
    #[arg(long, value_enum)]
    pub runtime: Option<RuntimeArg>,
    /// Machine-readable result.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: VerifyArgs) -> CliResult {
    if a.file.is_dir() {
        if a.topo.is_some() {
            return Err(CliError::input(format!(
                "{}: --topo applies to one file; a directory is checked by the runtime's selection alone",
                a.file.display()
            )));
        }
        return super::verify_dir::run(&a.file, a.runtime.map(RuntimeArg::runtime), a.json);
    }
    let p = front::msccl_xml::load(&a.file).map_err(CliError::input)?;
    let mut opts = VerifyOptions::default();
    if let Some(t) = &a.topo {
        let topo = front::load_topology(t).map_err(CliError::input)?;
        if topo.num_ranks() as i64 != p.ngpus {
            return Err(CliError::input(format!(
                "{}: ngpus=\"{}\" but the topology {} has {} ranks",
                a.file.display(),
                p.ngpus,
                t.display(),
                topo.num_ranks()
            )));
        }
        opts.max_tbs = topo.min_sms().map(|s| s as usize);
    }
    opts.runtime = a.runtime.map(RuntimeArg::runtime);
    // Each runtime's own rules (the symbolic phase is the same for all);
    // the judged runtime's errors gate the proof.
    let judged = opts.runtime.unwrap_or(p.runtime);
    let per_runtime = structural_for(&p, &opts, &Runtime::ALL);
    let runtimes: Vec<RuntimeVerdict> = Runtime::ALL
        .iter()
        .zip(&per_runtime)
        .map(|(rt, errs)| {
            // Each broken rule once, in the order first broken.
            let mut rules: Vec<&'static str> = Vec::new();
            for e in errs {
                if !rules.contains(&e.rule) {
                    rules.push(e.rule);
                }
            }
            RuntimeVerdict {
                runtime: rt.name(),
                rules_hold: errs.is_empty(),
                broken: rules,
            }
        })
        .collect();
    let own = Runtime::ALL.iter().position(|&rt| rt == judged);
    let res = prove(
        &p,
        own.map_or_else(|| structural(&p, &opts), |i| per_runtime[i].clone()),
    );
    let prog_coll = p.coll.display();
    let file = a.file.display().to_string();
    let errs: &[VerifyError] = res.as_ref().err().map_or(&[], |e| &e[..]);
    let rules = group(errs);
    let writable = if_input_writable(&p, errs, &opts);
    if a.json {
        let out = VerifyOut {
            file: &file,
            valid: res.is_ok(),
            errors: errs,
            rules: &rules,
            correct_if_input_writable: writable.as_ref().map(|w| w.is_ok()),
            runtimes: &runtimes,
            report: res.as_ref().ok(),
        };
        let text = serde_json::to_string_pretty(&out).map_err(CliError::input)?;
        println!("{text}");
    }
    match res {
        Ok(r) => {
            if !a.json {
                println!(
                    "{file}: valid {} ({} ranks, {} threadblocks, {} steps; correct {})",
                    prog_coll,
                    r.ranks,
                    r.threadblocks,
                    r.steps,
                    r.modes.join(" and ")
                );
                if let Some(sms) = opts.max_tbs {
                    // All of a rank's threadblocks must be resident at once.
                    let tbs = p.max_tbs_per_rank();
                    println!(
                        "{file}: needs {tbs} threadblocks per rank resident at once, {:.0} % of the GPU's {sms} SMs{}",
                        100.0 * tbs as f64 / sms.max(1) as f64,
                        if 2 * tbs > sms {
                            " (more than half: it cannot run beside a second such collective, e.g. FSDP's reduce-scatter beside the next allgather; see `rscc synth --max-tbs`)"
                        } else {
                            ""
                        }
                    );
                }
                if a.runtime.is_none() {
                    println!("{file}: {}", runtimes_line(&runtimes));
                }
            }
            Ok(())
        }
        Err(errs) => {
            if !a.json {
                for g in &rules {
                    print_group(&file, g);
                }
                match &writable {
                    Some(Ok(r)) => eprintln!(
                        "{file}: otherwise correct ({}) if the input buffer may be overwritten: only the input-write rule is broken",
                        r.modes.join(" and ")
                    ),
                    Some(Err(e)) => eprintln!(
                        "{file}: and with the input buffer writable it is still wrong: {}",
                        e[0]
                    ),
                    None => {}
                }
                if a.runtime.is_none() {
                    eprintln!("{file}: {}", runtimes_line(&runtimes));
                }
            }
            Err(CliError::check(format!(
                "{file}: {} rule(s) broken{}",
                rules.len(),
                if errs.len() > rules.len() {
                    format!(" ({} errors)", errs.len())
                } else {
                    String::new()
                }
            )))
        }
    }
}

/// One broken rule: its first error in full, then where it broke again.
fn print_group(file: &str, g: &RuleGroup) {
    eprintln!("{file}: {}", g.first[0]);
    if g.count == 1 {
        return;
    }
    let more: Vec<String> = g.first[1..]
        .iter()
        .map(|e| match &e.at {
            Some(at) => at.to_string(),
            None => e.msg.clone(),
        })
        .collect();
    let rest = g.count - g.first.len();
    eprintln!(
        "{file}: [{}] broken {} times in all; also at {}{}",
        g.rule,
        g.count,
        more.join("; "),
        if rest > 0 {
            format!(" and {rest} more")
        } else {
            String::new()
        }
    );
}

/// Whether one runtime's own rules hold for the file.
#[derive(serde::Serialize)]
struct RuntimeVerdict {
    runtime: &'static str,
    rules_hold: bool,
    /// The rules broken for this runtime.
    broken: Vec<&'static str>,
}

/// "executor: its rules hold; legacy: rejects it ([runtime], …)".
fn runtimes_line(v: &[RuntimeVerdict]) -> String {
    let parts: Vec<String> = v
        .iter()
        .map(|r| {
            if r.rules_hold {
                format!("{}: its rules hold", r.runtime)
            } else {
                let rules: Vec<String> = r.broken.iter().map(|b| format!("[{b}]")).collect();
                format!("{}: rejects it ({})", r.runtime, rules.join(", "))
            }
        })
        .collect();
    format!("runtimes: {}", parts.join("; "))
}

/// `rscc verify --json`.
#[derive(serde::Serialize)]
struct VerifyOut<'a> {
    file: &'a str,
    valid: bool,
    /// Every error found.
    errors: &'a [VerifyError],
    /// The same, each rule once with its count and first errors.
    rules: &'a [RuleGroup],
    /// Whether a file whose only broken rule is `input-write` is otherwise
    /// correct (null when other rules are broken, or none).
    correct_if_input_writable: Option<bool>,
    /// Per runtime, whether its own rules hold.
    runtimes: &'a [RuntimeVerdict],
    #[serde(flatten)]
    report: Option<&'a VerifyReport>,
}
