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
    keygen_for(dir, days, 0)
}

/// The file names of agent `k`'s own identity, when keygen made one per agent.
pub fn agent_files(k: u32) -> (String, String) {
    (format!("agent-{k}.pem"), format!("agent-{k}.key"))
}

/// [`keygen`], plus an identity of its own for each of `agents` agents (`agent-K.pem`,
/// `agent-K.key`, K = 0..agents): an agent named `NAME-K` (a StatefulSet's pod) uses its own,
/// so one agent's stolen key is not every agent's.
pub fn keygen_for(dir: &Path, days: u32, agents: u32) -> anyhow::Result<Generated> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
    if !(1..=3650).contains(&days) {
        bail!("--days must be 1..=3650 (got {days})");
    }
    if agents > 1024 {
        bail!("--agents must be at most 1024 (got {agents})");
    }
    let own: Vec<(String, String)> = (0..agents).map(agent_files).collect();
    let names = [CA_FILE, AGENT_CERT, AGENT_KEY, CONTROLLER_CERT, CONTROLLER_KEY]
        .map(String::from)
        .into_iter()
        .chain(own.iter().flat_map(|(c, k)| [c.clone(), k.clone()]));
    for f in names {
        if dir.join(&f).exists() {
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
    let mut identities = vec![
        (AGENT_NAME, ExtendedKeyUsagePurpose::ServerAuth, AGENT_CERT.to_string(), AGENT_KEY.to_string()),
        (CONTROLLER_NAME, ExtendedKeyUsagePurpose::ClientAuth, CONTROLLER_CERT.to_string(), CONTROLLER_KEY.to_string()),
    ];
    identities.extend(own.into_iter().map(|(c, k)| (AGENT_NAME, ExtendedKeyUsagePurpose::ServerAuth, c, k)));
    for (name, eku, cert, key) in identities {
        let k = KeyPair::generate().with_context(|| format!("generating the {name} key"))?;
        let mut p = CertificateParams::new(vec![name.to_string()]).with_context(|| format!("{name} parameters"))?;
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![eku];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity(&mut p);
        let c = p.signed_by(&k, &ca_cert, &ca_key).with_context(|| format!("signing the {name} certificate"))?;
        files.push(write_file(&dir.join(&cert), c.pem().as_bytes(), 0o644)?);
        files.push(write_file(&dir.join(&key), k.serialize_pem().as_bytes(), 0o600)?);
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

const FIX: &str = "make credentials with `horde agent keygen --out DIR`";

fn certs(p: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    horde_model::files::pem_certs(p, what, FIX).map_err(|e| anyhow::anyhow!(e))
}

fn key(p: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    horde_model::files::pem_key(p, FIX).map_err(|e| anyhow::anyhow!(e))
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
    agent_config_for(dir, "")
}

/// The identity files of the agent called `name`: its own (`agent-K.*`) when its name ends in
/// `-K` and the directory has them, else the shared `agent.pem`/`agent.key`.
pub fn agent_identity(dir: &Path, name: &str) -> (String, String) {
    let own = name.rsplit_once('-').and_then(|(_, k)| k.parse::<u32>().ok()).map(agent_files);
    match own {
        Some((c, k)) if dir.join(&c).is_file() && dir.join(&k).is_file() => (c, k),
        _ => (AGENT_CERT.to_string(), AGENT_KEY.to_string()),
    }
}

/// [`agent_config`] with the identity of the agent called `name` ([`agent_identity`]).
pub fn agent_config_for(dir: &Path, name: &str) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (cert_file, key_file) = agent_identity(dir, name);
    check_own(dir, &cert_file, &certs(&dir.join(&cert_file), "agent certificate")?, true)?;
    let p = provider();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(dir)?, p.clone()).build().context("building the controller verifier")?;
    let cfg = rustls::ServerConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&dir.join(&cert_file), "agent certificate")?, key(&dir.join(&key_file))?)
        .with_context(|| format!("{cert_file} and {key_file} do not make a usable identity (does the key belong to the certificate?)"))?;
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

    /// Issue 21: all agents shared one key; keygen makes one identity per agent, and an agent
    /// named NAME-K uses its own.
    #[test]
    fn each_agent_of_a_statefulset_has_its_own_identity() {
        let d = std::env::temp_dir().join(format!("horde-tls-own-ids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        keygen_for(&d, 1, 3).unwrap();
        assert_eq!(agent_identity(&d, "horde-agent-2"), ("agent-2.pem".to_string(), "agent-2.key".to_string()));
        assert_eq!(agent_identity(&d, "horde-agent-7"), (AGENT_CERT.to_string(), AGENT_KEY.to_string()), "no such identity: the shared one");
        assert_eq!(agent_identity(&d, "lab"), (AGENT_CERT.to_string(), AGENT_KEY.to_string()));
        assert!(agent_config_for(&d, "horde-agent-0").is_ok());
        assert_ne!(std::fs::read(d.join("agent-0.key")).unwrap(), std::fs::read(d.join("agent-1.key")).unwrap());
        let _ = std::fs::remove_dir_all(&d);
    }
}
