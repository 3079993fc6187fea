//! Unit tests of `debuginfod.rs`: a stripped C shared object (built as
//! `debuginfo_tests.rs` does) whose debug file only a local HTTP server
//! (a `TcpListener` thread) serves. The configuration is passed, never
//! read from the process's environment. Needs `cc` and binutils.

use std::io::{BufRead as _, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::symbols::ObjectCache;
use crate::symbols::elf::ElfObject;

const SOURCE: &str = r#"
static int __attribute__((noinline)) mdiag_fetched_helper(int x) { return x * 3 + 1; }
int mdiag_fetched_api(int x) { return mdiag_fetched_helper(x) + 2; }
"#;
const HIDDEN: &str = "mdiag_fetched_helper";

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("run {program} (cc and binutils are needed): {e}"));
    assert!(status.success(), "{program} {args:?} failed");
}

/// Builds `source` in `dir`: (unstripped, debug file, stripped: no
/// `.symtab`, no debug link).
fn build(dir: &Path, source: &str) -> (PathBuf, PathBuf, PathBuf) {
    let c = dir.join("fetched.c");
    std::fs::write(&c, source).unwrap();
    let (full, debug, stripped) = (
        dir.join("libfetched-full.so"),
        dir.join("libfetched.debug"),
        dir.join("libfetched.so"),
    );
    let s = |p: &PathBuf| p.to_str().unwrap().to_owned();
    run(
        "cc",
        &[
            "-g",
            "-O0",
            "-shared",
            "-fPIC",
            "-Wl,--build-id",
            "-o",
            &s(&full),
            &s(&c),
        ],
    );
    run("objcopy", &["--only-keep-debug", &s(&full), &s(&debug)]);
    run("strip", &["--strip-all", "-o", &s(&stripped), &s(&full)]);
    (full, debug, stripped)
}

fn build_id(path: &Path) -> Vec<u8> {
    ElfObject::open(path).unwrap().build_id().unwrap().to_vec()
}

/// A server answering `GET /buildid/<id>/debuginfo` with `files`' bytes
/// (404 otherwise), counting the requests; runs for the test process.
fn serve(files: Vec<(String, Vec<u8>)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = answer(stream, &files);
        }
    });
    (url, requests)
}

fn answer(mut stream: TcpStream, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? <= 2 {
            break;
        }
    }
    let path = request.split(' ').nth(1).unwrap_or("");
    match files
        .iter()
        .find(|(id, _)| path == format!("/buildid/{id}/debuginfo"))
    {
        Some((_, body)) => {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            stream.write_all(body)?;
        }
        None => write!(
            stream,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?,
    }
    stream.flush()
}

fn config(urls: Vec<String>, cache_dir: &Path) -> DebuginfodConfig {
    DebuginfodConfig {
        urls,
        cache_dir: cache_dir.to_path_buf(),
        timeout: Duration::from_secs(5),
        max_time: Duration::from_secs(10),
        max_bytes: MAX_BYTES,
        env_proxy: false,
    }
}

/// A cache with no local debug directory, asking `config`'s servers.
fn cache(dir: &Path, config: Option<DebuginfodConfig>) -> ObjectCache {
    ObjectCache::new(8)
        .with_debug_dirs(vec![dir.join("no-debug-dir")])
        .with_debuginfod(config)
}

/// A listener that must never be contacted: `assert_untouched` fails the
/// test if a connection is waiting.
struct Tripwire(TcpListener);

impl Tripwire {
    fn new() -> Tripwire {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Tripwire(l)
    }
    fn url(&self) -> String {
        format!("http://{}", self.0.local_addr().unwrap())
    }
    fn assert_untouched(&self) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the server was contacted: {other:?}"),
        }
    }
}

#[test]
fn the_static_function_comes_through_the_server_then_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (full, debug, stripped) = build(dir.path(), SOURCE);
    let id = build_id(&stripped);
    let value = ElfObject::open(&full)
        .unwrap()
        .function(HIDDEN)
        .unwrap()
        .value;
    let (url, requests) = serve(vec![(hex(&id), std::fs::read(&debug).unwrap())]);
    let cache_dir = dir.path().join("cache");

    let without = cache(dir.path(), None).open(&stripped).unwrap();
    assert!(
        without.function(HIDDEN).is_none(),
        "only through the server"
    );

    let o = cache(dir.path(), Some(config(vec![url.clone()], &cache_dir)))
        .open(&stripped)
        .unwrap();
    let kept = cache_dir.join(hex(&id)).join("debuginfo");
    assert_eq!(o.debug_file(), Some(kept.as_path()));
    assert_eq!(o.function(HIDDEN).map(|f| f.value), Some(value));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        std::fs::read(&debug).unwrap()
    );
    let leftovers: Vec<_> = std::fs::read_dir(kept.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["debuginfo"], "the temporary file was renamed");

    // Another process (a new client): the cache, not the server.
    let again = cache(dir.path(), Some(config(vec![url], &cache_dir)))
        .open(&stripped)
        .unwrap();
    assert_eq!(again.function(HIDDEN).map(|f| f.value), Some(value));
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "server not contacted again"
    );
}

