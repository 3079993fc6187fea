//! Reading `/metrics`' TLS files again: when a change is seen (a rename
//! over, a secret volume's symlink swap, a file gone), how often the files
//! are looked at, and that new files that cannot be used leave the
//! previous certificate or CA in service, said once.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rustls::pki_types::pem::PemObject;

use super::*;
use crate::agent::{pki, web_config::WebConfig};

const SECOND: Duration = Duration::from_secs(1);

/// Writes `text` to `path` as cert-manager and most renewers do: a new
/// file, renamed over the old one.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn a_file_renamed_over_is_seen_at_the_next_look_only() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tls.crt");
    std::fs::write(&f, "one").unwrap();
    let t0 = Instant::now();
    let mut w = Watched::new(vec![f.clone()], SECOND, t0);
    assert!(!w.changed(t0 + SECOND), "nothing changed yet");
    // Same size, so only the inode and times tell it apart.
    replace(&f, "two");
    assert!(
        !w.changed(t0 + SECOND + SECOND / 2),
        "looked again within a second"
    );
    assert!(w.changed(t0 + 2 * SECOND), "the rename was not seen");
    assert!(!w.changed(t0 + 3 * SECOND), "one change seen twice");
}

#[test]
fn a_secret_volume_symlink_swap_is_seen_through_the_links() {
    // The kubelet's layout: tls.crt -> ..data/tls.crt, ..data -> ..v1;
    // an update writes ..v2 and renames a new ..data link over the old.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for v in ["..v1", "..v2"] {
        std::fs::create_dir(d.join(v)).unwrap();
        std::fs::write(d.join(v).join("tls.crt"), "same bytes").unwrap();
    }
    std::os::unix::fs::symlink("..v1", d.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/tls.crt", d.join("tls.crt")).unwrap();
    let t0 = Instant::now();
    let mut w = Watched::new(vec![d.join("tls.crt")], SECOND, t0);
    assert!(!w.changed(t0 + SECOND));
    std::os::unix::fs::symlink("..v2", d.join("..data_tmp")).unwrap();
    std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
    // The link tls.crt itself did not change; its target did.
    assert!(w.changed(t0 + 2 * SECOND), "the ..data swap was not seen");
    assert!(!w.changed(t0 + 3 * SECOND));
}

#[test]
fn a_file_gone_is_a_change_and_so_is_its_return() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tls.key");
    std::fs::write(&f, "key").unwrap();
    let t0 = Instant::now();
    let mut w = Watched::new(vec![f.clone()], SECOND, t0);
    std::fs::remove_file(&f).unwrap();
    assert!(w.changed(t0 + SECOND), "a removed file was not seen");
    assert!(!w.changed(t0 + 2 * SECOND), "still gone is no change");
    std::fs::write(&f, "key").unwrap();
    assert!(w.changed(t0 + 3 * SECOND), "its return was not seen");
}

#[test]
fn no_files_never_change() {
    let t0 = Instant::now();
    let mut w = Watched::new(Vec::new(), SECOND, t0);
    assert!(!w.changed(t0 + 10 * SECOND));
}

/// A value read from `f`, "bad..." refused; and how many reads there were.
fn reloading(f: &Path) -> (Reloading<String>, Arc<AtomicUsize>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let (path, counter) = (f.to_owned(), reads.clone());
    let r = Reloading::new("certificate", vec![f.to_owned()], move || {
        counter.fetch_add(1, Ordering::SeqCst);
        let text = std::fs::read_to_string(&path).map_err(|e| ("file".into(), e.to_string()))?;
        if text.starts_with("bad") {
            return Err(("file".into(), format!("refused {text:?}")));
        }
        Ok(text)
    })
    .unwrap();
    (r, reads)
}

#[test]
fn bad_new_files_keep_the_previous_value_and_are_tried_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tls.crt");
    std::fs::write(&f, "v1").unwrap();
    let (r, reads) = reloading(&f);
    let t0 = Instant::now();
    assert_eq!(r.get_at(t0), "v1");
    assert_eq!(reads.load(Ordering::SeqCst), 1, "read at start only");
    replace(&f, "v2");
    assert_eq!(r.get_at(t0 + 2 * SECOND), "v2");
    replace(&f, "bad: truncated");
    assert_eq!(r.get_at(t0 + 4 * SECOND), "v2", "a bad file replaced v2");
    let after_bad = reads.load(Ordering::SeqCst);
    // Unchanged bad files are not read (nor warned about) again.
    for s in 5..10 {
        assert_eq!(r.get_at(t0 + s * SECOND), "v2");
    }
    assert_eq!(
        reads.load(Ordering::SeqCst),
        after_bad,
        "bad file read again"
    );
    let c = r.counts();
    assert_eq!(
        (c.files, c.ok, c.failed, c.failing),
        ("certificate", 1, 1, true)
    );
    // Fixed: in service, no longer failing.
    replace(&f, "v3");
    assert_eq!(r.get_at(t0 + 11 * SECOND), "v3");
    let c = r.counts();
    assert_eq!((c.ok, c.failed, c.failing), (2, 1, false));
    assert!(r.watches_files());
}

