//! `horde completions SHELL` and `horde man [SUBCOMMAND]`: the shell completions and manual
//! pages, made from the same clap definitions that parse the command line (clap_complete,
//! clap_mangen), so they never disagree with `--help`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap_complete::Shell;

use crate::{bad_input, Outcome};

#[derive(clap::Args, Debug)]
#[command(after_help = "Install (bash): horde completions bash > ~/.local/share/bash-completion/completions/horde\n\
Install (zsh):  horde completions zsh > ~/.zfunc/_horde   (with fpath+=(~/.zfunc) before compinit)\n\
Install (fish): horde completions fish > ~/.config/fish/completions/horde.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// The shells Horde writes completions for.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Read one:      horde man run | man -l -\n\
Install them:  horde man --out ~/.local/share/man/man1   (then `man horde-run`)")]
pub struct ManArgs {
    /// The subcommand whose page to print (`run`, `emu`, `agent keygen`, …); none: horde(1)
    #[arg(value_name = "SUBCOMMAND", num_args = 0..)]
    pub sub: Vec<String>,
    /// Write every page (horde.1, horde-run.1, horde-emu-up.1, …) into this directory instead
    #[arg(long, value_name = "DIR", conflicts_with = "sub")]
    pub out: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs, mut cli: clap::Command) -> Outcome {
    let shell = match a.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut cli, "horde", &mut text);
    crate::output::out(&String::from_utf8_lossy(&text))?;
    Ok(0)
}

pub fn man(a: ManArgs, mut cli: clap::Command) -> Outcome {
    cli.build();
    if let Some(dir) = a.out {
        let mut n = 0;
        write_pages(&cli, "horde", &dir, &mut n)?;
        say!("horde man: wrote {n} pages into {}", dir.display());
        return Ok(0);
    }
    let mut page = cli;
    let mut name = String::from("horde");
    for s in &a.sub {
        let found = page.find_subcommand(s).filter(|c| !c.is_hide_set()).cloned();
        let Some(next) = found else {
            let known: Vec<&str> = page.get_subcommands().filter(|c| !c.is_hide_set()).map(|c| c.get_name()).filter(|n| *n != "help").collect();
            let of = if name == "horde" { String::new() } else { format!(" of `{}`", name.replace('-', " ")) };
            let list = if known.is_empty() { "it has none".to_string() } else { known.join(", ") };
            return Err(bad_input(anyhow::anyhow!("no subcommand `{s}`{of}: pick one of {list}")));
        };
        name = format!("{name}-{s}");
        page = next;
    }
    crate::output::out(&render(page, &name)?)?;
    Ok(0)
}

/// One page: `name` is its file's stem (`horde-emu-up`), shown as the page's title.
fn render(cmd: clap::Command, name: &str) -> Result<String, crate::Failure> {
    let cmd = cmd.name(name.to_string());
    let mut text = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut text).context("rendering the manual page")?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

fn write_pages(cmd: &clap::Command, name: &str, dir: &Path, n: &mut usize) -> Result<(), crate::Failure> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, render(cmd.clone(), name)?).with_context(|| format!("writing {}", path.display()))?;
    *n += 1;
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, n)?;
    }
    Ok(())
}
