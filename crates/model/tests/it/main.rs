//! The integration tests of `model`: one test binary (matklad's "Delete Cargo Integration
//! Tests"), one module per subject; shared helpers once. CONTRIBUTING.md says how to run one
//! test, the fast subset and the root subset.

mod behaviour;
mod fidelity;
mod garbage;
mod samplers;
mod schedule;
mod services;
mod sessions;
