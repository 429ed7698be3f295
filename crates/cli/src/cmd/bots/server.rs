//! The game servers `horde bots` starts and watches: `openarena-server` on a free port (or inside
//! an emulated host), its `getstatus`, its CPU from `/proc`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use horde_engine::clock::{Clock as _, Stopwatch};

use anyhow::Context;

use super::Args;

/// A game server this command started: stopped (and reaped) when dropped.
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) addr: SocketAddr,
    pub(super) log: PathBuf,
    /// `--server-cpu`: the cgroup holding it to its share of a core (removed after it stops).
    pub(super) cap: Option<horde_sys::cgroup::CpuCap>,
}

impl Drop for Server {
    fn drop(&mut self) {
        horde_sys::own::stop_within(&mut self.child, Duration::from_secs(3));
        // its capped group goes once it is empty
        drop(self.cap.take());
    }
}

pub(super) const OA_SERVER: &str = "/usr/games/openarena-server";

pub(super) use horde_engine::bots::{free_udp_port, status};

pub(super) fn start_server(args: &Args, dir: &std::path::Path, index: usize, max: usize) -> anyhow::Result<Server> {
    if !std::path::Path::new(OA_SERVER).exists() {
        anyhow::bail!("{OA_SERVER} not found: install it with `apt-get install openarena-server` (Debian), or give --server IP:PORT of a running server");
    }
    let place = args.place.as_ref();
    let port = if place.is_some() { 27960 + index as u16 } else { free_udp_port()? };
    let ip = place.map_or(std::net::IpAddr::from([127, 0, 0, 1]), |p| p.server_ip);
    let log = dir.join(if index == 0 { "server.log".to_string() } else { format!("server-{index}.log") });
    let home = dir.join("server-home");
    std::fs::create_dir_all(&home)?;
    let f = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let max = max.clamp(1, 64);
    let mut cmd = Command::new(OA_SERVER);
    let fd = place.map(|p| std::os::fd::AsRawFd::as_raw_fd(&*p.server_ns));
    // `--server-cpu`: the server joins its capped group before it execs, so every thread it
    // starts is held to the share (the kernel's CFS bandwidth control).
    let cap = match args.server_cpu {
        Some(f) => {
            let rel = format!("horde-bots/{}-{index}-{}", std::process::id(), horde_sys::clock::unix_secs());
            Some(
                horde_sys::cgroup::CpuCap::create(&rel, f)
                    .with_context(|| format!("--server-cpu {f}: cannot cap the server's CPU here (root and the kernel's CPU controller are needed)"))?,
            )
        }
        None => None,
    };
    let joiners = cap.as_ref().map(|c| c.joiners()).transpose().context("--server-cpu: opening the capped group")?.unwrap_or_default();
    let join_fds: Vec<std::os::fd::RawFd> = joiners.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
    // The game server dies with us, even when we are SIGKILLed (no orphan holding the port and
    // a core); if we died before it started, it does not start at all.
    horde_sys::own::arm(&mut cmd, Some(horde_sys::own::DIE_WITH_US), false, fd, move || {
        join_fds.iter().try_for_each(|&fd| horde_sys::cgroup::join_from_child(fd))
    });
    let child = cmd
        .args(["+set", "dedicated", "1", "+set", "net_ip", &ip.to_string(), "+set", "net_port", &port.to_string()])
        .args(["+set", "sv_maxclients", &max.to_string(), "+set", "sv_pure", "0", "+set", "sv_fps", &args.sv_fps.to_string()])
        .args(["+set", "g_inactivity", "0", "+set", "sv_timeout", "30", "+map", &args.map])
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .spawn()
        .with_context(|| format!("starting {OA_SERVER}"))?;
    drop(joiners);
    let server = Server { child, addr: SocketAddr::new(ip, port), log, cap };
    let t = Stopwatch::start();
    while t.elapsed() < Duration::from_secs(30) {
        if status(server.addr, place.map(|p| &*p.clients[0])).is_some() {
            return Ok(server);
        }
        horde_sys::clock::System.sleep(Duration::from_millis(200));
    }
    anyhow::bail!("the server did not answer within 30 s; see {}", server.log.display())
}

pub(super) use horde_sys::host::process_cpu as proc_cpu_split;

/// This process's user + system CPU seconds so far.
pub(super) fn self_cpu() -> f64 {
    horde_sys::host::own_usage().cpu_s
}

/// User + system CPU seconds of a process so far.
pub(super) fn proc_cpu(pid: u32) -> Option<f64> {
    proc_cpu_split(pid).map(|(u, s)| u + s)
}

/// The server process's CPU time on its clock, sampled about every millisecond until `done`:
/// `(real ns, cumulative ns)`, the sum of its threads' time on a CPU (`/proc/PID/task/*/schedstat`,
/// the scheduler's own nanosecond count). At most [`horde_q3::frames::MAX_EVENTS`] samples.
pub(super) fn sample_schedstat(pid: u32, done: &std::sync::atomic::AtomicBool, clock: &dyn horde_sys::clock::Clock) -> Vec<(u64, u64)> {
    let dir = format!("/proc/{pid}/task");
    let read = || -> Option<u64> {
        let mut sum = 0u64;
        for t in std::fs::read_dir(&dir).ok()?.flatten() {
            let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            sum += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
        Some(sum)
    };
    let mut out = Vec::new();
    while !done.load(std::sync::atomic::Ordering::Relaxed) && out.len() < horde_q3::frames::MAX_EVENTS {
        match read() {
            Some(c) => out.push((clock.real_ns(), c)),
            None => break,
        }
        clock.sleep(std::time::Duration::from_micros(900));
    }
    out
}
