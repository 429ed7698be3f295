use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use crate::Outcome;

/// Makes a run key: 32 random bytes as 64 hex digits. Give the same key file to both sides
/// (`--key-file` of send and recv, `key_file` in a scenario): hellos not made with it are
/// dropped without an answer.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write the key to FILE (created with mode 600; an existing file is not overwritten) instead of standard output
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> Outcome {
    let key = horde_proto::RunKey::from_bytes(horde_engine::random_secret().context("drawing random bytes")?);
    match &args.out {
        None => outln!("{}", key.to_hex())?,
        Some(p) => {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(p)
                .with_context(|| format!("creating {} (it must not exist yet)", p.display()))?;
            writeln!(f, "{}", key.to_hex()).with_context(|| format!("writing {}", p.display()))?;
            say!("horde key: wrote {}", p.display());
        }
    }
    Ok(0)
}
