//! Small inline-SVG charts for the HTML report: stacked vertical bars,
//! horizontal bars, log2 histograms and time panels with shaded windows.
//!
//! Hand-written on purpose: the report must be one self-contained file that
//! opens without network access, and the charts are simple enough that a
//! charting crate or a JavaScript library would add far more than it saves.
//! Every chart is an `<svg>` with an `id`, a `<title>` and, per mark, a
//! `<title>` tooltip with the exact number, so the values stay readable.

use std::fmt::Write;

/// Series colours (colour-blind friendly, Okabe–Ito).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

const W: f64 = 760.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 36.0;

/// Escapes text for HTML and SVG content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A "nice" axis maximum at or above `max` (1, 2, 2.5, 5 × 10^n).
pub fn nice_max(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= max * 0.999_999 {
            return m * p;
        }
    }
    10.0 * p
}

fn num(x: f64) -> String {
    crate::findings::format_number(x)
}

fn open(out: &mut String, id: &str, title: &str, height: f64) {
    let _ = write!(
        out,
        r#"<svg id="{}" class="chart" role="img" viewBox="0 0 {W} {height}" width="{W}" height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{}</title><text x="{LEFT}" y="16" class="chart-title">{}</text>"#,
        esc(id),
        esc(title),
        esc(title)
    );
}

/// One horizontal gridline at `y` across the plot, labelled `v` on the left.
fn gridline(out: &mut String, y: f64, v: f64) {
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"##,
        W - RIGHT,
        LEFT - 4.0,
        y + 4.0,
        esc(&num(v))
    );
}

/// Y axis with 5 gridlines from 0 to `max` over the plot [top, bottom].
fn y_axis(out: &mut String, max: f64, top: f64, bottom: f64, unit: &str) {
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = bottom - (bottom - top) * f64::from(i) / 4.0;
        gridline(out, y, v);
    }
    let _ = write!(
        out,
        r#"<text x="4" y="{:.1}" class="unit">{}</text>"#,
        top - 8.0,
        esc(unit)
    );
}

fn legend(out: &mut String, names: &[&str], y: f64) {
    let mut x = LEFT;
    for (i, name) in names.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" class="legend">{}</text>"#,
            y - 9.0,
            x + 14.0,
            y,
            esc(name)
        );
        x += 24.0 + 7.0 * name.chars().count() as f64;
    }
}

/// Vertical bars, one per category, stacked by series (`series[i].1[c]` is
/// series i's value for category c). Values below 0 count as 0.
pub fn stacked_bars(
    id: &str,
    title: &str,
    unit: &str,
    categories: &[String],
    series: &[(&str, Vec<f64>)],
) -> String {
    let height = 276.0;
    let (top, bottom) = (TOP + 30.0, height - BOTTOM);
    let totals: Vec<f64> = (0..categories.len())
        .map(|c| {
            series
                .iter()
                .map(|(_, v)| v.get(c).copied().unwrap_or(0.0).max(0.0))
                .sum()
        })
        .collect();
    let max = nice_max(totals.iter().copied().fold(0.0, f64::max));
    let mut out = String::new();
    open(&mut out, id, title, height);
    legend(
        &mut out,
        &series.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        TOP + 4.0,
    );
    y_axis(&mut out, max, top, bottom, unit);
    let n = categories.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    let bar = (slot * 0.7).max(1.0);
    for (c, cat) in categories.iter().enumerate() {
        let x = LEFT + slot * c as f64 + (slot - bar) / 2.0;
        let mut y = bottom;
        for (i, (name, values)) in series.iter().enumerate() {
            let v = values.get(c).copied().unwrap_or(0.0).max(0.0);
            if v <= 0.0 {
                continue;
            }
            let h = (bottom - top) * v / max;
            y -= h;
            let _ = write!(
                out,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{bar:.1}" height="{h:.1}" fill="{}"><title>{}: {} {} {}</title></rect>"#,
                PALETTE[i % PALETTE.len()],
                esc(cat),
                esc(name),
                esc(&num(v)),
                esc(unit)
            );
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            x + bar / 2.0,
            bottom + 14.0,
            esc(cat)
        );
    }
    out.push_str("</svg>");
    out
}

