//! The userspace link emulator: one daemon per experiment, living in the fabric namespace. Each
//! impaired link is split in two veth pairs whose fabric ends (`hdEXPiNa`, `hdEXPiNb`) the daemon
//! holds as AF_PACKET sockets; every frame read on one end goes through that direction's
//! [`horde_impair::Link`] and is written to the other end at the time it decides.
//!
//! One thread forwards (`fwd_loop`): epoll over all sockets, each wait timed (nanoseconds) to end
//! when the earliest pending frame is due. A control socket (`ctl.sock`, JSON lines, root only) changes a link's
//! impairments while traffic flows and reports per-direction counters.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use horde_impair::{Link, LinkSpec, LinkStats, Trace};
use serde::{Deserialize, Serialize};

use crate::{ns, state_dir, EmuError};

use crate::fwd_io::{self, mono_ns, os_err};
use crate::fwd_loop::{Dir, Shared};

const ETH_P_ALL: u16 = 0x0003;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// How long a control client may take to send its request line.
const CTL_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest control request line.
const CTL_MAX_LINE: u64 = 1 << 20;

/// Receive-buffer bytes the link emulator's sockets may hold together while it is not reading
/// (the host gave its core to something else): 1 GiB over every socket, at most 256 MiB and at
/// least 16 MiB each. A limit, not an allocation: memory is taken only while frames wait. At
/// 16 MiB per socket, a paced 1 M pkt/s flow lost frames whenever the daemon was off its core
/// for ~15 ms (this VM's agent and kdamond take a core that long); 256 MiB holds ~0.5 s of it.
const RECV_BUFFERS_TOTAL: usize = 1 << 30;
const RECV_BUFFER_MIN: usize = 16 << 20;
const RECV_BUFFER_MAX: usize = 256 << 20;

/// The receive buffer of each of `sockets` link-emulator sockets.
fn recv_buffer(sockets: usize) -> usize {
    (RECV_BUFFERS_TOTAL / sockets.max(1)).clamp(RECV_BUFFER_MIN, RECV_BUFFER_MAX)
}

/// An AF_PACKET socket bound to one interface, non-blocking, blind to its own sends, with a
/// receive buffer of `rcvbuf` bytes.
fn packet_socket(ifname: &str, rcvbuf: usize) -> Result<OwnedFd, EmuError> {
    let c = std::ffi::CString::new(ifname).expect("no NUL");
    // SAFETY: valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(os_err(&format!("finding interface {ifname} in the fabric namespace")));
    }
    // Protocol 0 until bound, so no frame of another interface slips in.
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_err("opening an AF_PACKET socket"));
    }
    // SAFETY: fd just opened and owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    let big: libc::c_int = 16 << 20;
    let rcvbuf = rcvbuf.min(i32::MAX as usize / 2) as libc::c_int;
    // SAFETY: setsockopt with int values of the right size.
    unsafe {
        libc::setsockopt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one as *const _ as *const libc::c_void, 4);
        if libc::setsockopt(fd, libc::SOL_PACKET, fwd_io::PACKET_VNET_HDR, &one as *const _ as *const libc::c_void, 4) != 0 {
            return Err(os_err("asking for virtio-net headers on an AF_PACKET socket (PACKET_VNET_HDR)"));
        }
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &rcvbuf as *const _ as *const libc::c_void, 4);
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &big as *const _ as *const libc::c_void, 4);
    }
    // SAFETY: zeroed sockaddr_ll is valid; fields set below.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = idx as i32;
    // SAFETY: sll is a valid sockaddr_ll.
    if unsafe { libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32) } != 0 {
        return Err(os_err(&format!("binding an AF_PACKET socket to {ifname}")));
    }
    Ok(sock)
}

