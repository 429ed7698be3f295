//! Runs the console starts: each a child running a typed `RunRequest` (`horde child run NAME`,
//! started through `horde_sys::own`) — the same driver, events and commands as `horde run` and
//! `horde bots` on the command line — whose event lines go into the hub and whose commands
//! (each with the id its answer names) go to its standard input. Also the report files of a run
//! and the list of past runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use horde_model::scenario::Scenario;
use horde_scenario::part::RunRequest;
use horde_scenario::EventLine;
use horde_sys::own;
use serde::{Deserialize, Serialize};

use crate::hub::{CommandSink, Hub, RunInfo};

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
    /// ... or a scenario file's text, pasted (TOML); checked as `horde run` checks a file, then
    /// written to RUNS/scenarios/NAME-TIME.toml and run from there (a service or topology file
    /// it names is relative to that directory: give absolute paths, or a built-in service).
    pub toml: Option<String>,
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

/// A bots start, checked as `horde bots` checks its flags.
fn bots_request(b: &StartBots, out: PathBuf) -> Result<RunRequest, String> {
    if !(1..=1024).contains(&b.players) {
        return Err(format!("bots.players must be 1..=1024 (got {})", b.players));
    }
    let ns = |what: &str, v: &str| horde_model::units::parse_duration_ns(v).map_err(|m| format!("{what}: {m}"));
    let duration_ns = ns("bots.duration", &b.duration)?;
    let ramp_ns = b.ramp.as_deref().map(|r| ns("bots.ramp", r)).transpose()?;
    let server = b.server.as_deref().map(|s| horde_model::flow::parse_addr(s).map_err(|m| format!("bots.server: {m}"))).transpose()?;
    Ok(RunRequest::Bots { players: b.players, duration_ns, ramp_ns, server, out })
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
    let pasted = req.toml.take();
    let (name, run) = match (req.scenario.take(), req.form.take(), req.bots.take()) {
        (None, None, None) if pasted.is_some() => {
            let f = write_toml(runs_dir, pasted.as_deref().unwrap_or_default()).map_err(bad)?;
            scenario_request(runs_dir, f, &req)?
        }
        _ if pasted.is_some() => return Err(bad("give one of scenario (a file), form (a scenario's fields), toml (a scenario's text) or bots".into())),
        (None, None, Some(b)) => {
            if req.players.is_some() || req.online.is_some() || req.duration.is_some() || req.seed.is_some() {
                return Err(bad("a bots start takes its values in bots {players, duration, ramp, server}".into()));
            }
            ("bots".to_string(), bots_request(&b, out_dir(runs_dir, "bots")).map_err(bad)?)
        }
        (Some(f), None, None) => scenario_request(runs_dir, f, &req)?,
        (None, Some(form), None) => {
            let f = write_form(runs_dir, &form).map_err(bad)?;
            scenario_request(runs_dir, f, &req)?
        }
        _ => return Err(bad("give one of scenario (a file), form (a scenario's fields), toml (a scenario's text) or bots".into())),
    };
    let out = match &run {
        RunRequest::Scenario { out, .. } | RunRequest::Bots { out, .. } => out.clone(),
    };
    let tie = own::Tie {
        // a run outlives no console: it stops (and writes its partial report) when the console goes
        death_signal: Some(libc::SIGTERM),
        own_session: false,
        netns: None,
        keep_stdin: true,
        stdout: Stdio::piped(),
        stderr: Stdio::piped(),
    };
    let label: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
    let mut child = own::spawn(own::Kind::Run, &label, &run, tie).map_err(|e| (500, format!("starting the run: {e}")))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let sink = stdin.map(command_writer);
    let id = hub.add(&name, &out.display().to_string(), false, sink).map_err(|r| (409, r.to_string()))?;
    let mut readers = Vec::new();
    for r in [stderr.map(|e| Box::new(e) as Box<dyn std::io::Read + Send>), stdout.map(|o| Box::new(o) as _)].into_iter().flatten() {
        let (hub, name) = (hub.clone(), name.clone());
        readers.push(std::thread::spawn(move || forward(&hub, id, &name, r)));
    }
    let hub2 = hub.clone();
    std::thread::spawn(move || {
        for r in readers {
            let _ = r.join();
        }
        let code = child.wait().ok().and_then(|s| s.code()).map_or(1, |c| c.clamp(0, 255) as u8);
        hub2.finish(id, code);
    });
    hub.info(id).map_err(|r| (500, r.to_string()))
}

