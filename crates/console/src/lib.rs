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
//! - `openapi.rs` — the API's OpenAPI document, made from the same types (docs/openapi.json);
//! - `assets.rs` — the browser application, embedded (no network needed).
//!
//! Security: loopback only (a console beyond loopback would need TLS, which this version does
//! not serve: reach a remote console through an SSH tunnel); a fresh token per start; at most
//! [`MAX_CONNECTIONS`] connections, a request's headers within 10 s, bodies within
//! [`api::MAX_BODY`].

pub mod api;
pub mod assets;
pub mod guard;
pub mod hub;
pub mod openapi;
pub mod runs;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;

pub struct Options {
    pub listen: SocketAddr,
    /// Where runs started from the console write their reports, and past runs are listed from.
    pub runs_dir: PathBuf,
    /// Whether runs may be started from the console (`horde ui`), or it watches one (`--ui`).
    pub can_start: bool,
}

/// A running console.
pub struct Console {
    pub addr: SocketAddr,
    /// The URL to open (with the token).
    pub url: String,
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
    if !opts.listen.ip().is_loopback() {
        anyhow::bail!(
            "--listen {}: the console listens on loopback only (beyond it, it would need TLS, which this version does not serve); from another machine use an SSH tunnel: ssh -L 7070:127.0.0.1:7070 THIS_HOST",
            opts.listen
        );
    }
    let token = guard::new_token().context("drawing the console's token")?;
    let listener = std::net::TcpListener::bind(opts.listen)
        .with_context(|| format!("--listen {}: cannot listen there (in use? another port: --listen 127.0.0.1:0)", opts.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let app = Arc::new(api::App { hub: hub.clone(), guard: guard::Guard::new(token.clone(), addr, false), runs_dir: opts.runs_dir, can_start: opts.can_start });
    let router = api::router(app);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("horde-ui").enable_all().build().context("starting the console's runtime")?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("horde-ui".into()).spawn(move || rt.block_on(serve(listener, router, rx)))?;
    let url = format!("http://{addr}/?token={token}");
    Ok(Console { addr, url, hub, shutdown: Some(tx), thread: Some(thread) })
}

async fn serve(listener: std::net::TcpListener, router: axum::Router, mut stop: tokio::sync::oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let tcp = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => match a { Ok((tcp, _)) => tcp, Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue } },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let svc = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let io = hyper_util::rt::TokioIo::new(tcp);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .max_buf_size(64 * 1024)
                .serve_connection(io, svc);
            let _ = conn.await;
        });
    }
}
