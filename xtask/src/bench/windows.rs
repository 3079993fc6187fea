//! The target cost of allocator windows measured inside one run: the
//! TCMalloc workload's own timeline (monotonic time, allocations so far,
//! its CPU time, every few milliseconds) lined up with the windows the
//! agent logged (their monotonic start and end, probe hits, cost). The
//! CPU time per allocation over the whole run, over that of the stretches
//! well away from any window, is what the windows added, with the run's
//! own baseline taken from the same seconds: the host's drift between runs
//! (tens of percent on a small shared host) mostly cancels. Applied to an
//! unobserved run with the same windows laid over it, the same arithmetic
//! gives the method's noise (it should say 0). All pure.

/// One timeline sample: monotonic ns, allocations so far, process CPU ns.
pub(super) type Sample = [u64; 3];

/// One allocator window, as the agent logged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) hits: u64,
    pub(super) cost_ns: u64,
    pub(super) early: bool,
}

/// Time on either side of a window that counts as neither inside nor
/// outside (attach and detach, and what they disturb).
pub(super) const MARGIN_NS: u64 = 200_000_000;

/// CPU time and allocations of a run, split by where they fell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Split {
    pub(super) in_cpu: f64,
    pub(super) in_allocs: f64,
    pub(super) out_cpu: f64,
    pub(super) out_allocs: f64,
    pub(super) all_cpu: f64,
    pub(super) all_allocs: f64,
    /// The windows' own accounting (probe hits × pair cost) over the run.
    pub(super) accounted_ns: f64,
    pub(super) windows: usize,
}

impl Split {
    /// What the windows added to the CPU time per allocation over the run,
    /// as a share of the outside stretches' (`None` without both).
    pub(super) fn cost(&self) -> Option<f64> {
        let out = ratio(self.out_cpu, self.out_allocs)?;
        Some(ratio(self.all_cpu, self.all_allocs)? / out - 1.0)
    }

    /// CPU ns per allocation inside and outside windows.
    pub(super) fn ns_in_out(&self) -> (Option<f64>, Option<f64>) {
        (
            ratio(self.in_cpu, self.in_allocs),
            ratio(self.out_cpu, self.out_allocs),
        )
    }

    /// The agent's accounting as a share of the run's CPU.
    pub(super) fn accounted(&self) -> Option<f64> {
        ratio(self.accounted_ns, self.all_cpu)
    }
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// Splits `timeline` by `windows` (sorted or not): each interval between
/// two samples is inside when it lies within a window, outside when it is
/// more than `margin` from every window, else only in the totals.
pub(super) fn split(timeline: &[Sample], windows: &[Window], margin: u64) -> Split {
    let mut s = Split::default();
    let (Some(first), Some(last)) = (timeline.first(), timeline.last()) else {
        return s;
    };
    for pair in timeline.windows(2) {
        let ([t0, a0, c0], [t1, a1, c1]) = (pair[0], pair[1]);
        let (cpu, allocs) = (c1.saturating_sub(c0) as f64, a1.saturating_sub(a0) as f64);
        s.all_cpu += cpu;
        s.all_allocs += allocs;
        if windows.iter().any(|w| t0 >= w.start_ns && t1 <= w.end_ns) {
            s.in_cpu += cpu;
            s.in_allocs += allocs;
        } else if windows
            .iter()
            .all(|w| t1 + margin < w.start_ns || t0 > w.end_ns + margin)
        {
            s.out_cpu += cpu;
            s.out_allocs += allocs;
        }
    }
    for w in windows {
        if w.start_ns >= first[0] && w.end_ns <= last[0] {
            s.accounted_ns += w.cost_ns as f64;
            s.windows += 1;
        }
    }
    s
}

/// `windows` moved from a run that started at `from` to one that started
/// at `to` (monotonic ns): the same offsets into the run.
pub(super) fn moved(windows: &[Window], from: u64, to: u64) -> Vec<Window> {
    windows
        .iter()
        .map(|w| Window {
            start_ns: (w.start_ns + to).saturating_sub(from),
            end_ns: (w.end_ns + to).saturating_sub(from),
            ..*w
        })
        .collect()
}

/// The windows in the agent's log: its "allocator window closed" lines
/// (debug), whose fields are `key=value` (colours, if any, stripped).
pub(super) fn logged_windows(log: &str) -> Vec<Window> {
    log.lines()
        .filter(|l| l.contains("allocator window closed"))
        .filter_map(|l| {
            let l = strip_ansi(l);
            let field = |k: &str| -> Option<String> {
                l.split_whitespace()
                    .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
                    .map(str::to_owned)
            };
            let num = |k: &str| field(k)?.parse::<u64>().ok();
            Some(Window {
                start_ns: num("start_ns")?,
                end_ns: num("end_ns")?,
                hits: num("hits")?,
                cost_ns: num("cost_ns")?,
                early: field("early").as_deref() == Some("true"),
            })
        })
        .filter(|w| w.end_ns > w.start_ns)
        .collect()
}

/// `s` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A timeline every 5 ms for `secs`, 10 ns of CPU per allocation, 100
    /// times that inside `windows`.
    fn timeline(secs: u64, windows: &[Window]) -> Vec<Sample> {
        let (mut allocs, mut cpu) = (0, 0);
        let mut out = Vec::new();
        let mut t = 1_000 * MS;
        while t <= 1_000 * MS + secs * 1_000 * MS {
            out.push([t, allocs, cpu]);
            let inside = windows.iter().any(|w| t >= w.start_ns && t < w.end_ns);
            let ns_per = if inside { 1_000 } else { 10 };
            cpu += 2 * 5 * MS; // two cores
            allocs += 2 * 5 * MS / ns_per;
            t += 5 * MS;
        }
        out
    }

