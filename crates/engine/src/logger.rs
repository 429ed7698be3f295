//! Background writer of per-packet logs. Data-path threads fill local batches of records and
//! hand whole batches over a channel; the writer thread encodes and writes them, so disk I/O
//! never stalls a departure. One allocation per 4096 records.
//!
//! Durability: the file header is on disk before the first packet, producers hand over partial
//! batches at least every [`FLUSH_EVERY_NS`] (via [`LogSink::tick`]) and the writer flushes its
//! buffer to the kernel as often, so a SIGKILL loses at most about the last second of records.
//!
//! A log can also go to a live log server as it is written (`--log-server`): the writer thread
//! hands the same encoded bytes to a [`LogTap`], which must never block it (the stream's own
//! thread and bounded queue are the tap's; see `horde_agent::logstream`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use horde_wire::{LogHeader, Record, Role, LOG_HEADER_LEN, RECORD_LEN};

const BATCH: usize = 4096;
/// Batches in flight before a producer blocks: 256 × 4096 records ≈ 1 M packets of slack.
const QUEUE: usize = 256;
/// How stale buffered records may get, in producers and in the writer: 1 s.
pub const FLUSH_EVERY_NS: u64 = 1_000_000_000;

/// Where a log's records go besides its file, as they are written: a live log server. The
/// writer thread calls it; it must not block (a tap that cannot keep up drops and counts).
pub trait LogTap: Send {
    /// The log's file header, once, before any record.
    fn header(&mut self, header: &[u8]);
    /// Encoded whole records, in log order.
    fn records(&mut self, bytes: &[u8]);
    /// The log is complete: end the stream (bounded wait) and say what became of it (a tap
    /// that is no stream, such as an agent's live summary, has nothing to say).
    fn finish(self: Box<Self>) -> Option<TapReport>;
}

/// What became of a log's live stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TapReport {
    /// The log server, `address:port`.
    pub server: String,
    /// The name the log has there (`NAME.log` in its directory).
    pub name: String,
    /// Records handed to the stream, and of those the ones dropped because the stream fell
    /// behind (the server's log marks each such gap).
    pub records: u64,
    pub dropped: u64,
    /// Records the server said it wrote, when it acknowledged the end of the stream.
    pub acknowledged: Option<u64>,
    /// Why the stream ended early, if it did.
    pub error: Option<String>,
}

/// A tap handed to a run through its options (taken once, by the run's log writer).
#[derive(Clone, Default)]
pub struct TapSlot(std::sync::Arc<std::sync::Mutex<Option<Box<dyn LogTap>>>>);

impl TapSlot {
    pub fn new(tap: Box<dyn LogTap>) -> TapSlot {
        TapSlot(std::sync::Arc::new(std::sync::Mutex::new(Some(tap))))
    }

    /// Whether a tap is waiting to be taken.
    pub fn is_set(&self) -> bool {
        self.0.lock().map(|t| t.is_some()).unwrap_or(false)
    }

    pub fn take(&self) -> Option<Box<dyn LogTap>> {
        self.0.lock().ok().and_then(|mut t| t.take())
    }
}

impl std::fmt::Debug for TapSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() { "TapSlot(set)" } else { "TapSlot(empty)" })
    }
}

/// What a finished log writer wrote.
#[derive(Debug, Clone, Default)]
pub struct LogDone {
    /// Records written (to the file, or to the stream where there is no file).
    pub records: u64,
    pub tap: Option<TapReport>,
}

/// Owns the writer thread. `finish` flushes everything and reports how many records were written.
pub struct LogWriter {
    tx: Option<SyncSender<Vec<Record>>>,
    thread: Option<JoinHandle<std::io::Result<LogDone>>>,
    path: Option<PathBuf>,
}

/// A producer's handle: cheap to clone, one per data-path thread.
pub struct LogSink {
    tx: Option<SyncSender<Vec<Record>>>,
    batch: Vec<Record>,
    /// Monotonic time of the last hand-over (see [`LogSink::tick`]).
    last_flush_ns: u64,
}

