//! Writing to the terminal. Standard output carries results and may be a pipe that closes early
//! (`horde presets | head -1`): that ends the command quietly with exit code 0, never a panic.
//! Standard error carries progress and notes; a closed standard error is ignored.

use std::io::Write;

use crate::Failure;

/// Writes `text` to standard output. A closed pipe becomes a quiet [`Failure`] with code 0, so
/// the command stops where it is and `main` exits 0 after every guard (logs, experiments) ran.
pub fn out(text: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::closed_pipe()),
        Err(e) => Err(Failure::from(anyhow::Error::new(e).context("writing to standard output"))),
    }
}

/// `println!` for results: formats, then [`out`]s the line.
#[macro_export]
macro_rules! outln {
    () => { $crate::output::out("\n") };
    ($($arg:tt)*) => { $crate::output::out(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics (a closed standard error is ignored).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! say_inline {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut e = std::io::stderr();
        let _ = write!(e, $($arg)*);
        let _ = e.flush();
    }};
}

/// Human-readable results: to standard output, unless machine output (`--json -`, `--csv -`,
/// `--out -`) has it, then to standard error, so `| jq` and `| head` see only the machine's.
pub fn human(text: &str, machine_on_stdout: bool) -> Result<(), Failure> {
    if machine_on_stdout {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(text.as_bytes());
        let _ = e.flush();
        Ok(())
    } else {
        out(text)
    }
}

/// Whether a path flag means standard output.
pub fn is_stdout(p: &Option<std::path::PathBuf>) -> bool {
    p.as_deref() == Some(std::path::Path::new("-"))
}

/// At most one machine output may go to standard output.
pub fn one_stdout(flags: &[(&str, &Option<std::path::PathBuf>)]) -> Result<bool, Failure> {
    let on: Vec<&str> = flags.iter().filter(|(_, p)| is_stdout(p)).map(|(n, _)| *n).collect();
    if on.len() > 1 {
        return Err(crate::bad_input(anyhow::anyhow!("{} all write to standard output (`-`); send all but one to files", on.join(", "))));
    }
    Ok(!on.is_empty())
}
