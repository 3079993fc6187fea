//! `target.mongosh_args`: how a fix's `mongosh` reaches the recorded server.
//!
//! A bare `mongosh --eval` connects to 127.0.0.1:27017 without credentials,
//! so it fails on a server with another port, another address or
//! authentication. The arguments are built here from what the recording
//! says of the server: the `--uri` it was polled through (already without
//! credentials in the recording; the user information and secret options are
//! dropped again here), else the port mongod reports (getCmdLineOpts
//! parsed.net.port, live or FTDC) or has on its command line (its argv, or
//! the target's), else mongod's default 27017, on 127.0.0.1. When the server
//! wants credentials (the URI named a user, or getCmdLineOpts says
//! authorization is on), a `--username` taken from the `MONGOSH_USER`
//! environment variable is added:
//! mongosh then asks for the password. Never a secret: the fact holds no
//! user name, no password, no token.
//!
//! The value is a shell fragment of several words (the URI quoted as one
//! word by [`shell_word`]), which placeholders insert as it is
//! ([`crate::rules::placeholders::SHELL_FRAGMENTS`]).

use crate::mongo::conn::without_credentials;
use crate::recording::model::Recording;
use crate::rules::placeholders::shell_word;

/// mongod's default port.
const DEFAULT_PORT: u16 = 27017;

/// What a fix adds when the server wants authentication: the user from the
/// environment (the shell stops with this message when it is not set), the
/// password asked by mongosh.
pub const USERNAME_ARGS: &str =
    r#"--username "${MONGOSH_USER:?set MONGOSH_USER to a MongoDB user with the needed roles}""#;

/// The arguments that make `mongosh` reach the recorded server.
pub fn mongosh_args(rec: &Recording) -> String {
    let info = rec.mongod.as_ref().and_then(|m| m.info.as_ref());
    // mongod's own getCmdLineOpts says whether it requires authentication.
    let server_auth = info.and_then(|i| i.auth) == Some(true);
    let with_user = |uri: String, auth: bool| {
        if auth || server_auth {
            format!("{uri} {USERNAME_ARGS}")
        } else {
            uri
        }
    };
    let polled = rec
        .mongod
        .as_ref()
        .and_then(|m| m.uri.as_deref())
        .and_then(without_credentials);
    if let Some((uri, auth)) = polled {
        return with_user(shell_word(&uri), auth);
    }
    let argv = info
        .map(|i| i.argv.as_slice())
        .filter(|a| !a.is_empty())
        .or_else(|| rec.target.as_ref().map(|t| t.cmdline.as_slice()))
        .unwrap_or_default();
    let port = info
        .and_then(|i| i.port)
        .and_then(|p| u16::try_from(p).ok())
        .or_else(|| port_in(argv))
        .unwrap_or(DEFAULT_PORT);
    with_user(format!("mongodb://127.0.0.1:{port}/"), false)
}

/// The `--port N` / `--port=N` of a command line.
fn port_in(argv: &[String]) -> Option<u16> {
    let mut args = argv.iter();
    while let Some(a) = args.next() {
        if let Some(v) = a.strip_prefix("--port=") {
            return v.parse().ok();
        }
        if a == "--port" {
            return args.next()?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    #[test]
    fn arguments_come_from_the_recorded_server_never_with_a_secret() {
        let mut rec = testdata::baseline();
        let m = rec.mongod.get_or_insert_with(Default::default);
        m.uri = Some("mongodb://***@db.example:27018/?replicaSet=rs0&authSource=admin".into());
        let args = mongosh_args(&rec);
        assert_eq!(
            args,
            format!(
                "'mongodb://db.example:27018/?replicaSet=rs0&authSource=admin' {USERNAME_ARGS}"
            )
        );
        // A URI without a user: no --username.
        rec.mongod.as_mut().unwrap().uri = Some("mongodb://10.0.0.5:27019".into());
        assert_eq!(mongosh_args(&rec), "mongodb://10.0.0.5:27019");
        // An unredacted URI (never stored so, but never trusted): no secret out.
        rec.mongod.as_mut().unwrap().uri = Some("mongodb://root:hunter22@h:1/?tls=true".into());
        let args = mongosh_args(&rec);
        assert!(
            !args.contains("hunter22") && !args.contains("root"),
            "{args}"
        );
        // No URI (FTDC, or a target found without --uri): mongod's own port.
        let m = rec.mongod.as_mut().unwrap();
        m.uri = None;
        m.info.get_or_insert_with(Default::default).argv =
            vec!["/usr/bin/mongod".into(), "--port".into(), "27020".into()];
        assert_eq!(mongosh_args(&rec), "mongodb://127.0.0.1:27020/");
        // FTDC's getCmdLineOpts: the configured port, and authentication on.
        let i = rec.mongod.as_mut().unwrap().info.as_mut().unwrap();
        i.port = Some(27021);
        i.auth = Some(true);
        assert_eq!(
            mongosh_args(&rec),
            format!("mongodb://127.0.0.1:27021/ {USERNAME_ARGS}")
        );
        rec.mongod = None;
        if let Some(t) = rec.target.as_mut() {
            t.cmdline = vec!["mongod".into(), "--port=28017".into()];
        }
        assert_eq!(mongosh_args(&rec), "mongodb://127.0.0.1:28017/");
        rec.target = None;
        assert_eq!(mongosh_args(&rec), "mongodb://127.0.0.1:27017/");
    }
}
