pub mod agent;
pub mod behave;
pub mod bots;
pub mod circuit;
pub mod commands;
pub mod decode;
pub mod demo;
pub mod emu;
pub mod key;
pub mod presets;
pub mod recv;
pub mod run;
pub mod send;
pub mod services;
pub mod ui;

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

/// Files that mark a directory as a Horde report (what a run writes first and last).
const REPORT_FILES: [&str; 4] = ["summary.json", "index.html", "client.hlog", "server.json"];

/// `horde-out/NAME-SECONDS`: a fresh report directory for a run given no `--out`.
pub fn default_out(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("horde-out/{name}-{}", horde_sys::clock::unix_secs()))
}

/// Checks a report directory (`--out`) before anything is run: Horde never writes through a
/// symbolic link, nor into a directory that holds files of something else; a new, empty or
/// earlier Horde report directory is fine. Nothing is created here (a run refused later leaves
/// no empty directory behind).
pub fn report_dir(out: &Path) -> Result<(), crate::Failure> {
    let bad = |why: String| crate::bad_input(anyhow::anyhow!("--out {}: {why}", out.display()));
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => Err(bad("is a symbolic link: give the real directory (Horde does not write through links)".into())),
        Ok(m) if !m.is_dir() => Err(bad("is a file, not a directory: give a new directory".into())),
        Ok(_) => {
            let ours = REPORT_FILES.iter().any(|f| out.join(f).exists());
            let empty = std::fs::read_dir(out).map(|mut d| d.next().is_none()).unwrap_or(false);
            if ours || empty {
                Ok(())
            } else {
                Err(bad("holds files that are not a Horde report: give a new or empty directory (Horde overwrites only its own reports)".into()))
            }
        }
        Err(_) => Ok(()),
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
