//! mongod during `record`: starts the [`Poller`] with the recording, turns
//! what it sent into one [`MongodSlice`] per probe slice (a second without a
//! reply is marked with the reason), and at the end into the recording's
//! [`MongodRecording`]. Never waits for the server. For a local server each
//! answered second also gets the host's CPU, memory, data-disk and space
//! figures ([`super::system::read_live`]), the live twin of FTDC's
//! systemMetrics.

use std::time::{Duration, Instant};

use super::conn::Connection;
use super::poll::{PollEvent, Poller};
use crate::recording::mongod::{MongodRecording, MongodSlice, TcmallocDetail};

/// What `record` was asked to poll.
#[derive(Debug, Clone, PartialEq)]
pub struct MongoPlan {
    pub conn: Connection,
    /// The server runs on this host (its dbPath storage can be read).
    pub local: bool,
}

/// Polling state of one recording.
pub struct MongoSession {
    poller: Option<Poller>,
    /// Replies that arrived after the end of the slice being read (the
    /// slice was read late): they belong to the next one.
    held: Vec<PollEvent>,
    start: Instant,
    rec: MongodRecording,
    /// The last poll answered (false before the first answer).
    answering: bool,
    /// What the user was last told: mongod answers (true) or not (false).
    told: Option<bool>,
    /// Lines told and not yet printed.
    news: Vec<String>,
    local: bool,
    /// This member's state (replSetGetStatus `myState`), last read.
    repl_state: Option<i64>,
    /// The cluster's id (`cl_id`), once read.
    cluster_id: Option<String>,
}

impl MongoSession {
    /// Starts polling; `start` is the recording's time zero.
    pub fn start(plan: &MongoPlan, start: Instant) -> Self {
        let mut rec = MongodRecording {
            source: "live".into(),
            uri: Some(plan.conn.redacted()),
            uri_from: Some(plan.conn.from.clone()),
            local: Some(plan.local),
            ..Default::default()
        };
        let poller = match Poller::start(&plan.conn, start) {
            Ok(p) => Some(p),
            Err(e) => {
                rec.last_error = Some(format!("cannot start the polling thread: {e}"));
                None
            }
        };
        Self {
            poller,
            held: Vec::new(),
            start,
            rec,
            answering: false,
            told: None,
            news: Vec::new(),
            local: plan.local,
            repl_state: None,
            cluster_id: None,
        }
    }

    /// One line for the user when mongod starts or stops answering, never
    /// one per poll (tests wait for "mongod answers serverStatus" too); the
    /// caller prints it ([`Self::take_news`]) where it will not tear a
    /// progress bar.
    fn tell(&mut self, answers: bool, line: &str) {
        if self.told == Some(answers) {
            return;
        }
        self.told = Some(answers);
        self.news.push(line.to_owned());
    }

    /// What mongod said of itself (buildInfo, getCmdLineOpts, hostInfo), once read.
    pub fn info(&self) -> Option<&crate::recording::mongod::MongodInfo> {
        self.rec.info.as_ref()
    }

    /// This member's replica-set state (`myState`) at the last
    /// replSetGetStatus that said it.
    pub fn repl_state(&self) -> Option<i64> {
        self.repl_state
    }

    /// The cluster's id (`cl_id`), once read.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The lines told since the last call.
    pub fn take_news(&mut self) -> Vec<String> {
        std::mem::take(&mut self.news)
    }

    fn ms(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_millis() as u64
    }

