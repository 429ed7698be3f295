//! Measures the controller's merge on synthetic log shards (bench/distributed.sh, part 3):
//! writes one client log per agent and one server log, WoW-like record counts (2.4 APDUs/s up
//! and 5.4 down per player), then loads and clock-corrects them as the controller does.
//!
//!   cargo run --release -p horde-agent --example merge_shards -- --agents 40 --players 500 --seconds 60 --dir /tmp/shards --json merge.json

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use horde_agent::merge::{load_records, Part};
use horde_wire::log::{LogHeader, Role, LOG_HEADER_LEN, RECORD_LEN};
use horde_wire::{Record, RecordKind};

const UP_PER_S: f64 = 2.4;
const DOWN_PER_S: f64 = 5.4;

fn main() -> anyhow::Result<()> {
    let mut agents = 10u32;
    let mut players = 100u32;
    let mut seconds = 60u64;
    let mut dir = PathBuf::from("shards");
    let mut json = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().ok_or_else(|| anyhow::anyhow!("{a} needs a value"));
        match a.as_str() {
            "--agents" => agents = v()?.parse()?,
            "--players" => players = v()?.parse()?,
            "--seconds" => seconds = v()?.parse()?,
            "--dir" => dir = v()?.into(),
            "--json" => json = Some(PathBuf::from(v()?)),
            _ => anyhow::bail!("unknown argument {a} (--agents N --players P --seconds S --dir D --json F)"),
        }
    }
    let t0 = 1_800_000_000_000_000_000u64;
    let mut parts = Vec::new();
    let mut log_bytes = 0u64;
    let mut server = Writer::new(dir.join("server").join("server.hlog"), Role::Sender, t0)?;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for a in 0..agents {
        let d = dir.join(format!("agent{a}"));
        let mut client = Writer::new(d.join("client.hlog"), Role::Sender, t0)?;
        let offset = (a as i64 - agents as i64 / 2) * 250_000;
        for p in a * players..(a + 1) * players {
            for (per_s, up) in [(UP_PER_S, true), (DOWN_PER_S, false)] {
                let n = (per_s * seconds as f64) as u64;
                for seq in 0..n {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let t = t0 + seq * (1e9 / per_s) as u64 + rng % 1_000_000;
                    let size = 40 + (rng >> 40) as u32 % 400;
                    let sent = Record { flow: p, size, seq, t_a: t, t_b: t + 3_000, kind: RecordKind::Sent, ..Default::default() };
                    let recv = Record { flow: p, size, seq, t_a: t, t_b: t + 80_000, kind: RecordKind::Received, ..Default::default() };
                    // Client clocks are offset; the server's is the reference.
                    let shift = |mut r: Record, client_side: bool| {
                        if client_side {
                            r.t_b = (r.t_b as i64 + offset) as u64;
                            if r.kind == RecordKind::Sent {
                                r.t_a = (r.t_a as i64 + offset) as u64;
                            }
                        } else if r.kind == RecordKind::Received {
                            r.t_a = (r.t_a as i64 + offset) as u64;
                        }
                        r
                    };
                    if up {
                        client.push(&shift(sent, true))?;
                        server.push(&shift(recv, false))?;
                    } else {
                        server.push(&shift(sent, false))?;
                        client.push(&shift(recv, true))?;
                    }
                }
            }
        }
        log_bytes += client.finish()?;
        parts.push(Part {
            name: format!("agent{a}"),
            dir: d,
            offset_ns: offset,
            players: std::iter::once(a * players..(a + 1) * players).collect(),
            server: false,
            ok: true,
            client: None,
            server_report: None,
        });
    }
    log_bytes += server.finish()?;
    parts.push(Part {
        name: "server".into(),
        dir: dir.join("server"),
        offset_ns: 0,
        players: Vec::new(),
        server: true,
        ok: true,
        client: None,
        server_report: None,
    });
    let t = Instant::now();
    // The synthetic shards' plan: any time, as many APDUs per player as the shards could hold.
    let plan =
        horde_agent::merge::Plan { from_ns: 0, to_ns: u64::MAX, apdus: vec![[u64::MAX, u64::MAX]; (agents * players) as usize], exact: None, stopped: false };
    let (c, s, refused) = load_records(&parts, &plan)?;
    assert!(refused.is_empty(), "{refused:?}");
    let merge_s = t.elapsed().as_secs_f64();
    let records = (c.len() + s.len()) as u64;
    let r =
        serde_json::json!({"agents": agents, "players_per_agent": players, "seconds": seconds, "records": records, "log_bytes": log_bytes, "merge_s": merge_s});
    println!("{r}");
    if let Some(j) = json {
        std::fs::write(j, r.to_string())?;
    }
    Ok(())
}

struct Writer {
    f: std::io::BufWriter<std::fs::File>,
    bytes: u64,
}

impl Writer {
    fn new(p: PathBuf, role: Role, start_ns: u64) -> anyhow::Result<Writer> {
        std::fs::create_dir_all(p.parent().unwrap_or(&p))?;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&p)?);
        let mut h = [0u8; LOG_HEADER_LEN];
        LogHeader { role, start_ns }.emit(&mut h);
        f.write_all(&h)?;
        Ok(Writer { f, bytes: LOG_HEADER_LEN as u64 })
    }

    fn push(&mut self, r: &Record) -> anyhow::Result<()> {
        let mut b = [0u8; RECORD_LEN];
        r.emit(&mut b);
        self.f.write_all(&b)?;
        self.bytes += RECORD_LEN as u64;
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<u64> {
        self.f.flush()?;
        Ok(self.bytes)
    }
}
