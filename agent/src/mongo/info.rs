//! The once-per-recording facts from the replies of buildInfo,
//! getCmdLineOpts and hostInfo, whether they came from a live server or from
//! an FTDC metadata document (which holds the same three replies).

use bson::{Bson, Document};

use super::model::MongodInfo;

/// Reads what mdiag keeps from the three replies; each may be missing.
pub fn from_documents(
    build: Option<&Document>,
    opts: Option<&Document>,
    host: Option<&Document>,
) -> MongodInfo {
    let mut info = MongodInfo::default();
    if let Some(b) = build {
        info.version = string(b, &["version"]);
        info.git_version = string(b, &["gitVersion"]);
        info.allocator = string(b, &["allocator"]);
        info.target_os = string(b, &["buildEnvironment", "target_os"]);
        info.modules = match b.get_array("modules") {
            Ok(a) => a
                .iter()
                .filter_map(|m| m.as_str().map(str::to_owned))
                .collect(),
            Err(_) => Vec::new(),
        };
    }
    if let Some(o) = opts {
        info.db_path = string(o, &["parsed", "storage", "dbPath"]);
        let engine = ["parsed", "storage", "wiredTiger", "engineConfig"];
        info.cache_size_gb = float(o, &[&engine[..], &["cacheSizeGB"]].concat());
        info.wt_config_string = string(o, &[&engine[..], &["configString"]].concat());
        info.argv = match o.get_array("argv") {
            Ok(a) => a
                .iter()
                .filter_map(|m| m.as_str().map(str::to_owned))
                .collect(),
            Err(_) => Vec::new(),
        };
    }
    if let Some(h) = host {
        info.host_name = string(h, &["system", "hostname"]);
        info.host_cores = int(h, &["system", "numCores"]);
        info.host_mem_mb = int(h, &["system", "memSizeMB"]);
        info.host_numa = match get(h, &["system", "numaEnabled"]) {
            Some(Bson::Boolean(b)) => Some(*b),
            _ => None,
        };
        info.host_cpu_arch = string(h, &["system", "cpuArch"]);
        info.os = match (string(h, &["os", "name"]), string(h, &["os", "version"])) {
            (Some(n), Some(v)) => Some(format!("{n} {v}")),
            (n, v) => n.or(v),
        };
        info.os_type = string(h, &["os", "type"]);
    }
    info
}

impl MongodInfo {
    /// Whether mongod runs on Linux, as far as buildInfo and hostInfo say:
    /// `None` when neither names the operating system.
    pub fn is_linux(&self) -> Option<bool> {
        let named = [self.os_type.as_deref(), self.target_os.as_deref()];
        let mut known = named.into_iter().flatten().map(str::trim).peekable();
        known.peek()?;
        Some(known.all(|os| os.eq_ignore_ascii_case("linux")))
    }
}

/// The kernel release hostInfo reports (`extra.kernelVersion`), if any.
pub fn kernel_version(host: &Document) -> Option<String> {
    string(host, &["extra", "kernelVersion"])
}

pub(crate) fn get<'a>(doc: &'a Document, path: &[&str]) -> Option<&'a Bson> {
    let (last, parents) = path.split_last()?;
    let mut d = doc;
    for p in parents {
        d = d.get_document(p).ok()?;
    }
    d.get(last)
}

pub(crate) fn string(doc: &Document, path: &[&str]) -> Option<String> {
    get(doc, path).and_then(Bson::as_str).map(str::to_owned)
}

pub(crate) fn int(doc: &Document, path: &[&str]) -> Option<i64> {
    match get(doc, path)? {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

fn float(doc: &Document, path: &[&str]) -> Option<f64> {
    match get(doc, path)? {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn reads_the_three_replies() {
        let build = doc! { "version": "8.2.1", "allocator": "tcmalloc-google", "modules": ["enterprise"], "gitVersion": "abc" };
        let opts = doc! {
            "argv": ["mongod", "--config", "/etc/mongod.conf"],
            "parsed": { "storage": { "dbPath": "/var/lib/mongo", "wiredTiger": { "engineConfig": {
                "cacheSizeGB": 4.5, "configString": "eviction_target=80" } } } },
        };
        let host = doc! {
            "system": { "hostname": "db1", "numCores": 8, "memSizeMB": 32000_i64, "numaEnabled": false, "cpuArch": "x86_64" },
            "os": { "name": "Ubuntu", "version": "22.04" },
            "extra": { "kernelVersion": "5.15.0-100-generic" },
        };
        let i = from_documents(Some(&build), Some(&opts), Some(&host));
        assert_eq!(i.version.as_deref(), Some("8.2.1"));
        assert_eq!(i.allocator.as_deref(), Some("tcmalloc-google"));
        assert_eq!(i.modules, vec!["enterprise"]);
        assert_eq!(i.db_path.as_deref(), Some("/var/lib/mongo"));
        assert_eq!(i.cache_size_gb, Some(4.5));
        assert_eq!(i.wt_config_string.as_deref(), Some("eviction_target=80"));
        assert_eq!(i.argv.len(), 3);
        assert_eq!(
            (i.host_cores, i.host_mem_mb, i.host_numa),
            (Some(8), Some(32000), Some(false))
        );
        assert_eq!(i.os.as_deref(), Some("Ubuntu 22.04"));
        assert_eq!(kernel_version(&host).as_deref(), Some("5.15.0-100-generic"));
        // Missing replies and fields are None, never an error.
        let empty = from_documents(None, Some(&doc! { "parsed": {} }), None);
        assert_eq!(empty, MongodInfo::default());
    }
}
