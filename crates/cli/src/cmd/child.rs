//! `horde child KIND ID`: a task this binary hands itself (`horde_sys::own`): a part of a run,
//! an experiment's link emulator, or a whole run the console starts. The task is the first line
//! of standard input (typed, versioned JSON); the arguments are only a label, checked against
//! it. Not for users.

use std::io::BufReader;
use std::sync::atomic::AtomicBool;

use anyhow::anyhow;
use horde_scenario::part::RunRequest;
use horde_sys::own::{self, Kind};

use crate::{bad_input, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What the child is for: part, link-emulator
    pub kind: String,
    /// The run's or the experiment's id (its task says the same)
    pub id: String,
}

pub fn run(args: Args, stop: &AtomicBool) -> Outcome {
    let kind = Kind::parse(&args.kind).ok_or_else(|| bad_input(anyhow!("`horde child` runs tasks horde hands itself; `{}` is none of them", args.kind)))?;
    // The task line through standard input's own buffer: what follows it (commands) stays
    // there for whoever reads standard input next.
    if kind == Kind::ExecInit {
        // its task on its own descriptor: standard input is the command's
        use std::os::fd::FromRawFd as _;
        // SAFETY: the parent (horde_emu::exec) put the task pipe there, for this process alone.
        let mut task = BufReader::new(unsafe { std::fs::File::from_raw_fd(own::TASK_FD) });
        let t: horde_emu::exec::ExecTask = own::read_task(&mut task, kind, &args.id).map_err(bad_input)?;
        drop(task);
        let code = horde_emu::exec::run_task(&t).map_err(|e| anyhow!("{e}"))?;
        return Ok(code.clamp(0, 255) as u8);
    }
    let mut stdin = std::io::stdin().lock();
    match kind {
        Kind::Part => {
            let part: horde_scenario::part::Part = own::read_task(&mut stdin, kind, &args.id).map_err(bad_input)?;
            drop(stdin);
            horde_scenario::run_part::child(&part, BufReader::new(std::io::stdin()), std::io::stdout(), stop)?;
        }
        Kind::LinkEmulator => {
            let task: horde_emu::fwd::DaemonTask = own::read_task(&mut stdin, kind, &args.id).map_err(bad_input)?;
            if task.exp != args.id {
                return Err(bad_input(anyhow!("a link emulator task for {} given to {}", task.exp, args.id)));
            }
            drop(stdin);
            horde_emu::fwd::run_daemon(&task.exp).map_err(|e| anyhow!(e))?;
        }
        Kind::Run => {
            let req: RunRequest = own::read_task(&mut stdin, kind, &args.id).map_err(bad_input)?;
            drop(stdin);
            return run_request(req, stop);
        }
        Kind::ExecInit => unreachable!("read above"),
    }
    Ok(0)
}

/// A run the console asked for, as `horde run FILE` or `horde bots` would run it: its events as
/// `--progress json` lines, its commands from standard input.
fn run_request(req: RunRequest, stop: &AtomicBool) -> Outcome {
    use crate::cmd::run::{ProgressArgs, ProgressMode};
    let commands = crate::cmd::commands::CommandArgs { commands: Some("-".into()) };
    match req {
        RunRequest::Scenario { file, out, overrides } => {
            let mut sc = horde_model::scenario::Scenario::load(&file).map_err(bad_input)?;
            horde_scenario::apply_overrides(&mut sc, &overrides)?;
            let args = crate::cmd::run::Args {
                scenario: file,
                out: Some(out),
                players: None,
                online: None,
                duration: None,
                seed: None,
                gso: None,
                progress: ProgressArgs { quiet: false, progress: ProgressMode::Json, progress_file: None },
                commands,
                agents: None,
                server_agent: None,
                credentials: None,
                deadman: None,
                collect: crate::cmd::CollectArg::Logs,
                ui: None,
            };
            crate::cmd::run::run_loaded(&args, sc, stop)
        }
        RunRequest::Bots { players, duration_ns, ramp_ns, server, out } => {
            // the flags' own defaults for everything the request does not say
            #[derive(clap::Parser)]
            struct Defaults {
                #[command(flatten)]
                bots: crate::cmd::bots::Args,
            }
            let mut a = <Defaults as clap::Parser>::try_parse_from(["bots", "--start-server"]).map_err(|e| anyhow!("{e}"))?.bots;
            a.players = players as usize;
            a.duration = std::time::Duration::from_nanos(duration_ns);
            if let Some(r) = ramp_ns {
                a.ramp = std::time::Duration::from_nanos(r);
            }
            a.start_server = server.is_none();
            a.server = server.map(|s| s.to_string());
            a.out = Some(out);
            a.progress = Some("json".into());
            a.commands = commands;
            crate::cmd::bots::run(a, stop)
        }
    }
}
