//! Workload: two threads bounce a byte through a pair of pipes for a while,
//! so the host does many (voluntary) context switches per second.
//!
//! mdiag-pingpong --ms MS [--hold]    prints {"round_trips": N, "ms": MS} when done.
//!
//! With `--hold` it prints `ready` once both threads exist and starts
//! bouncing only when a line arrives on stdin, so that an observer can
//! attach to it first (the benches count only the observed round trips).
use anyhow::Context as _;
use std::{
    io::{BufRead, Read, Write},
    os::unix::net::UnixStream,
    time::{Duration, Instant},
};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let ms: u64 = args
        .iter()
        .position(|a| a == "--ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let hold = args.iter().any(|a| a == "--hold");
    let (mut a, mut b) = UnixStream::pair().context("socketpair")?;
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        while b.read_exact(&mut buf).is_ok() {
            if buf[0] == 0 || b.write_all(&buf).is_err() {
                break;
            }
        }
    });
    if hold {
        println!("ready");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
            // Released by nobody: stop the echo thread and say nothing.
            let _ = a.write_all(&[0]);
            let _ = echo.join();
            return Ok(());
        }
    }
    let t = Instant::now();
    let mut n = 0u64;
    let mut buf = [1u8; 1];
    while t.elapsed() < Duration::from_millis(ms) {
        if a.write_all(&[1]).is_err() || a.read_exact(&mut buf).is_err() {
            break;
        }
        n += 1;
    }
    let _ = a.write_all(&[0]);
    let _ = echo.join();
    println!(
        "{}",
        serde_json::json!({"round_trips": n, "ms": t.elapsed().as_millis() as u64})
    );
    Ok(())
}
