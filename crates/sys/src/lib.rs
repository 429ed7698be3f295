//! Horde's operating-system floor, below the engine and the emulator: the clocks and the precise
//! wait (`clock`), a readiness set with a nanosecond wait (`epoll`), entering a network namespace
//! (`netns`), opening what a user names (`fs`), what the host takes from a run — steal time and the busy-wait floor (`host`) —,
//! Horde's own binary as a child with a typed task (`own`), and secrets from the kernel
//! (`random_secret`).
//!
//! Architecture invariant: together with `horde-engine`, `horde-emu` and `horde-agent`, this is
//! the only crate that reads a clock or touches the operating system's network state; everything
//! above takes time through here (`crates/cli/tests/it/architecture.rs` checks it).

pub mod cgroup;
pub mod clock;
pub mod epoll;
pub mod fs;
pub mod host;
pub mod listen;
pub mod netns;
pub mod own;
pub mod pidns;

/// 32 bytes from the operating system's random source (getrandom), for secrets: run keys and
/// cookie secrets. The only randomness Horde draws that is not seeded.
pub fn random_secret() -> std::io::Result<[u8; 32]> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(b)
}
