//! The web configuration file: what parses, and that every mistake names
//! its key or file.

use std::path::Path;

use super::*;
use crate::agent::pki;

/// A directory with a server certificate for localhost (`server.crt`,
/// `server.key`) and the CA that signed it (`ca.crt`).
fn pki() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    pki::Ca::new().write(
        dir.path(),
        &["localhost"],
        ["server.crt", "server.key", "ca.crt"],
    );
    dir
}

fn parse_in(dir: &Path, text: &str) -> Result<WebConfig, WebConfigError> {
    WebConfig::parse(text, &dir.join("web-config.yml"))
}

const HASH: &str = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG";

#[test]
fn a_whole_file_parses_with_files_relative_to_it() {
    let dir = pki();
    let text = format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
         min_version: TLS13\n\
         http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n\
         basic_auth_users:\n  prometheus: {HASH}\n"
    );
    let c = parse_in(dir.path(), &text).unwrap();
    let tls = c.tls.as_ref().unwrap();
    assert_eq!(tls.client_auth, ClientAuth::RequireAndVerify);
    assert_eq!((tls.min_version, tls.max_version), ("TLS13", "TLS13"));
    assert!(tls.cert_source.ends_with("server.crt"), "{tls:?}");
    assert_eq!(tls.server().alpn_protocols, vec![b"http/1.1".to_vec()]);
    assert_eq!(c.users.keys().collect::<Vec<_>>(), ["prometheus"]);
    assert_eq!(c.headers, [("X-Frame-Options".into(), "deny".into())]);
    assert!(c.authenticates());
    // What check-config prints names the files and users, never the hash.
    let shown = format!("{}{c:?}", c.summary());
    assert!(
        shown.contains("server.crt")
            && shown.contains("prometheus")
            && shown.contains("read again when they change"),
        "{shown}"
    );
    assert!(
        !shown.contains(HASH) && !shown.contains("X0h1gD"),
        "{shown}"
    );
}

#[test]
fn an_empty_file_is_plain_http_without_auth() {
    for text in ["", "# nothing yet\n", "basic_auth_users: {}\n"] {
        let c = parse_in(Path::new("/nonexistent"), text).unwrap();
        assert!(
            c.tls.is_none() && c.users.is_empty() && !c.authenticates(),
            "{text:?}"
        );
    }
}

#[test]
fn unknown_and_unsupported_keys_are_named() {
    let dir = pki();
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    for (text, key) in [
        ("basic_auth_user:\n  a: b\n".to_owned(), "basic_auth_user"),
        (format!("{tls}  cert_fiel: x\n"), "cert_fiel"),
        (
            format!("{tls}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"),
            "cipher_suites",
        ),
        (
            format!("{tls}  client_allowed_sans: [a]\n"),
            "client_allowed_sans",
        ),
        (format!("{tls}  min_version: TLS11\n"), "min_version"),
        (
            format!("{tls}  min_version: TLS13\n  max_version: TLS12\n"),
            "min_version",
        ),
        (
            format!("{tls}  client_auth_type: RequireAnyClientCert\n"),
            "client_auth_type",
        ),
        (
            format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
            "client_ca_file",
        ),
        (format!("{tls}  client_ca_file: ca.crt\n"), "client_ca_file"),
        ("http_server_config:\n  http2: true\n".to_owned(), "http2"),
        (
            "http_server_config:\n  headers:\n    Server: x\n".to_owned(),
            "headers.Server",
        ),
        (
            "rate_limit:\n  interval: 1s\n  burst: 2\n".to_owned(),
            "rate_limit",
        ),
        (
            "basic_auth_users:\n  bob: hunter2\n".to_owned(),
            "basic_auth_users.bob",
        ),
        (
            "tls_server_config:\n  key_file: server.key\n".to_owned(),
            "cert_file",
        ),
    ] {
        let e = parse_in(dir.path(), &text).unwrap_err().to_string();
        assert!(
            e.contains(key) && e.contains("web-config.yml"),
            "{text:?}: {e}"
        );
        // A secret never appears in an error.
        assert!(!e.contains("hunter2"), "{e}");
    }
}

#[test]
fn a_missing_or_wrong_file_is_named() {
    let dir = pki();
    // A key that is not the certificate's.
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.path().join("other.key"), other.serialize_pem()).unwrap();
    for (cert, key, says) in [
        ("gone.crt", "server.key", ["cert_file", "gone.crt"]),
        ("server.crt", "other.key", ["key_file", "other.key"]),
        // A certificate file with no certificate in it.
        ("server.key", "server.key", ["cert_file", "no CERTIFICATE"]),
    ] {
        let text = format!("tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n");
        let e = parse_in(dir.path(), &text).unwrap_err().to_string();
        assert!(says.iter().all(|s| e.contains(s)), "{says:?}: {e}");
    }
    let e = WebConfig::load(&dir.path().join("absent.yml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.yml"), "{e}");
}

#[test]
fn inline_pem_works_and_both_forms_at_once_do_not() {
    let dir = pki();
    let cert = std::fs::read_to_string(dir.path().join("server.crt")).unwrap();
    let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
    let text = format!(
        "tls_server_config:\n  cert: |\n{}  key_file: server.key\n",
        indent(&cert)
    );
    let c = parse_in(dir.path(), &text).unwrap();
    assert_eq!(c.tls.unwrap().cert_source, "inline cert");
    let e = parse_in(dir.path(), &format!("{text}  cert_file: server.crt\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not both"), "{e}");
}

#[test]
fn exposure_is_warned_off_loopback_only() {
    let dir = pki();
    let open: std::net::SocketAddr = "0.0.0.0:9219".parse().unwrap();
    let local: std::net::SocketAddr = "127.0.0.1:9219".parse().unwrap();
    assert_eq!(exposure(local, None), None);
    assert!(
        exposure(open, None)
            .unwrap()
            .contains("without authentication")
    );
    let tls_only = parse_in(
        dir.path(),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap();
    assert!(
        exposure(open, Some(&tls_only))
            .unwrap()
            .contains("without authentication")
    );
    let auth_only = parse_in(dir.path(), &format!("basic_auth_users:\n  p: {HASH}\n")).unwrap();
    assert!(
        exposure(open, Some(&auth_only))
            .unwrap()
            .contains("clear text")
    );
    let both = parse_in(
        dir.path(),
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  p: {HASH}\n"
        ),
    )
    .unwrap();
    assert_eq!(exposure(open, Some(&both)), None);
}
