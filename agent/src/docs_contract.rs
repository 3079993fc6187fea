//! Keeps `docs/ARCHITECTURE.md`'s probe family table true (test builds only),
//! as `report/contract.rs` does for `docs/report-json.md`.
//!
//! The table under "## Probe families" must name exactly the families of
//! [`crate::probes::FAMILIES`] (the names `Probes::attach` records in each
//! `ProbeStatus`), which must also be the kernel side's modules
//! (`ebpf/mdiag-ebpf/src/main.rs`) and the sections of a recording's
//! `Slice`. For each family, the "programs" column must name exactly the
//! program kinds of its kernel file (`tp_btf`, `uprobe`, `perf_event`, ...),
//! and the "attaches to" column every BTF tracepoint that file attaches to.
//! And "How to add a probe family" names only files that exist.

use std::collections::BTreeSet;

use crate::probes::FAMILIES;

const DOC: &str = include_str!("../../docs/ARCHITECTURE.md");
const KERNEL_MAIN: &str = include_str!("../../ebpf/mdiag-ebpf/src/main.rs");

/// One row of the family table: name, programs, attach points.
struct Row {
    family: String,
    programs: String,
    attaches_to: String,
}

/// The rows of the table under "## Probe families".
fn documented_families() -> Vec<Row> {
    doc_section("## Probe families")
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            assert!(cells.len() >= 5, "a short row of the family table: {l}");
            Row {
                family: cells[1].trim_matches('`').to_string(),
                programs: cells[2].to_string(),
                attaches_to: cells[3].to_string(),
            }
        })
        .collect()
}

/// The `backticked` words of a table cell.
fn backticked(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The kernel-side source of `family`.
fn kernel_source(family: &str) -> String {
    let path = format!(
        "{}/../ebpf/mdiag-ebpf/src/{family}.rs",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The program kinds of a kernel file, named as the kernel and the
/// recording's attach points name them (`#[btf_tracepoint]` is `tp_btf`).
fn program_kinds(source: &str) -> BTreeSet<String> {
    const MACROS: [(&str, &str); 10] = [
        ("btf_tracepoint", "tp_btf"),
        ("tracepoint", "tracepoint"),
        ("raw_tracepoint", "raw_tp"),
        ("kprobe", "kprobe"),
        ("kretprobe", "kretprobe"),
        ("uprobe", "uprobe"),
        ("uretprobe", "uretprobe"),
        ("perf_event", "perf_event"),
        ("fentry", "fentry"),
        ("fexit", "fexit"),
    ];
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#["))
        .filter_map(|attr| {
            let name = attr.split(['(', ']']).next()?;
            MACROS
                .iter()
                .find(|(m, _)| *m == name)
                .map(|(_, kind)| kind.to_string())
        })
        .collect()
}

/// The tracepoints of a kernel file's `#[btf_tracepoint(function = "...")]`.
fn btf_tracepoints(source: &str) -> BTreeSet<String> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#[btf_tracepoint(function = \""))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

fn code_families() -> BTreeSet<String> {
    FAMILIES.iter().map(|f| f.name.to_string()).collect()
}

#[test]
fn the_family_table_names_exactly_the_code_families() {
    let rows = documented_families();
    let documented: BTreeSet<String> = rows.iter().map(|r| r.family.clone()).collect();
    assert_eq!(
        documented.len(),
        rows.len(),
        "docs/ARCHITECTURE.md: a family is listed twice"
    );
    let code = code_families();
    assert_eq!(
        FAMILIES.len(),
        code.len(),
        "probes::FAMILIES names a family twice"
    );
    assert_eq!(
        documented, code,
        "docs/ARCHITECTURE.md's family table (left) and probes::FAMILIES (right) differ"
    );
}

#[test]
fn every_family_has_a_kernel_module_and_a_slice_section() {
    let modules: BTreeSet<String> = KERNEL_MAIN
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect();
    assert_eq!(
        modules,
        code_families(),
        "the modules of ebpf/mdiag-ebpf/src/main.rs (left) and probes::FAMILIES (right) differ"
    );
    // A slice without any section, written back: every section's key.
    let slice: crate::recording::model::Slice =
        serde_json::from_str(r#"{"start_ms": 0, "duration_ms": 1000}"#).expect("a bare slice");
    let slice = serde_json::to_value(&slice).expect("slice");
    let sections: BTreeSet<String> = slice
        .as_object()
        .expect("a slice is an object")
        .keys()
        .filter(|k| !["start_ms", "duration_ms", "mongod"].contains(&k.as_str()))
        .cloned()
        .collect();
    assert_eq!(
        sections,
        code_families(),
        "the family sections of a recording's Slice (left) and probes::FAMILIES (right) differ"
    );
}

#[test]
fn each_row_says_how_its_family_attaches() {
    let mut problems = Vec::new();
    for row in documented_families() {
        let family = &row.family;
        let source = kernel_source(family);
        let kinds = program_kinds(&source);
        let documented = backticked(&row.programs);
        if kinds.is_empty() || documented != kinds {
            problems.push(format!(
                "{family}: the programs column says {documented:?}, \
                 ebpf/mdiag-ebpf/src/{family}.rs defines {kinds:?}"
            ));
        }
        let named = backticked(&row.attaches_to);
        let missing: Vec<_> = btf_tracepoints(&source)
            .into_iter()
            .filter(|tp| !named.contains(tp))
            .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "{family}: tracepoints not in the \"attaches to\" column: {missing:?}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md's family table:\n{}",
        problems.join("\n")
    );
}

#[test]
fn program_kinds_are_read_from_the_attributes() {
    let src = "#[map]\nstatic M: u32 = 0;\n#[btf_tracepoint(function = \"sched_switch\")]\n\
               fn a() {}\n#[uprobe(multi)]\nfn b() {}\n#[uretprobe]\nfn c() {}\n";
    assert_eq!(
        program_kinds(src),
        ["tp_btf", "uprobe", "uretprobe"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert_eq!(
        btf_tracepoints(src),
        BTreeSet::from(["sched_switch".to_string()])
    );
}

/// The section of `DOC` under `heading` ("## ..."), up to the next one.
fn doc_section(heading: &str) -> &'static str {
    let start = DOC
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md has a \"{heading}\" section"));
    let section = &DOC[start + 1..];
    section[1..]
        .find("\n## ")
        .map_or(section, |end| &section[..=end])
}

/// "How to add a probe family" names real files: every backticked path in
/// it (a word with a `/` ending in `.rs`, `.md` or `.toml`), with
/// `<family>` and `<group>` read as `softirq` (a family with one file per
/// layer), exists from the repository's root or from `agent/src/`.
#[test]
fn the_steps_to_add_a_family_name_files_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let paths: Vec<String> = doc_section("## How to add a probe family")
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.contains('/') && !w.contains([' ', '*']))
        .filter(|w| [".rs", ".md", ".toml"].iter().any(|e| w.ends_with(e)))
        .map(|w| {
            w.replace("<family>", "softirq")
                .replace("<group>", "softirq")
        })
        .collect();
    assert!(paths.len() >= 15, "too few paths found: {paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !root.join(p).exists() && !root.join("agent/src").join(p).exists())
        .collect();
    assert!(missing.is_empty(), "named but missing: {missing:?}");
}
