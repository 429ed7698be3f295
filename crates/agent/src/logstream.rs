//! The source end of a live log stream (`send`/`recv --log-server`): connects to `horde logd`
//! over TLS 1.3, proves it holds the run key on this connection and checks that the server
//! does (`horde_wire::logstream`), then streams the log's records from a thread of its own.
//!
//! Back-pressure: the log writer hands each batch over without waiting ([`LogTap`]); up to
//! [`QUEUE`] batches (≈ 10 MB) wait for the network. A stream that falls further behind drops
//! whole batches — the local log, if any, still has them — counts them, and tells the server,
//! whose log marks the gap with its size. The data path never waits for a log server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use horde_engine::logger::{LogTap, TapReport};
use horde_proto::{LogSide, RunKey};
use horde_wire::logstream::{emit_frame, AnswerStatus, Frame, FrameDecoder, LogAnswer, LogHello, ANSWER_LEN, KEEPALIVE_NS};
use horde_wire::{Role, RECORD_LEN};

/// Batches (of up to 4,096 records) waiting for the network, at most.
pub const QUEUE: usize = 64;
/// How long connecting, the handshake and the end of the stream may take.
pub const WAIT: Duration = Duration::from_secs(5);

type Tls<C> = rustls::StreamOwned<C, TcpStream>;

enum Msg {
    Header(Vec<u8>),
    Records(Vec<u8>),
    Gap { records: u64, since_ns: u64 },
}

/// A connected, authenticated stream to a log server.
pub struct LogStream {
    tx: Option<SyncSender<Msg>>,
    thread: Option<JoinHandle<Ended>>,
    server: SocketAddr,
    name: String,
    records: u64,
    dropped: u64,
    /// Records dropped since the last gap the server was told of, and since when.
    pending_gap: Option<(u64, u64)>,
}

struct Ended {
    acknowledged: Option<u64>,
    error: Option<String>,
}

/// The run's source name by default: `send-HOST-PID` / `recv-HOST-PID`.
pub fn default_name(role: Role) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).take(32).collect();
    let role = if role == Role::Sender { "send" } else { "recv" };
    let name = if host.is_empty() { format!("{role}-{}", std::process::id()) } else { format!("{role}-{host}-{}", std::process::id()) };
    name.trim_start_matches('.').to_string()
}

/// TLS configuration of a source: TLS 1.3; the server's certificate is not from an authority
/// (a log server makes a fresh one when it starts), so the server is authenticated by its proof
/// of the run key over this session's keying material, which `connect` checks before anything
/// is sent. The certificate's handshake signature is still verified.
fn client_config() -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let p = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ProofVerified(p)))
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

