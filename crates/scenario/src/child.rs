//! The parent's side of a server-side part run as a child process ([`ServerChild`]): started
//! through `horde_sys::own`, its commands written and its [`PartEvent`]s read, stopped and
//! reaped with its own resource usage.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context as _;

use crate::part::{Part, PartEvent, MAX_EVENT};
use crate::server::LiveServer;

/// The server-side child process, stopped (SIGTERM) and reaped on drop; and its live delay,
/// read from its standard output.
pub struct ServerChild(std::process::Child, LiveServer);

impl ServerChild {
    /// Starts the server side as a child running `part` (in network namespace `netns`, if
    /// given) and waits for its listening address.
    pub fn start(part: &Part, netns: Option<&std::fs::File>) -> anyhow::Result<(ServerChild, SocketAddr)> {
        use horde_sys::own;
        let tie = own::Tie {
            // The server side dies with us, even when we are killed (and does not start if we
            // died first).
            death_signal: Some(own::DIE_WITH_US),
            own_session: false,
            netns: netns.map(std::os::fd::AsRawFd::as_raw_fd),
            keep_stdin: true,
            stdout: std::process::Stdio::piped(),
            stderr: std::process::Stdio::inherit(),
        };
        let mut child = own::spawn(own::Kind::Part, &part.run_id, part, tie).context("starting the server side")?;
        let stdout = child.stdout.take().context("the server side's standard output")?;
        let live = LiveServer::default();
        let guard = ServerChild(child, live.clone());
        let mut out = std::io::BufReader::new(stdout);
        let addr = match own::read_line::<PartEvent>(&mut out, MAX_EVENT).context("reading the server side's address")? {
            Some(PartEvent::Listening { addr }) => addr,
            Some(other) => anyhow::bail!("the server side said {other:?} before it listened"),
            None => anyhow::bail!("the server side did not start (see its error above)"),
        };
        std::thread::Builder::new().name("horde-server-live".into()).spawn(move || follow_live(out, &live)).context("starting a thread")?;
        Ok((guard, addr))
    }

    /// The live figures the child reported.
    pub fn live(&self) -> LiveServer {
        self.1.clone()
    }

    /// Passes a (stamped) command to the child on its standard input, one JSON line.
    pub fn command(&mut self, c: &crate::control::Command) -> anyhow::Result<()> {
        use std::io::Write;
        let stdin = self.0.stdin.as_mut().context("the server side's standard input is closed")?;
        let line = serde_json::to_string(c).context("encoding a command")?;
        stdin.write_all(format!("{line}\n").as_bytes()).context("writing to the server side")?;
        stdin.flush().context("writing to the server side")
    }

    /// How the child ended, if it has (it is not reaped here, so that [`ServerChild::finish`]
    /// still gets its resource usage).
    pub fn exited(&mut self) -> Option<String> {
        horde_sys::own::exited(&mut self.0)
    }

    /// Stops the server side and returns the text of the file it leaves in `out` (`None` if
    /// it died and left none).
    pub fn finish_file(mut self, out: &Path, died: bool, file: &str) -> anyhow::Result<Option<String>> {
        if self.exited().is_none() {
            horde_sys::own::terminate(&self.0);
        }
        let status = self.reap().context("waiting for the server side")?;
        // 130: the child was interrupted (Ctrl-C reaches the whole process group, the child
        // too, and it may exit before this process has seen its own signal). That is an end
        // like any other: its report when it had written one, the run's report without it when
        // the signal came before it served.
        let interrupted = status.code() == Some(130);
        if !status.success() && !interrupted && !died {
            anyhow::bail!("the server side failed ({status})");
        }
        match horde_model::files::read_text(&out.join(file), 1 << 30, "the server side's report") {
            Ok(text) => Ok(Some(text)),
            Err(_) if died || interrupted => Ok(None),
            Err(e) => Err(anyhow::anyhow!("reading {file}: {e}")),
        }
    }
}

/// The CPU seconds and peak RSS (kB) of the last server-side child reaped: its own, from
/// wait4, not `RUSAGE_CHILDREN` (which, after `cargo run` execs horde, also holds the build's).
static CHILD_USAGE: std::sync::Mutex<Option<(f64, u64)>> = std::sync::Mutex::new(None);

/// What [`ServerChild`] measured of the last server side it reaped.
pub fn child_usage() -> Option<(f64, u64)> {
    *CHILD_USAGE.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerChild {
    /// Waits for the child and takes its own resource usage.
    fn reap(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let (status, usage) = horde_sys::own::reap(&mut self.0)?;
        if let Some(u) = usage {
            *CHILD_USAGE.lock().unwrap_or_else(|p| p.into_inner()) = Some((u.cpu_s, u.max_rss_kb));
        }
        Ok(status)
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Reads a server-side child's live events until it closes its output (or says something that
/// is not an event: then it is read no more).
fn follow_live(mut out: impl std::io::BufRead, live: &LiveServer) {
    while let Ok(Some(PartEvent::Live { delay_ms, seconds })) = horde_sys::own::read_line::<PartEvent>(&mut out, MAX_EVENT) {
        live.lock().unwrap_or_else(|p| p.into_inner()).take(delay_ms, &seconds);
    }
}
