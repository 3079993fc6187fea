//! The feature compatibility version (FCV): what the fix of
//! `mongod.feature_compatibility` runs. `setFeatureCompatibilityVersion`
//! takes the version as `"major.minor"` and, from 7.0, `confirm: true`
//! (MongoDB's manual, setFeatureCompatibilityVersion: "Changed in version
//! 7.0"); 6.0 and earlier refuse the field.
//!
//! The `--eval` argument is built here from the two numbers of a parsed
//! version, never from recorded text, so a fix command holds nothing the
//! server sent but digits.

use super::lifecycle::series;

/// `--eval`'s argument, one single-quoted shell word, that sets the FCV of
/// a server running `binary` (its buildInfo version) to `to` ("5.0");
/// `None` when either does not parse as a release.
pub fn set_eval(binary: &str, to: &str) -> Option<String> {
    let (binary_major, _) = series(binary)?;
    let (major, minor) = series(to)?;
    let confirm = if binary_major >= 7 {
        ", confirm: true"
    } else {
        ""
    };
    Some(format!(
        "'db.adminCommand({{setFeatureCompatibilityVersion: \"{major}.{minor}\"{confirm}}})'"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirm_from_7_0_and_only_digits_from_the_server() {
        assert_eq!(
            set_eval("6.0.5", "6.0").as_deref(),
            Some("'db.adminCommand({setFeatureCompatibilityVersion: \"6.0\"})'")
        );
        assert_eq!(
            set_eval("8.2.1", "8.2").as_deref(),
            Some("'db.adminCommand({setFeatureCompatibilityVersion: \"8.2\", confirm: true})'")
        );
        // The revert to a recorded 6.0 on a 7.0 binary needs confirm too.
        assert!(set_eval("7.0.14", "6.0").unwrap().contains("confirm: true"));
        // Text that is not a release gives no command.
        assert_eq!(set_eval("6.0.5", "6.0'; rm -rf /"), None);
        assert_eq!(set_eval("6.0.5", "latest"), None);
        assert_eq!(set_eval("dev", "6.0"), None);
    }
}
