//! `horde child KIND ID`: a task this binary hands itself (`horde_sys::own`): a part of a run,
//! or an experiment's link emulator. The task is the first line of standard input (typed,
//! versioned JSON); the arguments are only a label, checked against it. Not for users.

use std::io::BufReader;
use std::sync::atomic::AtomicBool;

use anyhow::anyhow;
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
    let mut input = BufReader::new(std::io::stdin());
    match kind {
        Kind::Part => {
            let part: horde_scenario::part::Part = own::read_task(&mut input, kind, &args.id).map_err(bad_input)?;
            horde_scenario::part::run(&part, input, std::io::stdout(), stop)?;
        }
        Kind::LinkEmulator => {
            let task: horde_emu::fwd::DaemonTask = own::read_task(&mut input, kind, &args.id).map_err(bad_input)?;
            if task.exp != args.id {
                return Err(bad_input(anyhow!("a link emulator task for {} given to {}", task.exp, args.id)));
            }
            drop(input);
            horde_emu::fwd::run_daemon(&task.exp).map_err(|e| anyhow!(e))?;
        }
    }
    Ok(0)
}
