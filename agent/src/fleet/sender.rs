//! Delivery from the spool to the store, on a thread of its own (with its
//! own runtime for the driver), so a slow or dead store never delays the
//! agent's windows: the agent only appends to the spool ([`Fleet::submit`]).
//!
//! The sender reads the oldest undelivered records, writes them (at most
//! `replay_rate` per second: a token bucket, so a long outage's backlog
//! does not hit the store at once), and acknowledges what the store
//! acknowledged. A failure waits an exponential backoff with full jitter
//! (so a fleet of agents that lost the store together does not come back
//! together), then tries the same records again. One line is logged when
//! the store becomes reachable or unreachable, never one per write.

use std::{
    path::Path,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use rand::Rng;

use super::config::FleetConfig;
use super::spool::{Record, Spool, SpoolConfig, SpoolError};
use super::store::Store;

/// Records read from the spool per batch (acknowledged together).
const BATCH: usize = 64;
/// First retry after this long; doubles up to [`BACKOFF_CAP`].
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// How often an idle sender looks at the spool when nothing woke it.
const IDLE: Duration = Duration::from_secs(1);

/// Exponential backoff with full jitter: the n-th wait is uniform in
/// `[0, min(cap, base * 2^n)]`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The ceiling of the next wait (before jitter).
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The next wait, drawn from `rng`.
    pub fn next(&mut self, rng: &mut impl Rng) -> Duration {
        let ceil = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_nanos(rng.random_range(0..=ceil.as_nanos().min(u64::MAX as u128) as u64))
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// Full at `now`.
    pub fn new(rate: f64, burst: f64, now: Instant) -> Self {
        let burst = burst.max(1.0);
        Self {
            rate: rate.max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes one token at `now`: `None` when taken, else how long until
    /// one is there.
    pub fn take(&mut self, now: Instant) -> Option<Duration> {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now.max(self.last);
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

/// The delivery figures, as the metrics show them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetStats {
    pub up: bool,
    pub spool_bytes: u64,
    pub spool_records: u64,
    pub delivered: u64,
    /// Dropped to keep the spool's bounds, unreadable, or refused by the store.
    pub dropped: u64,
    pub retries: u64,
}

#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    up: AtomicBool,
    delivered: AtomicU64,
    refused: AtomicU64,
    retries: AtomicU64,
    /// Set when records were appended; the sender waits on it.
    wake: Mutex<bool>,
    bell: Condvar,
}

impl Shared {
    /// Waits until stopped or `d` passed, or (`bell`) records were appended.
    /// A backoff does not listen to the bell: new records do not make a
    /// dead store come back sooner.
    fn wait(&self, d: Duration, bell: bool) {
        let deadline = Instant::now() + d;
        let Ok(mut woken) = self.wake.lock() else {
            return;
        };
        while !(bell && *woken) && !self.stop.load(Ordering::Relaxed) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.bell.wait_timeout(woken, left) {
                Ok((w, _)) => woken = w,
                Err(_) => return,
            }
        }
        if bell {
            *woken = false;
        }
    }

    fn ring(&self) {
        if let Ok(mut w) = self.wake.lock() {
            *w = true;
        }
        self.bell.notify_all();
    }
}

/// Why the fleet writer could not start.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Spool(#[from] SpoolError),
    #[error("cannot start the fleet sender thread: {0}")]
    Thread(std::io::Error),
}

/// The agent's side: append records, read the figures. Dropping it stops
/// the sender (what is not delivered stays in the spool for next time).
pub struct Fleet {
    spool: Arc<Mutex<Spool>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    pub config: FleetConfig,
}

impl Fleet {
    /// Opens the spool under `state_dir/spool` and starts the sender;
    /// `log` gets one line per change of the store's reachability.
    pub fn start(
        config: FleetConfig,
        state_dir: &Path,
        log: fn(&str),
    ) -> Result<Fleet, FleetError> {
        let (spool, opened) = Spool::open(SpoolConfig {
            dir: state_dir.join("spool"),
            max_bytes: config.spool_max_bytes,
            max_age: config.spool_max_age,
        })?;
        if opened.cut_bytes > 0 {
            log(&format!(
                "fleet spool: cut {} bytes of a torn or corrupt tail (a crash while writing)",
                opened.cut_bytes
            ));
        }
        if opened.pending > 0 {
            log(&format!(
                "fleet spool: {} records to deliver from the last run",
                opened.pending
            ));
        }
        let spool = Arc::new(Mutex::new(spool));
        let shared = Arc::new(Shared::default());
        let thread = {
            let (spool, shared, config) = (spool.clone(), shared.clone(), config.clone());
            std::thread::Builder::new()
                .name("mdiag-fleet".into())
                .spawn(move || send_loop(&config, &spool, &shared, log))
                .map_err(FleetError::Thread)?
        };
        Ok(Fleet {
            spool,
            shared,
            thread: Some(thread),
            config,
        })
    }

    /// Appends `records` durably (one fsync) and wakes the sender.
    pub fn submit(&self, records: &[Record]) -> Result<(), SpoolError> {
        if records.is_empty() {
            return Ok(());
        }
        let now = chrono::Utc::now().timestamp_millis();
        let result = match self.spool.lock() {
            Ok(mut s) => s.append(records, now),
            Err(_) => Ok(()),
        };
        self.shared.ring();
        result
    }

    pub fn stats(&self) -> FleetStats {
        let (spool_bytes, spool_records, dropped) = match self.spool.lock() {
            Ok(s) => (s.bytes(), s.pending(), s.dropped),
            Err(_) => (0, 0, 0),
        };
        let s = &self.shared;
        FleetStats {
            up: s.up.load(Ordering::Relaxed),
            spool_bytes,
            spool_records,
            delivered: s.delivered.load(Ordering::Relaxed),
            dropped: dropped + s.refused.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
        }
    }

    /// Stops the sender: waits at most `grace` for a write in flight.
    pub fn stop(&mut self, grace: Duration) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.ring();
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + grace;
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(2));
    }
}

