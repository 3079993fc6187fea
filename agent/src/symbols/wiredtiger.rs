//! Whether WiredTiger is in the target, in which object, and which checkpoint
//! functions can be probed: `__wt_txn_checkpoint` (the checkpoint of a
//! transaction), the `__wt_checkpoint*` entry points and, when `.symtab` kept
//! them, the static `__checkpoint_*` steps (GCC may suffix those `.isra.0`,
//! `.constprop.0`, `.part.0`: such clones are listed as found).

use serde::{Deserialize, Serialize};

use super::names::ObjectNames;

/// Where the WiredTiger code lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WiredTigerHost {
    /// Statically linked into the main executable (mongod).
    MainExecutable,
    /// The Python binding's `_wiredtiger*.so`.
    PythonModule,
    /// `libwiredtiger*.so`.
    SharedLibrary,
    /// Another shared object.
    OtherObject,
}

/// What was found about WiredTiger; `Default` is "not present".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WiredTigerReport {
    pub present: bool,
    /// The object holding it.
    pub object: Option<String>,
    pub host: Option<WiredTigerHost>,
    /// `wiredtiger_version` is defined there.
    pub version_symbol: bool,
    /// `__wt_txn_checkpoint` is defined there.
    pub txn_checkpoint: bool,
    /// Checkpoint functions present, sorted: `__wt_txn_checkpoint`,
    /// `__wt_checkpoint*`, `__checkpoint_*`.
    pub checkpoint_functions: Vec<String>,
}

/// Whether a function name is one of WiredTiger's checkpoint functions.
pub fn is_checkpoint_function(name: &str) -> bool {
    name == "__wt_txn_checkpoint"
        || name.starts_with("__wt_checkpoint")
        || name.starts_with("__checkpoint_")
}

fn host_of(o: &ObjectNames<'_>) -> WiredTigerHost {
    let file = o.file_name();
    if o.is_main {
        WiredTigerHost::MainExecutable
    } else if file.starts_with("_wiredtiger") && file.contains(".so") {
        WiredTigerHost::PythonModule
    } else if file.starts_with("libwiredtiger") && file.contains(".so") {
        WiredTigerHost::SharedLibrary
    } else {
        WiredTigerHost::OtherObject
    }
}

/// Finds WiredTiger: the first object (main executable first) that defines
/// `wiredtiger_version` or `__wt_txn_checkpoint`.
pub fn detect_wiredtiger(objects: &[ObjectNames<'_>]) -> WiredTigerReport {
    let found = objects
        .iter()
        .find(|o| o.has("wiredtiger_version") || o.has("__wt_txn_checkpoint"));
    let Some(o) = found else {
        return WiredTigerReport::default();
    };
    let mut checkpoint_functions: Vec<String> = o
        .names()
        .filter(|n| is_checkpoint_function(n))
        .map(|n| n.to_string())
        .collect();
    checkpoint_functions.sort_unstable();
    checkpoint_functions.dedup();
    WiredTigerReport {
        present: true,
        object: Some(o.path.to_string()),
        host: Some(host_of(o)),
        version_symbol: o.has("wiredtiger_version"),
        txn_checkpoint: o.has("__wt_txn_checkpoint"),
        checkpoint_functions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mongod_main_executable() {
        let main = ObjectNames::new(
            "/usr/bin/mongod",
            true,
            [
                "main",
                "wiredtiger_version",
                "__wt_txn_checkpoint",
                "__wt_checkpoint_close",
                "__wt_checkpoint",
                "__checkpoint_prepare.isra.0",
                "__checkpoint_flush_tier",
                "__wt_txn_begin",
                "checkpoint_unrelated",
            ],
        );
        let libc = ObjectNames::new("/lib/libc.so.6", false, ["malloc"]);
        let r = detect_wiredtiger(&[main, libc]);
        assert!(r.present && r.version_symbol && r.txn_checkpoint);
        assert_eq!(r.host, Some(WiredTigerHost::MainExecutable));
        assert_eq!(r.object.as_deref(), Some("/usr/bin/mongod"));
        assert_eq!(
            r.checkpoint_functions,
            [
                "__checkpoint_flush_tier",
                "__checkpoint_prepare.isra.0",
                "__wt_checkpoint",
                "__wt_checkpoint_close",
                "__wt_txn_checkpoint",
            ]
        );
    }

    #[test]
    fn python_module_and_shared_library_and_absent() {
        let main = ObjectNames::new("/usr/bin/python3.11", true, ["main"]);
        let py = ObjectNames::new(
            "/usr/lib/python3/dist-packages/_wiredtiger.cpython-311-x86_64-linux-gnu.so",
            false,
            ["PyInit__wiredtiger"],
        );
        let lib = ObjectNames::new(
            "/usr/lib/libwiredtiger-11.2.0.so",
            false,
            ["wiredtiger_version"],
        );
        let r = detect_wiredtiger(&[main.clone(), py, lib]);
        assert_eq!(r.host, Some(WiredTigerHost::SharedLibrary));
        assert!(r.version_symbol && !r.txn_checkpoint && r.checkpoint_functions.is_empty());
        let py = ObjectNames::new("/x/_wiredtiger.so", false, ["__wt_txn_checkpoint"]);
        assert_eq!(
            detect_wiredtiger(&[py]).host,
            Some(WiredTigerHost::PythonModule)
        );
        let r = detect_wiredtiger(&[main]);
        assert!(!r.present && r.object.is_none());
    }
}
