use chrono::TimeZone;

use super::*;

fn at(window: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + window * 60, 0).unwrap()
}

fn seen(rule: &str, obs: Observation) -> Seen {
    Seen {
        rule: rule.into(),
        title: format!("{rule} title"),
        summary: if obs == Observation::Above {
            format!("{rule} held")
        } else {
            String::new()
        },
        obs,
    }
}

#[test]
fn an_episode_fires_resolves_and_is_forgotten() {
    let config = AgentConfig::default();
    let mut f = Findings::default();
    let mut log = Vec::new();
    let mut w = 0;
    let mut feed = |f: &mut Findings, obs, log: &mut Vec<Change>| {
        w += 1;
        log.extend(f.observe("mongod:27017", &[seen("r", obs)], &config, at(w)));
    };
    // Clean windows track nothing.
    feed(&mut f, Observation::Below, &mut log);
    assert_eq!(f.iter().count(), 0);
    for _ in 0..3 {
        feed(&mut f, Observation::Above, &mut log);
    }
    let states: Vec<_> = log.iter().map(|c| state_name(c.transition.to)).collect();
    assert_eq!(states, ["pending", "firing"]);
    // The episode started at its first held window, and both lines say so.
    assert!(log.iter().all(|c| c.episode_start == at(2)));
    for _ in 0..10 {
        feed(&mut f, Observation::Below, &mut log);
    }
    assert_eq!(state_name(log.last().unwrap().transition.to), "resolved");
    assert_eq!(
        log.len(),
        3,
        "one line per change, none per window: {log:?}"
    );
    // Resolved stays tracked (its episode can be looked up) until it is inactive.
    assert_eq!(f.iter().count(), 1);
}

#[test]
fn a_target_that_goes_away_makes_its_findings_stale_not_resolved() {
    let config = AgentConfig::default();
    let mut f = Findings::default();
    for w in 0..3 {
        f.observe(
            "mongod:27017",
            &[seen("r", Observation::Above)],
            &config,
            at(w),
        );
    }
    let other = f.observe("host", &[seen("r", Observation::Above)], &config, at(3));
    assert_eq!(other.len(), 1, "another target is another finding");
    let c = f.target_missing("mongod:27017", at(4));
    assert_eq!(c.len(), 1);
    assert_eq!(state_name(c[0].transition.to), "stale");
    // Many windows without it: still stale, no more lines.
    for w in 5..40 {
        assert!(f.target_missing("mongod:27017", at(w)).is_empty());
    }
    // Back, still held: firing again, the same episode.
    let c = f.observe(
        "mongod:27017",
        &[seen("r", Observation::Above)],
        &config,
        at(41),
    );
    assert_eq!(state_name(c[0].transition.to), "firing");
    assert_eq!(c[0].episode_start, at(0));
}

#[test]
fn per_rule_life_cycles_come_from_the_config() {
    let config = AgentConfig::parse(
        "[agent.rules.fast]\nfire_in = 1\nof_last = 1\n",
        std::path::Path::new("x"),
    )
    .unwrap();
    let mut f = Findings::default();
    let c = f.observe(
        "host",
        &[
            seen("fast", Observation::Above),
            seen("slow", Observation::Above),
        ],
        &config,
        at(0),
    );
    let by_rule: Vec<_> = c
        .iter()
        .map(|c| (c.rule.as_str(), state_name(c.transition.to)))
        .collect();
    assert_eq!(by_rule, [("fast", "firing"), ("slow", "pending")]);
}

#[test]
fn a_report_maps_to_held_clean_and_no_data() {
    use crate::rules::testdata;
    let rules = testdata::sched_rule_only();
    let held = crate::explain::explain(&testdata::oversubscribed(), &rules, None, None).unwrap();
    let clean = crate::explain::explain(&testdata::near_miss(), &rules, None, None).unwrap();
    let mut empty = testdata::base("6.8.0", "x86_64", 8);
    empty.probes.clear();
    let missing = crate::explain::explain(&empty, &rules, None, None).unwrap();
    let one = |r: &crate::report::Report| {
        let o = observations(r);
        assert_eq!(o.len(), rules.len(), "every rule once: {o:?}");
        o[0].obs
    };
    assert_eq!(one(&held), Observation::Above);
    assert_eq!(one(&clean), Observation::Below);
    assert_eq!(one(&missing), Observation::NoData);
}

#[test]
fn an_oscillating_signal_replayed_makes_at_most_two_transitions() {
    // A value that crosses the threshold every window for ten hours of
    // 60 s windows: held in 3 of every 5 windows or so, never 10 clean in
    // a row. One episode: inactive → pending → firing, then quiet.
    let config = AgentConfig::default();
    let mut f = Findings::default();
    let mut changes = Vec::new();
    for w in 0..600 {
        let obs = if w % 2 == 0 {
            Observation::Above
        } else {
            Observation::Below
        };
        changes.extend(f.observe("mongod:27017", &[seen("r", obs)], &config, at(w)));
    }
    assert!(changes.len() <= 2, "{changes:?}");
    assert_eq!(state_name(changes.last().unwrap().transition.to), "firing");
}

#[test]
fn a_renamed_target_keeps_its_episodes() {
    let config = AgentConfig::default();
    let mut f = Findings::default();
    let exe = "mongod@/usr/bin/mongod";
    for w in 1..=2 {
        f.observe(exe, &[seen("r", Observation::Above)], &config, at(w));
    }
    f.rename_target(exe, "mongod:27017");
    assert_eq!(f.targets(), ["mongod:27017"]);
    // The third held window fires the episode that began under the old name.
    let c = f.observe(
        "mongod:27017",
        &[seen("r", Observation::Above)],
        &config,
        at(3),
    );
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(state_name(c[0].transition.to), "firing");
    assert_eq!(c[0].episode_start, at(1));
    // Renaming a target with nothing tracked changes nothing.
    f.rename_target("nobody", "x");
    assert_eq!(f.targets(), ["mongod:27017"]);
}

#[test]
fn a_change_carries_the_summary_of_the_last_window_that_held() {
    let config = AgentConfig::default();
    let mut f = Findings::default();
    let c = f.observe("host", &[seen("r", Observation::Above)], &config, at(1));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].transition.to, State::Pending);
    assert_eq!(c[0].summary, "r held");
    // A clean window keeps what the evidence last said.
    let c = f.observe("host", &[seen("r", Observation::NoData)], &config, at(2));
    assert_eq!(
        c[0].transition.to,
        State::Stale {
            was: super::super::lifecycle::Active::Pending
        }
    );
    assert_eq!(c[0].summary, "r held");
}
