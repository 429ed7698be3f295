//! `horde compare A B [C…]`: report directories side by side, every run against the first,
//! each difference judged with the verdicts' statistics at the sample sizes
//! (`horde_scenario::compare`; Python's `horde.compare` reads its JSON).

use std::path::{Path, PathBuf};

use anyhow::Context;
use horde_scenario::compare::{compare, html, text, Report, ALPHA};

use crate::{bad_input, Outcome};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  horde compare horde-out/a horde-out/b horde-out/c      # b and c against a\n  \
horde compare a b --json cmp.json --html cmp.html --all\n\n\
Schedule figures are equal or not (one seed twice: the same); rates, distributions and loss are tested at the runs' sample sizes (α split over each pair's tests); one-way delay is shown, not tested.")]
pub struct Args {
    /// Report directories (`horde run --out`, `horde demo`, the console's runs); the first is the baseline
    #[arg(value_name = "REPORT_DIR", num_args = 2.., required = true)]
    pub reports: Vec<PathBuf>,
    /// Significance level of each pair's family of tests
    #[arg(long, default_value_t = ALPHA)]
    pub alpha: f64,
    /// Write the comparison as JSON (`-`: standard output, the table then goes to standard error)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the comparison as a self-contained HTML page
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print every figure, not only those beyond noise
    #[arg(long)]
    pub all: bool,
}

pub fn run(a: Args) -> Outcome {
    let reports = a.reports.iter().map(|d| read(d)).collect::<Result<Vec<_>, _>>()?;
    let c = compare(&reports, a.alpha).map_err(|e| bad_input(anyhow::anyhow!(e)))?;
    let table = text(&c, a.all);
    let json = serde_json::to_string_pretty(&c).context("encoding the comparison")? + "\n";
    if let Some(p) = &a.html {
        std::fs::write(p, html(&c)).with_context(|| format!("writing {}", p.display()))?;
    }
    match &a.json {
        Some(p) if p == Path::new("-") => {
            eprint!("{table}");
            crate::output::out(&json)?;
        }
        Some(p) => {
            std::fs::write(p, json).with_context(|| format!("writing {}", p.display()))?;
            crate::output::out(&table)?;
        }
        None => crate::output::out(&table)?,
    }
    Ok(0)
}

/// A report directory's summary.json.
fn read(dir: &Path) -> Result<(String, Report), crate::Failure> {
    let name = dir.display().to_string();
    let r = horde_scenario::compare::load(dir, "summary.json", &name).map_err(|e| bad_input(anyhow::anyhow!(e)))?;
    Ok((name, r))
}
