//! Reading files that users name (flow, scenario, service and topology files, value lists,
//! capacity traces) as hostile input: regular files only (a FIFO, `/dev/zero` or a directory is
//! refused before anything is read, without blocking), a size limit checked before and while
//! reading, and errors that name the file and the problem, never its contents.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest TOML file Horde reads (flows, scenarios, services, topologies). The largest built-in
/// (the WoW service with 24 hourly matrices) is 11 kB; 4 MiB leaves room for generated files
/// with thousands of flows while keeping a mistaken multi-gigabyte file out of memory.
pub const MAX_TOML: u64 = 4 << 20;
/// Largest data file (replayed values, Mahimahi traces): a day-long 1 ms trace is ~600 kB.
pub const MAX_DATA: u64 = 64 << 20;

/// Why a user's file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// (`err` is shown in the message, not chained as a source: once is enough.)
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: is a {kind}, not a regular file; give the path of a file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path}: is {size} bytes, more than the {limit}-byte limit for {what}")]
    TooLarge { path: PathBuf, size: u64, limit: u64, what: &'static str },
    #[error("{path}: is not UTF-8 text")]
    NotText { path: PathBuf },
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO (named pipe)"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Reads a whole regular file of at most `limit` bytes. `what` names the kind of file in the
/// size error ("TOML files", "traces").
pub fn read_bytes(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let io = |err| FileError::Io { path: path.to_path_buf(), err };
    // Opening a FIFO must not wait for a writer; the type is checked right after.
    let file = horde_sys::fs::open_for_reading(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular { path: path.to_path_buf(), kind: kind_of(&meta.file_type()) });
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge { path: path.to_path_buf(), size: meta.len(), limit, what });
    }
    // Files under /proc report size 0 and may be endless: the limit holds while reading too.
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > limit {
        return Err(FileError::TooLarge { path: path.to_path_buf(), size: buf.len() as u64, limit, what });
    }
    Ok(buf)
}

/// [`read_bytes`] for text.
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, FileError> {
    String::from_utf8(read_bytes(path, limit, what)?).map_err(|_| FileError::NotText { path: path.to_path_buf() })
}

/// A TOML error as "line L, column C: MESSAGE", without the offending line and without what
/// the message quotes from the file: the file may not be a Horde file at all (`/etc/shadow`
/// given by mistake, or a root-only file named to a console running as root), and its
/// contents are not ours to print.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = without_contents(&e.message().trim().replace('\n', " "));
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

/// `msg` without what it quotes from the file: serde names the offending value before
/// ", expected …" (`invalid type: string "…"`), and what follows lists what Horde expects
/// (ours to show). Each quoted span before it becomes `…` — except the name of an unknown
/// field or variant (a key or a choice, a short identifier: what the user needs to fix a typo,
/// not a secret's shape).
fn without_contents(msg: &str) -> String {
    if let Some(rest) = ["unknown field `", "unknown variant `", "missing field `"].iter().find_map(|p| msg.strip_prefix(p)) {
        if let Some((name, _)) = rest.split_once('`') {
            if (1..=32).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return msg.to_string();
            }
        }
    }
    let (head, tail) = msg.split_at(msg.find(", expected").unwrap_or(msg.len()));
    let mut out = String::with_capacity(msg.len());
    let mut open: Option<char> = None;
    for ch in head.chars() {
        match open {
            Some(q) if ch == q => {
                out.push('…');
                out.push(ch);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(ch);
                if ch == '"' || ch == '`' || ch == '\'' {
                    open = Some(ch);
                }
            }
        }
    }
    if let Some(q) = open {
        out.push('…');
        out.push(q);
    }
    out.push_str(tail);
    out
}