/// Counters of one direction of one link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirReport {
    pub packets: u64,
    pub lost: u64,
    pub queue_drops: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub sent: u64,
    pub send_errors: u64,
    /// Frames dropped because the direction's delay line held its byte limit already.
    #[serde(default)]
    pub overflow_drops: u64,
    /// Bytes in the rate limiter's queue when the counters were read.
    #[serde(default)]
    pub queue_bytes: u64,
    /// Bytes inside the link when the counters were read (queued or being delayed).
    #[serde(default)]
    pub in_flight_bytes: u64,
    /// Frames (datagrams, copies included) inside the link when the counters were read:
    /// queued or being delayed, neither delivered nor dropped yet.
    #[serde(default)]
    pub in_flight: u64,
    /// Bytes delivered (the rate each way is its change over time).
    #[serde(default)]
    pub delivered_bytes: u64,
    /// Bits the bit-error rate flipped, and the frames that had any.
    #[serde(default)]
    pub bit_errors: u64,
    #[serde(default)]
    pub errored: u64,
    /// Frames sent at once by `reorder_prob` (ahead of those delayed before them).
    #[serde(default)]
    pub reordered: u64,
    /// Frames lost before the link read them: its socket's receive buffer or its interface's
    /// input backlog overflowed (the link could not keep up). Never in `packets`.
    #[serde(default)]
    pub rx_overrun: u64,
    /// Frames the link sent that the far side's input backlog dropped. Counted in `sent`.
    #[serde(default)]
    pub tx_overrun: u64,
    pub spec: String,
}

impl DirReport {
    /// Frames that reached the link: those it read, and those lost before it could
    /// (`rx_overrun`).
    pub fn offered(&self) -> u64 {
        self.packets + self.rx_overrun
    }

    /// Frames the far side took (sent, less those its backlog dropped).
    pub fn delivered(&self) -> u64 {
        self.sent.saturating_sub(self.tx_overrun)
    }

    /// Whether every frame is accounted for: offered plus the copies made equals dropped plus
    /// in the link plus delivered.
    pub fn adds_up(&self) -> bool {
        self.offered() + self.duplicated == self.dropped() + self.in_flight + self.delivered()
    }

    /// Every frame this direction lost, whatever lost it: its impairments, its queue, its
    /// delay line, and overruns before and after it.
    pub fn dropped(&self) -> u64 {
        self.lost + self.queue_drops + self.overflow_drops + self.send_errors + self.rx_overrun + self.tx_overrun
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkReport {
    pub a: String,
    pub b: String,
    pub ab: DirReport,
    pub ba: DirReport,
}

/// The directions of a link a change applies to, as the user named its ends: `ab` leaves the
/// first node named, `ba` the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkDir {
    Ab,
    Ba,
    #[default]
    Both,
}

impl LinkDir {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkDir::Ab => "ab",
            LinkDir::Ba => "ba",
            LinkDir::Both => "both",
        }
    }

    /// The plan's directions (0: its a → b, 1: b → a) this names, where `swapped` says the user
    /// named the plan's b first.
    pub fn plan_dirs(self, swapped: bool) -> Vec<usize> {
        match (self, swapped) {
            (LinkDir::Both, _) => vec![0, 1],
            (LinkDir::Ab, false) | (LinkDir::Ba, true) => vec![0],
            (LinkDir::Ba, false) | (LinkDir::Ab, true) => vec![1],
        }
    }

    /// The direction that names plan direction(s) `dirs` from the user's order.
    pub fn of_plan_dirs(dirs: &[usize], swapped: bool) -> LinkDir {
        match dirs {
            [d] if (*d == 0) != swapped => LinkDir::Ab,
            [_] => LinkDir::Ba,
            _ => LinkDir::Both,
        }
    }
}

impl std::str::FromStr for LinkDir {
    type Err = String;
    fn from_str(s: &str) -> Result<LinkDir, String> {
        match s {
            "ab" => Ok(LinkDir::Ab),
            "ba" => Ok(LinkDir::Ba),
            "both" => Ok(LinkDir::Both),
            d => Err(format!("direction `{d}`: use ab, ba or both")),
        }
    }
}

