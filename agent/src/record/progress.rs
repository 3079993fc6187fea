//! The progress bar of `mdiag record`: elapsed / remaining time and live event
//! counts. Drawn on stderr, and only when stdout is a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::recording::SchedSlice;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub fn new(duration: Duration, visible: bool, what: &str) -> Self {
        let bar = ProgressBar::with_draw_target(
            Some(duration.as_millis() as u64),
            if visible {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        let style = ProgressStyle::with_template(
            "{spinner} recording {prefix} [{elapsed_precise} / {duration_precise}, {eta} left] {wide_bar} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(what.to_owned());
        bar.enable_steady_tick(Duration::from_millis(250));
        Self { bar }
    }

    pub fn update(&self, elapsed: Duration, last: Option<&SchedSlice>, total_events: u64) {
        self.bar.set_position(elapsed.as_millis() as u64);
        if let Some(s) = last {
            let switched = s.voluntary + s.involuntary;
            let share = if switched > 0 {
                100.0 * s.involuntary as f64 / switched as f64
            } else {
                0.0
            };
            self.bar.set_message(format!(
                "{} switches/s, {share:.0}% involuntary, {} threads, {} events",
                s.switches_total,
                s.threads.len(),
                total_events
            ));
        }
    }

    /// A note ([`crate::messages::note`]) above the bar: the bar is hidden
    /// while it is written, so neither tears the other.
    pub fn note(&self, text: &str) {
        self.bar.suspend(|| crate::messages::note(text));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
