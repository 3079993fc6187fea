//! Function names as people read them: C++ (Itanium ABI, `_Z…`) and Rust
//! (`_R…`, and the older `_ZN…17h<hash>E`) symbols demangled.
//!
//! Why: mongod is C++; its profile read as `_ZN5mongo9LockStatsINS_10Atomic…`
//! tells an SRE nothing. The recording keeps the linkage names (rules and
//! slow-path patterns match them); the report shows these. Parameters are
//! left out (`mongo::LockStats<…>::report`, not its whole signature), as
//! profilers' tables and flame graphs do, so that a name fits its column.
//! Demangling is done by well-kept crates (gimli-rs' `cpp_demangle`, the
//! Rust project's `rustc-demangle`), never by hand.

use std::borrow::Cow;

/// `name` demangled when it is a C++ or Rust symbol, else as it is.
pub fn readable(name: &str) -> Cow<'_, str> {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        // `{:#}`: without the hash suffix.
        return Cow::Owned(format!("{rust:#}"));
    }
    if name.starts_with("_Z")
        && let Ok(symbol) = cpp_demangle::Symbol::new(name)
    {
        let options = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Ok(text) = symbol.demangle_with_options(&options) {
            return Cow::Owned(text);
        }
    }
    Cow::Borrowed(name)
}

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn cpp_and_rust_names_read_as_written_and_others_are_left_alone() {
        for (mangled, readable_name) in [
            // From mongod 6.0.5's own symbol table.
            (
                "_ZN5mongo9LockStatsINS_10AtomicWordIxEEE5resetEv",
                "mongo::LockStats<mongo::AtomicWord<long long> >::reset",
            ),
            ("_Znwm", "operator new"),
            ("_ZdlPv", "operator delete"),
            (
                "_ZN8tcmalloc11ThreadCache21ReleaseToCentralCacheEPNS0_8FreeListEmi",
                "tcmalloc::ThreadCache::ReleaseToCentralCache",
            ),
            // Rust, legacy and v0.
            (
                "_ZN4core3ptr13drop_in_place17h1234567890abcdefE",
                "core::ptr::drop_in_place",
            ),
            ("_RNvCs15kBYyAo9fc_7mycrate4main", "mycrate::main"),
            // C and what is not a symbol at all.
            ("malloc", "malloc"),
            ("__wt_session_get_dhandle", "__wt_session_get_dhandle"),
            ("_Z", "_Z"),
            ("_ZN5mongo", "_ZN5mongo"),
            ("", ""),
        ] {
            assert_eq!(readable(mangled), readable_name, "{mangled}");
        }
    }
}