impl std::fmt::Display for LinkDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A control request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    Stats,
    /// Changes impairments; fields left out keep their values.
    Set {
        a: String,
        b: String,
        dir: LinkDir,
        /// Parsed once at the edge (the CLI, the run's command channel): typed from there on.
        change: Box<horde_topo::LinkChange>,
        clear: bool,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    pub error: Option<String>,
    pub links: Vec<LinkReport>,
}

/// A spec in words, as `tc qdisc show` would say it.
pub fn describe(s: &LinkSpec) -> String {
    let mut v = Vec::new();
    if let Some(r) = s.rate_bps {
        v.push(format!("rate {:.3} Mbit/s", r as f64 / 1e6));
    }
    if s.trace.is_some() {
        v.push("trace".into());
    }
    if s.delay_ns > 0 {
        v.push(format!("delay {:.3} ms", s.delay_ns as f64 / 1e6));
    }
    if s.jitter_ns > 0 {
        v.push(format!("jitter {:.3} ms", s.jitter_ns as f64 / 1e6));
    }
    match s.loss {
        horde_impair::Loss::None => {}
        horde_impair::Loss::Random(p) => v.push(format!("loss {:.3}%", p * 100.0)),
        horde_impair::Loss::GilbertElliott { p, r, .. } => v.push(format!("loss gemodel p {:.3}% r {:.3}%", p * 100.0, r * 100.0)),
    }
    if s.duplicate > 0.0 {
        v.push(format!("duplicate {:.3}%", s.duplicate * 100.0));
    }
    if s.corrupt > 0.0 {
        v.push(format!("corrupt {:.3}%", s.corrupt * 100.0));
    }
    if s.ber > 0.0 {
        v.push(format!("ber {:e}", s.ber));
    }
    if s.reorder_prob > 0.0 {
        v.push(format!("reorder {:.3}% gap {}", s.reorder_prob * 100.0, s.reorder_gap.max(1)));
    }
    match s.queue_limit() {
        Some(q) if s.queue_is_default() => v.push(format!("queue {q} B (default: 100 ms at the rate)")),
        Some(q) => v.push(format!("queue {q} B")),
        None if s.queue_unbounded => v.push("queue unbounded".into()),
        None => {}
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Reads a Mahimahi trace (path relative to the topology's directory): a regular file of at
/// most [`horde_model::files::MAX_DATA`] bytes, so a FIFO or `/dev/zero` is refused at once.
fn load_trace(base: &Path, path: &Option<String>) -> Result<Option<Arc<Trace>>, EmuError> {
    let Some(p) = path else { return Ok(None) };
    let full = base.join(p);
    let text = horde_model::files::read_text(&full, horde_model::files::MAX_DATA, "traces").map_err(|e| EmuError::Other(format!("reading trace: {e}")))?;
    let t = Trace::parse(&text).map_err(|e| EmuError::Other(format!("{}: {e}", full.display())))?;
    Ok(Some(Arc::new(t)))
}

/// The new settings of a direction: its current ones with the change applied (typed all the
/// way; a new trace file is read here).
fn changed_spec(old: &LinkSpec, change: &horde_topo::LinkChange, clear: bool, base: &Path) -> Result<LinkSpec, EmuError> {
    let mut spec = change.apply(old, clear).map_err(|(f, m)| EmuError::Other(format!("{f}: {m}")))?;
    if change.trace.is_some() {
        spec.trace = load_trace(base, &change.trace)?;
    }
    Ok(spec)
}

/// The link emulator's task, as its process reads it (`horde child link-emulator EXP`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonTask {
    pub exp: String,
}

/// Starts the daemon for `exp` (this binary, in a session of its own: it outlives the command
/// that started it) and waits until its sockets are open.
pub fn spawn_daemon(exp: &str) -> Result<u32, EmuError> {
    use horde_sys::own;
    let dir = state_dir(exp);
    let log = std::fs::File::create(dir.join("daemon.log")).map_err(|e| EmuError::io("creating daemon.log", e))?;
    let tie = own::Tie {
        death_signal: None,
        own_session: true,
        netns: None,
        keep_stdin: false,
        stdout: log.try_clone().map_err(|e| EmuError::io("daemon.log", e))?.into(),
        stderr: log.into(),
    };
    let mut child =
        own::spawn(own::Kind::LinkEmulator, exp, &DaemonTask { exp: exp.to_string() }, tie).map_err(|e| EmuError::io("starting the link emulator", e))?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if dir.join("ready").exists() {
            return Ok(child.id());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
            return Err(EmuError::Other(format!("the link emulator exited ({status}): {}", log.trim())));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    Err(EmuError::Other("the link emulator did not start within 10 s (see daemon.log in the experiment's directory)".into()))
}

/// The daemon's body (`horde child link-emulator EXP`, its [`DaemonTask`] read). Runs until killed.
pub fn run_daemon(exp: &str) -> Result<(), EmuError> {
    let (meta, plan) = crate::load(exp)?;
    let fabric = ns::open(&format!("{}{exp}", ns::PREFIX))?;
    ns::enter(&fabric)?;
    let base = PathBuf::from(&meta.base_dir);
    let mut socks = Vec::new();
    let mut dirs = Vec::new();
    let mut names = Vec::new();
    let mut ifnames = Vec::new();
    let seed = exp.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    let links = crate::userspace_links(&plan, &meta);
    let rcvbuf = recv_buffer(2 * links.len());
    for (k, li) in links.into_iter().enumerate() {
        let l = &plan.links[li];
        for end in ["a", "b"] {
            let name = format!("hd{exp}i{k}{end}");
            socks.push(packet_socket(&name, rcvbuf)?);
            ifnames.push(name);
        }
        for (d, spec) in [&l.ab, &l.ba].into_iter().enumerate() {
            let mut spec = spec.clone();
            spec.trace = load_trace(&base, if d == 0 { &l.trace_ab } else { &l.trace_ba })?;
            let link = Link::new(spec, seed ^ (2 * k + d) as u64).map_err(|e| EmuError::Other(e.to_string()))?;
            // frames read on end a (index 2k) leave by end b (2k+1), and the other way
            dirs.push(Dir {
                link,
                out: 2 * k + 1 - d,
                sent: 0,
                send_errors: 0,
                pending_bytes: 0,
                pending_frames: 0,
                overflow_drops: 0,
                rx_overrun: 0,
                tx_overrun: 0,
            });
        }
        names.push((plan.nodes[l.a.node].name.clone(), plan.nodes[l.b.node].name.clone()));
    }
    let drops = fwd_io::interface_drops();
    let if_base = ifnames.iter().map(|n| drops.get(n).copied().unwrap_or_default()).collect();
    let offered = socks
        .iter()
        .map(|s: &OwnedFd| {
            crate::offered::Offered::attach(s.as_raw_fd())
                .map_err(|e| eprintln!("horde: no eBPF counter on a link socket ({e}): a GSO buffer the socket drops counts as one frame"))
                .ok()
        })
        .collect();
    let n = socks.len();
    let sock_fds = socks.iter().map(|s: &OwnedFd| s.as_raw_fd()).zip(ifnames).collect();
    let shared = Arc::new(Mutex::new(Shared { dirs, names, socks: sock_fds, if_base, offered, sock_bufs: vec![0; n], if_rx: vec![0; n] }));
    let ctl_path = state_dir(exp).join("ctl.sock");
    let _ = std::fs::remove_file(&ctl_path);
    let listener = UnixListener::bind(&ctl_path).map_err(|e| EmuError::io("creating the control socket", e))?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&ctl_path, std::fs::Permissions::from_mode(0o600));
    }
    let sh = shared.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let _ = serve_ctl(conn, &sh, &base);
        }
    });
    std::fs::write(state_dir(exp).join("ready"), std::process::id().to_string()).map_err(|e| EmuError::io("writing ready", e))?;
    crate::fwd_loop::forward(&socks, &shared)
}

