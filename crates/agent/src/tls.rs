//! The control channel's security: TLS 1.3 only (rustls, ring), both sides authenticated by
//! certificates of one private certificate authority that `horde agent keygen` makes (rcgen).
//!
//! - The agent's certificate is for server authentication only (name [`AGENT_NAME`]), the
//!   controller's for client authentication only (name [`CONTROLLER_NAME`]): an agent's key
//!   cannot drive other agents, and a controller's cannot pose as an agent.
//! - An agent refuses any peer without a certificate of its authority (TLS client
//!   authentication is mandatory); a controller refuses any agent without one.
//! - A recorded session replayed later fails its handshake: TLS 1.3 derives each session's keys
//!   from fresh ephemeral key shares of both sides, and 0-RTT (the one replayable part of TLS
//!   1.3) is not enabled.
//! - Private keys must be files only their owner can read (as ssh insists).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The name in every agent's certificate (agents are found by address or DNS name; they prove
/// who they are by their certificate, not by the name they were reached at).
pub const AGENT_NAME: &str = "horde-agent";
/// The name in the controller's certificate.
pub const CONTROLLER_NAME: &str = "horde-controller";

/// The files of a credentials directory.
pub const CA_FILE: &str = "ca.pem";
pub const AGENT_CERT: &str = "agent.pem";
pub const AGENT_KEY: &str = "agent.key";
pub const CONTROLLER_CERT: &str = "controller.pem";
pub const CONTROLLER_KEY: &str = "controller.key";

/// What `keygen` wrote.
pub struct Generated {
    pub files: Vec<PathBuf>,
}

/// Makes a certificate authority and, signed by it, an agent and a controller certificate,
/// valid for `days`, into `dir` (created, mode 700; keys mode 600). The authority's own key is
/// not kept: to add or rotate credentials, run keygen again and distribute the new set.
pub fn keygen(dir: &Path, days: u32) -> anyhow::Result<Generated> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
    if !(1..=3650).contains(&days) {
        bail!("--days must be 1..=3650 (got {days})");
    }
    for f in [CA_FILE, AGENT_CERT, AGENT_KEY, CONTROLLER_CERT, CONTROLLER_KEY] {
        if dir.join(f).exists() {
            bail!("{} exists: keygen does not overwrite credentials; choose an empty directory, or remove the old set first", dir.join(f).display());
        }
    }
    create_private_dir(dir)?;
    let start = time_now();
    let end = std::time::SystemTime::now() + std::time::Duration::from_secs(days as u64 * 86_400);
    let validity = |p: &mut CertificateParams| {
        p.not_before = start.into();
        p.not_after = end.into();
    };
    let ca_key = KeyPair::generate().context("generating the authority's key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).context("authority parameters")?;
    ca.distinguished_name.push(DnType::CommonName, "Horde control authority");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca);
    let ca_cert = ca.self_signed(&ca_key).context("signing the authority's certificate")?;
    let mut files = vec![write_file(&dir.join(CA_FILE), ca_cert.pem().as_bytes(), 0o644)?];
    for (name, eku, cert, key) in [
        (AGENT_NAME, ExtendedKeyUsagePurpose::ServerAuth, AGENT_CERT, AGENT_KEY),
        (CONTROLLER_NAME, ExtendedKeyUsagePurpose::ClientAuth, CONTROLLER_CERT, CONTROLLER_KEY),
    ] {
        let k = KeyPair::generate().with_context(|| format!("generating the {name} key"))?;
        let mut p = CertificateParams::new(vec![name.to_string()]).with_context(|| format!("{name} parameters"))?;
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![eku];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity(&mut p);
        let c = p.signed_by(&k, &ca_cert, &ca_key).with_context(|| format!("signing the {name} certificate"))?;
        files.push(write_file(&dir.join(cert), c.pem().as_bytes(), 0o644)?);
        files.push(write_file(&dir.join(key), k.serialize_pem().as_bytes(), 0o600)?);
    }
    Ok(Generated { files })
}

fn time_now() -> std::time::SystemTime {
    // A day back: machines whose clocks lag a little still accept fresh credentials.
    std::time::SystemTime::now() - std::time::Duration::from_secs(86_400)
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).with_context(|| format!("creating {}", dir.display()))
}

fn write_file(p: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(p).with_context(|| format!("creating {}", p.display()))?;
    f.write_all(bytes).with_context(|| format!("writing {}", p.display()))?;
    Ok(p.to_path_buf())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

const MAX_PEM: u64 = 64 << 10;

fn read_pem(p: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    let meta =
        std::fs::metadata(p).with_context(|| format!("{what} {}: cannot read it (make credentials with `horde agent keygen --out DIR`)", p.display()))?;
    if !meta.is_file() || meta.len() > MAX_PEM {
        bail!("{what} {}: not a PEM file of at most {MAX_PEM} bytes", p.display());
    }
    std::fs::read(p).with_context(|| format!("reading {what} {}", p.display()))
}

fn certs(p: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let bytes = read_pem(p, what)?;
    let v: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{what} {}: not a PEM certificate: {e:?}", p.display()))?;
    if v.is_empty() {
        bail!("{what} {}: holds no certificate", p.display());
    }
    Ok(v)
}

fn key(p: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    let bytes = read_pem(p, "private key")?;
    horde_model::files::check_private(p).map_err(|e| anyhow::anyhow!("private key {e}"))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| anyhow::anyhow!("private key {}: not a PEM private key: {e:?}", p.display()))
}

