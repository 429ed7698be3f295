use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use horde_model::behaviour::{self, Params, Segment};
use horde_model::service::Service;

use crate::{bad_input, Outcome};

/// Runs the behaviour process alone: players' sessions and state (category) changes, seeded and
/// reproducible. Writes one row per stay and prints a summary to check against the model.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Built-in service name (`horde services`) or a service .toml file
    #[arg(short, long, default_value = "wow")]
    pub service: String,
    /// Number of players
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub players: u32,
    /// Simulated time, e.g. 1h, 30m, 86400s
    #[arg(short = 't', long, short_alias = 'd', default_value = "1h")]
    pub duration: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Hour of day (0..24, fractions allowed) at which the run starts
    #[arg(long, default_value_t = 20.0)]
    pub start_hour: f64,
    /// Keep the hour of day fixed (the model's expected shares then apply exactly)
    #[arg(long)]
    pub fixed_hour: bool,
    /// Segments file: .csv or .jsonl (by extension); - for CSV on stdout
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the summary as JSON to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
}

/// The longest simulated time: a year of behaviour (stays are streamed, so memory does not grow
/// with it; the limit only keeps a typo from running for days).
const MAX_BEHAVE_NS: u64 = 366 * 86_400 * 1_000_000_000;

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let mut svc = Service::load(&args.service).map_err(bad_input)?;
    if args.fixed_hour {
        svc.hour_advances = false;
    }
    let dur = horde_model::units::parse_duration_ns(&args.duration).map_err(|m| bad_input(anyhow::anyhow!("--duration: {m}")))?;
    if dur == 0 || dur > MAX_BEHAVE_NS {
        return Err(bad_input(anyhow::anyhow!("--duration must be longer than 0 and at most 366 days (got {})", args.duration)));
    }
    if !(0.0..24.0).contains(&args.start_hour) {
        return Err(bad_input(anyhow::anyhow!("--start-hour must be in 0..24 (got {})", args.start_hour)));
    }
    if args.players == 0 || args.players > 1 << 24 {
        return Err(bad_input(anyhow::anyhow!("--players must be 1..=16777216 (got {})", args.players)));
    }
    let p = Params { players: args.players, duration_s: dur as f64 / 1e9, seed: args.seed, start_hour: args.start_hour };
    let mut sink = match &args.out {
        Some(path) => Some(SegmentSink::open(path)?),
        None => None,
    };
    let mut acc = behaviour::SummaryAcc::new(&svc);
    let churn = !matches!(svc.session, horde_model::service::Session::Fixed);
    let mut hourly = horde_model::sessions::Hourly::new(p.duration_s);
    let mut stays = 0usize;
    let mut done = 0u32;
    for player in 0..p.players {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let segs = behaviour::player(&svc, &p, player);
        if let Some(s) = &mut sink {
            s.write(&svc, &segs)?;
        }
        acc.add(&segs);
        if churn {
            hourly.add(&behaviour::sessions(&svc, &p, player, 0.0));
        }
        stays += segs.len();
        done += 1;
    }
    if let Some(s) = sink {
        s.finish()?;
    }
    let interrupted = done < p.players;
    let mut sum = acc.finish(&svc, &Params { players: done, ..p });
    if churn {
        sum.sessions = Some(horde_model::sessions::Summary::new(&svc, &Params { players: done, ..p }, hourly));
    }
    if interrupted {
        say!("horde behave: interrupted after {done} of {} players; the summary covers those", p.players);
    }
    let machine = crate::output::one_stdout(&[("--out", &args.out), ("--summary-json", &args.summary_json)])?;
    print_summary(&sum, stays, machine)?;
    if let Some(path) = &args.summary_json {
        super::write_out(path, &serde_json::to_string_pretty(&sum).expect("summary serialises"))?;
    }
    Ok(if interrupted { 130 } else { 0 })
}

/// Where stays go: CSV or JSON Lines, a file or standard output.
struct SegmentSink {
    w: Box<dyn Write>,
    jsonl: bool,
}