/// Horizontal bars, one row per (label, value).
pub fn hbars(id: &str, title: &str, unit: &str, rows: &[(String, f64)]) -> String {
    let row_h = 22.0;
    let height = TOP + 10.0 + row_h * rows.len().max(1) as f64 + 24.0;
    let label_w = 150.0;
    let x0 = LEFT + label_w;
    let max = nice_max(rows.iter().map(|r| r.1).fold(0.0, f64::max));
    let mut out = String::new();
    open(&mut out, id, title, height);
    for (i, (label, v)) in rows.iter().enumerate() {
        let y = TOP + 10.0 + row_h * i as f64;
        let w = (W - RIGHT - x0) * v.max(0.0) / max;
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text><rect class="bar" x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}: {} {}</title></rect><text x="{:.1}" y="{:.1}" class="tick">{}</text>"#,
            x0 - 6.0,
            y + 14.0,
            esc(label),
            row_h - 6.0,
            PALETTE[0],
            esc(label),
            esc(&num(*v)),
            esc(unit),
            x0 + w + 4.0,
            y + 14.0,
            esc(&num(*v))
        );
    }
    let _ = write!(
        out,
        r#"<text x="{x0:.1}" y="{:.1}" class="unit">{}</text></svg>"#,
        height - 6.0,
        esc(unit)
    );
    out
}

/// A log2 histogram: bucket i holds values in [2^i, 2^(i+1)) of `unit_ns`
/// nanoseconds; one bar per bucket from the first to the last non-empty one.
pub fn log2_histogram(id: &str, title: &str, hist: &[u64]) -> String {
    let first = hist.iter().position(|&n| n > 0).unwrap_or(0);
    let last = hist.iter().rposition(|&n| n > 0).unwrap_or(0);
    let categories: Vec<String> = (first..=last)
        .map(|i| ns_label(1u64 << i.min(63)))
        .collect();
    let values: Vec<f64> = hist[first..=last.min(hist.len().saturating_sub(1))]
        .iter()
        .map(|&n| n as f64)
        .collect();
    stacked_bars(id, title, "calls", &categories, &[("calls", values)])
}

/// 1500 → "1.5µs", 2_000_000 → "2ms".
pub fn ns_label(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{}s", num(ns / 1e9))
    } else if ns >= 1e6 {
        format!("{}ms", num(ns / 1e6))
    } else if ns >= 1e3 {
        format!("{}µs", num(ns / 1e3))
    } else {
        format!("{}ns", num(ns))
    }
}

/// One time panel: name, unit, and (time, value) points (`None`: a gap).
pub type Panel<'a> = (&'a str, &'a str, Vec<(f64, Option<f64>)>);

