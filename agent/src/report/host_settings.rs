//! The host settings behind the production-notes rules that are read from
//! the disk and the kernel rather than measured: the data directory's disk
//! and its readahead, and memory overcommit. Built from the same facts the
//! rules read (`storage`, `tuning`), so the report and the rules agree.

use serde::{Deserialize, Serialize};

use crate::rules::{FactValue, Facts};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSettings {
    /// The data directory (dbPath) and its disk; `None` when unknown (see
    /// `data_dir_unknown`).
    pub data_dir: Option<DataDir>,
    /// Why the data directory or its disk is unknown.
    pub data_dir_unknown: Option<String>,
    /// vm.overcommit_* and the commit figures; `None` when not recorded.
    pub overcommit: Option<Overcommit>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataDir {
    pub path: String,
    pub found_by: String,
    pub fs_type: Option<String>,
    pub disk: Option<String>,
    pub read_ahead_kb: Option<i64>,
    pub rotational: Option<bool>,
    pub scheduler: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overcommit {
    /// vm.overcommit_memory: 0 heuristic, 1 always, 2 strict.
    pub mode: i64,
    pub ratio: Option<i64>,
    pub kbytes: Option<i64>,
    pub commit_limit_gib: Option<f64>,
    pub committed_as_gib: Option<f64>,
}

fn text(v: Option<&FactValue>) -> Option<String> {
    match v? {
        FactValue::Text(s) => Some(s.clone()),
        _ => None,
    }
}

fn int(v: Option<&FactValue>) -> Option<i64> {
    match v? {
        FactValue::Int(i) => Some(*i),
        _ => None,
    }
}

/// The settings of a recording; `None` when neither was recorded (a
/// host-wide recording of an older mdiag).
pub fn build(facts: &Facts) -> Option<HostSettings> {
    let mut s = HostSettings::default();
    match facts.group("storage") {
        Some(g) => {
            s.data_dir = Some(DataDir {
                path: text(g.get("db_path")).unwrap_or_default(),
                found_by: text(g.get("found_by")).unwrap_or_default(),
                fs_type: text(g.get("fs_type")),
                disk: text(g.get("disk")),
                read_ahead_kb: int(g.get("read_ahead_kb")),
                rotational: match g.get("rotational") {
                    Some(FactValue::Bool(b)) => Some(*b),
                    _ => None,
                },
                scheduler: text(g.get("scheduler")),
            })
        }
        None => s.data_dir_unknown = facts.absent_reason("storage").map(str::to_owned),
    }
    s.overcommit = facts.group("tuning").and_then(|g| {
        Some(Overcommit {
            mode: int(g.get("overcommit_memory"))?,
            ratio: int(g.get("overcommit_ratio")),
            kbytes: int(g.get("overcommit_kbytes")),
            commit_limit_gib: g.get("commit_limit_gib").and_then(FactValue::as_f64),
            committed_as_gib: g.get("committed_as_gib").and_then(FactValue::as_f64),
        })
    });
    (s.data_dir.is_some() || s.overcommit.is_some()).then_some(s)
}

impl HostSettings {
    /// One line per setting, in plain words.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        match (&self.data_dir, &self.data_dir_unknown) {
            (Some(d), _) => {
                let mut l = format!("data directory {} (from {})", d.path, d.found_by);
                if let Some(disk) = &d.disk {
                    l.push_str(&format!(
                        ": {} on {disk}",
                        d.fs_type.as_deref().unwrap_or("unknown file system")
                    ));
                }
                if let Some(kb) = d.read_ahead_kb {
                    l.push_str(&format!(", readahead {kb} KiB ({} sectors)", kb * 2));
                }
                match d.rotational {
                    Some(true) => l.push_str(", spinning disk"),
                    Some(false) => l.push_str(", non-rotational"),
                    None => {}
                }
                if let Some(s) = &d.scheduler {
                    l.push_str(&format!(", I/O scheduler {s}"));
                }
                out.push(l);
            }
            (None, Some(why)) => out.push(format!("data directory unknown: {why}")),
            (None, None) => {}
        }
        if let Some(o) = &self.overcommit {
            let mode = match o.mode {
                0 => "heuristic",
                1 => "always",
                2 => "strict",
                _ => "unknown mode",
            };
            let mut l = format!(
                "memory overcommit: vm.overcommit_memory {} ({mode})",
                o.mode
            );
            match (o.kbytes, o.ratio) {
                (Some(kb), _) if kb > 0 => l.push_str(&format!(", overcommit_kbytes {kb}")),
                (_, Some(r)) => l.push_str(&format!(", overcommit_ratio {r} %")),
                _ => {}
            }
            if let (Some(limit), Some(used)) = (o.commit_limit_gib, o.committed_as_gib) {
                l.push_str(&format!(
                    "; committed {used:.1} GiB of a CommitLimit of {limit:.1} GiB{}",
                    if o.mode == 2 {
                        " (enforced)"
                    } else {
                        " (not enforced in this mode)"
                    }
                ));
            }
            out.push(l);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::facts::example_recording;

    #[test]
    fn lines_from_the_facts() {
        let rec = example_recording();
        let s = build(&Facts::derive(&rec)).unwrap();
        let d = s.data_dir.as_ref().unwrap();
        assert_eq!(
            (d.path.as_str(), d.disk.as_deref(), d.read_ahead_kb),
            ("/data/db", Some("nvme0n1"), Some(128))
        );
        let lines = s.lines();
        assert_eq!(
            lines[0],
            "data directory /data/db (from open file WiredTiger.lock): xfs on nvme0n1, \
             readahead 128 KiB (256 sectors), non-rotational, I/O scheduler none"
        );
        assert_eq!(
            lines[1],
            "memory overcommit: vm.overcommit_memory 0 (heuristic), overcommit_ratio 50 %; \
             committed 20.0 GiB of a CommitLimit of 40.0 GiB (not enforced in this mode)"
        );
    }

    #[test]
    fn unknown_data_directory_says_why() {
        let mut rec = example_recording();
        rec.host.db_path = None;
        let s = build(&Facts::derive(&rec)).unwrap();
        assert_eq!(s.data_dir, None);
        assert!(
            s.lines()[0].starts_with(
                "data directory unknown: the data directory (dbPath) was not recorded"
            )
        );
        rec.host.memory = None;
        assert_eq!(build(&Facts::derive(&rec)), None);
    }
}
