//! Tests that need root: they build emulated networks in network namespaces (and veth pairs,
//! raw ICMP sockets, FRR daemons). Each carries
//! `#[cfg_attr(not(horde_root), ignore = "needs root …")]`: run as another user, the suite
//! reports them as ignored with that reason (build.rs sets `horde_root` when the suite is built
//! as root or under `CI=true`). Run only these: `sudo -E cargo test -p horde --test it root::`.

mod bots_record;
mod emu;
mod emu_across;
mod emu_cleanup;
mod emu_flows;
mod emu_ipv6;
mod emu_services;
mod external;
mod gameserver_emu;
mod icmp;
mod matrix;
mod regression_emu;
mod regulated;
mod routing;
mod ui_browser;
