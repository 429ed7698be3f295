//! Horde's packet engine: real sockets, precise pacing, per-packet logs.
//!
//! Architecture invariant: the engine takes validated flows (`horde_model::Flow`) and follows
//! their pure schedules; it never decides what to send. Data paths run on their own threads
//! (no async runtime: its timers are 1 ms coarse), and the logging thread is the only one that
//! touches the disk.

pub mod clock;
pub mod logger;
pub mod net;
pub mod receiver;
pub mod sender;

pub use receiver::{RecvOptions, RecvReport};
pub use sender::{SendOptions, SendReport};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Config(String),
    #[error("{flow}: {what}: {source}")]
    Flow { flow: String, what: String, source: std::io::Error },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("interrupted")]
    Interrupted,
}
