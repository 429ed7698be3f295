//! The Quake 3 protocol (ioquake3, OpenArena) from a client's side, with no I/O: bytes and
//! times in, bytes and events out. Layers, bottom up:
//! - [`huffman`]: the engine's adaptive Huffman coder and the fixed message code built from
//!   [`hdata`];
//! - [`msg`]: the bit stream of netchan messages (raw low bits, Huffman-coded bytes);
//! - [`netchan`]: sequenced datagrams, fragments, the protocol-71 checksum or the legacy
//!   scrambling;
//! - [`oob`]: connectionless commands (`getchallenge`, compressed `connect`, replies);
//! - [`server`]: server messages (gamestate, reliable commands, snapshots);
//! - [`usercmd`] and [`input`]: a player's per-frame input and a seeded behaviour model;
//! - [`client`]: one automated player's state machine;
//! - [`frames`]: the server's frames from outside (snapshot bursts, its CPU, requests);
//! - [`watch`]: a client's usercmds read off the wire by a passive observer (a capture).
//!
//! Another engine's protocol would be a sibling crate; nothing here knows about sockets.

pub mod client;
pub mod frames;
pub mod hdata;
pub mod huffman;
pub mod input;
pub mod msg;
pub mod netchan;
pub mod oob;
pub mod server;
pub mod usercmd;
pub mod watch;

pub use client::{Bot, Config, End, LogEvent, Phase, Protocol, Stats};
