//! The pprof protobuf: a [`Profile`] as a gzip-compressed `profile.proto`
//! (<https://github.com/google/pprof/blob/main/proto/profile.proto>), what
//! `go tool pprof`, speedscope, Pyroscope and most profile viewers read.
//! `mdiag export --pprof` writes it.
//!
//! The messages are declared here by hand with prost's derive, only the
//! fields we write (field numbers as in `profile.proto`): no build script,
//! no protoc. What goes in:
//!
//! - sample types: on CPU `samples/count` and `cpu/nanoseconds` (one sample
//!   stands for 1/`freq_hz` s, the `period`, of `cpu/nanoseconds`), as Go's
//!   own CPU profiles do; off CPU `off_cpu/nanoseconds`;
//! - one sample per stack, locations leaf first (pprof's order; ours are
//!   root first), with a `thread_class` string label (`-tagfocus`,
//!   `-tagroot`, `-traces` show it), and off CPU, when known, an
//!   `in_checkpoint` one (`true`, `false`: the waits began inside a
//!   checkpoint);
//! - one location and one function per distinct frame (function, object),
//!   without address or line: the frames come symbolized, and the mappings
//!   say so (`has_functions`), so pprof does not try to symbolize again;
//! - one mapping per distinct object, its file name the object's
//!   (`[kernel]` for kernel frames);
//! - a truncated stack (the unwinder stopped before the thread's entry
//!   point) gets a `[truncated]` pseudo-frame at its root, without mapping;
//! - function names go in `name` only: `system_name` is for the mangled name,
//!   which we do not keep, and pprof, seeing one equal to `name`, would
//!   shorten C++ names (parameters and templates dropped) as if it had
//!   demangled them itself.

use std::collections::HashMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use prost::Message;

use super::folded::TRUNCATED;
use super::{Frame, Profile, ProfileKind};

/// Why a profile could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PprofError {
    /// An on-CPU profile without its sampling frequency: no CPU time can be
    /// given to its samples.
    #[error("the on-CPU profile has no sampling frequency (freq_hz is 0)")]
    NoFrequency,
    #[error("writing the pprof profile: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes `profile` as a gzip-compressed pprof `profile.proto`.
pub fn write_pprof(profile: &Profile, out: &mut impl Write) -> Result<(), PprofError> {
    let encoded = to_proto(profile)?.encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&encoded)?;
    gz.finish()?;
    Ok(())
}

/// The messages of `profile.proto` that we write, fields we leave unset
/// omitted.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        /// `string_table[0]` must be "".
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        /// Index into the string table; unset, readers take the last type.
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// Leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// 0: no mapping.
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// The label key of the thread class.
const THREAD_CLASS: &str = "thread_class";
/// The label key of [`super::ProfileStack::in_checkpoint`], when known.
const IN_CHECKPOINT: &str = "in_checkpoint";

/// `profile` as pprof messages.
fn to_proto(profile: &Profile) -> Result<proto::Profile, PprofError> {
    let mut b = Builder::default();
    // Index 0 of the string table is "".
    b.string("");
    let value_type = |b: &mut Builder, t: &str, u: &str| proto::ValueType {
        r#type: b.string(t),
        unit: b.string(u),
    };
    let (sample_type, period_type, period) = match profile.kind {
        ProfileKind::OnCpu => {
            if profile.freq_hz == 0 {
                return Err(PprofError::NoFrequency);
            }
            (
                vec![
                    value_type(&mut b, "samples", "count"),
                    value_type(&mut b, "cpu", "nanoseconds"),
                ],
                Some(value_type(&mut b, "cpu", "nanoseconds")),
                int(NANOS_PER_SECOND / profile.freq_hz),
            )
        }
        ProfileKind::OffCpu => (vec![value_type(&mut b, "off_cpu", "nanoseconds")], None, 0),
    };
    let thread_class = b.string(THREAD_CLASS);
    let mut sample = Vec::with_capacity(profile.stacks.len());
    for stack in &profile.stacks {
        let mut location_id: Vec<u64> = stack.frames.iter().rev().map(|f| b.frame(f)).collect();
        if stack.truncated {
            location_id.push(b.truncated());
        }
        let value = match profile.kind {
            ProfileKind::OnCpu => {
                let cpu = u128::from(stack.value) * u128::from(NANOS_PER_SECOND)
                    / u128::from(profile.freq_hz);
                vec![int(stack.value), i64::try_from(cpu).unwrap_or(i64::MAX)]
            }
            ProfileKind::OffCpu => vec![int(stack.value)],
        };
        let mut label = vec![proto::Label {
            key: thread_class,
            str: b.string(&stack.class),
            ..Default::default()
        }];
        if let Some(inside) = stack.in_checkpoint {
            label.push(proto::Label {
                key: b.string(IN_CHECKPOINT),
                str: b.string(if inside { "true" } else { "false" }),
                ..Default::default()
            });
        }
        sample.push(proto::Sample {
            location_id,
            value,
            label,
        });
    }
    Ok(proto::Profile {
        sample_type,
        sample,
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        string_table: b.strings,
        duration_nanos: int(profile.duration_ns),
        period_type,
        period,
        ..Default::default()
    })
}

