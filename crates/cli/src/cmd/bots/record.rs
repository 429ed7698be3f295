//! `horde bots --record FILE`: a player's input, frame by frame, as an action file (what
//! `--actions` replays): the first bot's as it played, or a real client's decoded from a
//! capture of its session (`--capture`), since Horde speaks the protocol both ways.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use horde_q3::usercmd::UserCmd;
use horde_q3::watch::Watch;

use super::Args;
use crate::{bad_input, Outcome};

/// Writes `frames` to `path` as an action file, with where they came from.
pub(super) fn write(path: &Path, frames: &[(u32, UserCmd)], about: &[String]) -> Result<(), crate::Failure> {
    if frames.is_empty() {
        return Err(bad_input(anyhow::anyhow!("--record {}: no frame was recorded (the bot never played a frame)", path.display())));
    }
    let text = horde_q3::input::write_actions(frames, about);
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    say!("  recorded: {} frames over {:.1} s in {} (replay with --actions)", frames.len(), frames.last().map_or(0, |f| f.0) as f64 / 1e3, path.display());
    Ok(())
}

/// Is this datagram a client's connectionless request to a server?
fn is_request(payload: &[u8]) -> bool {
    payload.strip_prefix(&horde_q3::oob::PREFIX[..]).is_some_and(|b| b.starts_with(b"getchallenge") || b.starts_with(b"connect "))
}

/// Decodes the client's input from `--capture` and writes it to `--record`; no bots play.
pub(super) fn from_capture(args: &Args) -> Outcome {
    let (Some(cap_path), Some(out)) = (&args.capture, &args.record) else {
        return Err(bad_input(anyhow::anyhow!("--capture needs --record FILE")));
    };
    let protocol = horde_q3::Protocol::from_name(&args.protocol)
        .ok_or_else(|| bad_input(anyhow::anyhow!("--protocol must be openarena, ioq3 or q3 (got `{}`)", args.protocol)))?;
    let wanted: Option<SocketAddr> = match &args.client {
        Some(c) => Some(c.parse().map_err(|_| bad_input(anyhow::anyhow!("--client `{c}` is not IP:PORT")))?),
        None => None,
    };
    let file = horde_sys::fs::open_for_reading(cap_path)
        .map_err(|e| bad_input(anyhow::anyhow!("--capture {}: {e} (give a pcap or pcapng file)", cap_path.display())))?;
    let mut cap = horde_fit::capture::Capture::new(std::io::BufReader::with_capacity(1 << 20, file))
        .map_err(|e| bad_input(anyhow::anyhow!("--capture {}: {e}", cap_path.display())))?;
    let mut w = Watch::new(protocol, horde_q3::input::MAX_ACTIONS);
    // (client, server): the given client, or the first that asks a server for a challenge
    let mut pair: Option<(SocketAddr, SocketAddr)> = None;
    let mut clients: Vec<SocketAddr> = Vec::new();
    while let Some((p, bytes)) = cap.next_datagram() {
        if is_request(&bytes) && !clients.contains(&p.src) && clients.len() < 1000 {
            clients.push(p.src);
        }
        if pair.is_none() && (wanted == Some(p.src) || (wanted.is_none() && is_request(&bytes))) {
            pair = Some((p.src, p.dst));
        }
        match pair {
            Some((c, s)) if p.src == c && p.dst == s => w.from_client(&bytes),
            Some((c, s)) if p.src == s && p.dst == c => w.from_server(&bytes),
            _ => {}
        }
    }
    if let Some(why) = &cap.skipped.ended {
        say!("  the capture ended early: {why}");
    }
    let Some((client, server)) = pair else {
        return Err(bad_input(match wanted {
            Some(c) => anyhow::anyhow!("--capture {}: no datagram from {c}; the clients that connect in it: {}", cap_path.display(), list(&clients)),
            None => anyhow::anyhow!(
                "--capture {}: no client connects to a server in it (no getchallenge or connect); capture from before the client connects, both directions",
                cap_path.display()
            ),
        }));
    };
    let s = &w.stats;
    say!(
        "horde bots --capture: client {client} to server {server} ({} client(s) connect in the capture): {} of {} packets decoded, {} commands read, {} kept (newer server times, as the server takes them)",
        clients.len(),
        s.decoded,
        s.client_packets,
        s.commands_read,
        s.commands_kept
    );
    if s.before_gamestate + s.undecodable + s.fragmented > 0 {
        say!("  left out: {} before the connection's gamestate, {} undecodable, {} fragmented", s.before_gamestate, s.undecodable, s.fragmented);
    }
    if w.frames.is_empty() {
        let why = if s.connections == 0 {
            "the capture does not hold the client's connection (its challenge and gamestate): capture from before the client connects, both directions"
        } else {
            "the client sent no usercmd the server would take; is --protocol right?"
        };
        return Err(bad_input(anyhow::anyhow!("--capture {}: no input decoded for {client}: {why}", cap_path.display())));
    }
    let about = [format!("input of client {client} to server {server}, decoded by horde bots --capture from {}", cap_path.display()), format!("{:?}", w.stats)];
    write(out, &w.timed(), &about)?;
    Ok(0)
}

fn list(a: &[SocketAddr]) -> String {
    if a.is_empty() {
        return "none".into();
    }
    a.iter().take(10).map(|a| a.to_string()).collect::<Vec<_>>().join(", ") + if a.len() > 10 { ", …" } else { "" }
}
