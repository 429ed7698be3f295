//! The integration tests of `engine`: one test binary (matklad's "Delete Cargo Integration
//! Tests"), one module per subject; shared helpers once. CONTRIBUTING.md says how to run one
//! test, the fast subset and the root subset.

mod consent;
mod early;
mod gso;
mod idle;
mod pending_error;
mod udp_hello_retry;
