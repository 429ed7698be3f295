//! TLS for a console that listens beyond loopback (rustls, ring): a certificate and key from
//! files, or a self-made certificate for the names the console answers to — written beside the
//! runs so a browser or `curl --cacert` can trust it; its key never leaves memory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Where the console's certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsFrom {
    /// A certificate chain and its private key (PEM; the key readable by its owner only).
    Files { cert: PathBuf, key: PathBuf },
    /// Made at start for the console's names; the certificate is written to `write_to`.
    SelfMade { write_to: PathBuf },
}

const FIX: &str = "give a PEM certificate chain with --tls-cert and its key with --tls-key, or let the console make one with --tls-self-signed";

/// The server configuration, and the path of a self-made certificate.
pub fn server_config(from: &TlsFrom, names: &[String], listen: SocketAddr) -> anyhow::Result<(Arc<rustls::ServerConfig>, Option<PathBuf>)> {
    let (certs, key, written) = match from {
        TlsFrom::Files { cert, key } => {
            let certs = horde_model::files::pem_certs(cert, "--tls-cert", FIX).map_err(|e| anyhow::anyhow!(e))?;
            let key = horde_model::files::pem_key(key, FIX).map_err(|e| anyhow::anyhow!(e))?;
            (certs, key, None)
        }
        TlsFrom::SelfMade { write_to } => {
            let (cert, key, pem) = self_made(names, listen)?;
            write_cert(write_to, &pem)?;
            (vec![cert], key, Some(write_to.clone()))
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate and key do not go together (or the key is of a kind rustls does not take)")?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(cfg), written))
}

/// A certificate for `localhost`, the listening address and every `names` entry.
fn self_made(names: &[String], listen: SocketAddr) -> anyhow::Result<(CertificateDer<'static>, PrivateKeyDer<'static>, String)> {
    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if !listen.ip().is_unspecified() {
        sans.push(listen.ip().to_string());
    }
    sans.extend(names.iter().cloned());
    sans.dedup();
    let made = rcgen::generate_simple_self_signed(sans).context("making the console's certificate")?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der()));
    Ok((made.cert.der().clone(), key, made.cert.pem()))
}

fn write_cert(path: &Path, pem: &str) -> anyhow::Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    std::fs::write(path, pem).with_context(|| format!("writing the console's certificate to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_made_certificate_is_written_and_serves() {
        let dir = std::env::temp_dir().join(format!("horde-console-tls-{}", std::process::id()));
        let path = dir.join("console-cert.pem");
        let (_, written) = server_config(&TlsFrom::SelfMade { write_to: path.clone() }, &["lab.example".into()], "0.0.0.0:7070".parse().unwrap()).unwrap();
        assert_eq!(written.as_deref(), Some(path.as_path()));
        let certs = horde_model::files::pem_certs(&path, "cert", "").unwrap();
        assert_eq!(certs.len(), 1);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn missing_files_name_the_flag_and_the_fix() {
        let e = server_config(&TlsFrom::Files { cert: "/nonexistent/c.pem".into(), key: "/nonexistent/k.pem".into() }, &[], "127.0.0.1:1".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--tls-cert") && e.contains("--tls-self-signed"), "{e}");
    }
}
