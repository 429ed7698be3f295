use horde_model::service::{Service, BUILTINS};

use crate::{bad_input, Outcome};

/// Lists the built-in services, or prints one (`show NAME|FILE`) as the TOML it is loaded from.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: Option<What>,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Prints a service's file (built-in name or path), after checking that it loads
    Show {
        /// Built-in name (e.g. wow) or path to a service .toml file
        name: String,
    },
    /// Checks a service file and says what is wrong, naming the field
    Check {
        /// Path to a service .toml file
        file: String,
    },
}

pub fn run(args: Args) -> Outcome {
    match args.what {
        None => {
            outln!("Built-in services (`horde services show NAME` prints one; schema in docs/services.md):")?;
            for (name, _) in BUILTINS {
                let s = Service::builtin(name).expect("built-in service loads");
                outln!(
                    "  {:<18} {:<4} states: {:<55} {}",
                    name,
                    s.transport.name(),
                    s.states.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", "),
                    s.description
                )?;
            }
            Ok(0)
        }
        Some(What::Show { name }) => {
            let s = Service::load(&name).map_err(bad_input)?;
            crate::output::out(&s.text)?;
            Ok(0)
        }
        Some(What::Check { file }) => {
            let s = Service::load(&file).map_err(bad_input)?;
            // The automated-player model is checked as `horde bots` would use it.
            horde_q3::input::BotModel::from_table(&s.bot).map_err(|e| bad_input(anyhow::anyhow!("{file}: {e}")))?;
            outln!("{file}: ok — service `{}`, {} state(s), {}", s.name, s.states.len(), s.transport.name())?;
            Ok(0)
        }
    }
}
