pub mod behave;
pub mod decode;
pub mod demo;
pub mod emu;
pub mod presets;
pub mod recv;
pub mod run;
pub mod send;
pub mod services;

use std::path::Path;

use anyhow::Context;

/// Writes `text` to `path`, or to stdout when `path` is `-`.
pub fn write_out(path: &Path, text: &str) -> Result<(), crate::Failure> {
    if path == Path::new("-") {
        crate::output::out(text)
    } else {
        Ok(std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?)
    }
}

/// Parses a duration flag (`500ms`, `3s`, `2m`).
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    horde_model::units::parse_duration_ns(s).map(std::time::Duration::from_nanos)
}

/// `10s`, `1.5s`, `250ms` for messages.
pub fn decode_fmt_duration(d: std::time::Duration) -> String {
    horde_model::units::fmt_ns(d.as_nanos() as f64)
}
