//! The integration tests of `proto`: one test binary (matklad's "Delete Cargo Integration
//! Tests"), one module per subject; shared helpers once. CONTRIBUTING.md says how to run one
//! test, the fast subset and the root subset.

mod conn;
mod garbage;
