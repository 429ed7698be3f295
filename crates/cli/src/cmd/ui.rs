//! `horde ui`: the live console (`horde-console`) — start scenarios, watch their events and
//! steer them from a browser; and `horde run … --ui ADDR`, the same console attached to one run.

use horde_sys::clock::Clock as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use horde_console::hub::{Hub, RunState};
use horde_model::scenario::Scenario;
use horde_scenario::control::{Command, Commands};
use horde_scenario::EventLine;

use crate::{bad_input, Outcome};

/// Where a run's events go besides its printer: the console it is attached to (`--ui`).
pub static TEE: std::sync::OnceLock<Tee> = std::sync::OnceLock::new();

/// A receiver of a run's events.
pub type Tee = Box<dyn Fn(&horde_scenario::Event) + Send + Sync>;

/// How long the console waits for its runs to stop and write their reports when it is stopped.
const DRAIN: Duration = Duration::from_secs(90);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the console listens (loopback unless --public; port 0: any free one). Open the URL it prints: it carries this start's token
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Report directories of the runs it starts, its saved topologies (DIR/topologies), and where it lists past runs from
    #[arg(long, value_name = "DIR", default_value = "horde-out")]
    pub runs: PathBuf,
    /// Allow a --listen address beyond loopback (then HTTPS only: --tls-self-signed or --tls-cert/--tls-key)
    #[arg(long)]
    pub public: bool,
    /// Serve HTTPS with this PEM certificate chain (and --tls-key)
    #[arg(long, value_name = "FILE", requires = "tls_key", conflicts_with = "tls_self_signed")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM, readable by its owner only)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve HTTPS with a certificate made at start for localhost, the address and every --name; it is written to DIR/console-cert.pem to trust
    #[arg(long)]
    pub tls_self_signed: bool,
    /// A host name the console answers to (the name you type in the browser; needed with --listen 0.0.0.0); repeatable
    #[arg(long = "name", value_name = "HOST")]
    pub names: Vec<String>,
    /// Also write the URL with this start's token to FILE (mode 0600, one line; removed when the console stops): for scripts and the Python client (`Client(token_file=…)`), instead of reading it from standard error
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Refuse every command in emulated nodes (`emu exec` from the page or the API): token holders start runs and topologies, nothing more
    #[arg(long)]
    pub no_exec: bool,
    /// Honour a topology's `force = true` (an external node taking an interface this machine uses) from token holders; refused without this flag
    #[arg(long)]
    pub allow_force: bool,
    /// A network whose connections the admission policy always trusts, ADDR or ADDR/PREFIX (repeat, or comma-separate): never rate-limited or struck, its places reserved (as OpenSSH's PerSourcePenaltyExemptList). Sources that showed the token in the last 15 minutes are trusted anyway
    #[arg(long, value_name = "ADDR[/PREFIX]", value_delimiter = ',', value_parser = super::exempt)]
    pub exempt: Vec<(std::net::IpAddr, u8)>,
}

/// `--token-file`: the console's URL (with its token) in a file only its owner can read, there
/// while the console runs. Written beside its final name and renamed into place, so a reader
/// never sees half a line and a link planted at the name is replaced, not followed.
struct TokenFile {
    path: PathBuf,
    line: String,
}

impl TokenFile {
    fn write(path: &Path, url: &str) -> Result<TokenFile, crate::Failure> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let name = path.file_name().ok_or_else(|| bad_input(anyhow::anyhow!("--token-file {}: name a file, not a directory", path.display())))?;
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let line = format!("{url}\n");
        let fail = |e: std::io::Error| bad_input(anyhow::anyhow!("--token-file {}: {e} (give a file in a directory you can write)", path.display()));
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(fail)?;
        let written = f.write_all(line.as_bytes()).and_then(|_| f.sync_all()).and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(e));
        }
        Ok(TokenFile { path: path.to_path_buf(), line })
    }
}