/// A short identifier: a name or a choice (`wow`, `eth0`, `10.0.0.1:9000`, `5s`), what the user
/// needs to see to fix a typo, not a secret's shape. Anything else a file holds is its contents.
/// An address or a subnet (`10.0.0.0/24`, `[::1]:9000`) is a place, kept too.
fn short_identifier(s: &str) -> bool {
    let place = || {
        let (ip, prefix) = s.split_once('/').unwrap_or((s, "0"));
        (ip.parse::<std::net::IpAddr>().is_ok() || ip.parse::<std::net::SocketAddr>().is_ok()) && prefix.parse::<u8>().is_ok()
    };
    (1..=32).contains(&s.len()) && (s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')) || place())
}

/// `msg`, a validation message about the file `text`, without what it quotes from the file:
/// every string value and key of the file that is not a short identifier becomes `…` wherever
/// it appears, and so does a backtick-quoted part of one (a parser that names the first token
/// of a value). What Horde itself says (`exponential(10)`, the choices it lists) stays.
pub fn redact(msg: &str, text: &str) -> String {
    let Ok(doc) = text.parse::<toml::Table>() else { return msg.to_string() };
    let mut values: Vec<String> = Vec::new();
    fn walk(v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::String(s) => out.push(s.clone()),
            toml::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            toml::Value::Table(t) => t.iter().for_each(|(k, v)| {
                out.push(k.clone());
                walk(v, out)
            }),
            _ => {}
        }
    }
    walk(&toml::Value::Table(doc), &mut values);
    values.retain(|v| v.len() >= 3 && !short_identifier(v));
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values.dedup();
    let mut out = msg.to_string();
    for v in &values {
        out = out.replace(v.as_str(), "…");
    }
    // a quoted part of a value: `$6$s3cr3t` of `$6$s3cr3t/x`
    let mut kept = String::with_capacity(out.len());
    let mut parts = out.split('`');
    kept.push_str(parts.next().unwrap_or(""));
    for (i, part) in parts.enumerate() {
        kept.push('`');
        let inside = i % 2 == 0;
        if inside && part.len() >= 3 && !short_identifier(part) && values.iter().any(|v| v.contains(part)) {
            kept.push('…');
        } else {
            kept.push_str(part);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parse_error_names_the_place_but_quotes_nothing_from_the_file() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Raw {
            service: Option<std::collections::BTreeMap<String, u32>>,
            players: Option<u32>,
        }
        for text in ["service = \"TOPSECRET_ABC\"\n", "\"TOPSECRET KEY\" = 1\n", "players = 'TOPSECRET'\n", "players = -7\n"] {
            let e = toml::from_str::<Raw>(text).unwrap_err();
            let m = toml_error(text, &e);
            assert!(m.starts_with("line 1, column"), "{m}");
            assert!(!m.contains("TOPSECRET") && !m.contains("-7"), "{m}");
        }
        let e = toml::from_str::<Raw>("playrs = 1\n").unwrap_err();
        let m = toml_error("playrs = 1\n", &e);
        assert!(m.contains("unknown field `playrs`") && m.contains("`players`"), "a key's name and what Horde expects are still said: {m}");
        assert_eq!(without_contents("unknown field `a b`, expected `a`"), "unknown field `…`, expected `a`");
        assert_eq!(without_contents("unknown variant `eigrp`, expected `ospf`"), "unknown variant `eigrp`, expected `ospf`");
        assert_eq!(without_contents("unknown variant `$6$x/y`, expected `ospf`"), "unknown variant `…`, expected `ospf`");
        assert_eq!(without_contents("invalid type: string \"abc"), "invalid type: string \"…\"");
    }

    #[test]
    fn a_validation_message_quotes_names_but_not_the_files_contents() {
        let text = "service = 'wow'\nduration = '$6$s3cr3t/x.y'\ndst = 'TOPSECRET token'\n";
        assert_eq!(redact("duration: `$6$s3cr3t/x.y` is not a duration", text), "duration: `…` is not a duration");
        assert_eq!(redact("unknown distribution `$6$s3cr3t` in `$6$s3cr3t/x.y`", text), "unknown distribution `…` in `…`");
        assert_eq!(redact("service: TOPSECRET token: cannot read", text), "service: …: cannot read");
        assert_eq!(redact("no built-in service `wow`; write e.g. `exponential(10)`", text), "no built-in service `wow`; write e.g. `exponential(10)`");
        assert_eq!(redact("anything", "not = toml = at all"), "anything");
        assert_eq!(redact("subnet 10.0.0.0/24 twice", "subnet = '10.0.0.0/24'"), "subnet 10.0.0.0/24 twice");
    }

    #[test]
    fn special_files_are_refused_without_reading() {
        let e = read_text(Path::new("/dev/zero"), MAX_TOML, "TOML files").unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_text(Path::new("/"), MAX_TOML, "TOML files").unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("horde-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&fifo, MAX_TOML, "TOML files").unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let big = dir.join("big");
        std::fs::write(&big, vec![b'a'; 2000]).unwrap();
        let e = read_text(&big, 1000, "test files").unwrap_err();
        assert!(e.to_string().contains("2000 bytes, more than the 1000-byte limit for test files"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn endless_proc_files_hit_the_limit_while_reading() {
        // /proc/self/maps reports size 0; read under a tiny limit it must be refused, not cut.
        let e = read_bytes(Path::new("/proc/self/maps"), 16, "test files").unwrap_err();
        assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn toml_errors_give_the_place_not_the_line() {
        let text = "ok = 1\nroot:$6$secret$hash:19000:0:99999:7:::\n";
        let e = toml::from_str::<toml::Table>(text).unwrap_err();
        let m = toml_error(text, &e);
        assert!(m.starts_with("line 2, column"), "{m}");
        assert!(!m.contains("secret"), "{m}");
    }
}

std::thread_local! {
    static NO_VALUE_FILES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with `file(PATH)` distributions refused: an agent parses what a controller sent
/// and must never open a file that text names (the controller inlines the values instead,
/// [`crate::dist::inline_value_files`]).
pub fn without_value_files<T>(f: impl FnOnce() -> T) -> T {
    let before = NO_VALUE_FILES.with(|c| c.replace(true));
    let r = f();
    NO_VALUE_FILES.with(|c| c.set(before));
    r
}

/// Whether `file(PATH)` may be read on this thread now.
pub fn value_files_allowed() -> bool {
    !NO_VALUE_FILES.with(|c| c.get())
}

/// Whether a secret's file (a private key, a run key) is private enough: nobody but its owner
/// can read it, or (as Kubernetes mounts a Secret with `fsGroup`, and as PostgreSQL accepts its
/// key) it is owned by root with read access for exactly this process's group and nobody else.
/// Returns the reason and the fix when not.
pub fn check_private(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mode = m.mode() & 0o777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    let egid = horde_sys::fs::effective_gid();
    if mode & 0o037 == 0 && m.uid() == 0 && m.gid() == egid {
        return Ok(());
    }
    Err(format!("{} is readable by others (mode {mode:o}); make it private with `chmod 600 {}`", p.display(), p.display()))
}

/// Largest PEM file (a certificate chain or a key) Horde reads.
pub const MAX_PEM: u64 = 64 << 10;

fn read_pem(p: &Path, what: &str, fix: &str) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("{what} {}: cannot read it ({e}); {fix}", p.display()))?;
    if !meta.is_file() || meta.len() > MAX_PEM {
        return Err(format!("{what} {}: not a PEM file of at most {MAX_PEM} bytes", p.display()));
    }
    std::fs::read(p).map_err(|e| format!("reading {what} {}: {e}", p.display()))
}

/// The certificates of a PEM file (at least one). `fix` says where such a file comes from.
pub fn pem_certs(p: &Path, what: &str, fix: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read_pem(p, what, fix)?;
    let v: Vec<_> =
        CertificateDer::pem_slice_iter(&bytes).collect::<Result<_, _>>().map_err(|e| format!("{what} {}: not a PEM certificate: {e:?}", p.display()))?;
    if v.is_empty() {
        return Err(format!("{what} {}: holds no certificate", p.display()));
    }
    Ok(v)
}

/// The private key of a PEM file that only its owner can read ([`check_private`]).
pub fn pem_key(p: &Path, fix: &str) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read_pem(p, "private key", fix)?;
    check_private(p).map_err(|e| format!("private key {e}"))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| format!("private key {}: not a PEM private key: {e:?}", p.display()))
}

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[cfg(test)]
mod private_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn secrets_are_private_to_their_owner_or_to_roots_group_of_this_process() {
        let p = std::env::temp_dir().join(format!("horde-private-{}", std::process::id()));
        std::fs::write(&p, "k").unwrap();
        let set = |m| std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).unwrap();
        set(0o600);
        assert!(check_private(&p).is_ok());
        set(0o644);
        assert!(check_private(&p).unwrap_err().contains("chmod 600"));
        set(0o440);
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(&p).unwrap();
        // Group-readable passes only for a root-owned file of this process's group (a
        // Kubernetes Secret with fsGroup); as root here, the file is exactly that.
        assert_eq!(check_private(&p).is_ok(), m.uid() == 0 && m.gid() == gid, "uid {uid}");
        let _ = std::fs::remove_file(&p);
    }
}