fn roots(dir: &Path) -> anyhow::Result<Arc<rustls::RootCertStore>> {
    let mut r = rustls::RootCertStore::empty();
    for c in certs(&dir.join(CA_FILE), "authority certificate")? {
        r.add(c).with_context(|| format!("{}: not a usable authority certificate", dir.join(CA_FILE).display()))?;
    }
    Ok(Arc::new(r))
}

/// Checks our own certificate against our own authority now, as the peer will: an expired or
/// not yet valid certificate is refused at start, naming the file, instead of failing every
/// handshake later.
fn check_own(dir: &Path, file: &str, chain: &[CertificateDer<'static>], server: bool) -> anyhow::Result<()> {
    use rustls::client::danger::ServerCertVerifier as _;
    let now = rustls::pki_types::UnixTime::now();
    let p = provider();
    let r = if server {
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(dir)?, p).build().context("building a verifier")?;
        v.verify_server_cert(&chain[0], &chain[1..], &agent_server_name(), &[], now).map(|_| ())
    } else {
        let v = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(dir)?, p).build().context("building a verifier")?;
        v.verify_client_cert(&chain[0], &chain[1..], now).map(|_| ())
    };
    r.map_err(|e| {
        let path = dir.join(file);
        let why = format!("{e:?}");
        if why.contains("Expired") {
            anyhow::anyhow!("{}: this certificate has expired ({why}): make new credentials with `horde agent keygen`", path.display())
        } else if why.contains("NotValidYet") {
            anyhow::anyhow!("{}: this certificate is not valid yet ({why}): check this machine's clock", path.display())
        } else {
            anyhow::anyhow!(
                "{}: this certificate is not one of {}'s ({why}): use one credentials directory from one `horde agent keygen`",
                path.display(),
                CA_FILE
            )
        }
    })
}

/// The agent's TLS configuration from a credentials directory (ca.pem, agent.pem, agent.key).
pub fn agent_config(dir: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    check_own(dir, AGENT_CERT, &certs(&dir.join(AGENT_CERT), "agent certificate")?, true)?;
    let p = provider();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(dir)?, p.clone()).build().context("building the controller verifier")?;
    let cfg = rustls::ServerConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&dir.join(AGENT_CERT), "agent certificate")?, key(&dir.join(AGENT_KEY))?)
        .with_context(|| format!("{} and {} do not make a usable identity (does the key belong to the certificate?)", AGENT_CERT, AGENT_KEY))?;
    Ok(Arc::new(cfg))
}

/// The controller's TLS configuration (ca.pem, controller.pem, controller.key).
pub fn controller_config(dir: &Path) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    check_own(dir, CONTROLLER_CERT, &certs(&dir.join(CONTROLLER_CERT), "controller certificate")?, false)?;
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .with_root_certificates(roots(dir)?)
        .with_client_auth_cert(certs(&dir.join(CONTROLLER_CERT), "controller certificate")?, key(&dir.join(CONTROLLER_KEY))?)
        .with_context(|| format!("{} and {} do not make a usable identity (does the key belong to the certificate?)", CONTROLLER_CERT, CONTROLLER_KEY))?;
    Ok(Arc::new(cfg))
}

/// The name the controller expects in an agent's certificate.
pub fn agent_server_name() -> ServerName<'static> {
    ServerName::try_from(AGENT_NAME).expect("a valid DNS name")
}

/// Whether an error is rustls refusing the peer's credentials (for messages that say so).
pub fn describe(e: &std::io::Error) -> String {
    match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(c)) if format!("{c:?}").contains("Expired") => {
            format!("the peer's certificate has expired ({c:?}): make new credentials with `horde agent keygen`")
        }
        Some(rustls::Error::InvalidCertificate(c)) if format!("{c:?}").contains("NotValidYet") => {
            format!("the peer's certificate is not valid yet ({c:?}): check both machines' clocks")
        }
        Some(rustls::Error::InvalidCertificate(c)) => format!("the peer's certificate was refused ({c:?}): it is not from this Horde authority"),
        Some(rustls::Error::NoCertificatesPresented) => {
            "the peer presented no certificate (a controller needs controller.pem/.key from `horde agent keygen`)".into()
        }
        Some(rustls::Error::AlertReceived(a)) => {
            format!("the peer refused the handshake ({a:?}): it does not accept our certificate, or we are not what it expects")
        }
        Some(r) => format!("TLS: {r}"),
        // rustls reports a TCP close without TLS close_notify as UnexpectedEof.
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the connection ended without a TLS close (the process at the other end died, or the network dropped it)".into()
        }
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 21: our own certificate is checked at start against our own authority (validity
    /// and issuer), naming the file, instead of failing every handshake later.
    #[test]
    fn own_certificates_not_of_our_authority_are_refused_at_start_naming_the_file() {
        let d = std::env::temp_dir().join(format!("horde-tls-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        keygen(&d.join("a"), 1).unwrap();
        keygen(&d.join("b"), 1).unwrap();
        assert!(agent_config(&d.join("a")).is_ok() && controller_config(&d.join("a")).is_ok());
        // b's agent certificate and key in a's directory: not from a's authority.
        for f in [AGENT_CERT, AGENT_KEY] {
            std::fs::copy(d.join("b").join(f), d.join("a").join(f)).unwrap();
        }
        let e = format!("{:#}", agent_config(&d.join("a")).unwrap_err());
        assert!(e.contains(AGENT_CERT) && e.contains("not one of"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