#[test]
fn servers_are_asked_in_order_and_a_failure_is_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let (_, debug, stripped) = build(dir.path(), SOURCE);
    let id = build_id(&stripped);
    let (empty, asked_first) = serve(Vec::new());
    let (good, asked_second) = serve(vec![(hex(&id), std::fs::read(&debug).unwrap())]);
    let client = Debuginfod::new(config(vec![empty.clone(), good], &dir.path().join("c1")));
    assert!(client.debug_file(&id).is_some());
    assert_eq!(
        (
            asked_first.load(Ordering::SeqCst),
            asked_second.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
    // A 404 everywhere: asked once per build-id for the life of the client.
    let client = Debuginfod::new(config(vec![empty], &dir.path().join("c2")));
    assert!(client.debug_file(&id).is_none());
    assert!(client.debug_file(&id).is_none());
    assert_eq!(asked_first.load(Ordering::SeqCst), 2);
}

#[test]
fn a_file_of_another_build_id_or_too_large_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, stripped) = build(dir.path(), SOURCE);
    let id = build_id(&stripped);
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let (_, other_debug, _) = build(
        &other_dir,
        &format!("{SOURCE}\nint more(void) {{ return 7; }}\n"),
    );
    let (url, _) = serve(vec![(hex(&id), std::fs::read(&other_debug).unwrap())]);
    let cache_dir = dir.path().join("cache");
    let client = Debuginfod::new(config(vec![url], &cache_dir));
    assert!(client.debug_file(&id).is_none());
    assert!(!client.cache_path(&id).exists(), "not kept");

    let (_, debug, _) = build(dir.path(), SOURCE);
    let (url, _) = serve(vec![(hex(&id), std::fs::read(&debug).unwrap())]);
    let mut small = config(vec![url], &cache_dir);
    small.max_bytes = 100;
    assert!(Debuginfod::new(small).debug_file(&id).is_none());
    assert!(!client.cache_path(&id).exists(), "not kept");
}

#[test]
fn a_silent_server_times_out() {
    let dir = tempfile::tempdir().unwrap();
    // Accepts (the backlog) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let mut c = config(vec![url], dir.path());
    c.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    assert!(Debuginfod::new(c).debug_file(&[1, 2, 3, 4]).is_none());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn unset_or_empty_urls_never_connect() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, stripped) = build(dir.path(), SOURCE);
    let tripwire = Tripwire::new();
    let cache_path = dir.path().join("cache").into_os_string();
    for urls in [None, Some(""), Some("   "), Some("ima:enforcing")] {
        let vars = |name: &str| match name {
            "DEBUGINFOD_URLS" => urls.map(OsString::from),
            "DEBUGINFOD_CACHE_PATH" => Some(cache_path.clone()),
            _ => None,
        };
        let config = DebuginfodConfig::from_vars(vars);
        assert_eq!(config, None, "{urls:?}");
        let o = cache(dir.path(), config).open(&stripped).unwrap();
        assert!(o.function(HIDDEN).is_none());
    }
    tripwire.assert_untouched();
    // The same tripwire named by the variable is contacted: the check is live.
    let url = tripwire.url();
    let vars = |name: &str| match name {
        "DEBUGINFOD_URLS" => Some(OsString::from(&url)),
        "DEBUGINFOD_CACHE_PATH" => Some(cache_path.clone()),
        _ => None,
    };
    let mut config = DebuginfodConfig::from_vars(vars).unwrap();
    config.timeout = Duration::from_millis(200);
    config.env_proxy = false;
    let _ = cache(dir.path(), Some(config)).open(&stripped).unwrap();
    assert!(tripwire.0.accept().is_ok(), "contacted when configured");
}

#[test]
fn an_object_with_a_symtab_is_never_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (full, _, _) = build(dir.path(), SOURCE);
    let tripwire = Tripwire::new();
    let o = cache(dir.path(), Some(config(vec![tripwire.url()], dir.path())))
        .open(&full)
        .unwrap();
    assert!(o.function(HIDDEN).is_some());
    tripwire.assert_untouched();
}

#[test]
fn the_environment_is_read_as_elfutils_documents() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let c = DebuginfodConfig::from_vars(vars(&[
        (
            "DEBUGINFOD_URLS",
            " https://a.example/ ima:enforcing http://b.example:8002 file:///x ",
        ),
        ("HOME", "/nonexistent-home"),
    ]))
    .unwrap();
    assert_eq!(c.urls, ["https://a.example", "http://b.example:8002"]);
    assert_eq!(
        c.cache_dir,
        Path::new("/nonexistent-home/.cache/debuginfod_client")
    );
    assert_eq!(c.timeout, MAX_TIMEOUT, "90 s by default, capped");
    assert_eq!((c.max_time, c.max_bytes), (MAX_TIME, MAX_BYTES));
    assert!(c.env_proxy);
    let c = DebuginfodConfig::from_vars(vars(&[
        ("DEBUGINFOD_URLS", "https://a.example"),
        ("XDG_CACHE_HOME", "/xdg"),
        ("HOME", "/home/u"),
        ("DEBUGINFOD_TIMEOUT", "7"),
        ("DEBUGINFOD_MAXTIME", "9999"),
        ("DEBUGINFOD_MAXSIZE", "1000"),
    ]))
    .unwrap();
    assert_eq!(c.cache_dir, Path::new("/xdg/debuginfod_client"));
    assert_eq!(c.timeout, Duration::from_secs(7));
    assert_eq!((c.max_time, c.max_bytes), (MAX_TIME, 1000));
    let c = DebuginfodConfig::from_vars(vars(&[
        ("DEBUGINFOD_URLS", "https://a.example"),
        ("DEBUGINFOD_CACHE_PATH", "/var/cache/d"),
        ("XDG_CACHE_HOME", "/xdg"),
    ]))
    .unwrap();
    assert_eq!(c.cache_dir, Path::new("/var/cache/d"));
    // No cache directory at all: not used.
    let none = DebuginfodConfig::from_vars(vars(&[("DEBUGINFOD_URLS", "https://a.example")]));
    assert_eq!(none, None);
}
