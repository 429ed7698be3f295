//! Horde's I/O-free core: distributions, flow specifications, presets and departure schedules.
//!
//! Architecture invariant: nothing in this crate touches a socket or reads the clock. Time is
//! a number of nanoseconds passed in or produced; randomness comes from seeded generators, so the
//! same seed always yields the same schedule.

pub mod behaviour;
pub mod dist;
pub mod ditg;
pub mod files;
pub mod fit;
pub mod flow;
pub mod gso;
pub mod preset;
pub mod rerun;
pub mod roster;
pub mod scenario;
pub mod schedule;
pub mod service;
pub mod sessions;
pub mod transport;
pub mod units;

pub use dist::{Dist, Kind, Round, Sampler};
pub use flow::{Flow, FlowError, FlowFile, Meter, RawFlow, Stop, Transport};
pub use schedule::{Departure, Schedule};

/// Derives an independent 64-bit seed for a sub-stream (SplitMix64 finaliser), so that the
/// inter-departure, size and on/off streams of one flow do not share random numbers: changing
/// the size model does not change departure times.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
