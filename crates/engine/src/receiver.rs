//! The receiver: listens on any set of UDP and TCP addresses, timestamps every arrival
//! (kernel SO_TIMESTAMPNS for UDP), logs it, and echoes it when the sender asked for round-trip
//! measurement. Anything that is not a Horde packet is counted and dropped; it never stops the
//! receiver.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use horde_wire::datagram::{FLAG_ECHO_REPLY, FLAG_ECHO_REQUEST};
use horde_wire::log::FLAG_KERNEL_TS;
use horde_wire::stream::HELLO_ECHO;
use horde_wire::{DatagramHeader, Record, RecordKind, Role, StreamDecoder, StreamEvent};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::Serialize;
use socket2::Socket;

use crate::clock::{self, mono_ns, real_ns};
use crate::logger::{LogSink, LogWriter};
use crate::net::{self, RecvBatch};
use crate::EngineError;

/// Largest datagram read whole; longer ones are truncated and counted as garbage.
const MAX_DATAGRAM: usize = 65_536;
const LISTENER_BASE: usize = 1 << 20;
const CONN_BASE: usize = 1 << 21;
/// Batches drained from one UDP socket before serving other sockets.
const FAIRNESS_BATCHES: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct RecvOptions {
    pub udp: Vec<SocketAddr>,
    pub tcp: Vec<SocketAddr>,
    pub log: Option<PathBuf>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when nothing arrived for this long (counted from the last arrival, or the start).
    pub idle: Option<Duration>,
    /// Stop after this many packets.
    pub packets: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FlowReceived {
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RecvReport {
    pub listening: Vec<String>,
    pub packets: u64,
    pub bytes: u64,
    /// Datagrams that were not Horde packets (bad magic, version, or too short).
    pub garbage_datagrams: u64,
    /// TCP connections closed because their bytes were not a Horde stream.
    pub garbage_streams: u64,
    pub tcp_connections: u64,
    pub echoed: u64,
    pub kernel_timestamps: u64,
    pub flows: BTreeMap<u32, FlowReceived>,
    pub duration_s: f64,
    pub interrupted: bool,
    pub log: Option<PathBuf>,
    pub log_records: u64,
}

struct Conn {
    sock: TcpStream,
    decoder: StreamDecoder,
    echo: bool,
    out: Vec<u8>,
    flow: u32,
    tag: u32,
}

/// Binds every listener, calls `ready` with the bound addresses (port 0 becomes a real port),
/// then receives until a stop condition or `stop` is set.
pub fn run(opts: &RecvOptions, stop: &AtomicBool, ready: impl FnOnce(&[SocketAddr])) -> Result<RecvReport, EngineError> {
    if opts.udp.is_empty() && opts.tcp.is_empty() {
        return Err(EngineError::Config("nothing to listen on; give --udp and/or --tcp ports".into()));
    }
    clock::raise_fd_limit();
    let bind_err = |proto: &str, a: &SocketAddr, e: io::Error| {
        let hint = if e.kind() == io::ErrorKind::AddrInUse { " (the port is in use: stop the other program or pick another port)" } else { "" };
        EngineError::Io { what: format!("binding {proto} {a}{hint}"), source: e }
    };
    let mut udp: Vec<Socket> = Vec::new();
    for a in &opts.udp {
        udp.push(net::udp_listener(*a).map_err(|e| bind_err("udp", a, e))?);
    }
    let mut listeners: Vec<TcpListener> = Vec::new();
    for a in &opts.tcp {
        let s = net::tcp_listener(*a).map_err(|e| bind_err("tcp", a, e))?;
        listeners.push(TcpListener::from_std(s.into()));
    }
    let mut bound = Vec::new();
    let mut names = Vec::new();
    for s in &udp {
        let a = s.local_addr().ok().and_then(|a| a.as_socket()).expect("bound UDP socket has an address");
        bound.push(a);
        names.push(format!("udp {a}"));
    }
    for l in &listeners {
        let a = l.local_addr().expect("bound TCP listener has an address");
        bound.push(a);
        names.push(format!("tcp {a}"));
    }
    let start_real = real_ns();
    let (writer, sink) = match &opts.log {
        Some(p) => {
            let (w, s) =
                LogWriter::create(p, Role::Receiver, start_real).map_err(|e| EngineError::Io { what: format!("creating log {}", p.display()), source: e })?;
            (Some(w), s)
        }
        None => (None, LogSink::disabled()),
    };
    ready(&bound);
    let mut rx = Receiver {
        udp,
        listeners,
        conns: Vec::new(),
        free: Vec::new(),
        sink,
        report: RecvReport { listening: names, log: opts.log.clone(), ..Default::default() },
        batch: RecvBatch::new(MAX_DATAGRAM),
        read_buf: vec![0u8; 256 * 1024],
        last_arrival: mono_ns(),
    };
    let res = rx.serve(opts, stop);
    rx.sink.flush();
    let mut report = std::mem::take(&mut rx.report);
    drop(rx);
    if let Some(w) = writer {
        report.log_records = w.finish().map_err(|e| EngineError::Io { what: "writing the receive log".into(), source: e })?;
    }
    res.map_err(|e| EngineError::Io { what: "receiving".into(), source: e })?;
    Ok(report)
}

struct Receiver {
    udp: Vec<Socket>,
    listeners: Vec<TcpListener>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    sink: LogSink,
    report: RecvReport,
    batch: RecvBatch,
    read_buf: Vec<u8>,
    last_arrival: u64,
}

impl Receiver {
    fn serve(&mut self, opts: &RecvOptions, stop: &AtomicBool) -> io::Result<()> {
        let mut poll = Poll::new()?;
        for (i, s) in self.udp.iter().enumerate() {
            poll.registry().register(&mut SourceFd(&s.as_raw_fd()), Token(i), Interest::READABLE)?;
        }
        for (i, l) in self.listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(LISTENER_BASE + i), Interest::READABLE)?;
        }
        let started = mono_ns();
        let mut events = Events::with_capacity(4096);
        loop {
            let now = mono_ns();
            if stop.load(Ordering::Relaxed) {
                self.report.interrupted = true;
                break;
            }
            if opts.duration.is_some_and(|d| now - started >= d.as_nanos() as u64)
                || opts.idle.is_some_and(|d| now - self.last_arrival >= d.as_nanos() as u64)
                || opts.packets.is_some_and(|p| self.report.packets >= p)
            {
                break;
            }
            match poll.poll(&mut events, Some(Duration::from_millis(50))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for ev in events.iter() {
                let t = ev.token().0;
                if t < LISTENER_BASE {
                    self.drain_udp(t);
                } else if t < CONN_BASE {
                    self.accept(&poll, t - LISTENER_BASE);
                } else {
                    self.serve_conn(&poll, t - CONN_BASE, ev.is_readable(), ev.is_writable());
                }
            }
        }
        self.report.duration_s = (mono_ns() - started) as f64 / 1e9;
        Ok(())
    }

    fn drain_udp(&mut self, i: usize) {
        let fd = self.udp[i].as_raw_fd();
        for _ in 0..FAIRNESS_BATCHES {
            let n = match self.batch.recv(fd) {
                Ok(0) => return,
                Ok(n) => n,
                Err(_) => return,
            };
            self.last_arrival = mono_ns();
            let now = real_ns();
            let mut echo_bufs: Vec<(usize, SocketAddr)> = Vec::new();
            for k in 0..n {
                let info = self.batch.info(k);
                let h = match DatagramHeader::parse(self.batch.data(k)) {
                    Ok(h) if h.flags & FLAG_ECHO_REPLY == 0 && info.len < MAX_DATAGRAM => h,
                    _ => {
                        self.report.garbage_datagrams += 1;
                        continue;
                    }
                };
                let rec = net::datagram_record(&h, &info, now, 0, RecordKind::Received);
                self.report.kernel_timestamps += (rec.flags & FLAG_KERNEL_TS != 0) as u64;
                self.count(h.flow, info.len, rec.t_b);
                self.sink.push(rec);
                if h.flags & FLAG_ECHO_REQUEST != 0 {
                    if let Some(from) = info.from {
                        echo_bufs.push((k, from));
                    }
                }
            }
            if !echo_bufs.is_empty() {
                self.echo_udp(fd, &echo_bufs);
            }
            if n < net::BATCH {
                return;
            }
        }
    }

    fn echo_udp(&mut self, fd: i32, which: &[(usize, SocketAddr)]) {
        let mut bufs: Vec<Vec<u8>> = which.iter().map(|(k, _)| self.batch.data(*k).to_vec()).collect();
        for b in &mut bufs {
            b[3] = (b[3] & !FLAG_ECHO_REQUEST) | FLAG_ECHO_REPLY;
        }
        let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
        let to: Vec<SocketAddr> = which.iter().map(|(_, a)| *a).collect();
        if let Ok(k) = net::send_batch_to(fd, &slices, &to) {
            self.report.echoed += k as u64;
        }
    }

    fn count(&mut self, flow: u32, len: usize, t: u64) {
        self.report.packets += 1;
        self.report.bytes += len as u64;
        let f = self.report.flows.entry(flow).or_default();
        if f.packets == 0 {
            f.first_ns = t;
        }
        f.packets += 1;
        f.bytes += len as u64;
        f.last_ns = t;
    }

    fn accept(&mut self, poll: &Poll, li: usize) {
        loop {
            match self.listeners[li].accept() {
                Ok((mut sock, _peer)) => {
                    let _ = sock.set_nodelay(true);
                    let idx = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    if poll.registry().register(&mut sock, Token(CONN_BASE + idx), Interest::READABLE | Interest::WRITABLE).is_err() {
                        self.free.push(idx);
                        continue;
                    }
                    self.report.tcp_connections += 1;
                    self.conns[idx] = Some(Conn { sock, decoder: StreamDecoder::new(), echo: false, out: Vec::new(), flow: 0, tag: 0 });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of file descriptors or a connection reset before accept: keep serving.
                Err(_) => return,
            }
        }
    }

    fn serve_conn(&mut self, poll: &Poll, idx: usize, readable: bool, writable: bool) {
        let Some(Some(c)) = self.conns.get_mut(idx) else {
            return;
        };
        let mut close = false;
        if readable {
            close = read_conn(c, &mut self.read_buf, &mut self.sink, &mut self.report, &mut self.last_arrival);
        }
        if (writable || readable) && !close && !c.out.is_empty() {
            close = flush_out(c);
        }
        if close {
            if let Some(mut c) = self.conns[idx].take() {
                let _ = poll.registry().deregister(&mut c.sock);
            }
            self.free.push(idx);
        }
    }
}

/// Reads what is available; returns true when the connection should be closed.
fn read_conn(c: &mut Conn, buf: &mut [u8], sink: &mut LogSink, report: &mut RecvReport, last_arrival: &mut u64) -> bool {
    loop {
        let n = match c.sock.read(buf) {
            Ok(0) => return true,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        };
        *last_arrival = mono_ns();
        let now = real_ns();
        let mut apdus: Vec<(u64, u16, u64)> = Vec::new();
        let mut hello = None;
        let r = c.decoder.feed(&buf[..n], |ev| match ev {
            StreamEvent::Hello(h) => hello = Some(h),
            StreamEvent::Apdu { seq, len, send_ns } => apdus.push((seq, len, send_ns)),
        });
        if let Some(h) = hello {
            c.flow = h.flow;
            c.tag = h.tag;
            c.echo = h.flags & HELLO_ECHO != 0;
        }
        for (seq, len, send_ns) in apdus {
            report.packets += 1;
            report.bytes += len as u64;
            let f = report.flows.entry(c.flow).or_default();
            if f.packets == 0 {
                f.first_ns = now;
            }
            f.packets += 1;
            f.bytes += len as u64;
            f.last_ns = now;
            if c.echo {
                report.echoed += 1;
            }
            sink.push(Record {
                flow: c.flow,
                size: len as u32,
                seq,
                t_a: send_ns,
                t_b: now,
                tag: c.tag,
                tos: 255,
                ttl: 0,
                kind: RecordKind::Received,
                flags: 0,
            });
        }
        if r.is_err() {
            report.garbage_streams += 1;
            return true;
        }
        if c.echo {
            c.out.extend_from_slice(&buf[..n]);
            if flush_out(c) {
                return true;
            }
        }
    }
}

fn flush_out(c: &mut Conn) -> bool {
    while !c.out.is_empty() {
        match c.sock.write(&c.out) {
            Ok(0) => return true,
            Ok(k) => {
                c.out.drain(..k);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    false
}
