//! The integration tests of `agent`: one test binary (matklad's "Delete Cargo Integration
//! Tests"), one module per subject; shared helpers once. CONTRIBUTING.md says how to run one
//! test, the fast subset and the root subset.

mod common;

mod control;
mod emu_requests;
mod hostile_agent;
mod places;
mod root;
