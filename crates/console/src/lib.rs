//! Horde's live console (`horde ui`, `horde run … --ui ADDR`): a client of the run driver's
//! channel, not a second implementation. Runs it starts are `horde run --progress json
//! --commands -` children; a run it is attached to feeds its events in and takes its commands
//! out through the same [`hub::Hub`]. The API's events are the CLI's `--progress json` lines
//! ([`horde_scenario::EventLine`]) and its commands are `--commands` lines
//! ([`horde_scenario::control::Command`]).
//!
//! - `hub.rs` — the runs, their numbered event lines (resumable streams) and command sinks;
//! - `guard.rs` — the token, `Host` and `Origin` checks of every request (I/O-free, fuzzed);
//! - `api.rs` — the HTTP/JSON API and server-sent events;
//! - `runs.rs` — children, report files, past runs;
//! - `topo.rs` — the topology editor's files: text ↔ the editor's form, checked by the planner;
//! - `emu.rs` — the experiment view: `horde emu up|down|link|exec` children, plans, counters;
//! - `openapi.rs` — the API's OpenAPI document, made from the same types (docs/openapi.json);
//! - `assets.rs` — the browser application, embedded (no network needed).
//!
//! Security: loopback by default; beyond loopback only when asked (`public`) and only over TLS
//! (`tls.rs`: a certificate from files, or a self-made one); a fresh token per start; at most
//! [`MAX_CONNECTIONS`] connections, of them [`MAX_UNAUTHENTICATED`] before the token is shown
//! (per address and with eviction of the oldest silent one: [`horde_proto::admission`]), a TLS
//! handshake and a request's headers within 10 s each,
//! bodies within [`api::MAX_BODY`].

pub mod api;
pub mod assets;
pub mod emu;
pub mod guard;
pub mod hub;
pub mod openapi;
pub mod runs;
pub mod tls;
pub mod topo;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

/// Connections served at once: every unauthenticated place and 64 more; a connection waits up
/// to a second for its slot (one shed for it frees its own as its task ends), then is closed.
pub const MAX_CONNECTIONS: usize = MAX_UNAUTHENTICATED + 64;

pub struct Options {
    pub listen: SocketAddr,
    /// Where runs started from the console write their reports, and past runs are listed from.
    pub runs_dir: PathBuf,
    /// Whether runs may be started from the console (`horde ui`), or it watches one (`--ui`).
    pub can_start: bool,
    /// Serve HTTPS (required beyond loopback).
    pub tls: Option<tls::TlsFrom>,
    /// Listening beyond loopback was asked for explicitly.
    pub public: bool,
    /// Host names the console answers to besides its address (the `Host` check, and the
    /// self-made certificate's names).
    pub names: Vec<String>,
    /// What a token holder may make this console do beyond runs (`--no-exec`, `--allow-force`).
    pub allow: Allow,
    /// Networks the admission policy always trusts (`--exempt`).
    pub exempt: Vec<(std::net::IpAddr, u8)>,
}

/// What a token holder may do on this machine through the console or an agent, set by whoever
/// started the daemon: the token (or a controller's certificate) starts runs, but running
/// commands in emulated nodes and taking an interface the machine uses are the operator's call.
#[derive(Clone, Copy, Debug)]
pub struct Allow {
    /// `emu exec` in nodes (`--no-exec` turns it off).
    pub exec: bool,
    /// A topology's `force = true` on an external node (`--allow-force` turns it on).
    pub force: bool,
}

impl Default for Allow {
    fn default() -> Allow {
        Allow { exec: true, force: false }
    }
}

impl Options {
    /// A loopback console over plain HTTP.
    pub fn local(listen: SocketAddr, runs_dir: PathBuf, can_start: bool) -> Options {
        Options { listen, runs_dir, can_start, tls: None, public: false, names: Vec::new(), allow: Allow::default(), exempt: Vec::new() }
    }
}