#[test]
fn a_load_that_fails_at_start_is_the_callers_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tls.crt");
    std::fs::write(&f, "bad from the start").unwrap();
    let r = Reloading::new("certificate", vec![f.clone()], move || {
        Err::<String, _>(("tls_server_config.cert_file".into(), "no".into()))
    });
    assert_eq!(r.err().unwrap().0, "tls_server_config.cert_file");
}

/// A web config in `dir` with the server pair `server.crt`/`server.key`
/// (for localhost, signed by a new CA) and `extra` TLS lines.
fn web(dir: &Path, extra: &str) -> WebConfig {
    pki::Ca::new().write(dir, &["localhost"], ["server.crt", "server.key", "ca.crt"]);
    let text =
        format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{extra}");
    WebConfig::parse(&text, &dir.join("web-config.yml")).unwrap()
}

#[test]
fn a_renewed_pair_is_served_and_a_broken_one_keeps_the_previous() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tls = web(d, "").tls.unwrap();
    let t0 = Instant::now();
    let first = tls.certificate_at(t0);
    // Renewed: another subject, another key.
    let ca = pki::Ca::new();
    let (cert2, key2) = ca.sign(&["localhost", "renewed"]);
    replace(&d.join("server.key"), &key2);
    replace(&d.join("server.crt"), &cert2);
    let second = tls.certificate_at(t0 + 2 * SECOND);
    assert_ne!(
        second.cert[0], first.cert[0],
        "the renewed pair is not served"
    );
    let pem = rustls::pki_types::CertificateDer::from_pem_slice(cert2.as_bytes()).unwrap();
    assert_eq!(second.cert[0], pem);
    // A certificate whose key is not the one on disk: refused, the
    // renewed pair still served.
    let (cert3, _) = ca.sign(&["localhost", "mismatched"]);
    replace(&d.join("server.crt"), &cert3);
    assert_eq!(tls.certificate_at(t0 + 4 * SECOND).cert[0], pem);
    // Not PEM at all, or a key file gone: the same.
    replace(
        &d.join("server.crt"),
        "-----BEGIN CERTIFICATE-----\ntruncated",
    );
    assert_eq!(tls.certificate_at(t0 + 6 * SECOND).cert[0], pem);
    std::fs::remove_file(d.join("server.key")).unwrap();
    assert_eq!(tls.certificate_at(t0 + 8 * SECOND).cert[0], pem);
    let counts = tls.reloads();
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!(
        (
            counts[0].files,
            counts[0].ok,
            counts[0].failed,
            counts[0].failing
        ),
        ("certificate", 1, 3, true)
    );
}

#[test]
fn a_changed_client_ca_makes_a_new_configuration_and_a_broken_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tls = web(
        d,
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    )
    .tls
    .unwrap();
    let t0 = Instant::now();
    let first = tls.server_at(t0);
    assert!(
        Arc::ptr_eq(&first, &tls.server_at(t0 + SECOND)),
        "rebuilt unchanged"
    );
    replace(&d.join("ca.crt"), &pki::Ca::new().pem());
    let second = tls.server_at(t0 + 2 * SECOND);
    assert!(!Arc::ptr_eq(&first, &second), "the new CA was not taken");
    assert_eq!(second.alpn_protocols, vec![b"http/1.1".to_vec()]);
    replace(&d.join("ca.crt"), "no certificate here\n");
    assert!(Arc::ptr_eq(&second, &tls.server_at(t0 + 4 * SECOND)));
    let ca = tls
        .reloads()
        .into_iter()
        .find(|c| c.files == "client_ca")
        .unwrap();
    assert_eq!((ca.ok, ca.failed, ca.failing), (1, 1, true));
}

#[test]
fn inline_pem_is_not_watched() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    pki::Ca::new().write(d, &["localhost"], ["server.crt", "server.key", "ca.crt"]);
    let indent = |f: &str| {
        std::fs::read_to_string(d.join(f))
            .unwrap()
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    let text = format!(
        "tls_server_config:\n  cert: |\n{}  key: |\n{}",
        indent("server.crt"),
        indent("server.key")
    );
    let tls = WebConfig::parse(&text, &d.join("web-config.yml"))
        .unwrap()
        .tls
        .unwrap();
    assert_eq!(tls.reloads(), []);
}