/// A value for an `int64` field (ours are far below its maximum).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The tables of a profile being built, each entry added once.
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: HashMap<String, u64>,
    locations: Vec<proto::Location>,
    functions: Vec<proto::Function>,
    /// Location (and function: same id) of each frame.
    frame_ids: HashMap<Frame, u64>,
    /// The `[truncated]` pseudo-frame's location, once added.
    truncated_id: Option<u64>,
}

impl Builder {
    /// Index of `s` in the string table.
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = int(self.strings.len() as u64);
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    /// Id of the mapping of `object`.
    fn mapping(&mut self, object: &str) -> u64 {
        if let Some(&id) = self.mapping_ids.get(object) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(object);
        self.mappings.push(proto::Mapping {
            id,
            filename,
            has_functions: true,
            ..Default::default()
        });
        self.mapping_ids.insert(object.to_owned(), id);
        id
    }

    /// A location and its function, named `function`, in `mapping_id`.
    fn location(&mut self, function: &str, mapping_id: u64) -> u64 {
        let id = self.locations.len() as u64 + 1;
        let name = self.string(function);
        self.functions.push(proto::Function {
            id,
            name,
            ..Default::default()
        });
        self.locations.push(proto::Location {
            id,
            mapping_id,
            line: vec![proto::Line {
                function_id: id,
                line: 0,
            }],
            ..Default::default()
        });
        id
    }

    /// Id of the location of `frame`.
    fn frame(&mut self, frame: &Frame) -> u64 {
        if let Some(&id) = self.frame_ids.get(frame) {
            return id;
        }
        let mapping_id = self.mapping(&frame.object);
        let id = self.location(&frame.function, mapping_id);
        self.frame_ids.insert(frame.clone(), id);
        id
    }

    /// Id of the `[truncated]` pseudo-frame (no mapping).
    fn truncated(&mut self) -> u64 {
        if let Some(id) = self.truncated_id {
            return id;
        }
        let id = self.location(TRUNCATED, 0);
        self.truncated_id = Some(id);
        id
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::stacks::{KERNEL_OBJECT, test_stack as stack};

    /// An on-CPU profile at 100 Hz: 10 ms per sample.
    fn on_cpu() -> Profile {
        Profile {
            kind: ProfileKind::OnCpu,
            freq_hz: 100,
            duration_ns: 5_000_000_000,
            stacks: vec![
                stack(
                    "conn",
                    &[
                        ("start_thread", "libc.so.6"),
                        ("mongo::ServiceStateMachine::run", "mongod"),
                        ("__wt_btcur_search", "mongod"),
                    ],
                    false,
                    60,
                ),
                stack(
                    "conn",
                    &[
                        ("start_thread", "libc.so.6"),
                        ("mongo::ServiceStateMachine::run", "mongod"),
                        ("recv", "libc.so.6"),
                        ("tcp_recvmsg", KERNEL_OBJECT),
                    ],
                    false,
                    25,
                ),
                stack(
                    "WTCheckpointThr",
                    &[("__wt_checkpoint", "mongod"), ("__wt_evict", "mongod")],
                    true,
                    15,
                ),
            ],
        }
    }

    fn written(p: &Profile) -> Vec<u8> {
        let mut out = Vec::new();
        write_pprof(p, &mut out).unwrap();
        out
    }

    fn decode(gz: &[u8]) -> proto::Profile {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut raw)
            .unwrap();
        proto::Profile::decode(raw.as_slice()).unwrap()
    }

    fn string(p: &proto::Profile, i: i64) -> &str {
        &p.string_table[usize::try_from(i).unwrap()]
    }

    fn types(p: &proto::Profile) -> Vec<(&str, &str)> {
        p.sample_type
            .iter()
            .map(|t| (string(p, t.r#type), string(p, t.unit)))
            .collect()
    }

    /// The (function, mapping file) of each location of `s`, leaf first.
    fn frames<'a>(p: &'a proto::Profile, s: &proto::Sample) -> Vec<(&'a str, &'a str)> {
        s.location_id
            .iter()
            .map(|&id| {
                let loc = p.location.iter().find(|l| l.id == id).unwrap();
                assert_eq!(loc.line.len(), 1);
                let f = p
                    .function
                    .iter()
                    .find(|f| f.id == loc.line[0].function_id)
                    .unwrap();
                let file = match loc.mapping_id {
                    0 => "",
                    m => {
                        let m = p.mapping.iter().find(|x| x.id == m).unwrap();
                        string(p, m.filename)
                    }
                };
                (string(p, f.name), file)
            })
            .collect()
    }

    fn class<'a>(p: &'a proto::Profile, s: &proto::Sample) -> &'a str {
        assert_eq!(s.label.len(), 1);
        assert_eq!(string(p, s.label[0].key), "thread_class");
        string(p, s.label[0].str)
    }