/// A running console.
pub struct Console {
    pub addr: SocketAddr,
    /// The URL to open (with the token).
    pub url: String,
    /// This start's token (what `--token-file` holds, inside the URL).
    pub token: String,
    /// The self-made certificate's file (to trust it), when the console made one.
    pub cert: Option<PathBuf>,
    pub hub: Arc<hub::Hub>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Console {
    /// Stops serving (open streams end).
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// Binds `opts.listen` and serves the console on its own threads.
pub fn start(opts: Options, hub: Arc<hub::Hub>) -> anyhow::Result<Console> {
    let beyond = !opts.listen.ip().is_loopback();
    if beyond && !opts.public {
        anyhow::bail!(
            "--listen {}: the console listens on loopback unless asked: add --public (with TLS: --tls-self-signed, or --tls-cert/--tls-key), or reach it through an SSH tunnel: ssh -L 7070:127.0.0.1:7070 THIS_HOST",
            opts.listen
        );
    }
    if beyond && opts.tls.is_none() {
        anyhow::bail!(
            "--listen {} --public: beyond loopback the console serves HTTPS only: add --tls-self-signed, or --tls-cert FILE --tls-key FILE",
            opts.listen
        );
    }
    if opts.listen.ip().is_unspecified() && opts.names.is_empty() {
        anyhow::bail!("--listen {}: name the console with --name HOST (what you will type in the browser) so that its Host check knows it", opts.listen);
    }
    for n in &opts.names {
        if n.is_empty() || n.len() > 253 || !n.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':')) {
            anyhow::bail!("--name `{}`: a host name or address (letters, digits, . - :)", n.escape_debug());
        }
    }
    let token = guard::new_token().context("drawing the console's token")?;
    let listener = horde_sys::listen::bind(opts.listen)
        .with_context(|| format!("--listen {}: cannot listen there (in use? another port: --listen 127.0.0.1:0)", opts.listen))?;
    let addr = listener.local_addr()?;
    let (acceptor, cert) = match &opts.tls {
        Some(from) => {
            let (cfg, written) = tls::server_config(from, &opts.names, addr)?;
            (Some(tokio_rustls::TlsAcceptor::from(cfg)), written)
        }
        None => (None, None),
    };
    let mut guard = guard::Guard::new(token.clone(), addr, acceptor.is_some());
    for n in &opts.names {
        guard.also_named(n, addr.port());
    }
    let app = Arc::new(api::App {
        hub: hub.clone(),
        guard,
        runs_dir: opts.runs_dir,
        can_start: opts.can_start,
        tls: acceptor.is_some(),
        allow: opts.allow,
        tickets: std::sync::Mutex::new((std::time::Instant::now(), Default::default())),
    });
    let router = api::router(app);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("horde-ui").enable_all().build().context("starting the console's runtime")?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let admission = horde_proto::admission::AdmissionConfig::new(MAX_UNAUTHENTICATED, UNAUTHENTICATED_PER_SOURCE).exempting(opts.exempt);
    let thread = std::thread::Builder::new().name("horde-ui".into()).spawn(move || rt.block_on(serve(listener, router, acceptor, rx, admission)))?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let host = opts.names.first().map(|n| format!("{n}:{}", addr.port())).unwrap_or_else(|| addr.to_string());
    let url = format!("{scheme}://{host}/?token={token}");
    Ok(Console { addr, url, token, cert, hub, shutdown: Some(tx), thread: Some(thread) })
}

/// Connections that have not yet shown the token, at most (the rest of [`MAX_CONNECTIONS`] is
/// for those that have), and how many of them one address may hold.
pub const MAX_UNAUTHENTICATED: usize = 256;
/// A browser opens up to six connections to a host at once, more with several tabs.
const UNAUTHENTICATED_PER_SOURCE: usize = 16;

/// Who holds a place before showing the token ([`horde_proto::admission`]), on the clock since
/// the console started, and each pending connection's task (aborted when it is evicted).
struct Places {
    since: std::time::Instant,
    admission: horde_proto::admission::Admission,
    tasks: std::collections::HashMap<horde_proto::admission::Id, tokio::task::AbortHandle>,
}

impl Places {
    fn finished(&mut self, id: horde_proto::admission::Id, outcome: horde_proto::admission::Outcome) {
        self.tasks.remove(&id);
        let now = self.since.elapsed().as_nanos() as u64;
        self.admission.finished(id, outcome, now);
    }
}

fn lock(p: &std::sync::Mutex<Places>) -> std::sync::MutexGuard<'_, Places> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(
    listener: std::net::TcpListener,
    router: axum::Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    admission: horde_proto::admission::AdmissionConfig,
) {
    use horde_proto::admission::{Admission, Offer, Outcome};
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let places = Arc::new(std::sync::Mutex::new(Places { since: std::time::Instant::now(), admission: Admission::new(admission), tasks: Default::default() }));
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => match a { Ok(x) => x, Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue } },
        };
        // Silent, slow or churning connections cannot hold every place: a newcomer sheds one
        // (horde_proto::admission). One that showed the token no longer counts; one that was
        // answered without it (the page, a refusal) is no strike.
        let id = {
            let mut p = lock(&places);
            let now = p.since.elapsed().as_nanos() as u64;
            match p.admission.offer(peer.ip(), now) {
                Offer::Refuse(_) => continue,
                Offer::Admit { id, evict } => {
                    if let Some(t) = evict.and_then(|old| p.tasks.remove(&old)) {
                        t.abort();
                    }
                    id
                }
            }
        };
        let shown = places.clone();
        let router = tower::ServiceExt::<hyper::Request<hyper::body::Incoming>>::map_response(router.clone(), move |r: axum::response::Response| {
            let outcome = if r.extensions().get::<api::Authenticated>().is_some() { Outcome::Authenticated } else { Outcome::Answered };
            lock(&shown).finished(id, outcome);
            r
        });
        let svc = hyper_util::service::TowerToHyperService::new(router);
        let tls = tls.clone();
        let ended = places.clone();
        // held while the task starts and is filed: its end (which takes the lock) comes after
        let mut p = lock(&places);
        let slots = slots.clone();
        let task = tokio::spawn(async move {
            // a place shed for this one frees its slot when its task ends, which is at once
            let Ok(Ok(_slot)) = tokio::time::timeout(Duration::from_secs(1), slots.acquire_owned()).await else {
                lock(&ended).finished(id, Outcome::Closed);
                return;
            };
            match tls {
                None => connection(hyper_util::rt::TokioIo::new(tcp), svc).await,
                Some(acceptor) => {
                    // a client that never finishes its handshake holds a slot for 10 s at most
                    if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                        connection(hyper_util::rt::TokioIo::new(stream), svc).await
                    }
                }
            }
            // gone without showing the token (a place already left is not counted again)
            lock(&ended).finished(id, Outcome::Closed);
        });
        p.tasks.insert(id, task.abort_handle());
    }
}

async fn connection<I, S>(io: I, svc: S)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<hyper::Request<hyper::body::Incoming>, Response = axum::response::Response> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .max_buf_size(64 * 1024)
        .serve_connection(io, svc);
    let _ = conn.await;
}