#[derive(Debug)]
struct ProofVerified(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for ProofVerified {
    fn verify_server_cert(
        &self,
        _end: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        // Authenticated after the handshake, by the run-key proof bound to this session.
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _m: &[u8],
        _c: &rustls::pki_types::CertificateDer<'_>,
        _d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not used".into()))
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl LogStream {
    /// Connects to the log server at `server`, proves the run key and checks the server's proof;
    /// the log will be called `name` there. Refuses an open key: a log server takes logs only
    /// from holders of its key.
    pub fn connect(server: SocketAddr, key: &RunKey, role: Role, name: &str) -> anyhow::Result<LogStream> {
        if key.is_open() {
            bail!("--log-server needs the run key the log server was started with (--key-file, or HORDE_KEY_FILE)");
        }
        if !horde_wire::logstream::name_ok(name) {
            bail!("--log-name `{name}`: 1 to 64 of A-Z a-z 0-9 . _ -, not starting with `.`");
        }
        let fix = "is `horde logd` running there, with the same --key-file?";
        let mut tcp = TcpStream::connect_timeout(&server, WAIT).with_context(|| format!("connecting to the log server at {server} ({fix})"))?;
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(WAIT))?;
        tcp.set_write_timeout(Some(WAIT))?;
        let name_tls = rustls::pki_types::ServerName::try_from("horde-logd").expect("a valid DNS name");
        let mut conn = rustls::ClientConnection::new(client_config()?, name_tls).context("TLS")?;
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).map_err(|e| anyhow::anyhow!("TLS handshake with the log server at {server}: {e} ({fix})"))?;
        }
        let b = conn.export_keying_material([0u8; 32], LogSide::EXPORTER_LABEL, None).map_err(|e| anyhow::anyhow!("TLS keying material: {e}"))?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let hello = LogHello { role, proof: key.logstream_proof(LogSide::Source, &b), name: name.to_string() };
        tls.write_all(&hello.emit())?;
        tls.flush()?;
        let mut ab = [0u8; ANSWER_LEN];
        tls.read_exact(&mut ab).map_err(|e| {
            anyhow::anyhow!("the log server at {server} closed the stream without admitting it ({e}): does it use the same run key (--key-file)?")
        })?;
        let a = LogAnswer::parse(&ab).map_err(|e| anyhow::anyhow!("the log server at {server} answered in a way this build cannot read ({e}): {fix}"))?;
        if !key.logstream_proof_ok(LogSide::Server, &b, &a.proof) {
            bail!("the log server at {server} did not prove it holds the run key: nothing was sent to it (use the key file it was started with)");
        }
        match a.status {
            AnswerStatus::Ok => {}
            AnswerStatus::Busy => bail!("the log server at {server} takes no more sources now (its --max-sources, or its totals: 10,000 logs a run, room for two logs on its disk): raise it, free its disk, or use another log server"),
            AnswerStatus::Unavailable => bail!("the log server at {server} cannot open a log (see its own output: disk, permissions)"),
        }
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        let thread = std::thread::Builder::new().name("horde-logstream".into()).spawn(move || pump(tls, rx))?;
        Ok(LogStream { tx: Some(tx), thread: Some(thread), server, name: name.to_string(), records: 0, dropped: 0, pending_gap: None })
    }
}

impl LogTap for LogStream {
    fn header(&mut self, header: &[u8]) {
        if let Some(tx) = &self.tx {
            // The first message of an empty queue: it cannot be full.
            let _ = tx.try_send(Msg::Header(header.to_vec()));
        }
    }

    fn records(&mut self, bytes: &[u8]) {
        let n = (bytes.len() / RECORD_LEN) as u64;
        self.records += n;
        let Some(tx) = &self.tx else {
            self.dropped += n;
            return;
        };
        if let Some((records, since_ns)) = self.pending_gap {
            match tx.try_send(Msg::Gap { records, since_ns }) {
                Ok(()) => self.pending_gap = None,
                Err(_) => {
                    self.dropped += n;
                    self.pending_gap = Some((records + n, since_ns));
                    return;
                }
            }
        }
        match tx.try_send(Msg::Records(bytes.to_vec())) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped += n;
                self.pending_gap = Some((n, horde_engine::clock::real_ns()));
            }
            Err(TrySendError::Disconnected(_)) => {
                self.dropped += n;
                self.tx = None;
            }
        }
    }

    fn finish(mut self: Box<Self>) -> Option<TapReport> {
        if let (Some(tx), Some((records, since_ns))) = (&self.tx, self.pending_gap.take()) {
            let _ = tx.send(Msg::Gap { records, since_ns });
        }
        drop(self.tx.take());
        let ended = match self.thread.take() {
            Some(t) => t.join().unwrap_or(Ended { acknowledged: None, error: Some("the stream's thread panicked".into()) }),
            None => Ended { acknowledged: None, error: Some("the stream was not running".into()) },
        };
        Some(TapReport {
            server: self.server.to_string(),
            name: self.name.clone(),
            records: self.records,
            dropped: self.dropped,
            acknowledged: ended.acknowledged,
            error: ended.error,
        })
    }
}