    #[test]
    fn on_cpu_profile_decodes_back() {
        let gz = written(&on_cpu());
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "not gzip");
        let p = decode(&gz);
        assert_eq!(p.string_table[0], "");
        assert_eq!(types(&p), [("samples", "count"), ("cpu", "nanoseconds")]);
        let period_type = p.period_type.as_ref().unwrap();
        assert_eq!(
            (string(&p, period_type.r#type), string(&p, period_type.unit)),
            ("cpu", "nanoseconds")
        );
        assert_eq!(p.period, 10_000_000);
        assert_eq!(p.duration_nanos, 5_000_000_000);

        assert_eq!(p.sample.len(), 3);
        let s = &p.sample[0];
        assert_eq!(class(&p, s), "conn");
        assert_eq!(s.value, [60, 600_000_000]);
        assert_eq!(
            frames(&p, s),
            [
                ("__wt_btcur_search", "mongod"),
                ("mongo::ServiceStateMachine::run", "mongod"),
                ("start_thread", "libc.so.6"),
            ]
        );
        let s = &p.sample[1];
        assert_eq!(s.value, [25, 250_000_000]);
        assert_eq!(
            frames(&p, s),
            [
                ("tcp_recvmsg", "[kernel]"),
                ("recv", "libc.so.6"),
                ("mongo::ServiceStateMachine::run", "mongod"),
                ("start_thread", "libc.so.6"),
            ]
        );
        // The shared frames are the same locations.
        assert_eq!(p.sample[0].location_id[1..], p.sample[1].location_id[2..]);
        let s = &p.sample[2];
        assert_eq!(class(&p, s), "WTCheckpointThr");
        assert_eq!(s.value, [15, 150_000_000]);
        assert_eq!(
            frames(&p, s),
            [
                ("__wt_evict", "mongod"),
                ("__wt_checkpoint", "mongod"),
                ("[truncated]", ""),
            ]
        );
    }

    #[test]
    fn tables_hold_each_entry_once() {
        let p = decode(&written(&on_cpu()));
        // 7 distinct frames and the [truncated] pseudo-frame.
        assert_eq!(p.location.len(), 8);
        assert_eq!(p.function.len(), 8);
        let ids: Vec<u64> = p.location.iter().map(|l| l.id).collect();
        assert_eq!(ids, (1..=8).collect::<Vec<_>>());
        let mut files: Vec<&str> = p.mapping.iter().map(|m| string(&p, m.filename)).collect();
        files.sort_unstable();
        assert_eq!(files, ["[kernel]", "libc.so.6", "mongod"]);
        assert!(p.mapping.iter().all(|m| m.id != 0 && m.has_functions));
        let mut strings = p.string_table.clone();
        strings.sort_unstable();
        strings.dedup();
        assert_eq!(strings.len(), p.string_table.len(), "{:?}", p.string_table);
        // Names in `name` only (see the module's header).
        assert!(p.function.iter().all(|f| f.system_name == 0));
    }

    #[test]
    fn off_cpu_profile_has_one_value() {
        let mut profile = on_cpu();
        profile.kind = ProfileKind::OffCpu;
        profile.freq_hz = 0;
        profile.stacks[0].in_checkpoint = Some(false);
        profile.stacks[2].in_checkpoint = Some(true);
        let p = decode(&written(&profile));
        assert_eq!(types(&p), [("off_cpu", "nanoseconds")]);
        let labels: Vec<Vec<(&str, &str)>> = p
            .sample
            .iter()
            .map(|s| {
                s.label
                    .iter()
                    .map(|l| (string(&p, l.key), string(&p, l.str)))
                    .collect()
            })
            .collect();
        assert_eq!(
            labels,
            [
                vec![("thread_class", "conn"), ("in_checkpoint", "false")],
                vec![("thread_class", "conn")],
                vec![
                    ("thread_class", "WTCheckpointThr"),
                    ("in_checkpoint", "true")
                ],
            ]
        );
        assert_eq!(p.period_type, None);
        let values: Vec<&[i64]> = p.sample.iter().map(|s| s.value.as_slice()).collect();
        assert_eq!(values, [&[60][..], &[25], &[15]]);
    }

    #[test]
    fn on_cpu_without_frequency_is_an_error() {
        let mut profile = on_cpu();
        profile.freq_hz = 0;
        let mut out = Vec::new();
        let err = write_pprof(&profile, &mut out).unwrap_err();
        assert!(matches!(err, PprofError::NoFrequency), "{err}");
    }

    #[test]
    fn an_empty_profile_is_valid() {
        let profile = Profile {
            stacks: vec![],
            ..on_cpu()
        };
        let p = decode(&written(&profile));
        assert!(p.sample.is_empty() && p.location.is_empty());
        assert_eq!(p.string_table[0], "");
    }

    /// Says loudly that `test` was skipped, as `crate::emulation` does: on
    /// the terminal (not captured by the harness) and in `MDIAG_SKIP_LOG`.
    fn skipped(test: &str, why: &str) {
        let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
        if let Some(log) = std::env::var_os(crate::emulation::SKIP_LOG_ENV)
            && let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }

    /// Runs `go tool pprof` with `args` on `file`; its standard output.
    fn go_pprof(go: &std::path::Path, dir: &std::path::Path, args: &[&str]) -> String {
        let out = std::process::Command::new(go)
            .args(["tool", "pprof"])
            .args(args)
            .arg("profile.pb.gz")
            .current_dir(dir)
            // No toolchain download, no symbolization, nothing in $HOME.
            .env("GOTOOLCHAIN", "local")
            .env("PPROF_TMPDIR", dir)
            .env("PPROF_BINARY_PATH", dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "go tool pprof {args:?}: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The profile reads in Google's own reader: `go tool pprof` shows the
    /// functions with their counts, and the stacks in order.
    #[test]
    fn go_tool_pprof_reads_the_profile() {
        let test = "stacks::pprof::tests::go_tool_pprof_reads_the_profile";
        let Ok(go) = which::which("go") else {
            skipped(
                test,
                "no `go` on PATH: `go tool pprof` cannot check the file",
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("profile.pb.gz"), written(&on_cpu())).unwrap();

        let top = go_pprof(&go, dir.path(), &["-top", "-sample_index=samples"]);
        // `flat flat% sum% cum cum% name`, for each function.
        let row = |name: &str| -> (u64, u64) {
            let line = top
                .lines()
                .find(|l| l.trim_end().ends_with(&format!(" {name}")))
                .unwrap_or_else(|| panic!("no {name} in:\n{top}"));
            let words: Vec<&str> = line.split_whitespace().collect();
            (words[0].parse().unwrap(), words[3].parse().unwrap())
        };
        assert!(top.contains("Type: samples"), "{top}");
        assert!(top.contains("of 100 total"), "{top}");
        assert_eq!(row("__wt_btcur_search"), (60, 60));
        assert_eq!(row("tcp_recvmsg"), (25, 25));
        assert_eq!(row("__wt_evict"), (15, 15));
        assert_eq!(row("recv"), (0, 25));
        assert_eq!(row("mongo::ServiceStateMachine::run"), (0, 85));
        assert_eq!(row("start_thread"), (0, 85));
        assert_eq!(row("[truncated]"), (0, 15));

        let cpu = go_pprof(&go, dir.path(), &["-top", "-sample_index=cpu"]);
        assert!(cpu.contains("Type: cpu"), "{cpu}");
        assert!(cpu.contains("of 1000ms total"), "{cpu}");

        // Blocks of `thread_class: <class>`, `<count> <leaf>`, callers.
        let traces = go_pprof(&go, dir.path(), &["-traces", "-sample_index=samples"]);
        let mut got: Vec<(String, u64, Vec<String>)> = traces
            .split("-----------+")
            .filter_map(|block| {
                let mut lines = block.lines().map(str::trim).filter(|l| !l.is_empty());
                let class = lines.find_map(|l| l.strip_prefix("thread_class:"))?;
                let (count, leaf) = lines.next()?.split_once(' ')?;
                let mut frames = vec![leaf.trim().to_owned()];
                frames.extend(lines.map(str::to_owned));
                Some((class.trim().to_owned(), count.parse().ok()?, frames))
            })
            .collect();
        got.sort();
        let want = |class: &str, count, frames: &[&str]| {
            let frames = frames.iter().map(|f| (*f).to_owned()).collect();
            (class.to_owned(), count, frames)
        };
        let mut expected = vec![
            want(
                "conn",
                60,
                &[
                    "__wt_btcur_search",
                    "mongo::ServiceStateMachine::run",
                    "start_thread",
                ],
            ),
            want(
                "conn",
                25,
                &[
                    "tcp_recvmsg",
                    "recv",
                    "mongo::ServiceStateMachine::run",
                    "start_thread",
                ],
            ),
            want(
                "WTCheckpointThr",
                15,
                &["__wt_evict", "__wt_checkpoint", "[truncated]"],
            ),
        ];
        expected.sort();
        assert_eq!(got, expected, "{traces}");
    }
}
