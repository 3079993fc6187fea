//! The spool's promises, on real files: what was appended is read back in
//! order after a reopen, from the acknowledged position; a torn or corrupt
//! tail is cut and the records before it kept; the bounds drop the oldest
//! segments first and count the undelivered records in them.

use super::*;
use crate::fleet::schema::{HostFacts, WindowMeta};
use bson::DateTime;

fn cfg(dir: &Path, max_bytes: u64) -> SpoolConfig {
    SpoolConfig {
        dir: dir.join("spool"),
        max_bytes,
        max_age: Duration::from_secs(3600),
    }
}

fn event(i: i64) -> Record {
    Record::Finding(FindingEvent {
        host: "h".into(),
        rule: "r".into(),
        target: "t".into(),
        title: format!("event {i}"),
        from: "pending".into(),
        to: "firing".into(),
        at: DateTime::from_millis(1000 + i),
        episode_start: DateTime::from_millis(1000),
        facts: HostFacts::default(),
    })
}

fn window(i: i64) -> Record {
    Record::Window(WindowDoc {
        at: DateTime::from_millis(i),
        meta: WindowMeta {
            host: "h".into(),
            target: "t".into(),
        },
        seconds: 1.0,
        facts: bson::doc! { "sched": { "x": i } },
        held: vec!["r".into()],
    })
}

fn titles(recs: &[(u64, Record)]) -> Vec<String> {
    recs.iter()
        .map(|(_, r)| match r {
            Record::Finding(e) => e.title.clone(),
            other => other.kind().to_owned(),
        })
        .collect()
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("spool"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "spool"))
        .collect();
    v.sort();
    v
}

#[test]
fn records_come_back_in_order_and_a_reopen_resumes_at_the_ack() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, opened) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    assert_eq!(opened, Opened::default());
    s.append(&[event(0), event(1), window(2)], 10).unwrap();
    s.append(&[event(3)], 11).unwrap();
    assert_eq!(s.pending(), 4);
    let got = s.peek(2).unwrap();
    assert_eq!(got.iter().map(|(q, _)| *q).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(got[0].1, event(0));
    s.ack(2).unwrap();
    assert_eq!(titles(&s.peek(10).unwrap()), ["window", "event 3"]);
    drop(s);
    // A crash after the ack: the next open starts at record 2.
    let (mut s, opened) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    assert_eq!(opened.pending, 2);
    let got = s.peek(10).unwrap();
    assert_eq!(got[0], (2, window(2)));
    assert_eq!(got[1], (3, event(3)));
    s.ack(4).unwrap();
    assert_eq!(s.pending(), 0);
    assert!(s.peek(10).unwrap().is_empty());
    // New records continue the numbering.
    s.append(&[event(4)], 12).unwrap();
    assert_eq!(s.peek(10).unwrap(), vec![(4, event(4))]);
    assert_eq!(s.dropped, 0);
}

#[test]
fn a_torn_tail_is_cut_and_what_came_before_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    s.append(&[event(0), event(1)], 10).unwrap();
    drop(s);
    let seg = segments(dir.path()).pop().unwrap();
    let whole = std::fs::metadata(&seg).unwrap().len();
    // A crash in the middle of the next append: half a frame.
    let half = frame(&bson::serialize_to_vec(&event(2)).unwrap(), 11);
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&half[..half.len() / 2]).unwrap();
    drop(f);
    let (mut s, opened) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    assert_eq!(opened.cut_bytes, (half.len() / 2) as u64);
    assert_eq!(opened.pending, 2);
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), whole);
    // Appends continue after the cut, readable.
    s.append(&[event(2)], 12).unwrap();
    assert_eq!(
        titles(&s.peek(10).unwrap()),
        ["event 0", "event 1", "event 2"]
    );
}

#[test]
fn a_corrupt_record_fails_its_crc_and_is_cut_with_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    s.append(&[event(0), event(1), event(2)], 10).unwrap();
    drop(s);
    let seg = segments(dir.path()).pop().unwrap();
    let mut data = std::fs::read(&seg).unwrap();
    let one = data.len() / 3;
    // Flip a byte inside the second record's body.
    data[one + HEADER + 5] ^= 0xff;
    std::fs::write(&seg, &data).unwrap();
    let (mut s, opened) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    assert_eq!(opened.cut_bytes, (data.len() - one) as u64);
    assert_eq!(titles(&s.peek(10).unwrap()), ["event 0"]);
}

#[test]
fn the_byte_bound_drops_the_oldest_first_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let one = frame(&bson::serialize_to_vec(&event(0)).unwrap(), 0).len() as u64;
    // Segments of 4 KiB (the floor); room for about 3 of them.
    let max = 3 * (4 << 10) + one;
    let (mut s, _) = Spool::open(cfg(dir.path(), max)).unwrap();
    let n = 400;
    for i in 0..n {
        s.append(&[event(i)], 10).unwrap();
        assert!(s.bytes() <= max, "{} > {max}", s.bytes());
    }
    let kept = s.pending();
    assert!(kept > 0 && kept < n as u64, "{kept}");
    assert_eq!(s.dropped + kept, n as u64);
    // What is kept is the newest, in order, up to the last one.
    let got = s.peek(n as usize).unwrap();
    assert_eq!(got.len() as u64, kept);
    assert_eq!(got.last().unwrap().1, event(n - 1));
    assert_eq!(got[0].0, s.dropped);
    // Delivered records are not counted as dropped when their segment goes.
    s.ack(s.next_seq()).unwrap();
    let before = s.dropped;
    for i in 0..n {
        s.append(&[event(i)], 10).unwrap();
    }
    assert_eq!(s.dropped - before + s.pending(), n as u64);
    // The drops survive a reopen as the ack position.
    let pending = s.pending();
    drop(s);
    let (s, opened) = Spool::open(cfg(dir.path(), max)).unwrap();
    assert_eq!((opened.pending, s.pending()), (pending, pending));
}

#[test]
fn the_age_bound_drops_records_older_than_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = Spool::open(cfg(dir.path(), 1 << 20)).unwrap();
    let hour = 3_600_000;
    s.append(&[event(0), event(1)], 0).unwrap();
    s.append(&[event(2)], hour / 2).unwrap();
    // Nothing is older than an hour yet.
    assert_eq!((s.pending(), s.dropped), (3, 0));
    // Later, the whole (only) segment is older than max_age: it goes, and
    // what is appended now is kept.
    s.append(&[event(3)], 2 * hour).unwrap();
    assert_eq!(s.dropped, 3);
    assert_eq!(s.peek(10).unwrap(), vec![(3, event(3))]);
    assert_eq!(segments(dir.path()).len(), 1);
}

#[test]
fn delivered_segments_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    // Segments of 8 KiB: 200 records make several.
    let (mut s, _) = Spool::open(cfg(dir.path(), 64 << 10)).unwrap();
    for i in 0..200 {
        s.append(&[event(i)], 10).unwrap();
    }
    assert!(segments(dir.path()).len() > 2);
    // Read in batches the way the sender does, acking each.
    let mut seen = 0;
    loop {
        let got = s.peek(7).unwrap();
        let Some((last, _)) = got.last() else { break };
        assert_eq!(got[0].0, seen);
        seen = last + 1;
        s.ack(seen).unwrap();
    }
    assert_eq!(seen, 200);
    assert_eq!(segments(dir.path()).len(), 1);
    assert_eq!(
        s.bytes(),
        std::fs::metadata(&segments(dir.path())[0]).unwrap().len()
    );
}