    /// The slice ending now: the newest serverStatus that arrived since the
    /// last slice, or why there is none.
    /// The slice that ends at `until`. A serverStatus reply that arrived
    /// after `until` (the recorder read the slice late: its own work took
    /// more than the time left) is kept for the next slice, whose second it
    /// was asked in: the slice read late would otherwise take the next
    /// second's reply and leave that second without one.
    pub fn slice(&mut self, until: Instant) -> MongodSlice {
        let mut events = std::mem::take(&mut self.held);
        if let Some(p) = &self.poller {
            events.extend(p.drain());
        }
        let (events, later) = split_at(events, until);
        self.held = later;
        let mut out = MongodSlice::default();
        let mut failure = None;
        for e in events {
            match e {
                PollEvent::Info { info, error } => {
                    let mut info = *info;
                    if self.local
                        && let Some(path) = &info.db_path
                    {
                        info.db_path_storage =
                            Some(crate::host::storage_facts(std::path::Path::new(path)));
                    }
                    self.merge_info(info);
                    if error.is_some() {
                        self.rec.info_error = error;
                    }
                }
                PollEvent::Status { sent, done, result } => match result {
                    Ok(reply) => {
                        self.rec.polls_ok += 1;
                        self.answering = true;
                        self.rec.stopped_answering_at_ms = None;
                        let info = self.rec.info.get_or_insert_with(Default::default);
                        if reply.process.is_some() {
                            info.process = reply.process;
                        }
                        if reply.storage_engine.is_some() {
                            info.storage_engine = reply.storage_engine;
                        }
                        out.at_ms = Some(self.ms(done));
                        out.poll_ms = Some(done.saturating_duration_since(sent).as_millis() as u64);
                        out.status = Some(reply.sample);
                        failure = None;
                        self.tell(true, "mongod answers serverStatus");
                    }
                    Err(why) => {
                        self.rec.polls_failed += 1;
                        // The first unanswered poll after an answered one: when it was sent.
                        if self.answering {
                            self.rec.stopped_answering_at_ms = Some(self.ms(sent));
                        }
                        self.answering = false;
                        self.tell(
                            false,
                            &format!("mongod does not answer serverStatus: {why}"),
                        );
                        self.rec.last_error = Some(why.clone());
                        failure = Some(why);
                    }
                },
                PollEvent::Repl { sample, .. } => {
                    self.repl_state = sample.my_state.or(self.repl_state);
                    out.repl = Some(*sample);
                }
                PollEvent::ClusterId(id) => self.cluster_id = Some(id),
                PollEvent::Detail { done, metrics } => {
                    self.rec.tcmalloc_detail.push(TcmallocDetail {
                        at_ms: self.ms(done),
                        metrics,
                    });
                }
            }
        }
        if self.local && out.status.is_some() {
            out.system = Some(self.system_now());
        }
        if out.status.is_none() {
            out.missing = Some(match failure {
                Some(why) => why,
                None if self.poller.is_none() => self
                    .rec
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "mongod was not polled".into()),
                None if self.answering || self.rec.polls_ok + self.rec.polls_failed == 0 => {
                    "no reply in this second (a poll was still waiting)".into()
                }
                None => self
                    .rec
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "no reply in this second".into()),
            });
        }
        out
    }

    /// The host's figures now (mongod runs here): CPU, memory, the data
    /// disk and the space of the file system holding dbPath (mongod's
    /// default `/data/db` when getCmdLineOpts names none).
    fn system_now(&self) -> crate::recording::mongod::SystemSample {
        let info = self.rec.info.as_ref();
        let storage = info.and_then(|i| i.db_path_storage.as_ref());
        let path = info
            .and_then(|i| i.db_path.clone())
            .unwrap_or_else(|| "/data/db".into());
        let mount = storage
            .and_then(|s| s.mount_point.clone())
            .unwrap_or_else(|| path.clone());
        super::system::read_live(
            Some((std::path::Path::new(&path), &mount)),
            storage.and_then(|s| s.disk.as_deref()),
        )
    }

    fn merge_info(&mut self, info: crate::recording::mongod::MongodInfo) {
        let cur = self.rec.info.get_or_insert_with(Default::default);
        // process / storage engine may already have come with serverStatus.
        let process = cur.process.take();
        let engine = cur.storage_engine.take();
        *cur = info;
        cur.process = cur.process.take().or(process);
        cur.storage_engine = cur.storage_engine.take().or(engine);
    }

    /// What a window of the continuous agent keeps of mongod: the figures so
    /// far, with the per-sample details since the last window moved into it
    /// (so the session does not grow with the agent's uptime).
    pub fn take_window(&mut self) -> MongodRecording {
        let details = std::mem::take(&mut self.rec.tcmalloc_detail);
        MongodRecording {
            tcmalloc_detail: details,
            ..self.rec.clone()
        }
    }

    /// The TCMalloc details taken since the last call (a long recording
    /// streams them to its file instead of keeping them).
    pub fn take_details(&mut self) -> Vec<crate::recording::mongod::TcmallocDetail> {
        std::mem::take(&mut self.rec.tcmalloc_detail)
    }

    /// Ends polling (without waiting for a slow server) and returns what the
    /// recording keeps.
    pub fn finish(mut self) -> MongodRecording {
        if let Some(mut p) = self.poller.take() {
            p.stop(Duration::from_millis(200));
        }
        self.rec
    }
}

/// The events of the slice ending at `until`, and the serverStatus replies
/// that arrived after it (for the next slice).
fn split_at(events: Vec<PollEvent>, until: Instant) -> (Vec<PollEvent>, Vec<PollEvent>) {
    events
        .into_iter()
        .partition(|e| !matches!(e, PollEvent::Status { done, .. } if *done > until))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(done: Instant) -> PollEvent {
        PollEvent::Status {
            sent: done,
            done,
            result: Err("test".into()),
        }
    }

    #[test]
    fn a_reply_after_the_slice_end_waits_for_the_next_slice() {
        let end = Instant::now();
        let before = end - Duration::from_millis(900);
        let after = end + Duration::from_millis(104);
        let (now, later) = split_at(
            vec![
                status(before),
                status(after),
                PollEvent::ClusterId("c".into()),
            ],
            end,
        );
        let done = |v: &[PollEvent]| -> Vec<Instant> {
            v.iter()
                .filter_map(|e| match e {
                    PollEvent::Status { done, .. } => Some(*done),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(done(&now), [before]);
        assert_eq!(now.len(), 2, "other events are not held");
        assert_eq!(done(&later), [after]);
        // At the end of the slice itself: this slice's.
        let (now, later) = split_at(vec![status(end)], end);
        assert_eq!((now.len(), later.len()), (1, 0));
    }
}
