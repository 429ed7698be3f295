//! `horde logd`: the live log server (D-ITG's ITGLog). Senders, receivers and agents stream
//! their logs to it as they run (`--log-server`, [`crate::logstream`]); it writes one log per
//! source, as it arrives, in the log file format, so a source that dies leaves everything that
//! reached the server, followed by a gap record that says so.
//!
//! Trust: a source is admitted only after proving the run key on its own TLS session, and the
//! server proves it back before the source sends anything. What an admitted source sends is
//! still bounded by the server's own limits: frames of at most 4,096 records, records that parse
//! as a log's (no gap records: only the server writes those), a size limit per log, a silent
//! source dropped after 4 keep-alive periods, at most `max_sources` at once, and a handshake
//! within 5 s. Logs are only ever created new in the server's directory (`NAME.log`, or
//! `NAME-2.log` … when taken); nothing is overwritten or deleted but an empty log it just
//! made.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_proto::admission as adm;
use horde_proto::{LogSide, RunKey};
use horde_wire::log::{Gap, GapReason};
use horde_wire::logstream::{AnswerStatus, Frame, FrameDecoder, LogAnswer, LogHello, HELLO_FIXED, KEEPALIVE_NS, NAME_MAX};
use horde_wire::{LogHeader, Record, RecordKind, Role, LOG_HEADER_LEN, RECORD_LEN};
use serde::Serialize;

/// The log server's settings.
#[derive(Debug, Clone)]
pub struct LogdOptions {
    pub listen: SocketAddr,
    pub dir: PathBuf,
    pub key: RunKey,
    /// Sources streaming at once, at most.
    pub max_sources: usize,
    /// Bytes per log, at most (header and gap records included).
    pub max_bytes: u64,
    /// Stop after this long (else on Ctrl-C/SIGTERM).
    pub duration: Option<Duration>,
    /// Networks the admission policy always trusts (`--exempt`).
    pub exempt: Vec<(std::net::IpAddr, u8)>,
    /// Logs this server run writes at most ([`MAX_LOGS`]): a key holder cannot fill a
    /// directory with them. A source that wrote nothing does not count.
    pub max_logs: usize,
}

/// Connections not yet admitted, at most, beside the sources.
const PENDING: usize = 128;
/// Logs one server run writes at most (`horde logd`'s): a key holder cannot fill a directory
/// with them.
pub const MAX_LOGS: usize = 10_000;
const HANDSHAKE: Duration = Duration::from_secs(5);
/// How often a connection's thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(250);

/// One source's log, as the server ended it.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct SourceReport {
    pub name: String,
    pub file: PathBuf,
    pub peer: String,
    /// "sender" or "receiver".
    pub role: String,
    /// Records written (the source's; gap records not counted).
    pub records: u64,
    /// Records the source sent that were not written: not a log's records, or past the size
    /// limit.
    pub refused: u64,
    /// Whether the source ended its stream itself; else the log ends with a gap record.
    pub ended: bool,
    /// Records the source said it sent when it ended (equal to `records` unless its stream
    /// fell behind: see `gaps`).
    pub said: Option<u64>,
    /// The gaps marked in the log: why, and how many records (where known).
    pub gaps: Vec<GapNote>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GapNote {
    pub reason: String,
    pub records: Option<u64>,
}

/// What the server did.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct LogdReport {
    pub listening: String,
    pub dir: PathBuf,
    pub sources: Vec<SourceReport>,
    /// Connections closed before admission: no valid proof of the run key in time, or not a
    /// log stream.
    pub unauthenticated: u64,
    /// Sources turned away because `max_sources` were streaming.
    pub busy: u64,
    /// Sources turned away because the server's totals were reached: 10,000 logs a run, or
    /// less room on the disk than two logs at their limit.
    pub full: u64,
    pub interrupted: bool,
}

/// The TLS side of the server: TLS 1.3 with a certificate made at start (the server is
/// authenticated by its run-key proof over the session, not by the certificate).
fn server_config() -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let ck = rcgen::generate_simple_self_signed(vec!["horde-logd".to_string()]).context("making the log server's certificate")?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let p = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .context("the log server's certificate")?;
    Ok(Arc::new(cfg))
}

