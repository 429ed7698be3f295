//! The integration tests of `scenario`: one test binary (matklad's "Delete Cargo Integration
//! Tests"), one module per subject; shared helpers once. CONTRIBUTING.md says how to run one
//! test, the fast subset and the root subset.

mod contract;
mod digest;
mod report_sums;
mod run;
mod thin_streams;
