//! `horde circuit sim`: a throttle controller in a closed loop in virtual time
//! (`horde_regulate::sim`): a server that always has data sends at the rate the client last
//! asked for over a path with a round-trip time and a loss schedule, random or periodic. No
//! sockets, no clock: seconds of the loop take microseconds, so sweeps over loss × RTT (the
//! Mongoose paper's Figs. 3 and 6) run in seconds. The measured counterpart is `serve`/`join`
//! over an emulated link.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use horde_regulate::sim::{self, Loss, Path};
use horde_regulate::tcp::{mathis_bytes_per_s, padhye_bytes_per_s};
use horde_regulate::{Limits, Tuning};

use super::{parse_throttle, TuneArgs};
use crate::{bad_input, Outcome};

/// The longest run, virtual seconds (36 M steps of 0.1 ms: a few seconds of CPU).
const MAX_SECS: u64 = 3600;

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// fixed:KBPS, opensim[:SETTING], mongoose, mongoose-paper or tfrc
    #[arg(long, default_value = "mongoose")]
    pub throttle: String,
    #[command(flatten)]
    pub tune: TuneArgs,
    /// The path's round-trip time
    #[arg(long, value_parser = super::super::duration, default_value = "100ms")]
    pub rtt: Duration,
    /// Loss on the server → client direction: P% throughout, or a schedule T:P%,T:P%,… (T in seconds)
    #[arg(long, default_value = "1%")]
    pub loss: String,
    /// Lose every 1/p-th packet (the paper's deterministic pattern) instead of each one at random
    #[arg(long)]
    pub periodic: bool,
    /// Packet size, bytes (the mean OpenSim packet Mongoose measured: 375)
    #[arg(long, default_value_t = 375)]
    pub packet: u32,
    /// Virtual time to run (at most 3600 s)
    #[arg(short = 't', long, value_parser = super::super::duration, default_value = "300s")]
    pub duration: Duration,
    /// Seed of the random loss
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Per-second rows as CSV: t_s, loss_pct, requested_kbps, received_kbps
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The summary and the seconds as JSON (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(a: SimArgs) -> Outcome {
    let bad = |m: String| bad_input(anyhow::anyhow!("{m}"));
    let kind = parse_throttle(&a.throttle).map_err(bad)?.tuned(a.tune.tuning()).map_err(|e| bad(format!("--throttle-period/--floor: {e}")))?;
    let loss = Loss::parse(&a.loss, a.periodic).map_err(|e| bad(format!("--loss {e}")))?;
    let secs = a.duration.as_secs();
    if !(1..=MAX_SECS).contains(&secs) {
        return Err(bad(format!("-t: 1..={MAX_SECS} s of virtual time (got {secs} s)")));
    }
    let rtt_ns = a.rtt.as_nanos() as u64;
    if !(1_000_000..=10_000_000_000).contains(&rtt_ns) {
        return Err(bad("--rtt: 1 ms..=10 s".into()));
    }
    if !(20..=65_507).contains(&a.packet) {
        return Err(bad(format!("--packet: 20..=65507 bytes (got {})", a.packet)));
    }
    let path = Path { rtt_ns, loss: loss.clone(), packet: a.packet, seed: a.seed };
    let rows = sim::run(kind, Limits::default(), &path, secs);
    // The steady state: the last third, at the loss rate in force at the end.
    let from = secs - secs / 3;
    let (req, got) = sim::steady(&rows, from);
    let p_end = loss.at(secs * 1_000_000_000);
    let rtt_s = rtt_ns as f64 / 1e9;
    let fair = |f: fn(f64, f64, f64) -> f64| (p_end > 0.0).then(|| f(a.packet as f64, rtt_s, p_end) * 8.0 / 1000.0);
    let (padhye, mathis) = (fair(padhye_bytes_per_s), fair(mathis_bytes_per_s));
    let label = kind.label();
    say!(
        "horde circuit sim: {label}, RTT {} ms, loss {} ({}), {secs} s: over the last third it asked for {:.1} kbit/s and received {:.1}; TCP-fair at {:.3} %: {} (Padhye), {} (Mathis)",
        rtt_s * 1e3,
        a.loss,
        if a.periodic { "periodic" } else { "random" },
        req / 1000.0,
        got / 1000.0,
        p_end * 100.0,
        padhye.map_or("unbounded".into(), |v| format!("{v:.1} kbit/s")),
        mathis.map_or("unbounded".into(), |v| format!("{v:.1} kbit/s")),
    );
    if let Some(p) = &a.csv {
        let mut text = String::from("t_s,loss_pct,requested_kbps,received_kbps\n");
        for r in &rows {
            let _ = writeln!(text, "{},{},{:.3},{:.3}", r.t_s, loss.at((r.t_s - 1) * 1_000_000_000) * 100.0, r.requested_bps / 1000.0, r.received_bps / 1000.0);
        }
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.json {
        let seconds: Vec<_> = rows
            .iter()
            .map(|r| serde_json::json!({"t_s": r.t_s, "requested_kbps": r.requested_bps / 1000.0, "received_kbps": r.received_bps / 1000.0}))
            .collect();
        let j = serde_json::json!({
            "throttle": label, "rtt_ms": rtt_s * 1e3, "loss": a.loss, "periodic": a.periodic, "packet": a.packet, "seconds_run": secs, "seed": a.seed,
            "steady_from_s": from, "requested_kbps": req / 1000.0, "received_kbps": got / 1000.0, "final_loss_pct": p_end * 100.0,
            "padhye_kbps": padhye, "mathis_kbps": mathis, "seconds": seconds,
        });
        super::super::write_out(p, &serde_json::to_string_pretty(&j).expect("serialises"))?;
    }
    Ok(0)
}

/// The tuning as `horde_regulate` takes it.
impl TuneArgs {
    pub fn tuning(&self) -> Tuning {
        Tuning { period_s: self.throttle_period, floor_kbps: self.floor }
    }
}
