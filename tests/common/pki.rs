//! Certificates made at test time by rcgen (never checked in).

use std::path::PathBuf;
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::transport::ServerTls;

/// A CA and a server certificate it issued for `localhost` and 127.0.0.1,
/// written as PEM files into a fresh directory.
pub struct Pki {
    /// The directory holding the files (removed on drop).
    pub dir: PathBuf,
    /// The CA's certificate.
    pub ca: PathBuf,
    /// The server's certificate.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn make_pki(tag: &str) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let dir = std::env::temp_dir().join(format!(
        "unienv-tls-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("unienv test CA {tag}"));
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let pki = Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        dir,
    };
    std::fs::write(&pki.ca, ca.pem()).unwrap();
    std::fs::write(&pki.cert, cert.pem()).unwrap();
    std::fs::write(&pki.key, key.serialize_pem()).unwrap();
    pki
}

/// Our server hosting the conformance fixtures over TLS with `pki`'s
/// certificate, listening on loopback.
pub async fn tls_server(pki: &Pki) -> (Server, Listener) {
    let config = ServerConfig {
        tls: Some(ServerTls::from_pem_files(&pki.cert, &pki.key).unwrap()),
        ..ServerConfig::default()
    };
    let mut builder = Server::builder(config);
    unienv_remote::fixtures::register(&mut builder).unwrap();
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    (server, listener)
}
