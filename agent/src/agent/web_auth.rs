//! Basic authentication of `/metrics` against the bcrypt hashes of the web
//! configuration file's `basic_auth_users`, as exporter-toolkit does it.
//!
//! bcrypt is slow by design (~70 ms at cost 10) and Prometheus sends the
//! same credentials every scrape, so a verified pair is remembered: by a
//! SHA-256 of user, password and hash (no password is kept), in a set of at
//! most [`CACHE_MAX`] entries, emptied when full. Failures are never
//! remembered. An unknown user is checked against a hash of the same cost,
//! so the time taken does not say which users exist. At most [`PARALLEL`]
//! bcrypt checks run at once, off the server's thread: wrong passwords
//! cost the host bounded CPU.

use std::{
    collections::{BTreeMap, HashSet},
    str::FromStr,
    sync::{Arc, Mutex},
};

use base64::Engine;

/// Verified credentials remembered at most.
pub const CACHE_MAX: usize = 64;
/// bcrypt checks running at once at most.
pub const PARALLEL: usize = 2;

/// The `WWW-Authenticate` value of a 401.
pub const CHALLENGE: &str = "Basic realm=\"mdiag\"";

/// What a request's `Authorization` header is checked against.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    /// Checked when the user is unknown (same cost as the users' hashes).
    decoy: String,
    verified: Mutex<HashSet<[u8; 32]>>,
    gate: tokio::sync::Semaphore,
}

impl BasicAuth {
    /// `users`: name → bcrypt hash, as `WebConfig` checked them. Computes
    /// the decoy hash once (one bcrypt, at start).
    pub fn new(users: BTreeMap<String, String>) -> Result<Self, bcrypt::BcryptError> {
        let cost = users
            .values()
            .filter_map(|h| bcrypt::HashParts::from_str(h).ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let decoy = bcrypt::hash("mdiag: no such user", cost)?;
        Ok(Self {
            users,
            decoy,
            verified: Mutex::new(HashSet::new()),
            gate: tokio::sync::Semaphore::new(PARALLEL),
        })
    }

    /// Whether `header` (the request's `Authorization`) names a user with
    /// their password.
    pub async fn allows(self: &Arc<Self>, header: Option<&[u8]>) -> bool {
        let Some((user, password)) = header.and_then(credentials) else {
            return false;
        };
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.clone(), true),
            None => (self.decoy.clone(), false),
        };
        let key = cache_key(&user, &password, &hash);
        if known && self.remembered(&key) {
            return true;
        }
        // The semaphore is never closed: an error cannot happen, and
        // would only mean "no".
        let Ok(_permit) = self.gate.acquire().await else {
            return false;
        };
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .is_ok_and(|r| r.unwrap_or(false));
        if ok && known {
            self.remember(key);
        }
        ok && known
    }

    fn remembered(&self, key: &[u8; 32]) -> bool {
        self.verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }

    fn remember(&self, key: [u8; 32]) {
        let mut set = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if set.len() >= CACHE_MAX {
            set.clear();
        }
        set.insert(key);
    }

    /// Entries remembered now (for tests).
    pub fn remembered_count(&self) -> usize {
        self.verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

/// User and password of `Basic <base64(user:password)>`.
fn credentials(header: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// SHA-256 of the three, each length-prefixed (no two triples collide by
/// moving a boundary).
fn cache_key(user: &str, password: &str, hash: &str) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [user, password, hash] {
        ctx.update(&(part.len() as u64).to_le_bytes());
        ctx.update(part.as_bytes());
    }
    let mut out = [0; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {b64}").into_bytes()
    }

    fn auth() -> Arc<BasicAuth> {
        // Cost 4, bcrypt's least: the test checks logic, not cost.
        let hash = bcrypt::hash("s3cret:with colon", 4).unwrap();
        Arc::new(BasicAuth::new([("prometheus".to_owned(), hash)].into()).unwrap())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_right_pair_passes_and_only_it_is_remembered() {
        let a = auth();
        assert!(!a.allows(None).await);
        assert!(!a.allows(Some(b"Bearer abc")).await);
        assert!(!a.allows(Some(b"Basic !!!")).await);
        assert!(!a.allows(Some(&basic("prometheus", "wrong"))).await);
        assert!(!a.allows(Some(&basic("nobody", "s3cret:with colon"))).await);
        assert_eq!(a.remembered_count(), 0);
        assert!(
            a.allows(Some(&basic("prometheus", "s3cret:with colon")))
                .await
        );
        assert_eq!(a.remembered_count(), 1);
        // Remembered: the same pair again adds nothing; a wrong one still fails.
        assert!(
            a.allows(Some(&basic("prometheus", "s3cret:with colon")))
                .await
        );
        assert!(!a.allows(Some(&basic("prometheus", "s3cret"))).await);
        assert_eq!(a.remembered_count(), 1);
        // The scheme's name is case-insensitive (RFC 7617).
        let mut lower = basic("prometheus", "s3cret:with colon");
        lower[..5].copy_from_slice(b"basic");
        assert!(a.allows(Some(&lower)).await);
    }

    #[test]
    fn the_memory_is_bounded() {
        let a = auth();
        for i in 0..(CACHE_MAX * 3) {
            a.remember(cache_key("u", &i.to_string(), "h"));
            assert!(a.remembered_count() <= CACHE_MAX);
        }
    }

    #[test]
    fn keys_differ_when_a_boundary_moves() {
        assert_ne!(cache_key("ab", "c", "h"), cache_key("a", "bc", "h"));
    }
}
