//! The once-per-recording facts from the replies of buildInfo,
//! getCmdLineOpts and hostInfo, whether they came from a live server or from
//! an FTDC metadata document (which holds the same three replies).

use bson::{Bson, Document};

use crate::recording::StorageFacts;
use crate::recording::mongod::MongodInfo;

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
        info.sync_period_secs = float(o, &["parsed", "storage", "syncPeriodSecs"]);
        // A config file says `replication.replSetName`; `--replSet NAME`
        // arrives as `replication.replSet`, possibly with the old seed list
        // ("rs0/host1:27017,host2:27017").
        info.replica_set = string(o, &["parsed", "replication", "replSetName"]).or_else(|| {
            string(o, &["parsed", "replication", "replSet"])
                .and_then(|v| v.split('/').next().map(str::to_owned))
                .filter(|name| !name.is_empty())
        });
        info.cluster_role = string(o, &["parsed", "sharding", "clusterRole"]);
        info.port = int(o, &["parsed", "net", "port"]);
        let authorization = string(o, &["parsed", "security", "authorization"]);
        let key_file = string(o, &["parsed", "security", "keyFile"]);
        info.auth = Some(authorization.as_deref() == Some("enabled") || key_file.is_some());
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
        info.host_mem_limit_mb = int(h, &["system", "memLimitMB"]);
        info.numa_nodes = int(h, &["system", "numNumaNodes"]);
        info.libc_version = string(h, &["extra", "libcVersion"]);
        info.max_open_files = int(h, &["extra", "maxOpenFiles"]);
        info.page_size = int(h, &["extra", "pageSize"]);
    }
    if let Some(h) = host {
        let db_path = info
            .db_path
            .clone()
            .unwrap_or_else(|| DEFAULT_DB_PATH.into());
        info.db_path_mount = mount_of(h, &db_path);
    }
    info
}

/// mongod's dbPath when neither the command line nor the configuration file
/// sets one (`storage.dbPath` default on Linux and macOS).
pub const DEFAULT_DB_PATH: &str = "/data/db";

/// The mount holding `path` in hostInfo.extra.mountInfo (mongod 5.0+): the
/// longest mount point that is a whole-component prefix of `path`. Symbolic
/// links in `path` cannot be resolved from here (the server's file system is
/// not ours), so a dbPath reached through a link names the link's mount.
pub fn mount_of(host: &Document, path: &str) -> Option<StorageFacts> {
    let mounts = get(host, &["extra", "mountInfo"])?.as_array()?;
    let within = |mp: &str| {
        mp == "/"
            || path == mp
            || path
                .strip_prefix(mp)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    // The last of equally long mount points is the one on top (mountinfo
    // lists mounts in the order they were made).
    let best = mounts
        .iter()
        .filter_map(Bson::as_document)
        .filter(|m| m.get_str("mountPoint").is_ok_and(within))
        .enumerate()
        .max_by_key(|(i, m)| (m.get_str("mountPoint").map_or(0, str::len), *i))
        .map(|(_, m)| m)?;
    let words = |k: &str| {
        best.get_str(k).ok().map(|o| {
            let mut v: Vec<String> = o
                .split(',')
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect();
            v.sort();
            v
        })
    };
    let num = |k: &str| int(best, &[k]);
    Some(StorageFacts {
        path: path.to_owned(),
        mount_point: best.get_str("mountPoint").ok().map(str::to_owned),
        fs_type: best.get_str("type").ok().map(str::to_owned),
        source: best.get_str("source").ok().map(str::to_owned),
        mount_options: words("options"),
        super_options: words("superOpt"),
        device: match (num("major"), num("minor")) {
            (Some(a), Some(b)) => Some(format!("{a}:{b}")),
            _ => None,
        },
        ..StorageFacts::default()
    })
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

/// The feature compatibility version of a `getParameter:
/// featureCompatibilityVersion` reply: (`version`, `targetVersion`).
pub fn fcv(reply: &Document) -> (Option<String>, Option<String>) {
    let path = |key| string(reply, &["featureCompatibilityVersion", key]);
    (path("version"), path("targetVersion"))
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
                "cacheSizeGB": 4.5, "configString": "eviction_target=80" } } },
                "replication": { "replSetName": "rs0" }, "sharding": { "clusterRole": "shardsvr" } },
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
        assert_eq!(i.replica_set.as_deref(), Some("rs0"));
        assert_eq!(i.cluster_role.as_deref(), Some("shardsvr"));
        assert_eq!(i.wt_config_string.as_deref(), Some("eviction_target=80"));
        assert_eq!(i.argv.len(), 3);
        assert_eq!(
            (i.host_cores, i.host_mem_mb, i.host_numa),
            (Some(8), Some(32000), Some(false))
        );
        assert_eq!(i.os.as_deref(), Some("Ubuntu 22.04"));
        assert_eq!(kernel_version(&host).as_deref(), Some("5.15.0-100-generic"));
        // `--replSet` on the command line, with and without a seed list.
        for given in ["rs1", "rs1/db1:27017,db2:27017"] {
            let cli = doc! { "parsed": { "replication": { "replSet": given } } };
            let i = from_documents(None, Some(&cli), None);
            assert_eq!(i.replica_set.as_deref(), Some("rs1"), "{given}");
        }
        assert_eq!((i.port, i.auth), (None, Some(false)));
        // The port and authentication, as a config file gives them.
        let secured = doc! { "parsed": { "net": { "port": 27018 },
        "security": { "authorization": "enabled" } } };
        let i = from_documents(None, Some(&secured), None);
        assert_eq!((i.port, i.auth), (Some(27018), Some(true)));
        let keyed = doc! { "parsed": { "security": { "keyFile": "/etc/mongo.key" } } };
        assert_eq!(from_documents(None, Some(&keyed), None).auth, Some(true));
        // Missing replies and fields are None, never an error.
        let empty = from_documents(None, None, None);
        assert_eq!(empty, MongodInfo::default());
        let no_auth = from_documents(None, Some(&doc! { "parsed": {} }), None);
        assert_eq!(
            no_auth,
            MongodInfo {
                auth: Some(false),
                ..MongodInfo::default()
            }
        );
    }
}
