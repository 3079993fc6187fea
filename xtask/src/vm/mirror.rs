//! The host's main Debian mirror, for the sources of a private apt state
//! (see `apt.rs`): read from `/etc/apt/sources.list.d/debian.sources`
//! (deb822) or `/etc/apt/sources.list` (one-line), never the security one.
//!
//! Why the host's: it is the mirror this machine can reach (a proxy or a
//! local mirror, maybe), and its keyring is the one apt already trusts.
use std::fs;

/// Where Debian's archive keys are (for the private apt sources).
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

pub(super) struct Mirror {
    pub(super) uri: String,
    pub(super) signed_by: String,
}

/// The host's main Debian mirror (not the security one), from
/// `/etc/apt/sources.list.d/debian.sources` or `/etc/apt/sources.list`.
pub(super) fn host_mirror() -> Mirror {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    mirror_from_deb822(&read("/etc/apt/sources.list.d/debian.sources"))
        .or_else(|| mirror_from_list(&read("/etc/apt/sources.list")))
        .unwrap_or_else(|| Mirror {
            uri: DEFAULT_MIRROR.to_owned(),
            signed_by: DEBIAN_KEYRING.to_owned(),
        })
}

fn is_security(uri: &str, suites: &str) -> bool {
    uri.contains("security") || suites.split_whitespace().all(|s| s.ends_with("-security"))
}

/// The first deb822 stanza with a `deb` type and a non-security source.
fn mirror_from_deb822(text: &str) -> Option<Mirror> {
    text.split("\n\n").find_map(|stanza| {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
            })
        };
        let uri = field("URIs")?.split_whitespace().next()?;
        let types = field("Types").unwrap_or("deb");
        let suites = field("Suites").unwrap_or("");
        if !types.split_whitespace().any(|t| t == "deb") || is_security(uri, suites) {
            return None;
        }
        // A path; an inline key block does not fit in a one-line source.
        let signed_by = field("Signed-By")
            .filter(|s| s.starts_with('/'))
            .unwrap_or(DEBIAN_KEYRING);
        Some(Mirror {
            uri: uri.to_owned(),
            signed_by: signed_by.to_owned(),
        })
    })
}

/// The first non-security `deb URI SUITE …` line of a one-line sources.list.
fn mirror_from_list(text: &str) -> Option<Mirror> {
    text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        if words.next()? != "deb" {
            return None;
        }
        let mut uri = words.next()?;
        if uri.starts_with('[') {
            // Options: "[a=b c=d]", one word or several.
            if !uri.ends_with(']') {
                words.find(|w| w.ends_with(']'))?;
            }
            uri = words.next()?;
        }
        let suite = words.next()?;
        (!is_security(uri, suite)).then(|| Mirror {
            uri: uri.to_owned(),
            signed_by: DEBIAN_KEYRING.to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_mirror_is_found_not_the_security_one() {
        let deb822 = "\
Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /etc/apt/keyrings/mine.gpg
";
        let m = mirror_from_deb822(deb822).unwrap();
        assert_eq!(m.uri, "http://mirror.example/debian");
        assert_eq!(m.signed_by, "/etc/apt/keyrings/mine.gpg");
        let list = "# comment\ndeb http://security.debian.org/ bookworm-security main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://ftp.de.debian.org/debian bookworm main\n";
        assert_eq!(
            mirror_from_list(list).unwrap().uri,
            "http://ftp.de.debian.org/debian"
        );
        let list = "deb [trusted=yes] http://m.example/debian bookworm main\n";
        assert_eq!(
            mirror_from_list(list).unwrap().uri,
            "http://m.example/debian"
        );
        assert!(mirror_from_deb822("").is_none());
    }
}