impl SegmentSink {
    fn open(path: &std::path::Path) -> anyhow::Result<SegmentSink> {
        let jsonl = path.extension().is_some_and(|e| e == "jsonl" || e == "json");
        let mut w: Box<dyn Write> = if path == std::path::Path::new("-") {
            Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
        } else {
            Box::new(std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?))
        };
        if !jsonl {
            writeln!(w, "player,category,sub_activity,start_s,end_s,complete,hour")?;
        }
        Ok(SegmentSink { w, jsonl })
    }

    fn write(&mut self, svc: &Service, segs: &[Segment]) -> anyhow::Result<()> {
        for s in segs {
            let st = &svc.states[s.state as usize];
            let sub = &st.subs[s.sub as usize].name;
            if self.jsonl {
                let row = serde_json::json!({"player": s.player, "category": st.name, "sub_activity": sub, "start_s": s.start_s, "end_s": s.end_s, "complete": s.complete, "hour": s.hour});
                writeln!(self.w, "{row}")?;
            } else {
                writeln!(self.w, "{},{},{},{:.6},{:.6},{},{}", s.player, st.name, sub, s.start_s, s.end_s, s.complete, s.hour)?;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.w.flush()?;
        Ok(())
    }
}

/// `machine_on_stdout`: stays or the JSON summary go to standard output, so this goes to
/// standard error.
fn print_summary(sum: &behaviour::Summary, n: usize, machine_on_stdout: bool) -> Result<(), crate::Failure> {
    use std::fmt::Write as _;
    let mut o = String::new();
    say!(
        "horde behave: service {}, {} players, {:.0} s from hour {}, seed {}: {} stays",
        sum.service,
        sum.players,
        sum.duration_s,
        sum.start_hour,
        sum.seed,
        n
    );
    let _ = writeln!(o, "{:<16} {:>10} {:>12} {:>9} {:>14} {:>14}", "category", "time share", "model share", "stays", "mean dwell s", "model dwell s");
    for s in &sum.states {
        let opt = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "{:<16} {:>10.4} {:>12} {:>9} {:>14} {:>14}",
            s.state,
            s.time_share,
            opt(s.model_share, 4),
            s.segments,
            s.mean_dwell_s.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
            opt(s.model_dwell_s, 1)
        );
    }
    let _ = writeln!(
        o,
        "model share: each hour's long-run share, weighted by the time the run spent in that hour (exact with --fixed-hour); transitions in --summary-json"
    );
    if let Some(ss) = &sum.sessions {
        sessions_table(&mut o, sum, ss);
    }
    crate::output::human(&o, machine_on_stdout)
}

/// Logins, logouts and players online per hour of the run, beside the model's expectation and
/// its χ² verdicts.
fn sessions_table(o: &mut String, sum: &behaviour::Summary, ss: &horde_model::sessions::Summary) {
    use std::fmt::Write as _;
    let _ = writeln!(o, "\nsessions ({} model), per hour of the run:", ss.model);
    let _ = writeln!(o, "{:>5} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}", "hour", "day", "logins", "model", "logouts", "model", "online", "model");
    let e = ss.expected.as_ref();
    let m = |v: Option<&Vec<f64>>, i: usize| v.map(|v| format!("{:.1}", v[i])).unwrap_or_else(|| "-".into());
    for i in 0..ss.observed.logins.len() {
        let day_hour = (sum.start_hour + i as f64).rem_euclid(24.0).floor();
        let _ = writeln!(
            o,
            "{:>5} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            i,
            day_hour,
            ss.observed.logins[i],
            m(e.map(|e| &e.logins), i),
            ss.observed.logouts[i],
            m(e.map(|e| &e.logouts), i),
            ss.observed.online[i],
            m(e.map(|e| &e.online), i)
        );
    }
    for (what, t) in [("logins", &ss.logins_test), ("logouts", &ss.logouts_test)] {
        match t {
            Some(t) => {
                let _ = writeln!(
                    o,
                    "{what} per hour vs the model: chi-square {:.1} over {} hours, p = {:.3} ({} at p >= {})",
                    t.statistic,
                    t.bins,
                    t.p_value,
                    if t.fits { "fits" } else { "DIFFERS" },
                    t.alpha
                );
            }
            None if e.is_some() => {
                let _ = writeln!(o, "{what} per hour vs the model: no hour expects 5 or more (run more players or longer)");
            }
            None => {}
        }
    }
    let _ = writeln!(o, "hour: of the run; day: hour of day at its start; online: at the hour's start; a logout is a session ending within the run");
}
