pub mod agent;
pub mod behave;
pub mod bots;
pub mod circuit;
pub mod decode;
pub mod demo;
pub mod emu;
pub mod key;
pub mod presets;
pub mod recv;
pub mod run;
pub mod send;
pub mod services;

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Writes `text` to `path`, or to stdout when `path` is `-`.
pub fn write_out(path: &Path, text: &str) -> Result<(), crate::Failure> {
    if path == Path::new("-") {
        crate::output::out(text)
    } else {
        Ok(std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?)
    }
}

/// Parses a duration flag (`500ms`, `3s`, `2m`).
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    horde_model::units::parse_duration_ns(s).map(std::time::Duration::from_nanos)
}

/// `10s`, `1.5s`, `250ms` for messages.
pub fn decode_fmt_duration(d: std::time::Duration) -> String {
    horde_model::units::fmt_ns(d.as_nanos() as f64)
}

/// The run-key option shared by `send`, `recv` and `key`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KeyArgs {
    /// File holding the run key (64 hex digits, from `horde key --out FILE`); hellos without a MAC under it are dropped. Default: $HORDE_KEY_FILE, else no key
    #[arg(long, value_name = "FILE", env = "HORDE_KEY_FILE")]
    pub key_file: Option<PathBuf>,
}

impl KeyArgs {
    pub fn key(&self) -> Result<horde_proto::RunKey, crate::Failure> {
        match &self.key_file {
            None => Ok(horde_proto::RunKey::OPEN),
            Some(p) => Ok(horde_scenario::read_key(p)?),
        }
    }
}
