//! The integration tests of `cli`: one test binary (matklad's "Delete Cargo Integration
//! Tests"), one module per subject; shared helpers once. CONTRIBUTING.md says how to run one
//! test, the fast subset and the root subset.

mod common;
mod dist_util;
mod emu_util;

mod architecture;
mod bad_input;
mod circuit;
mod columnar;
mod control;
mod discover;
mod distributed;
mod ditg_script;
mod end_to_end;
mod first_hour;
mod flow_summaries;
mod gameserver;
mod icmp;
mod logd;
mod manifests;
mod reach;
mod regression;
mod root;
mod run;
mod ui;