    fn window(start_ms: u64, len_ms: u64) -> Window {
        Window {
            start_ns: start_ms * MS,
            end_ns: (start_ms + len_ms) * MS,
            hits: 0,
            cost_ns: 2 * len_ms * MS,
            early: false,
        }
    }

    #[test]
    fn the_windows_cost_is_what_they_add_per_allocation() {
        // 100 ms of 20 s at a hundredth of the speed: ~0.5 % more CPU per
        // allocation over the run.
        let ws = [window(6_000, 100), window(26_000, 100)];
        let s = split(&timeline(40, &ws), &ws, MARGIN_NS);
        let cost = s.cost().unwrap();
        assert!((0.004..0.006).contains(&cost), "{cost}");
        let (inside, outside) = s.ns_in_out();
        assert_eq!((inside, outside), (Some(1_000.0), Some(10.0)));
        assert_eq!(s.windows, 2);
        // The accounting: 2 × 200 ms of 80 s of CPU.
        assert!((s.accounted().unwrap() - 0.005).abs() < 1e-4);
    }

    #[test]
    fn windows_laid_over_an_unobserved_run_cost_nothing() {
        let ws = [window(6_000, 100)];
        let plain = timeline(40, &[]);
        let s = split(&plain, &moved(&ws, 0, 0), MARGIN_NS);
        assert_eq!(s.cost(), Some(0.0));
        assert_eq!(split(&[], &ws, MARGIN_NS).cost(), None);
        let later = moved(&ws, 1_000 * MS, 3_000 * MS);
        assert_eq!(later[0].start_ns, 8_000 * MS);
    }

    #[test]
    fn the_agent_s_lines_are_read() {
        let log = "mdiag agent: watching x (pid 1); probes attached: sched\n\
            2026-11-24T10:00:00Z DEBUG allocator window closed family=\"alloc\" start_ns=100 end_ns=200 hits=5 cost_ns=10000 allowance_ns=30000 early=true credit_ns=-3\n\
            \u{1b}[2m2026\u{1b}[0m DEBUG allocator window closed \u{1b}[3mstart_ns\u{1b}[0m\u{1b}[2m=\u{1b}[0m300 end_ns=400 hits=1 cost_ns=2 early=false\n\
            DEBUG allocator window closed start_ns=500 end_ns=500 hits=0 cost_ns=0\n";
        let ws = logged_windows(log);
        assert_eq!(ws.len(), 2, "{ws:?}");
        assert_eq!(
            ws[0],
            Window {
                start_ns: 100,
                end_ns: 200,
                hits: 5,
                cost_ns: 10_000,
                early: true
            }
        );
        assert_eq!((ws[1].start_ns, ws[1].early), (300, false));
    }
}
