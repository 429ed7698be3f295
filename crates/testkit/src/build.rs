//! For the build scripts of crates whose tests need root.
//!
//! libtest decides what is ignored when the test binary is compiled, so whether the suite runs
//! as root is read when it is built: `cfg(horde_root)` is set when the build runs as root, or
//! under `CI=true` (CI runs as root; there a root test must run and fail rather than be
//! ignored). Cargo runs the script again when the user changes (`sudo` sets `SUDO_UID`, `su`
//! sets `USER`) or `CI` does.

/// Emits `cargo::rustc-cfg=horde_root` when built as root or under `CI=true`.
pub fn root_cfg() {
    println!("cargo::rustc-check-cfg=cfg(horde_root)");
    for var in ["USER", "SUDO_UID", "CI"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if crate::is_root() || crate::ci() {
        println!("cargo::rustc-cfg=horde_root");
    }
}
