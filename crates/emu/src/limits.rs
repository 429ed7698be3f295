//! Kernel and process limits a large experiment meets, raised where Horde may and turned into
//! errors that name them (before anything is built) where it may not.

use crate::EmuError;

/// Descriptors `up` holds per namespace while building (the namespace; its sockets are opened
/// and closed in turn), and what it keeps besides.
const PER_NAMESPACE: u64 = 1;
const BESIDES: u64 = 64;

/// Raises the soft limit on open descriptors to the hard one — and, as root, the hard one to
/// what `namespaces` namespaces need — and fails (naming the limit and the fix) when it cannot.
pub(crate) fn descriptors(namespaces: usize) -> Result<(), EmuError> {
    let need = namespaces as u64 * PER_NAMESPACE + BESIDES;
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Ok(());
    }
    if r.rlim_cur < need.min(r.rlim_max) {
        let raised = libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max };
        // SAFETY: setrlimit reads the struct; raising the soft limit up to the hard one is
        // always allowed.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
        r.rlim_cur = r.rlim_max;
    }
    if r.rlim_cur < need {
        // root may raise the hard limit too (up to fs.nr_open)
        let raised = libc::rlimit { rlim_cur: need, rlim_max: need };
        // SAFETY: setrlimit reads the struct; it fails (EPERM) without CAP_SYS_RESOURCE.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
        return Err(EmuError::Other(format!(
            "{namespaces} namespaces need about {need} open descriptors while `up` builds them, but the hard limit is {} (ulimit -Hn): raise it (e.g. `ulimit -n {need}` as root, or LimitNOFILE= for a service) or split the topology",
            r.rlim_cur
        )));
    }
    Ok(())
}

/// The kernel's ARP table is one for all namespaces (`gc_thresh2`/`gc_thresh3`, default 512 and
/// 1,024 entries together): past it, a host that talks to many others cannot resolve them
/// (measured: from one host of 1,000 on a switch, 512 of 999 answered). Raised (never lowered),
/// through rtnetlink from the machine's namespace, to 2 and 4 entries per namespace, and said
/// so; left raised on `down` (other experiments may need it). Returns the change, if any.
pub(crate) fn neighbours(namespaces: usize) -> Result<Option<String>, EmuError> {
    let read = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/neigh/default/gc_thresh{k}")).ok().and_then(|s| s.trim().parse::<u32>().ok());
    let (Some(t2), Some(t3)) = (read("2"), read("3")) else { return Ok(None) };
    let n = namespaces.min(1 << 24) as u32;
    let (need2, need3) = (t2.max(2 * n), t3.max(4 * n));
    if (need2, need3) == (t2, t3) {
        return Ok(None);
    }
    let mut nl = crate::nl::Nl::open()?;
    nl.arp_thresholds(need2, need3)?;
    nl.flush()?;
    Ok(Some(format!(
        "raised the machine's ARP table limits for {namespaces} namespaces: net.ipv4.neigh.default.gc_thresh2 {t2} → {need2}, gc_thresh3 {t3} → {need3}"
    )))
}

/// Kernel memory one namespace with one link costs (measured: 1,605 MiB for 5,000 hosts on a
/// switch, `MemAvailable` before and after `up`; kernel 6.18, 2 CPUs; per-CPU parts grow with
/// the CPUs, hence the margin).
const PER_NAMESPACE_KIB: u64 = 400;
/// A link's veth pair and ports beyond the first of a namespace.
const PER_LINK_KIB: u64 = 64;
/// One FRR daemon in a router (measured: zebra 8 MiB, ospfd 5 MiB proportional set size).
const PER_DAEMON_KIB: u64 = 10 * 1024;

/// What an experiment needs of the machine's memory, estimated from what it is made of.
pub(crate) fn memory_needed(namespaces: usize, links: usize, daemons: usize) -> u64 {
    namespaces as u64 * PER_NAMESPACE_KIB + links.saturating_sub(namespaces) as u64 * PER_LINK_KIB + daemons as u64 * PER_DAEMON_KIB
}

/// Refuses, before anything is built, an experiment that would take more than nine tenths of
/// the memory the machine has available (`MemAvailable`): namespaces and interfaces are kernel
/// memory, which the kernel cannot swap, so the alternative is the OOM killer choosing among
/// the machine's processes halfway through the build.
pub(crate) fn memory(namespaces: usize, links: usize, daemons: usize) -> Result<(), EmuError> {
    let Some(avail) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find(|l| l.starts_with("MemAvailable:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
    else {
        return Ok(());
    };
    check_memory(memory_needed(namespaces, links, daemons), avail, namespaces, daemons)
}

fn check_memory(need: u64, avail: u64, namespaces: usize, daemons: usize) -> Result<(), EmuError> {
    if need <= avail / 10 * 9 {
        return Ok(());
    }
    let gib = |k: u64| k as f64 / (1024.0 * 1024.0);
    Err(EmuError::Other(format!(
        "this topology needs about {:.1} GiB of memory ({namespaces} namespaces with their interfaces at ~{PER_NAMESPACE_KIB} KiB each{}), but the machine has {:.1} GiB available (MemAvailable in /proc/meminfo): free memory, use fewer nodes, or split the topology",
        gib(need),
        if daemons > 0 { format!(", {daemons} routing daemons at ~{} MiB each", PER_DAEMON_KIB / 1024) } else { String::new() },
        gib(avail)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_estimated_and_refused_with_the_numbers() {
        // 10,000 hosts on a switch: ~3.8 GiB, within a 24 GiB machine, not a 4 GiB one
        let need = memory_needed(10_001, 10_000, 0);
        assert!((3_500_000..4_500_000).contains(&need), "{need}");
        assert!(check_memory(need, 24 << 20, 10_001, 0).is_ok());
        let e = check_memory(need, 4 << 20, 10_001, 0).unwrap_err().to_string();
        assert!(e.contains("3.8 GiB") && e.contains("4.0 GiB available") && e.contains("MemAvailable"), "{e}");
        // routing daemons dominate: 1,000 OSPF routers, two daemons each
        let e = check_memory(memory_needed(1_001, 1_000, 2_000), 16 << 20, 1_001, 2_000).unwrap_err().to_string();
        assert!(e.contains("2000 routing daemons at ~10 MiB each"), "{e}");
    }
}
