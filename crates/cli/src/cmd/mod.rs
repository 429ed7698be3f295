pub mod agent;
pub mod behave;
pub mod bots;
pub mod child;
pub mod circuit;
pub mod commands;
pub mod compare;
pub mod decode;
pub mod demo;
pub mod discover;
pub mod emu;
mod emu_agents;
pub mod fit;
pub mod key;
pub mod logd;
pub mod manual;
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

/// `--exempt ADDR[/PREFIX]`: a network a listener's admission policy always trusts.
pub fn exempt(s: &str) -> Result<(std::net::IpAddr, u8), String> {
    horde_proto::admission::parse_exempt(s)
}

/// `10s`, `1.5s`, `250ms` for messages.
pub fn decode_fmt_duration(d: std::time::Duration) -> String {
    horde_model::units::fmt_ns(d.as_nanos() as f64)
}

/// `--collect`: what the agents send after a distributed run (`run --agents`, `send --agents`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CollectArg {
    #[default]
    Logs,
    Summaries,
}

/// The live log server options shared by `send` and `recv`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LogServerArgs {
    /// Stream the per-packet log, as it is written, to the live log server `horde logd` at ADDR (host:port; needs the server's run key, --key-file). With or without --log
    #[arg(long, value_name = "ADDR")]
    pub log_server: Option<String>,
    /// The log's name on the log server (NAME.log there; 1 to 64 of A-Z a-z 0-9 . _ -). Default: send-HOST-PID or recv-HOST-PID
    #[arg(long, value_name = "NAME", requires = "log_server")]
    pub log_name: Option<String>,
}

impl LogServerArgs {
    /// Connects to the log server, if one was given: authenticated both ways before the run.
    pub fn tap(&self, key: &horde_proto::RunKey, role: horde_wire::Role) -> Result<horde_engine::logger::TapSlot, crate::Failure> {
        let Some(a) = &self.log_server else { return Ok(Default::default()) };
        let addr = resolve(a).map_err(|e| crate::bad_input(anyhow::anyhow!("--log-server {a}: {e}")))?;
        let name = self.log_name.clone().unwrap_or_else(|| horde_agent::logstream::default_name(role));
        let s = horde_agent::logstream::LogStream::connect(addr, key, role, &name)?;
        Ok(horde_engine::logger::TapSlot::new(Box::new(s)))
    }
}

/// One line on a log's live stream, for the summaries.
pub fn tap_line(t: &horde_engine::logger::TapReport) -> String {
    let mut s = format!("  log server: {} record(s) streamed to {} as {}.log", t.records - t.dropped, t.server, t.name);
    match t.acknowledged {
        Some(a) => s.push_str(&format!(", {a} written there")),
        None => s.push_str(", the end not acknowledged"),
    }
    if t.dropped > 0 {
        s.push_str(&format!("; {} dropped when the stream fell behind (marked there as gaps)", t.dropped));
    }
    if let Some(e) = &t.error {
        s.push_str(&format!("; {e}"));
    }
    s
}

/// `host:port` to one socket address.
pub fn resolve(a: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    a.to_socket_addrs().map_err(|e| format!("not host:port ({e})"))?.next().ok_or_else(|| "names no address".to_string())
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

/// The agents a controller command reaches, resolved once: `--agents`, `--credentials` (or
/// HORDE_CREDENTIALS) and `--deadman` (1s..60s) as every command through agents takes them.
pub struct Fleet {
    pub agents: Vec<horde_agent::controller::AgentSpec>,
    pub credentials: PathBuf,
    pub deadman: std::time::Duration,
}

impl Fleet {
    pub fn resolve(list: &str, credentials: Option<PathBuf>, deadman: &str) -> Result<Fleet, crate::Failure> {
        let agents = horde_agent::controller::parse_agents(list).map_err(crate::bad_input)?;
        let credentials = credentials.ok_or_else(|| {
            crate::bad_input(anyhow::anyhow!(
                "--agents needs --credentials DIR (ca.pem, controller.pem, controller.key from `horde agent keygen`), or HORDE_CREDENTIALS"
            ))
        })?;
        let deadman_ns = horde_model::units::parse_duration_ns(deadman).map_err(|e| crate::bad_input(anyhow::anyhow!("--deadman: {e}")))?;
        if !(1_000_000_000..=60_000_000_000).contains(&deadman_ns) {
            return Err(crate::bad_input(anyhow::anyhow!("--deadman must be 1s..60s (got {deadman})")));
        }
        Ok(Fleet { agents, credentials, deadman: std::time::Duration::from_nanos(deadman_ns) })
    }
}
