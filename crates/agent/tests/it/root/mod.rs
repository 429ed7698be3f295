//! Tests that need root (network namespaces): ignored, with the reason, when the suite is not
//! built as root (build.rs). Run only these: `sudo -E cargo test -p horde-agent --test it root::`.

mod emu_requests;