/// Runs the server until `stop`, or its duration. `ready` gets the bound address; `note` each
/// source's report as it ends.
pub fn serve(opts: &LogdOptions, stop: &AtomicBool, ready: impl FnOnce(SocketAddr), note: impl Fn(&SourceReport) + Sync) -> anyhow::Result<LogdReport> {
    if opts.key.is_open() {
        bail!("horde logd needs a run key (--key-file FILE, from `horde key --out FILE`): it takes logs only from their holders");
    }
    std::fs::create_dir_all(&opts.dir).with_context(|| format!("creating the log directory {}", opts.dir.display()))?;
    if let Err((free, need)) = room_for_two(&opts.dir, opts.max_bytes) {
        bail!(
            "the disk of {} has {} MiB free, less than room for two logs at --max-log-mib {} ({} MiB), so every source would be turned away: free space there, or lower --max-log-mib",
            opts.dir.display(),
            free >> 20,
            opts.max_bytes >> 20,
            need >> 20
        );
    }
    let cfg = server_config()?;
    let listener =
        horde_sys::listen::bind(opts.listen).with_context(|| format!("listening on {} (is another log server there? pick another --listen)", opts.listen))?;
    let bound = listener.local_addr()?;
    ready(bound);
    let started = Instant::now();
    let report = Mutex::new(LogdReport { listening: bound.to_string(), dir: opts.dir.clone(), ..Default::default() });
    let sources = AtomicUsize::new(0);
    let conns = AtomicUsize::new(0);
    let logs = AtomicUsize::new(0);
    let names = Mutex::new(());
    // Who may hold one of the PENDING places before proving the run key: any of them from one
    // address (an agent's sources start together); a newcomer sheds one when they are taken.
    let places = Mutex::new((
        adm::Admission::new(adm::AdmissionConfig::new(PENDING, PENDING).exempting(opts.exempt.clone())),
        std::collections::HashMap::<adm::Id, TcpStream>::new(),
    ));
    let now = || started.elapsed().as_nanos() as u64;
    std::thread::scope(|scope| {
        while !stop.load(Ordering::Relaxed) && opts.duration.is_none_or(|d| started.elapsed() < d) {
            let (sock, peer) = match horde_sys::listen::accept(&listener, Duration::from_millis(100)) {
                Ok(Some(x)) => x,
                Ok(None) => continue,
                Err(_) => {
                    // EMFILE and the like: wait, do not spin.
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            if conns.load(Ordering::Relaxed) >= opts.max_sources + PENDING {
                drop(sock);
                report.lock().expect("report").busy += 1;
                continue;
            }
            let id = {
                let mut p = places.lock().unwrap_or_else(|e| e.into_inner());
                match p.0.offer(peer.ip(), now()) {
                    adm::Offer::Refuse(_) => {
                        drop(p);
                        report.lock().expect("report").unauthenticated += 1;
                        continue;
                    }
                    adm::Offer::Admit { id, evict } => {
                        if let Some(old) = evict.and_then(|old| p.1.remove(&old)) {
                            let _ = old.shutdown(std::net::Shutdown::Both);
                        }
                        if let Ok(c) = sock.try_clone() {
                            p.1.insert(id, c);
                        }
                        id
                    }
                }
            };
            let (places, now) = (&places, &now);
            let proved = move |ok: bool| {
                let mut p = places.lock().unwrap_or_else(|e| e.into_inner());
                p.1.remove(&id);
                p.0.finished(id, if ok { adm::Outcome::Authenticated } else { adm::Outcome::Closed }, now());
            };
            conns.fetch_add(1, Ordering::Relaxed);
            let (cfg, report, sources, conns, names, note, logs) = (cfg.clone(), &report, &sources, &conns, &names, &note, &logs);
            let spawned = std::thread::Builder::new().name("horde-logd-src".into()).spawn_scoped(scope, move || {
                let r = source(sock, peer, cfg, opts, stop, sources, (names, logs), &proved);
                conns.fetch_sub(1, Ordering::Relaxed);
                let mut rep = report.lock().expect("report");
                match r {
                    Admission::Refused => rep.unauthenticated += 1,
                    Admission::Busy => rep.busy += 1,
                    Admission::Full => rep.full += 1,
                    Admission::Served(s) => {
                        note(&s);
                        rep.sources.push(s);
                    }
                }
            });
            if spawned.is_err() {
                conns.fetch_sub(1, Ordering::Relaxed);
                let mut p = places.lock().unwrap_or_else(|e| e.into_inner());
                p.1.remove(&id);
                p.0.finished(id, adm::Outcome::Closed, now());
            }
        }
    });
    let mut r = report.into_inner().expect("report");
    r.interrupted = stop.load(Ordering::Relaxed);
    r.sources.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(r)
}

/// Whether the disk of `dir` holds two more logs at `max_bytes` (else the bytes free and
/// needed). A disk whose free space cannot be read is not held against the server.
fn room_for_two(dir: &Path, max_bytes: u64) -> Result<(), (u64, u64)> {
    let need = max_bytes.saturating_mul(2);
    match horde_sys::fs::available_bytes(dir) {
        Ok(free) if free < need => Err((free, need)),
        _ => Ok(()),
    }
}

enum Admission {
    Refused,
    /// `max_sources` were streaming.
    Busy,
    /// The server's totals were reached (its logs, or room on its disk).
    Full,
    Served(SourceReport),
}

type Tls = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

#[allow(clippy::too_many_arguments)] // the connection, the server's settings and its shared counts
fn source(
    tcp: TcpStream,
    peer: SocketAddr,
    cfg: Arc<rustls::ServerConfig>,
    opts: &LogdOptions,
    stop: &AtomicBool,
    sources: &AtomicUsize,
    (names, logs): (&Mutex<()>, &AtomicUsize),
    proved: &dyn Fn(bool),
) -> Admission {
    let admitted = admit(tcp, cfg, &opts.key);
    // its place before the proof is free again, either way
    proved(admitted.is_some());
    let Some((mut tls, hello)) = admitted else {
        return Admission::Refused;
    };
    let b = tls.conn.export_keying_material([0u8; 32], LogSide::EXPORTER_LABEL, None).unwrap_or([0; 32]);
    let proof = opts.key.logstream_proof(LogSide::Server, &b);
    let answer = |tls: &mut Tls, status| {
        let _ = tls.write_all(&LogAnswer { status, proof }.emit()).and_then(|()| tls.flush());
    };
    if sources.fetch_add(1, Ordering::Relaxed) >= opts.max_sources {
        sources.fetch_sub(1, Ordering::Relaxed);
        answer(&mut tls, AnswerStatus::Busy);
        return Admission::Busy;
    }
    // Totals, not only each log's size: the logs of one run, and room left on the disk.
    let room = room_for_two(&opts.dir, opts.max_bytes).is_ok();
    if logs.fetch_add(1, Ordering::Relaxed) >= opts.max_logs || !room {
        sources.fetch_sub(1, Ordering::Relaxed);
        answer(&mut tls, AnswerStatus::Busy);
        return Admission::Full;
    }
    let opened = {
        let _one_at_a_time = names.lock().expect("names");
        create_new_log(&opts.dir, &hello.name)
    };
    let Ok((file, name)) = opened else {
        sources.fetch_sub(1, Ordering::Relaxed);
        answer(&mut tls, AnswerStatus::Unavailable);
        return Admission::Refused;
    };
    answer(&mut tls, AnswerStatus::Ok);
    let path = opts.dir.join(format!("{name}.log"));
    let mut log = SourceLog::new(BufWriter::with_capacity(256 << 10, file), opts.max_bytes);
    let ended = stream(&mut tls, &mut log, stop);
    let _ = log.flush();
    sources.fetch_sub(1, Ordering::Relaxed);
    let written = log.bytes;
    let mut s = log.report();
    s.name = name;
    s.peer = peer.to_string();
    s.role = if hello.role == Role::Sender { "sender" } else { "receiver" }.into();
    s.ended = ended;
    if written == 0 {
        // It never sent its header: nothing to keep (the empty file is the server's own), and
        // it does not count against the run's logs (issue 66: sources that proved the key and
        // wrote nothing used up the 10,000)
        let _ = std::fs::remove_file(&path);
        logs.fetch_sub(1, Ordering::Relaxed);
    }
    s.file = path;
    Admission::Served(s)
}

/// The TLS handshake and the source's hello with a valid proof, within [`HANDSHAKE`].
fn admit(tcp: TcpStream, cfg: Arc<rustls::ServerConfig>, key: &RunKey) -> Option<(Tls, LogHello)> {
    let deadline = Instant::now() + HANDSHAKE;
    let mut tcp = tcp;
    tcp.set_nonblocking(false).ok()?;
    tcp.set_nodelay(true).ok()?;
    tcp.set_read_timeout(Some(HANDSHAKE)).ok()?;
    tcp.set_write_timeout(Some(HANDSHAKE)).ok()?;
    let mut conn = rustls::ServerConnection::new(cfg).ok()?;
    while conn.is_handshaking() {
        if Instant::now() >= deadline {
            return None;
        }
        conn.complete_io(&mut tcp).ok()?;
    }
    let b = conn.export_keying_material([0u8; 32], LogSide::EXPORTER_LABEL, None).ok()?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut buf = vec![0u8; HELLO_FIXED];
    read_before(&mut tls, &mut buf, deadline)?;
    let len = LogHello::len_from_prefix(&buf).ok()?;
    debug_assert!(len <= HELLO_FIXED + NAME_MAX);
    buf.resize(len, 0);
    read_before(&mut tls, &mut buf[HELLO_FIXED..], deadline)?;
    let hello = LogHello::parse(&buf).ok()?;
    key.logstream_proof_ok(LogSide::Source, &b, &hello.proof).then_some((tls, hello))
}

fn read_before(tls: &mut Tls, mut buf: &mut [u8], deadline: Instant) -> Option<()> {
    while !buf.is_empty() {
        let left = deadline.checked_duration_since(Instant::now())?;
        tls.sock.set_read_timeout(Some(left.max(Duration::from_millis(1)))).ok()?;
        match tls.read(buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf = &mut buf[n..],
        }
    }
    Some(())
}

/// `DIR/NAME.log`, or the first of `NAME-2.log` … `NAME-1000.log` not taken; created new.
fn create_new_log(dir: &Path, name: &str) -> std::io::Result<(File, String)> {
    for k in 1..=1000u32 {
        let n = if k == 1 { name.to_string() } else { format!("{name}-{k}") };
        match std::fs::OpenOptions::new().write(true).create_new(true).open(dir.join(format!("{n}.log"))) {
            Ok(f) => return Ok((f, n)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!("{name}.log and 999 more names are taken")))
}

/// Reads frames until the source's end, its loss or silence, or the server's stop. True if the
/// source ended the stream itself.
fn stream<W: Write>(tls: &mut Tls, log: &mut SourceLog<W>, stop: &AtomicBool) -> bool {
    let _ = tls.sock.set_read_timeout(Some(POLL));
    let mut dec = FrameDecoder::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut heard = Instant::now();
    let silent = Duration::from_nanos(4 * KEEPALIVE_NS);
    loop {
        if stop.load(Ordering::Relaxed) {
            log.lost(GapReason::Lost);
            return false;
        }
        match tls.read(&mut buf) {
            Ok(0) => {
                log.lost(GapReason::Lost);
                return false;
            }
            Ok(n) => {
                heard = Instant::now();
                dec.feed(&buf[..n]);
                loop {
                    match dec.next_frame() {
                        Ok(Some(f)) => match log.on_frame(f, horde_engine::clock::real_ns()) {
                            Step::Go => {}
                            Step::Ack(records) => {
                                let _ = log.flush();
                                let mut out = Vec::new();
                                horde_wire::logstream::emit_frame(&Frame::EndAck { records }, &mut out);
                                let _ = tls.write_all(&out).and_then(|()| tls.flush());
                                tls.conn.send_close_notify();
                                let _ = tls.flush();
                                return true;
                            }
                            Step::Broken => {
                                log.lost(GapReason::Lost);
                                return false;
                            }
                        },
                        Ok(None) => break,
                        Err(_) => {
                            log.lost(GapReason::Lost);
                            return false;
                        }
                    }
                }
                // What arrived is in the kernel's hands at once: a source that dies now loses
                // nothing that reached the server.
                if log.flush().is_err() {
                    log.lost(GapReason::Lost);
                    return false;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if heard.elapsed() > silent {
                    log.lost(GapReason::Silent);
                    return false;
                }
            }
            Err(_) => {
                log.lost(GapReason::Lost);
                return false;
            }
        }
    }
}

/// What to do after a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Go,
    /// The source ended: acknowledge this many records written, then close.
    Ack(u64),
    /// The stream broke its rules: close (the log gets a gap record).
    Broken,
}

/// One source's log as frames arrive: I/O-free but for the writer it is given (a file, or a
/// `Vec` in tests and the fuzz target).
pub struct SourceLog<W: Write> {
    out: W,
    max_bytes: u64,
    /// Bytes written so far.
    pub bytes: u64,
    header: bool,
    records: u64,
    refused: u64,
    said: Option<u64>,
    gaps: Vec<GapNote>,
    last_ns: u64,
    limit_noted: bool,
    failed: bool,
}

impl<W: Write> SourceLog<W> {
    pub fn new(out: W, max_bytes: u64) -> SourceLog<W> {
        SourceLog {
            out,
            max_bytes: max_bytes.max((LOG_HEADER_LEN + 2 * RECORD_LEN) as u64),
            bytes: 0,
            header: false,
            records: 0,
            refused: 0,
            said: None,
            gaps: Vec::new(),
            last_ns: 0,
            limit_noted: false,
            failed: false,
        }
    }

    fn write(&mut self, b: &[u8]) {
        if !self.failed && self.out.write_all(b).is_err() {
            self.failed = true;
        }
        self.bytes += b.len() as u64;
    }

    /// Writes a gap record, room permitting (records stop two records short of the limit: the
    /// limit's own gap record and the stream's end fit).
    fn gap(&mut self, g: Gap) {
        if !self.header {
            return;
        }
        if self.bytes + RECORD_LEN as u64 <= self.max_bytes {
            let mut b = [0u8; RECORD_LEN];
            g.record().emit(&mut b);
            self.write(&b);
        }
        self.gaps.push(GapNote { reason: g.reason.name().to_string(), records: g.records });
    }

    /// Takes one frame.
    pub fn on_frame(&mut self, f: Frame<'_>, now_ns: u64) -> Step {
        if self.said.is_some() {
            return Step::Broken;
        }
        match f {
            Frame::Header(h) => {
                if self.header {
                    return Step::Broken;
                }
                let Ok(h) = LogHeader::parse(h) else { return Step::Broken };
                let mut hb = [0u8; LOG_HEADER_LEN];
                LogHeader { role: h.role, start_ns: h.start_ns }.emit(&mut hb);
                self.header = true;
                self.write(&hb);
            }
            Frame::Records(r) => {
                if !self.header {
                    return Step::Broken;
                }
                self.last_ns = now_ns;
                for rec in r.chunks_exact(RECORD_LEN) {
                    // Only the server writes gap records; anything else must read as a record.
                    let ok = Record::parse(rec).is_ok_and(|x| x.kind != RecordKind::Gap);
                    // One record's room is kept for the gap record that says the limit was hit.
                    if !ok || self.bytes + 2 * RECORD_LEN as u64 > self.max_bytes {
                        self.refused += 1;
                        if ok && !self.limit_noted {
                            self.limit_noted = true;
                            self.gap(Gap { reason: GapReason::Limit, records: None, since_ns: now_ns, noted_ns: now_ns });
                        }
                        continue;
                    }
                    self.write(rec);
                    self.records += 1;
                }
            }
            Frame::Gap { records, since_ns } => {
                if !self.limit_noted && self.bytes + 2 * RECORD_LEN as u64 <= self.max_bytes {
                    self.gap(Gap { reason: GapReason::Behind, records: Some(records), since_ns, noted_ns: now_ns });
                }
            }
            Frame::Keepalive => {}
            Frame::End { records } => {
                self.said = Some(records);
                return Step::Ack(self.records);
            }
            Frame::EndAck { .. } => return Step::Broken,
        }
        Step::Go
    }

    /// The stream ended without the source's end frame: the log says so.
    pub fn lost(&mut self, reason: GapReason) {
        if self.said.is_none() {
            let now = horde_engine::clock::real_ns();
            self.gap(Gap { reason, records: None, since_ns: if self.last_ns > 0 { self.last_ns } else { now }, noted_ns: now });
        }
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.failed {
            return Err(std::io::Error::other("writing the log failed"));
        }
        self.out.flush()
    }

    pub fn report(&self) -> SourceReport {
        SourceReport { records: self.records, refused: self.refused, said: self.said, gaps: self.gaps.clone(), ..Default::default() }
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_wire::logstream::emit_frame;

    fn header() -> [u8; LOG_HEADER_LEN] {
        let mut h = [0u8; LOG_HEADER_LEN];
        LogHeader { role: Role::Sender, start_ns: 7 }.emit(&mut h);
        h
    }

    fn rec(seq: u64) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        Record { flow: 1, size: 64, seq, t_a: seq, t_b: seq, ..Default::default() }.emit(&mut b);
        b
    }

    #[test]
    fn a_stream_becomes_the_log_and_a_lost_source_is_marked() {
        let mut s = SourceLog::new(Vec::new(), 1 << 20);
        assert_eq!(s.on_frame(Frame::Header(&header()), 1), Step::Go);
        let two = [rec(0), rec(1)].concat();
        assert_eq!(s.on_frame(Frame::Records(&two), 2), Step::Go);
        assert_eq!(s.on_frame(Frame::Gap { records: 5, since_ns: 3 }, 4), Step::Go);
        s.lost(GapReason::Lost);
        let r = s.report();
        assert_eq!((r.records, r.gaps.len()), (2, 2));
        let log = horde_stats::load(&s.into_inner()).unwrap();
        let gaps: Vec<Gap> = log.records.iter().filter_map(Gap::of).collect();
        assert_eq!(gaps[0].records, Some(5));
        assert_eq!(gaps[1].reason, GapReason::Lost);
        assert_eq!(log.records.iter().filter(|r| r.kind.is_packet()).count(), 2);
    }

    #[test]
    fn a_source_cannot_break_the_servers_rules() {
        // Records before the header, a second header, a forged gap record, frames after the end.
        let mut s = SourceLog::new(Vec::new(), 1 << 20);
        assert_eq!(s.on_frame(Frame::Records(&rec(0)), 1), Step::Broken);
        let mut s = SourceLog::new(Vec::new(), 1 << 20);
        s.on_frame(Frame::Header(&header()), 1);
        assert_eq!(s.on_frame(Frame::Header(&header()), 1), Step::Broken);
        let mut forged = [0u8; RECORD_LEN];
        Gap { reason: GapReason::Lost, records: None, since_ns: 0, noted_ns: 0 }.record().emit(&mut forged);
        let mut bad_kind = rec(3);
        bad_kind[38] = 99;
        assert_eq!(s.on_frame(Frame::Records(&[forged, bad_kind, rec(4)].concat()), 2), Step::Go);
        assert_eq!((s.report().records, s.report().refused), (1, 2));
        assert_eq!(s.on_frame(Frame::End { records: 3 }, 3), Step::Ack(1));
        assert_eq!(s.on_frame(Frame::Keepalive, 4), Step::Broken);
    }

    #[test]
    fn the_size_limit_holds_and_is_marked() {
        let max = (LOG_HEADER_LEN + 10 * RECORD_LEN) as u64;
        let mut s = SourceLog::new(Vec::new(), max);
        s.on_frame(Frame::Header(&header()), 1);
        let many: Vec<u8> = (0..100).flat_map(rec).collect();
        s.on_frame(Frame::Records(&many), 2);
        s.on_frame(Frame::Gap { records: 1, since_ns: 1 }, 3);
        s.lost(GapReason::Lost);
        let r = s.report();
        let out = s.into_inner();
        assert!(out.len() as u64 <= max, "{} > {max}", out.len());
        assert_eq!(r.records + r.refused, 100);
        assert_eq!(r.gaps.iter().filter(|g| g.reason == GapReason::Limit.name()).count(), 1);
        let mut wire = Vec::new();
        emit_frame(&Frame::Keepalive, &mut wire);
        assert_eq!(wire.len(), horde_wire::logstream::FRAME_HEADER_LEN);
    }
}