/// One panel per series over a shared time axis [0, `end_s`], with `windows`
/// (start, end) shaded in every panel: lets a reader see whether a figure
/// rises inside the windows. `series[i].1` holds (time, value) points; gaps
/// (`None`) break the line.
pub fn time_panels(
    id: &str,
    title: &str,
    end_s: f64,
    windows: &[(f64, f64)],
    window_label: &str,
    series: &[Panel],
) -> String {
    let panel_h = 90.0;
    let gap = 26.0;
    let height = TOP + 14.0 + (panel_h + gap) * series.len().max(1) as f64 + 24.0;
    let end = if end_s > 0.0 { end_s } else { 1.0 };
    let x_of = |t: f64| LEFT + (W - LEFT - RIGHT) * (t / end).clamp(0.0, 1.0);
    let mut out = String::new();
    open(&mut out, id, title, height);
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{:.1}" width="10" height="10" fill="#f4c27a" opacity="0.6"/><text x="{:.1}" y="{:.1}" class="legend">{}</text>"##,
        TOP - 5.0,
        LEFT + 14.0,
        TOP + 4.0,
        esc(window_label)
    );
    for (p, (name, unit, points)) in series.iter().enumerate() {
        let top = TOP + 14.0 + gap + (panel_h + gap) * p as f64;
        let bottom = top + panel_h;
        let max = nice_max(points.iter().filter_map(|p| p.1).fold(0.0, f64::max));
        for (ws, we) in windows {
            let (x1, x2) = (x_of(*ws), x_of(*we));
            let _ = write!(
                out,
                r##"<rect class="window" x="{x1:.1}" y="{top:.1}" width="{:.1}" height="{panel_h:.1}" fill="#f4c27a" opacity="0.6"><title>{} {}–{} s</title></rect>"##,
                (x2 - x1).max(1.0),
                esc(window_label),
                esc(&num(*ws)),
                esc(&num(*we))
            );
        }
        let _ = write!(
            out,
            r#"<text x="{LEFT}" y="{:.1}" class="panel-title">{} ({})</text>"#,
            top - 6.0,
            esc(name),
            esc(unit)
        );
        for (i, v) in [0.0, max / 2.0, max].iter().enumerate() {
            let y = bottom - panel_h * i as f64 / 2.0;
            gridline(&mut out, y, *v);
        }
        let mut path = String::new();
        let mut pen_down = false;
        for (t, v) in points {
            match v {
                Some(v) => {
                    let y = bottom - panel_h * (v.max(0.0) / max);
                    let _ = write!(
                        path,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        x_of(*t),
                        y
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let _ = write!(
            out,
            r#"<path class="series" d="{}" fill="none" stroke="{}" stroke-width="1.6"/>"#,
            path.trim_end(),
            PALETTE[p % PALETTE.len()]
        );
        for (t, v) in points {
            if let Some(v) = v {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{}"><title>{} s: {} {}</title></circle>"#,
                    x_of(*t),
                    bottom - panel_h * (v.max(0.0) / max),
                    PALETTE[p % PALETTE.len()],
                    esc(&num(*t)),
                    esc(&num(*v)),
                    esc(unit)
                );
            }
        }
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" class="unit" text-anchor="end">seconds after start (0–{})</text></svg>"#,
        W - RIGHT,
        height - 4.0,
        esc(&num(end))
    );
    out
}

/// A chart with its caption.
pub fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

/// Where a chart would be: what it would show and why there is no data.
pub fn no_data(out: &mut String, id: &str, what: &str, why: &str) {
    let _ = writeln!(
        out,
        "<p class=\"no-data\" id=\"{}\">No {}: {}</p>",
        esc(id),
        esc(what),
        esc(why)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_nice_axes() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(180.0), 200.0);
        assert_eq!(nice_max(2.2), 2.5);
        assert_eq!(nice_max(1000.0), 1000.0);
        assert_eq!(ns_label(1024), "1.02µs");
        assert_eq!(ns_label(2_097_152), "2.10ms");
    }

    #[test]
    fn stacked_bars_have_one_rect_per_non_zero_value() {
        let svg = stacked_bars(
            "c",
            "T",
            "ms/s",
            &["cpu0".into(), "cpu1".into()],
            &[("NET_RX", vec![3.0, 0.0]), ("TIMER", vec![1.0, 2.0])],
        );
        assert_eq!(svg.matches(r#"class="bar""#).count(), 3);
        assert!(svg.contains("<title>cpu0: NET_RX 3.00 ms/s</title>"));
        assert!(svg.starts_with("<svg id=\"c\"") && svg.ends_with("</svg>"));
    }

    #[test]
    fn time_panels_shade_windows_in_every_panel_and_break_on_gaps() {
        let svg = time_panels(
            "t",
            "T",
            10.0,
            &[(2.0, 4.0)],
            "checkpoint",
            &[
                (
                    "a",
                    "ms/s",
                    vec![(0.0, Some(1.0)), (1.0, None), (2.0, Some(3.0))],
                ),
                ("b", "/s", vec![(0.0, Some(5.0))]),
            ],
        );
        assert_eq!(svg.matches(r#"class="window""#).count(), 2);
        assert_eq!(svg.matches("<circle").count(), 3);
        // The gap starts a new sub-path: "M… M…" in the first panel's path.
        let d = svg.split(r#"class="series" d=""#).nth(1).unwrap();
        let d = &d[..d.find('"').unwrap()];
        assert_eq!(d.matches('M').count(), 2, "{d}");
    }

    #[test]
    fn histogram_spans_first_to_last_bucket() {
        let svg = log2_histogram("h", "H", &[0, 0, 0, 0, 0, 0, 0, 5, 0, 2]);
        assert_eq!(svg.matches(r#"class="bar""#).count(), 2);
        assert!(svg.contains("128ns"));
        assert!(svg.contains("512ns"));
    }
}
