//! Background writer of per-packet logs. Data-path threads fill local batches of records and
//! hand whole batches over a channel; the writer thread encodes and writes them, so disk I/O
//! never stalls a departure. One allocation per 4096 records.
//!
//! Durability: the file header is on disk before the first packet, producers hand over partial
//! batches at least every [`FLUSH_EVERY_NS`] (via [`LogSink::tick`]) and the writer flushes its
//! buffer to the kernel as often, so a SIGKILL loses at most about the last second of records.

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

/// Owns the writer thread. `finish` flushes everything and reports how many records were written.
pub struct LogWriter {
    tx: Option<SyncSender<Vec<Record>>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
    path: PathBuf,
}

/// A producer's handle: cheap to clone, one per data-path thread.
pub struct LogSink {
    tx: Option<SyncSender<Vec<Record>>>,
    batch: Vec<Record>,
    /// Monotonic time of the last hand-over (see [`LogSink::tick`]).
    last_flush_ns: u64,
}

impl LogWriter {
    pub fn create(path: &Path, role: Role, start_ns: u64) -> std::io::Result<(LogWriter, LogSink)> {
        let mut file = File::create(path)?;
        let mut hb = [0u8; LOG_HEADER_LEN];
        LogHeader { role, start_ns }.emit(&mut hb);
        file.write_all(&hb)?;
        let (tx, rx) = sync_channel::<Vec<Record>>(QUEUE);
        let thread = std::thread::Builder::new().name("horde-log".into()).spawn(move || {
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let mut n = 0u64;
            let mut buf = vec![0u8; BATCH * RECORD_LEN];
            let every = std::time::Duration::from_nanos(FLUSH_EVERY_NS);
            loop {
                let batch = match rx.recv_timeout(every) {
                    Ok(b) => b,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        w.flush()?;
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
                w.write_all(&buf[..batch.len() * RECORD_LEN])?;
                n += batch.len() as u64;
                // A batch is up to 160 kB: one write(2) each, to the kernel at once (no fsync).
                w.flush()?;
            }
            w.flush()?;
            w.get_ref().sync_data()?;
            Ok(n)
        })?;
        let sink = LogSink { tx: Some(tx.clone()), batch: Vec::with_capacity(BATCH), last_flush_ns: 0 };
        Ok((LogWriter { tx: Some(tx), thread: Some(thread), path: path.to_path_buf() }, sink))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for every sink to be dropped or flushed, then for the file to reach the disk.
    pub fn finish(mut self) -> std::io::Result<u64> {
        drop(self.tx.take());
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("log writer thread panicked")),
            None => Ok(0),
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
