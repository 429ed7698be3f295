//! Traffic regulation for virtual worlds as I/O-free state machines: the client throttle
//! controllers ([`throttle`]), the split of a circuit's rate over its seven channels
//! ([`channels`]), the server's regulators ([`bucket`]) and the TCP-fair rate ([`tcp`]).
//!
//! Architecture invariant: no clock, no socket, no randomness; time (nanoseconds) is passed
//! in, so tests drive every controller in virtual time and the same inputs give the same rates.

pub mod bucket;
pub mod channels;
pub mod circuit;
pub(crate) mod rng;
pub mod sim;
pub mod tcp;
pub mod throttle;

pub use channels::Channel;
pub use throttle::{Limits, Throttle, ThrottleKind, Tuning};