impl LogWriter {
    /// A writer to `path` (if given) and to `tap` (if given); at least one of them.
    pub fn create(path: Option<&Path>, role: Role, start_ns: u64, mut tap: Option<Box<dyn LogTap>>) -> std::io::Result<(LogWriter, LogSink)> {
        let mut hb = [0u8; LOG_HEADER_LEN];
        LogHeader { role, start_ns }.emit(&mut hb);
        let file = match path {
            Some(p) => {
                let mut f = File::create(p)?;
                f.write_all(&hb)?;
                Some(f)
            }
            None => None,
        };
        if let Some(t) = tap.as_mut() {
            t.header(&hb);
        }
        let (tx, rx) = sync_channel::<Vec<Record>>(QUEUE);
        let thread = std::thread::Builder::new().name("horde-log".into()).spawn(move || {
            let mut w = file.map(|f| BufWriter::with_capacity(1 << 20, f));
            let mut n = 0u64;
            let mut buf = vec![0u8; BATCH * RECORD_LEN];
            let every = std::time::Duration::from_nanos(FLUSH_EVERY_NS);
            let result = (|| -> std::io::Result<()> {
                loop {
                    let batch = match rx.recv_timeout(every) {
                        Ok(b) => b,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            if let Some(w) = w.as_mut() {
                                w.flush()?;
                            }
                            continue;
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    };
                    if buf.len() < batch.len() * RECORD_LEN {
                        buf.resize(batch.len() * RECORD_LEN, 0);
                    }
                    for (r, chunk) in batch.iter().zip(buf.chunks_exact_mut(RECORD_LEN)) {
                        r.emit(chunk);
                    }
                    let bytes = &buf[..batch.len() * RECORD_LEN];
                    if let Some(w) = w.as_mut() {
                        w.write_all(bytes)?;
                        // A batch is up to 160 kB: one write(2) each, to the kernel at once (no fsync).
                        w.flush()?;
                    }
                    if let Some(t) = tap.as_mut() {
                        t.records(bytes);
                    }
                    n += batch.len() as u64;
                }
                if let Some(w) = w.as_mut() {
                    w.flush()?;
                    w.get_ref().sync_data()?;
                }
                Ok(())
            })();
            // The stream ends whatever became of the file (it says what it got).
            let tap = tap.and_then(|t| t.finish());
            result.map(|()| LogDone { records: n, tap })
        })?;
        let sink = LogSink { tx: Some(tx.clone()), batch: Vec::with_capacity(BATCH), last_flush_ns: 0 };
        Ok((LogWriter { tx: Some(tx), thread: Some(thread), path: path.map(Path::to_path_buf) }, sink))
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Waits for every sink to be dropped or flushed, then for the file to reach the disk.
    pub fn finish(mut self) -> std::io::Result<LogDone> {
        drop(self.tx.take());
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("log writer thread panicked")),
            None => Ok(LogDone::default()),
        }
    }
}

impl LogSink {
    /// A sink that drops records (no log requested).
    pub fn disabled() -> LogSink {
        LogSink { tx: None, batch: Vec::new(), last_flush_ns: 0 }
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    #[inline]
    pub fn push(&mut self, r: Record) {
        if self.tx.is_none() {
            return;
        }
        self.batch.push(r);
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    /// Names a flow's two ends in the log (version 2's endpoint records), before its packets'
    /// records: `src` opened the flow, `dst` is where it went.
    pub fn endpoints(&mut self, flow: u32, tag: u32, src: Option<std::net::SocketAddr>, dst: Option<std::net::SocketAddr>, protocol: u8) {
        if self.tx.is_none() {
            return;
        }
        let at_ns = crate::clock::real_ns();
        for (end, addr) in [(horde_wire::RecordKind::Source, src), (horde_wire::RecordKind::Destination, dst)] {
            if let Some(addr) = addr {
                self.push(horde_wire::Endpoint { flow, end, addr, protocol, tag, at_ns }.record());
            }
        }
    }

    /// Hands a partial batch over when the last hand-over is older than [`FLUSH_EVERY_NS`].
    /// Data-path loops call it with the monotonic time they already read.
    #[inline]
    pub fn tick(&mut self, now_mono_ns: u64) {
        if now_mono_ns.saturating_sub(self.last_flush_ns) >= FLUSH_EVERY_NS {
            self.last_flush_ns = now_mono_ns;
            self.flush();
        }
    }

    /// Hands the current batch to the writer.
    pub fn flush(&mut self) {
        if let Some(tx) = &self.tx {
            if !self.batch.is_empty() {
                let full = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
                let _ = tx.send(full);
            }
        }
    }
}

impl Clone for LogSink {
    fn clone(&self) -> Self {
        LogSink { tx: self.tx.clone(), batch: Vec::with_capacity(if self.tx.is_some() { BATCH } else { 0 }), last_flush_ns: 0 }
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        self.flush();
    }
}