/// The stream's thread: frames out, keep-alives while idle, the end and its acknowledgement.
fn pump(mut tls: Tls<rustls::ClientConnection>, rx: Receiver<Msg>) -> Ended {
    let mut out = Vec::with_capacity(64 << 10);
    let mut sent = 0u64;
    let keepalive = Duration::from_nanos(KEEPALIVE_NS / 2);
    let fail = |e: std::io::Error, what: &str| Ended { acknowledged: None, error: Some(format!("{what}: {e}")) };
    loop {
        out.clear();
        match rx.recv_timeout(keepalive) {
            Ok(Msg::Header(h)) => emit_frame(&Frame::Header(&h), &mut out),
            Ok(Msg::Records(r)) => {
                out.extend_from_slice(&horde_wire::logstream::records_frame_header(r.len()));
                out.extend_from_slice(&r);
                sent += (r.len() / RECORD_LEN) as u64;
            }
            Ok(Msg::Gap { records, since_ns }) => emit_frame(&Frame::Gap { records, since_ns }, &mut out),
            Err(RecvTimeoutError::Timeout) => emit_frame(&Frame::Keepalive, &mut out),
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if let Err(e) = tls.write_all(&out).and_then(|()| tls.flush()) {
            return fail(e, "the log server stopped taking the stream");
        }
    }
    out.clear();
    emit_frame(&Frame::End { records: sent }, &mut out);
    if let Err(e) = tls.write_all(&out).and_then(|()| tls.flush()) {
        return fail(e, "ending the stream");
    }
    // The acknowledgement: the records the server wrote. Bounded by the socket's timeout.
    let deadline = Instant::now() + WAIT;
    let mut dec = FrameDecoder::new();
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                dec.feed(&buf[..n]);
                if let Ok(Some(Frame::EndAck { records })) = dec.next_frame() {
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                    return Ended { acknowledged: Some(records), error: None };
                }
                if dec.pending() > 64 {
                    break;
                }
            }
            Err(e) => return fail(e, "waiting for the log server's acknowledgement"),
        }
    }
    Ended { acknowledged: None, error: Some("the log server did not acknowledge the end of the stream".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream whose network side is a queue of `cap` this test drains by hand.
    fn stream(cap: usize) -> (LogStream, Receiver<Msg>) {
        let (tx, rx) = sync_channel(cap);
        let s = LogStream { tx: Some(tx), thread: None, server: "127.0.0.1:9".parse().unwrap(), name: "t".into(), records: 0, dropped: 0, pending_gap: None };
        (s, rx)
    }

    #[test]
    fn a_stream_that_falls_behind_drops_whole_batches_and_says_how_many_before_the_next() {
        let (mut s, rx) = stream(2);
        let batch = vec![0u8; 3 * RECORD_LEN];
        s.header(&[0; 32]);
        s.records(&batch); // queued (2 of 2)
        s.records(&batch); // full: dropped
        s.records(&batch); // still behind: dropped, added to the same gap
        assert_eq!((s.records, s.dropped), (9, 6));
        assert!(matches!(rx.recv().unwrap(), Msg::Header(_)));
        assert!(matches!(rx.recv().unwrap(), Msg::Records(r) if r.len() == 3 * RECORD_LEN));
        // Room again: the gap goes first, with every record it lost, then the batch.
        s.records(&batch);
        assert!(matches!(rx.recv().unwrap(), Msg::Gap { records: 6, .. }));
        assert!(matches!(rx.recv().unwrap(), Msg::Records(_)));
        assert_eq!((s.records, s.dropped), (12, 6));
        // The network side gone: everything after it counts as dropped, nothing blocks.
        drop(rx);
        s.records(&batch);
        s.records(&batch);
        assert_eq!(s.dropped, 12);
        let r = Box::new(s).finish();
        let r = r.expect("a stream's report");
        assert_eq!((r.records, r.dropped, r.acknowledged), (18, 12, None));
        assert!(r.error.is_some());
    }
}
