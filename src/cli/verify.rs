//! `rscc verify`: check an MSCCL XML file (rscc's or another tool's).

use super::{CliError, CliResult};
use crate::front;
use crate::verify::{
    group, if_input_writable, verify_all, RuleGroup, VerifyError, VerifyOptions, VerifyReport,
};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "Exit codes: 0 valid, 1 invalid, 2 unreadable.\n\nExample:\n  rscc verify rs.xml --topo topologies/dgx-h100.json\n  rscc verify other-tool.xml --json"
)]
pub struct VerifyArgs {
    /// MSCCL XML file.
    pub file: PathBuf,
    /// Topology the file targets: checks the rank count and the GPUs' SM
    /// count (threadblocks per rank).
    #[arg(long)]
    pub topo: Option<PathBuf>,
    /// Machine-readable result.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: VerifyArgs) -> CliResult {
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
    let res = verify_all(&p, &opts);
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
            report: res.as_ref().ok(),
        };
        let text = serde_json::to_string_pretty(&out).map_err(CliError::input)?;
        println!("{text}");
    }
    match res {
        Ok(r) => {
            if !a.json {
                println!(
                    "{file}: valid reduce-scatter ({} ranks, {} threadblocks, {} steps; correct {})",
                    r.ranks,
                    r.threadblocks,
                    r.steps,
                    r.modes.join(" and ")
                );
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
    #[serde(flatten)]
    report: Option<&'a VerifyReport>,
}
