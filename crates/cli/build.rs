//! Sets `cfg(horde_root)` for the tests when the suite is built as root or under CI=true
//! (horde-testkit's `build::root_cfg`): root tests are then run, not ignored.

fn main() {
    horde_testkit::build::root_cfg();
}
