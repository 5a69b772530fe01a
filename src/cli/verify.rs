//! `rscc verify`: check an MSCCL XML file (rscc's or another tool's).

use super::{CliError, CliResult};
use crate::front;
use crate::verify::{verify_all, VerifyError, VerifyOptions, VerifyReport};
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
    if a.json {
        let (report, errors) = match &res {
            Ok(r) => (Some(r), &[][..]),
            Err(errs) => (None, &errs[..]),
        };
        let out = VerifyOut {
            file: &file,
            valid: res.is_ok(),
            errors,
            report,
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
                for e in &errs {
                    eprintln!("{file}: {e}");
                }
            }
            Err(CliError::check(format!(
                "{file}: {} rule(s) broken",
                errs.len()
            )))
        }
    }
}

/// `rscc verify --json`.
#[derive(serde::Serialize)]
struct VerifyOut<'a> {
    file: &'a str,
    valid: bool,
    errors: &'a [VerifyError],
    #[serde(flatten)]
    report: Option<&'a VerifyReport>,
}