/// Serves one control connection: one request per line. A client that stalls is dropped after
/// [`CTL_TIMEOUT`], and a line is at most [`CTL_MAX_LINE`] bytes, so no client holds the
/// control thread or its memory.
fn serve_ctl(conn: UnixStream, shared: &Mutex<Shared>, base: &Path) -> std::io::Result<()> {
    conn.set_read_timeout(Some(CTL_TIMEOUT))?;
    conn.set_write_timeout(Some(CTL_TIMEOUT))?;
    let mut w = conn.try_clone()?;
    let mut r = BufReader::new(conn);
    loop {
        let mut line = Vec::new();
        let n = (&mut r).take(CTL_MAX_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let resp = match serde_json::from_slice::<Request>(&line) {
            Err(e) => Response { ok: false, error: Some(format!("bad request: {e}")), links: Vec::new() },
            Ok(req) => handle(req, shared, base),
        };
        writeln!(w, "{}", serde_json::to_string(&resp).expect("serializable"))?;
        if !line.ends_with(b"\n") {
            return Ok(());
        }
    }
}

fn refuse(msg: String) -> Response {
    Response { ok: false, error: Some(msg), links: Vec::new() }
}

/// Applies a control request. New settings (and trace files) are read and validated before the
/// forwarder's lock is taken, so a slow file never stalls the frames.
fn handle(req: Request, shared: &Mutex<Shared>, base: &Path) -> Response {
    if let Request::Set { a, b, dir, change, clear } = req {
        let (k, olds) = {
            let sh = shared.lock().expect("forwarder state");
            let found = sh.names.iter().position(|(x, y)| (x == &a && y == &b) || (x == &b && y == &a));
            let Some(k) = found else {
                let known: Vec<String> = sh.names.iter().map(|(x, y)| format!("{x} {y}")).collect();
                return refuse(format!("no emulated link between {a} and {b} (emulated links: {})", known.join("; ")));
            };
            let dirs = dir.plan_dirs(sh.names[k].0 != a);
            (k, dirs.into_iter().map(|d| (d, sh.dirs[2 * k + d].link.spec().clone())).collect::<Vec<_>>())
        };
        // Validate every direction before changing any.
        let mut new = Vec::new();
        for (d, old) in olds {
            match changed_spec(&old, &change, clear, base) {
                Ok(spec) => new.push((2 * k + d, spec)),
                Err(e) => return refuse(e.to_string()),
            }
        }
        let mut sh = shared.lock().expect("forwarder state");
        for (i, spec) in new {
            if let Err(e) = sh.dirs[i].link.set_spec(spec) {
                return refuse(e.to_string());
            }
        }
        return Response { ok: true, error: None, links: reports(&mut sh) };
    }
    Response { ok: true, error: None, links: reports(&mut shared.lock().expect("forwarder state")) }
}

/// Brings the overrun counters up to date from the kernel's (see [`fwd_io`]).
fn read_overruns(sh: &mut Shared) {
    let drops = fwd_io::interface_drops();
    for i in 0..sh.socks.len() {
        let (fd, name) = &sh.socks[i];
        let sock = fwd_io::socket_drops(*fd);
        let (rx, tx) = drops.get(name).copied().unwrap_or_default();
        let (rx0, tx0) = sh.if_base[i];
        sh.sock_bufs[i] += sock;
        sh.if_rx[i] += rx.saturating_sub(rx0);
        sh.dirs[i ^ 1].tx_overrun += tx.saturating_sub(tx0);
        sh.if_base[i] = (rx.max(rx0), tx.max(tx0));
        // in datagrams: those offered and never read (exact once the socket is drained; while
        // a drop is recent, datagrams still waiting in the socket count too)
        let sock_dgrams = match (&sh.offered[i], sh.sock_bufs[i]) {
            (_, 0) => 0,
            (Some(o), _) => o.read().saturating_sub(sh.dirs[i].link.stats().packets),
            (None, bufs) => bufs,
        };
        sh.dirs[i].rx_overrun = sh.if_rx[i] + sock_dgrams;
    }
}

fn reports(sh: &mut Shared) -> Vec<LinkReport> {
    read_overruns(sh);
    let now = mono_ns();
    let dir = |d: &Dir| {
        let s: LinkStats = d.link.stats();
        DirReport {
            packets: s.packets,
            lost: s.lost,
            queue_drops: s.queue_drops,
            duplicated: s.duplicated,
            corrupted: s.corrupted,
            sent: d.sent,
            send_errors: d.send_errors,
            overflow_drops: d.overflow_drops,
            queue_bytes: d.link.queued_bytes(now),
            in_flight_bytes: d.pending_bytes,
            in_flight: d.pending_frames,
            delivered_bytes: s.delivered_bytes,
            bit_errors: s.bit_errors,
            errored: s.errored,
            reordered: s.reordered,
            rx_overrun: d.rx_overrun,
            tx_overrun: d.tx_overrun,
            spec: describe(d.link.spec()),
        }
    };
    sh.names.iter().enumerate().map(|(k, (a, b))| LinkReport { a: a.clone(), b: b.clone(), ab: dir(&sh.dirs[2 * k]), ba: dir(&sh.dirs[2 * k + 1]) }).collect()
}

/// Link counters as a text table, one row per direction. Each row adds up: `offered` (frames
/// that reached the link) plus `+dup` (second copies it made) is `lost` + `q-drops` +
/// `overrun` + `in link` (queued or being delayed when read) + `delivered`.
pub fn links_table(links: &[LinkReport]) -> String {
    let row = |t: &mut String, c: [&str; 8], spec: &str| {
        t.push_str(&format!("{:<24} {:>10} {:>6} {:>8} {:>8} {:>8} {:>8} {:>10}  {spec}\n", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]));
    };
    let mut t = String::new();
    row(&mut t, ["emulated link", "offered", "+dup", "lost", "q-drops", "overrun", "in link", "delivered"], "impairments");
    for l in links {
        for (from, to, d) in [(&l.a, &l.b, &l.ab), (&l.b, &l.a, &l.ba)] {
            let overrun = d.rx_overrun + d.tx_overrun + d.overflow_drops + d.send_errors;
            let cells = [d.offered(), d.duplicated, d.lost, d.queue_drops, overrun, d.in_flight, d.delivered()].map(|n| n.to_string());
            let name = format!("{from} → {to}");
            row(&mut t, [&name, &cells[0], &cells[1], &cells[2], &cells[3], &cells[4], &cells[5], &cells[6]], &d.spec);
        }
    }
    t.push_str("(offered + dup = lost + q-drops + overrun + in link + delivered; in link: queued or being delayed when read)\n");
    t
}