/// Where a child run's commands go: a bounded queue a thread writes to its standard input, each
/// line the command with the id its answer names (a run that stops reading fills the queue, and
/// the next command is refused rather than blocking the console).
fn command_writer(mut stdin: std::process::ChildStdin) -> CommandSink {
    use std::io::Write as _;
    let (tx, rx) = std::sync::mpsc::sync_channel::<String>(64);
    std::thread::spawn(move || {
        while let Ok(line) = rx.recv() {
            if stdin.write_all(line.as_bytes()).and_then(|_| stdin.flush()).is_err() {
                break;
            }
        }
    });
    let tx = std::sync::Mutex::new(tx);
    Box::new(move |cid: u64, c: horde_scenario::control::Command| {
        let mut v = serde_json::to_value(&c).map_err(|e| e.to_string())?;
        v["id"] = cid.into();
        let line = v.to_string() + "\n";
        let sent = tx.lock().unwrap_or_else(|p| p.into_inner()).try_send(line);
        sent.map_err(|_| "the run is not reading its commands (too many queued, or it has ended)".to_string())
    })
}

/// A scenario file's run with the start's overrides, checked first as `horde run` checks them;
/// the run's name and request.
fn scenario_request(runs_dir: &Path, file: PathBuf, req: &StartRun) -> Result<(String, RunRequest), (u16, String)> {
    let bad = |m: String| (400, m);
    // the error names its file itself, as `horde run` prints it
    let mut sc = Scenario::load(&file).map_err(|e| bad(e.to_string()))?;
    let duration_ns = req.duration.as_deref().map(horde_scenario::duration_flag).transpose().map_err(|e| bad(format!("{:#}", e.into_anyhow())))?;
    let overrides = horde_scenario::Overrides { players: req.players, online: req.online, duration_ns, seed: req.seed };
    horde_scenario::apply_overrides(&mut sc, &overrides).map_err(|e| bad(format!("{:#}", e.into_anyhow())))?;
    // SAFETY: geteuid cannot fail.
    if sc.emu.is_some() && unsafe { libc::geteuid() } != 0 {
        return Err(bad(format!(
            "{} places its players on an emulated network ([emu]), which needs root: start the console as root (sudo horde ui)",
            file.display()
        )));
    }
    // the report directory is named after the scenario (a file's stem when it has no name)
    let out = out_dir(runs_dir, &sc.name);
    let file = std::path::absolute(&file).map_err(|e| bad(format!("{}: {e}", file.display())))?;
    Ok((sc.name, RunRequest::Scenario { file, out, overrides }))
}

/// A form's scenario as a TOML file under RUNS/scenarios/ (its name from its `name`, made safe).
fn write_form(runs_dir: &Path, form: &serde_json::Value) -> Result<PathBuf, String> {
    if !form.is_object() {
        return Err("form: a scenario's fields as a JSON object".into());
    }
    let text = toml::to_string(form).map_err(|e| format!("form: {e}"))?;
    write_scenario(runs_dir, form.get("name").and_then(|n| n.as_str()).unwrap_or("form"), &text)
}

/// A pasted scenario: checked as `horde run` checks a file (the same messages, naming the
/// field), then written beside the forms.
fn write_toml(runs_dir: &Path, text: &str) -> Result<PathBuf, String> {
    let dir = runs_dir.join("scenarios");
    let sc = horde_model::scenario::Scenario::parse(text, "the pasted scenario", &dir).map_err(|e| e.to_string())?;
    write_scenario(runs_dir, if sc.name == "the pasted scenario" { "pasted" } else { &sc.name }, text)
}

