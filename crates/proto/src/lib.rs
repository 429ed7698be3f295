//! Horde's connection protocols as I/O-free state machines (see the README).
//!
//! Architecture invariant: nothing here touches a socket, reads a clock or draws randomness;
//! time is a number of nanoseconds passed in, secrets are bytes passed in.
//!
//! Threat model in brief (the whole of it is in `docs/security.md`): a receiver or server side
//! sends an address that has not proven it can receive there at most a challenge smaller than
//! what it received (no amplification); it sends traffic only to admitted flows, and only while
//! they keep answering consent probes ([`consent`]); with a run key, hellos not made with the key
//! are dropped without an answer.

pub mod admission;
pub mod auth;
pub mod conn;
pub mod consent;
pub mod echo;
pub mod endpoint;
pub mod gate;
pub mod greeter;
pub mod mirror;
pub mod quiet;

pub use auth::{CookieJar, KeyError, LogSide, RunKey};
pub use conn::{Accepted, Close, Conn, ConnStats, Ctx, Event, Responder, Role, RxMeta};
pub use consent::Consent;
pub use echo::EchoConsent;
pub use endpoint::{Endpoint, Joiner, Peer};
pub use gate::{ConsentWork, Decision, DropReason, Gate, GateConfig, GateStats, Greeting};
pub use greeter::{GreetEvent, GreetState, Greeter};
pub use mirror::{Mirror, Source};