/// Sends a request to a running experiment's link emulator.
pub fn request(exp: &str, req: &Request) -> Result<Response, EmuError> {
    crate::check_id(exp)?;
    let p = state_dir(exp).join("ctl.sock");
    let mut s = UnixStream::connect(&p)
        .map_err(|e| EmuError::io(&format!("reaching experiment {exp}'s link emulator (is the experiment up, with emulated links? see `horde emu ls`)"), e))?;
    writeln!(s, "{}", serde_json::to_string(req).expect("serializable")).map_err(|e| EmuError::io("writing to the link emulator", e))?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).map_err(|e| EmuError::io("reading from the link emulator", e))?;
    let r: Response = serde_json::from_str(&line).map_err(|e| EmuError::Other(format!("bad answer from the link emulator: {e}")))?;
    match (&r.ok, &r.error) {
        (false, Some(e)) => Err(EmuError::Other(e.clone())),
        _ => Ok(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One link's two sockets get the most; a thousand links share the total down to the least.
    #[test]
    fn receive_buffers_share_a_bound() {
        assert_eq!(recv_buffer(2), RECV_BUFFER_MAX);
        assert_eq!(recv_buffer(8), 128 << 20);
        assert_eq!(recv_buffer(2000), RECV_BUFFER_MIN);
        assert_eq!(recv_buffer(0), RECV_BUFFER_MAX);
    }
}
