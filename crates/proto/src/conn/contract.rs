//! What a connection needs from its surroundings and tells them: the server side's grant
//! ([`Accepted`], from a [`Responder`]), the context it reads in ([`Ctx`]), why a stream ends
//! ([`Close`]) and what happened while reading ([`Event`]).

use horde_wire::control::Status;
use horde_wire::{Record, WireError};

use crate::mirror::Source;

/// The server side's grant for a client's hello.
pub struct Accepted {
    /// Departures to send back, times in ns after the client's start (the hello's base).
    pub source: Source,
    /// The client's own schedule, regenerated: incoming APDU k is its departure k.
    pub mirror: Option<Source>,
    pub tag: u32,
    /// A player steered by a roster (see [`horde_model::roster`]).
    pub presence: Option<horde_model::roster::Presence>,
}

/// Decides about a client's hello on the server side of a two-way scenario.
pub trait Responder: Send + Sync {
    /// Flow `flow` says it plays `tag` (player << 8). Each player is granted once per run.
    fn on_hello(&self, flow: u32, tag: u32) -> Result<Accepted, Status>;
}

/// What a connection needs from its surroundings while it reads.
pub trait Ctx {
    /// Real time (ns since the epoch) of the worker's start: departure times count from here.
    fn t0_real(&self) -> u64;
    fn record(&mut self, r: Record);
    /// Server role: asks the scenario about a client's hello.
    fn respond(&mut self, flow: u32, tag: u32) -> Result<Accepted, Status>;
}

/// Why a stream connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// Its bytes are not a Horde stream of this version.
    NotHorde(WireError),
    /// Its hello was not signed with the run key.
    BadMac,
    /// The server side refused the player.
    Refused(Status),
}

/// What happened while reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Server role: the hello was granted; departures now exist.
    Granted,
    /// Sink role: the peer asked for echoes.
    EchoRequested,
    /// Sink role: the peer asked for bulk back (reverse mode).
    ReverseRequested,
    /// Sink role: the sender ended its flow with a valid end message (logged as an end record).
    Ended,
}
