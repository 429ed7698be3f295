//! Runs the console starts: each a child `horde run FILE --progress json --commands -` — the
//! same driver, events and commands as on the command line — whose event lines (standard
//! error) go into the hub and whose commands go to its standard input. Also the report files of
//! a run and the list of past runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use horde_model::scenario::Scenario;
use horde_scenario::EventLine;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::hub::{Hub, RunInfo};

/// A start request (`POST /api/v1/runs`): a scenario file, or a scenario written in the
/// console's form, and the overrides `horde run` takes.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// Scenario file, as `horde run` takes it (relative to the console's directory) ...
    pub scenario: Option<PathBuf>,
    /// ... or a scenario's fields as JSON (the form the page makes from this schema); it is
    /// written to RUNS/scenarios/NAME-TIME.toml and run from there.
    #[schemars(with = "Option<horde_model::scenario::RawScenario>")]
    pub form: Option<serde_json::Value>,
    /// ... or Quake 3 bots against a game server (`horde bots`).
    pub bots: Option<StartBots>,
    pub players: Option<u32>,
    pub online: Option<u32>,
    /// e.g. "30s".
    pub duration: Option<String>,
    pub seed: Option<u64>,
}

/// A bots run (`horde bots … --progress json --commands -`): its players and duration, and the
/// game server (none: an `openarena-server` the run starts and stops).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBots {
    /// 1..=1024 bots.
    pub players: u32,
    /// How long they play once all joined, e.g. "30s".
    pub duration: String,
    /// They join evenly over this long, e.g. "5s" (default 2s).
    pub ramp: Option<String>,
    /// The game server, IP:PORT (loopback, or inside a namespace this host created).
    pub server: Option<String>,
}

fn bots_args(b: &StartBots, out: &Path) -> Result<Vec<std::ffi::OsString>, String> {
    if !(1..=1024).contains(&b.players) {
        return Err(format!("bots.players must be 1..=1024 (got {})", b.players));
    }
    for (what, v) in [("bots.duration", Some(&b.duration)), ("bots.ramp", b.ramp.as_ref())] {
        if let Some(v) = v {
            horde_model::units::parse_duration_ns(v).map_err(|m| format!("{what}: {m}"))?;
        }
    }
    let mut a: Vec<std::ffi::OsString> = vec!["bots".into(), "-n".into(), b.players.to_string().into(), "-t".into(), b.duration.clone().into()];
    if let Some(r) = &b.ramp {
        a.extend(["--ramp".into(), r.clone().into()]);
    }
    match &b.server {
        Some(s) => {
            horde_model::flow::parse_addr(s).map_err(|m| format!("bots.server: {m}"))?;
            a.extend(["--server".into(), s.clone().into()]);
        }
        None => a.push("--start-server".into()),
    }
    a.extend(["--out".into(), out.as_os_str().to_owned(), "--progress".into(), "json".into(), "--commands".into(), "-".into()]);
    Ok(a)
}

/// A fresh report directory under `runs_dir` named after `name`.
fn out_dir(runs_dir: &Path, name: &str) -> PathBuf {
    let name: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
    let name = if name.is_empty() { "run".to_string() } else { name };
    let mut out = runs_dir.join(format!("{name}-{}", horde_sys::clock::unix_secs()));
    for k in 2.. {
        if !out.exists() {
            break;
        }
        out = runs_dir.join(format!("{name}-{}-{k}", horde_sys::clock::unix_secs()));
    }
    out
}

/// Lines longer than this from a child are cut (a progress line is well under).
const MAX_LINE: usize = 256 * 1024;

/// Checks `req` as `horde run` would (the same messages), then starts the run.
pub async fn start(hub: &Arc<Hub>, runs_dir: &Path, mut req: StartRun) -> Result<RunInfo, (u16, String)> {
    let bad = |m: String| (400, m);
    let exe = std::env::current_exe().map_err(|e| (500, format!("locating the horde binary: {e}")))?;
    let mut cmd = tokio::process::Command::new(exe);
    let (name, out) = match (req.scenario.take(), req.form.take(), req.bots.take()) {
        (None, None, Some(b)) => {
            if req.players.is_some() || req.online.is_some() || req.duration.is_some() || req.seed.is_some() {
                return Err(bad("a bots start takes its values in bots {players, duration, ramp, server}".into()));
            }
            let out = out_dir(runs_dir, "bots");
            cmd.args(bots_args(&b, &out).map_err(bad)?);
            ("bots".to_string(), out)
        }
        (Some(f), None, None) => scenario_cmd(&mut cmd, runs_dir, f, &req)?,
        (None, Some(form), None) => {
            let f = write_form(runs_dir, &form).map_err(bad)?;
            scenario_cmd(&mut cmd, runs_dir, f, &req)?
        }
        _ => return Err(bad("give one of scenario (a file), form (a scenario's fields) or bots".into())),
    };
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| (500, format!("starting horde run: {e}")))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
    let sink = Box::new(move |cid: u64, c: horde_scenario::control::Command| {
        // the command's line with the id its answer names
        let mut v = serde_json::to_value(&c).map_err(|e| e.to_string())?;
        v["id"] = cid.into();
        let line = v.to_string() + "\n";
        tx.try_send(line).map_err(|_| "the run is not reading its commands (too many queued, or it has ended)".to_string())
    });
    let id = hub.add(&name, &out.display().to_string(), false, Some(sink)).map_err(|r| (409, r.to_string()))?;
    if let Some(mut stdin) = stdin {
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
    }
    let scenario = name.clone();
    let readers = [stderr.map(|e| Box::new(e) as Box<dyn tokio::io::AsyncRead + Unpin + Send>), stdout.map(|o| Box::new(o) as _)];
    let mut tasks = Vec::new();
    for r in readers.into_iter().flatten() {
        let (hub, scenario) = (hub.clone(), scenario.clone());
        tasks.push(tokio::spawn(async move { forward(&hub, id, &scenario, r).await }));
    }
    let hub2 = hub.clone();
    tokio::spawn(async move {
        for t in tasks {
            let _ = t.await;
        }
        let code = child.wait().await.ok().and_then(|s| s.code()).map_or(1, |c| c.clamp(0, 255) as u8);
        hub2.finish(id, code);
    });
    hub.info(id).map_err(|r| (500, r.to_string()))
}

