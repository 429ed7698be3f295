//! Distributed operation: `horde agent` on each load machine, and the controller
//! (`horde run SCENARIO --agents …`) that shards a scenario's players over them, measures their
//! clocks, starts them together, watches them, collects their logs and writes one report; and
//! the same for a flow file's flows (`horde send --flows F --agents …`).
//!
//! - [`msg`]: the control messages and their framing (an I/O-free codec);
//! - [`session`]: the agent's side of a session as an I/O-free state machine (hello and
//!   version check, one assignment, start, dead-man's switch, collection);
//! - [`clock`]: NTP-style clock offset estimation;
//! - [`tls`]: credentials (`horde agent keygen`) and TLS 1.3 configurations with mutual
//!   authentication;
//! - [`agent`]: the agent daemon (the TLS shell around [`session`]);
//! - [`controller`]: the controller (its link to each agent in `link.rs`), and [`merge`]: the
//!   agents' logs into one report;
//! - `fleet` (crate-private): what every controller shares — connect, assign in stages, one
//!   common start, watch with ordered stops, bounded collection; the run kinds on it:
//!   [`controller`] (a scenario's players), [`circuits`] (a scenario's regulated circuits),
//!   [`flows`] (a flow file's `send`/`recv` flows, D-ITG's manager use) and [`bots`] (game-server
//!   bots);
//! - [`metrics`]: the agent's optional Prometheus endpoint.
//!
//! See docs/distributed.md for the protocol, the security model and the failure behaviour.

pub mod agent;
pub mod bots;
pub mod circuits;
pub mod clock;
pub mod controller;
pub mod emu;
mod emu_place;
pub(crate) mod fleet;
pub mod flows;
mod flowsum;
mod link;
mod live;
pub mod logd;
pub mod logstream;
pub mod merge;
pub mod metrics;
pub mod msg;
mod schedule_check;
pub mod session;
pub mod tls;
