//! A run's inputs in its report directory, so that `horde run DIR` runs it again
//! ([`horde_model::rerun`] makes the scenario self-contained; this writes it).

use std::path::Path;

use anyhow::Context as _;
use horde_model::scenario::Scenario;
use serde::{Deserialize, Serialize};

/// What `run.json` says of a run: enough to know what ran and to run it again.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunInputs {
    pub schema_version: u32,
    /// The Horde that ran it (`horde --version`).
    pub horde_version: String,
    /// The command line of the process that ran it, as it was given.
    pub command_line: Vec<String>,
    /// The files beside `scenario.toml` that it names (the service file, with its value files
    /// inlined, and the topology).
    pub files: Vec<String>,
    /// What was not kept, and why.
    pub notes: Vec<String>,
}

/// Writes a run's inputs into its report directory, self-contained: `scenario.toml` as it ran
/// (the command line's overrides written in), the service and topology files it read, and
/// `run.json` (version and command line): `horde run DIR` runs it again, the directory copied
/// anywhere, with the same departures ([`horde_model::rerun`]).
pub fn write(sc: &Scenario, out: &Path) -> anyhow::Result<()> {
    // an agent that runs a part has no topology file of its own: the report says so
    let topology = sc.emu.as_ref().and_then(|e| horde_model::files::read_text(&e.topology, horde_model::files::MAX_TOML, "topology files").ok());
    let kept = horde_model::rerun::inputs(sc, topology.as_deref()).map_err(|e| anyhow::anyhow!("{e}"))?;
    for (name, text) in &kept.files {
        std::fs::write(out.join(name), text).with_context(|| format!("writing {name}"))?;
    }
    std::fs::write(out.join("scenario.toml"), &kept.scenario).context("writing scenario.toml")?;
    let run = RunInputs {
        schema_version: 1,
        horde_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect(),
        files: kept.files.iter().map(|(n, _)| n.to_string()).collect(),
        notes: kept.notes,
    };
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&run)?).context("writing run.json")?;
    Ok(())
}