/// Tells the store's reachability once per change.
struct Reach {
    told: Option<bool>,
    log: fn(&str),
    uri: String,
}

impl Reach {
    fn tell(&mut self, shared: &Shared, up: bool, why: &str) {
        shared.up.store(up, Ordering::Relaxed);
        if self.told == Some(up) {
            return;
        }
        self.told = Some(up);
        (self.log)(&if up {
            format!("fleet store {} reachable{why}", self.uri)
        } else {
            format!(
                "fleet store {} unreachable: {why}; findings wait in the spool",
                self.uri
            )
        });
    }
}

fn send_loop(config: &FleetConfig, spool: &Mutex<Spool>, shared: &Shared, log: fn(&str)) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log(&format!("fleet sender: cannot start its runtime: {e}"));
            return;
        }
    };
    let mut reach = Reach {
        told: None,
        log,
        uri: config.redacted_uri(),
    };
    let mut rng = rand::rng();
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_CAP);
    let mut bucket = TokenBucket::new(config.replay_rate, config.replay_rate, Instant::now());
    let mut store: Option<Store> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let batch = match spool.lock().map(|mut s| s.peek(BATCH)) {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                log(&format!("fleet spool: {e}"));
                shared.wait(backoff.next(&mut rng), false);
                continue;
            }
            Err(_) => return,
        };
        if batch.is_empty() {
            shared.wait(IDLE, true);
            continue;
        }
        if store.is_none() {
            match rt.block_on(Store::connect(config)) {
                Ok(s) => {
                    let kind = format!(" (window summaries: {:?})", s.windows_kind());
                    reach.tell(shared, true, &kind);
                    store = Some(s);
                }
                Err(e) => {
                    reach.tell(shared, false, &e.to_string());
                    shared.retries.fetch_add(1, Ordering::Relaxed);
                    shared.wait(backoff.next(&mut rng), false);
                    continue;
                }
            }
        }
        let Some(s) = &store else { continue };
        let mut done = None;
        let mut failed = None;
        for (seq, rec) in &batch {
            while let Some(wait) = bucket.take(Instant::now()) {
                shared.wait(wait, false);
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
            match rt.block_on(s.write(rec)) {
                Ok(()) => {
                    shared.delivered.fetch_add(1, Ordering::Relaxed);
                    done = Some(seq + 1);
                }
                Err(e) if e.is_transient() => {
                    failed = Some(e);
                    break;
                }
                Err(e) => {
                    // The store refuses this document: retrying cannot help.
                    log(&format!(
                        "fleet store refused a {} document: {e}",
                        rec.kind()
                    ));
                    shared.refused.fetch_add(1, Ordering::Relaxed);
                    done = Some(seq + 1);
                }
            }
        }
        if let Some(next) = done
            && let Ok(mut sp) = spool.lock()
            && let Err(e) = sp.ack(next)
        {
            log(&format!("fleet spool: {e}"));
        }
        match failed {
            Some(e) => {
                reach.tell(shared, false, &e.to_string());
                shared.retries.fetch_add(1, Ordering::Relaxed);
                shared.wait(backoff.next(&mut rng), false);
            }
            None => {
                backoff.reset();
                reach.tell(shared, true, "");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::StdRng};

    #[test]
    fn backoff_doubles_to_the_cap_with_full_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let ceilings: Vec<u128> = (0..6)
            .map(|_| {
                let c = b.ceiling();
                b.attempt += 1;
                c.as_millis()
            })
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(100));
        // Every draw is within [0, ceiling], and they spread over it.
        let mut rng = StdRng::seed_from_u64(7);
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        for _ in 0..5 {
            b.next(&mut rng);
        }
        let draws: Vec<Duration> = (0..2000)
            .map(|_| {
                let mut c = b.clone();
                c.next(&mut rng)
            })
            .collect();
        assert!(draws.iter().all(|d| *d <= Duration::from_secs(1)));
        let low = draws.iter().filter(|d| d.as_millis() < 250).count();
        let high = draws.iter().filter(|d| d.as_millis() >= 750).count();
        assert!(
            (350..650).contains(&low),
            "{low} of 2000 in the lowest quarter"
        );
        assert!(
            (350..650).contains(&high),
            "{high} of 2000 in the highest quarter"
        );
        // Many attempts do not overflow.
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        for _ in 0..100 {
            assert!(b.next(&mut rng) <= Duration::from_secs(60));
        }
    }

    #[test]
    fn the_token_bucket_keeps_the_rate_after_its_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 5.0, t0);
        // The burst goes at once, then one token every 100 ms.
        for _ in 0..5 {
            assert_eq!(b.take(t0), None);
        }
        let wait = b.take(t0).unwrap();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.take(t0 + Duration::from_millis(100)), None);
        assert!(b.take(t0 + Duration::from_millis(150)).is_some());
        // Over 10 s of steady asking, about 10 per second get through.
        let mut n = 0;
        let mut t = t0 + Duration::from_millis(200);
        while t < t0 + Duration::from_secs(10) {
            if b.take(t).is_none() {
                n += 1;
            }
            t += Duration::from_millis(7);
        }
        assert!((97..=100).contains(&n), "{n}");
        // Idle time refills only up to the burst.
        let later = t0 + Duration::from_secs(100);
        let taken = (0..20).take_while(|_| b.take(later).is_none()).count();
        assert_eq!(taken, 5);
    }
}
