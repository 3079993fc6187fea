//! Workload: TCP echo over 127.0.0.1 for a while, so the host runs NET_RX and
//! NET_TX softirqs. Traffic stays on the loopback interface.
//!
//! mdiag-loopback --ms MS    prints {"round_trips": N, "bytes": B} when done.
use anyhow::Context as _;
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::{Duration, Instant},
};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let ms: u64 = args
        .iter()
        .position(|a| a == "--ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
    let addr = listener.local_addr().context("local addr")?;
    let server = std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let _ = s.set_nodelay(true);
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut c = TcpStream::connect(addr).context("connect")?;
    let _ = c.set_nodelay(true);
    let msg = [7u8; 1024];
    let mut buf = [0u8; 1024];
    let (mut n, mut bytes) = (0u64, 0u64);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(ms) {
        if c.write_all(&msg).is_err() || c.read_exact(&mut buf).is_err() {
            break;
        }
        n += 1;
        bytes += 2 * msg.len() as u64;
    }
    drop(c);
    let _ = server.join();
    println!("{}", serde_json::json!({"round_trips": n, "bytes": bytes}));
    Ok(())
}
