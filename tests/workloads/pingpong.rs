//! Workload: two threads bounce a byte through a pair of pipes for a while,
//! so the host does many (voluntary) context switches per second.
//!
//! mdiag-pingpong --ms MS    prints {"round_trips": N} when done.
use std::{
    io::{Read, Write},
    os::unix::net::UnixStream,
    time::{Duration, Instant},
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ms: u64 = args
        .iter()
        .position(|a| a == "--ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        while b.read_exact(&mut buf).is_ok() {
            if buf[0] == 0 || b.write_all(&buf).is_err() {
                break;
            }
        }
    });
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
    println!("{}", serde_json::json!({"round_trips": n}));
}
