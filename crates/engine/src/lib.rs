//! Horde's packet engine: real sockets, precise pacing, per-packet logs.
//!
//! Architecture invariant: the engine takes validated flows (`horde_model::Flow`) and follows
//! their pure schedules; it never decides what to send. Data paths run on their own threads
//! (no async runtime: its timers are 1 ms coarse), and the logging thread is the only one that
//! touches the disk.

mod accept;
pub mod bots;
pub mod discover;
mod early;
pub mod icmp;
pub mod live;
pub mod logger;
pub mod net;
mod reading;
pub mod receiver;
pub mod sender;
mod setup;
pub mod shell;
mod slot;
mod worker;

pub use horde_sys::{clock, random_secret};
pub use receiver::{RecvOptions, RecvReport};
pub use sender::{SendOptions, SendReport};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Config(String),
    // (`err` is part of the message, not a chained source: anyhow would print it twice.)
    #[error("{flow}: {what}: {err}")]
    Flow { flow: String, what: String, err: std::io::Error },
    #[error("{what}: {err}")]
    Io { what: String, err: std::io::Error },
    #[error("interrupted")]
    Interrupted,
}
