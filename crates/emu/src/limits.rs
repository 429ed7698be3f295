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