/// `horde run FILE` with the start's overrides, checked first as `horde run` checks them; the
/// run's name and report directory.
fn scenario_cmd(cmd: &mut tokio::process::Command, runs_dir: &Path, file: PathBuf, req: &StartRun) -> Result<(String, PathBuf), (u16, String)> {
    let bad = |m: String| (400, m);
    let mut sc = Scenario::load(&file).map_err(|e| bad(format!("{}: {e}", file.display())))?;
    let o = horde_scenario::Overrides { players: req.players, online: req.online, duration: req.duration.as_deref(), seed: req.seed };
    horde_scenario::apply_overrides(&mut sc, &o).map_err(|e| bad(format!("{:#}", e.into_anyhow())))?;
    // SAFETY: geteuid cannot fail.
    if sc.emu.is_some() && unsafe { libc::geteuid() } != 0 {
        return Err(bad(format!(
            "{} places its players on an emulated network ([emu]), which needs root: start the console as root (sudo horde ui)",
            file.display()
        )));
    }
    // the report directory is named after the scenario (a file's stem when it has no name)
    let out = out_dir(runs_dir, &sc.name);
    cmd.arg("run").arg(&file).arg("--out").arg(&out).args(["--progress", "json", "--commands", "-"]);
    for (flag, v) in [
        ("--players", req.players.map(|n| n.to_string())),
        ("--online", req.online.map(|n| n.to_string())),
        ("--duration", req.duration.clone()),
        ("--seed", req.seed.map(|n| n.to_string())),
    ] {
        if let Some(v) = v {
            cmd.arg(flag).arg(v);
        }
    }
    Ok((sc.name, out))
}

/// A form's scenario as a TOML file under RUNS/scenarios/ (its name from its `name`, made safe).
fn write_form(runs_dir: &Path, form: &serde_json::Value) -> Result<PathBuf, String> {
    if !form.is_object() {
        return Err("form: a scenario's fields as a JSON object".into());
    }
    let text = toml::to_string(form).map_err(|e| format!("form: {e}"))?;
    let stem: String =
        form.get("name").and_then(|n| n.as_str()).unwrap_or("form").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
    let stem = if stem.is_empty() { "form".to_string() } else { stem };
    let dir = runs_dir.join("scenarios");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut path = dir.join(format!("{stem}-{}.toml", horde_sys::clock::unix_secs()));
    for k in 2.. {
        if !path.exists() {
            break;
        }
        path = dir.join(format!("{stem}-{}-{k}.toml", horde_sys::clock::unix_secs()));
    }
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// A child's lines into the hub: event lines as they are, any other line as a note.
async fn forward(hub: &Hub, id: u32, scenario: &str, r: impl tokio::io::AsyncRead + Unpin) {
    let mut lines = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut lines).take(MAX_LINE as u64).read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end();
        if text.is_empty() {
            continue;
        }
        let line = serde_json::from_str::<EventLine>(text).unwrap_or_else(|_| EventLine::Note { scenario: scenario.into(), text: text.into() });
        hub.push(id, &line);
    }
}

use tokio::io::AsyncReadExt as _;

/// File `rel` of report directory `out`: only plain files inside it, never through a link.
pub fn report_file(out: &Path, rel: &str) -> Result<(&'static str, Vec<u8>), String> {
    let clean = rel.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'));
    if !clean {
        return Err(format!("{rel}: not a file of the report"));
    }
    let p = out.join(rel);
    let meta = std::fs::symlink_metadata(&p).map_err(|_| format!("{rel}: not in the report (yet)"))?;
    if !meta.is_file() || meta.len() > 512 * 1024 * 1024 {
        return Err(format!("{rel}: not a plain file of the report"));
    }
    let mime = match p.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("csv") | Some("toml") | Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    };
    std::fs::read(&p).map(|b| (mime, b)).map_err(|e| format!("{rel}: {e}"))
}

/// One past run: its report directory and what its report's verdict boxes say.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PastRun {
    pub dir: String,
    /// "scenario" or "circuits" (a regulated run).
    pub kind: String,
    pub interrupted: bool,
    pub verdicts: Vec<horde_scenario::report::VerdictBox>,
}

/// Report directories under `dir` (at most 500, newest first) with a summary.json.
pub fn past(dir: &Path) -> Vec<PastRun> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .take(5_000)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    dirs.into_iter().take(500).filter_map(|(_, d)| past_run(&d)).collect()
}

fn past_run(d: &Path) -> Option<PastRun> {
    let f = d.join("summary.json");
    if std::fs::symlink_metadata(&f).ok()?.len() > 256 * 1024 * 1024 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).ok()?).ok()?;
    let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("scenario").to_string();
    let interrupted = v.get("interruption").is_some_and(|i| !i.is_null());
    // Reports from before verdicts were kept in summary.json have none to show.
    let verdicts = v.get("verdicts").cloned().and_then(|x| serde_json::from_value::<Vec<horde_scenario::report::VerdictBox>>(x).ok()).unwrap_or_default();
    Some(PastRun { dir: d.display().to_string(), kind, interrupted, verdicts })
}
