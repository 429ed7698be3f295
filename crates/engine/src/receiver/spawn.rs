//! A receiver on its own thread, in a network namespace if given, handed back once it listens.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{run, RecvOptions, RecvReport};

/// A receiver running on its own thread (inside `netns` when given), once it listens.
pub struct Running {
    pub handle: std::thread::JoinHandle<()>,
    /// Where it listens (the first bound address first).
    pub bound: Vec<SocketAddr>,
}

/// Starts [`run`] on a thread named `name`, in `netns` if given, and waits up to `within` for
/// it to listen; `ended` gets its result as it ends (before the thread does). A receiver that fails or does not listen in
/// time is stopped and joined, and its error returned.
pub fn spawn(
    opts: RecvOptions,
    stop: std::sync::Arc<AtomicBool>,
    netns: Option<std::sync::Arc<std::fs::File>>,
    name: String,
    within: Duration,
    ended: impl FnOnce(Result<RecvReport, String>) + Send + 'static,
) -> Result<Running, String> {
    let (tx, rx) = std::sync::mpsc::channel::<Result<Vec<SocketAddr>, String>>();
    let failed = tx.clone();
    let stop2 = stop.clone();
    let handle = std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let go = || run(&opts, &stop2, |bound| drop(tx.send(Ok(bound.to_vec())))).map_err(|e| format!("{e:#}"));
            let r = match &netns {
                Some(ns) => crate::net::within_netns(ns, go).unwrap_or_else(|e| Err(format!("entering its namespace: {e}"))),
                None => go(),
            };
            if let Err(e) = &r {
                let _ = failed.send(Err(e.clone()));
            }
            ended(r);
        })
        .map_err(|e| format!("starting a receiver thread: {e}"))?;
    let why = match rx.recv_timeout(within) {
        Ok(Ok(bound)) => return Ok(Running { handle, bound }),
        Ok(Err(e)) => e,
        Err(_) => format!("it did not listen within {} s", within.as_secs()),
    };
    stop.store(true, Ordering::Relaxed);
    let _ = handle.join();
    Err(why)
}