impl Drop for TokenFile {
    /// Removes the file, unless something else has been written there since.
    fn drop(&mut self) {
        if std::fs::read_to_string(&self.path).is_ok_and(|s| s == self.line) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub fn run(a: Args, stop: &AtomicBool) -> Outcome {
    let hub = Arc::new(Hub::new());
    let tls = match (&a.tls_cert, &a.tls_key, a.tls_self_signed) {
        (Some(cert), Some(key), _) => Some(horde_console::tls::TlsFrom::Files { cert: cert.clone(), key: key.clone() }),
        (_, _, true) => Some(horde_console::tls::TlsFrom::SelfMade { write_to: a.runs.join("console-cert.pem") }),
        _ => None,
    };
    let allow = horde_console::Allow { exec: !a.no_exec, force: a.allow_force };
    let opts = horde_console::Options {
        listen: a.listen,
        runs_dir: a.runs.clone(),
        can_start: true,
        tls,
        public: a.public,
        names: a.names.clone(),
        allow,
        exempt: a.exempt.clone(),
    };
    let console = horde_console::start(opts, hub.clone()).map_err(bad_input)?;
    say!("horde ui: the console is at {}", console.url);
    let _token_file = match &a.token_file {
        Some(p) => {
            let f = TokenFile::write(p, &console.url)?;
            say!("horde ui: its URL and token are in {} (mode 0600; removed when the console stops)", p.display());
            Some(f)
        }
        None => None,
    };
    if let Some(cert) = &console.cert {
        say!("horde ui: its certificate (made for this start) is {}: trust it in the browser, or curl --cacert it", cert.display());
    }
    say!("horde ui: runs write their reports under {}/; Ctrl-C stops the console (its runs stop first and report)", a.runs.display());
    let clock = horde_sys::clock::System;
    while !stop.load(Ordering::Relaxed) {
        clock.sleep(Duration::from_millis(100));
    }
    let running: Vec<u32> = hub.list().into_iter().filter(|r| r.state == RunState::Running).map(|r| r.id).collect();
    if !running.is_empty() {
        say!("horde ui: stopping {} run(s); each writes what it measured (Ctrl-C again to quit at once)", running.len());
        for id in &running {
            let _ = hub.command(*id, Command::Stop {});
        }
        let t = horde_sys::clock::Stopwatch::start();
        while hub.list().iter().any(|r| r.state == RunState::Running) && t.elapsed() < DRAIN {
            clock.sleep(Duration::from_millis(100));
        }
    }
    console.stop();
    Ok(0)
}

/// Starts a console at `addr` attached to one run of `sc` (report in `out`): the run's events go
/// to it, its commands come from it and from `--commands`. Returns the console and the run's
/// command channel.
pub fn attach(
    addr: SocketAddr,
    sc: &Scenario,
    out: &Path,
    from_flag: &super::commands::CommandArgs,
) -> Result<(horde_console::Console, Commands), crate::Failure> {
    let hub = Arc::new(Hub::new());
    let runs_dir = out.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let console = horde_console::start(horde_console::Options::local(addr, runs_dir, false), hub.clone()).map_err(bad_input)?;
    let (tx, commands) = Commands::channel();
    from_flag.feed(tx.clone())?;
    let tx = std::sync::Mutex::new(tx);
    let sink = Box::new(move |id: u64, c: Command| {
        let sent = tx.lock().unwrap_or_else(|p| p.into_inner()).send(horde_scenario::control::Incoming { id, command: Ok(c) });
        sent.map_err(|_| "the run has stopped reading commands".to_string())
    });
    let id = hub.add(&sc.name, &out.display().to_string(), true, Some(sink)).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (name, h) = (sc.name.clone(), hub.clone());
    let _ = TEE.set(Box::new(move |e| h.push(id, &EventLine::of(&name, e))));
    say!("horde run: the console is at {}", console.url);
    Ok((console, commands))
}

/// The attached run ended with `r`: the console's stream says so before the console stops.
pub fn finished(console: horde_console::Console, r: &Outcome) {
    let code = match r {
        Ok(c) => *c,
        Err(f) => f.code,
    };
    for info in console.hub.list() {
        console.hub.finish(info.id, code);
    }
    // Open streams get the last lines before the console goes.
    horde_sys::clock::System.sleep(Duration::from_millis(300));
    console.stop();
}
