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