fn write_scenario(runs_dir: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    let stem: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
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

/// A child's lines into the hub: event lines as they are, any other line as a note (each cut
/// at [`MAX_LINE`]).
fn forward(hub: &Hub, id: u32, scenario: &str, r: impl std::io::Read) {
    use std::io::BufRead as _;
    let mut lines = std::io::BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match std::io::Read::take(&mut lines, MAX_LINE as u64).read_until(b'\n', &mut buf) {
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

/// File `rel` of report directory `out`: only plain files inside it, never through a link in
/// any component (`horde_sys::fs::open_beneath`: a directory linked to `/etc` inside a report
/// does not lead out of it).
pub fn report_file(out: &Path, rel: &str) -> Result<(&'static str, Vec<u8>), String> {
    use std::io::Read;
    if rel.contains('\\') {
        return Err(format!("{rel}: not a file of the report"));
    }
    // the report directory itself is opened without following a link too (issue 66: one
    // swapped for a link to /etc served /etc/shadow)
    let (Some(parent), Some(name)) = (out.parent(), out.file_name().and_then(|n| n.to_str())) else {
        return Err(format!("{rel}: not a file of the report"));
    };
    let f = horde_sys::fs::open_beneath(parent, &format!("{name}/{rel}")).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => format!("{rel}: not a file of the report"),
        std::io::ErrorKind::NotFound => format!("{rel}: not in the report (yet)"),
        _ => format!("{rel}: not a plain file of the report"),
    })?;
    let meta = f.metadata().map_err(|e| format!("{rel}: {e}"))?;
    if !meta.is_file() || meta.len() > 512 * 1024 * 1024 {
        return Err(format!("{rel}: not a plain file of the report"));
    }
    let mime = match Path::new(rel).extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("csv") | Some("toml") | Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    };
    let mut b = Vec::with_capacity(meta.len() as usize);
    f.take(meta.len()).read_to_end(&mut b).map_err(|e| format!("{rel}: {e}"))?;
    Ok((mime, b))
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
    dirs.into_iter().take(500).filter_map(|(_, d)| past_run(dir, &d)).collect()
}

/// A report directory `d` of the runs directory `dir`, its summary.json opened beneath `dir`
/// with no link followed on the way (a root console must not read what a link planted in its
/// runs directory points at: issue 66), bounded.
fn past_run(dir: &Path, d: &Path) -> Option<PastRun> {
    const MAX: u64 = 256 * 1024 * 1024;
    let name = d.file_name()?.to_str()?;
    let f = horde_sys::fs::open_beneath(dir, &format!("{name}/summary.json")).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX), &mut bytes).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("scenario").to_string();
    let interrupted = v.get("interruption").is_some_and(|i| !i.is_null());
    // Reports from before verdicts were kept in summary.json have none to show.
    let verdicts = v.get("verdicts").cloned().and_then(|x| serde_json::from_value::<Vec<horde_scenario::report::VerdictBox>>(x).ok()).unwrap_or_default();
    Some(PastRun { dir: d.display().to_string(), kind, interrupted, verdicts })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_report_directory_swapped_for_a_link_is_not_followed() {
        let d = std::env::temp_dir().join(format!("horde-report-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("runs/r1")).unwrap();
        std::fs::create_dir_all(d.join("secret")).unwrap();
        std::fs::write(d.join("runs/r1/index.html"), "<p>report</p>").unwrap();
        std::fs::write(d.join("secret/index.html"), "secret").unwrap();
        assert_eq!(super::report_file(&d.join("runs/r1"), "index.html").unwrap().1, b"<p>report</p>");
        std::fs::remove_dir_all(d.join("runs/r1")).unwrap();
        std::os::unix::fs::symlink(d.join("secret"), d.join("runs/r1")).unwrap();
        assert!(super::report_file(&d.join("runs/r1"), "index.html").is_err(), "the swapped directory is a link: refused");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
