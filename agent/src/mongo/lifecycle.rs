//! MongoDB's lifecycle schedule: the end-of-life date of each server
//! release series, so a report can say that the mongod it recorded no
//! longer gets fixes (security ones included).
//!
//! The table is MongoDB's own "Software Lifecycle Schedules"
//! (<https://www.mongodb.com/legal/support-policy/lifecycles>, MongoDB
//! Server, as published in 2026: 7.0's date moved from August 2026 to
//! August 2027, 8.0's set to October 2029). From 8.2, MongoDB supports each
//! minor release on premises until its major release's date, so an 8.x
//! takes 8.0's. Rapid releases before 8.0 (5.1 to 7.3) were supported on
//! premises for development only and are not in the table: a version not
//! in it has no known date, and nothing is said rather than guessed.

use chrono::NaiveDate;

/// (major, minor, end of life as year, month, day) of each release series
/// in MongoDB's schedule; a major's `.0` line stands for all its minors
/// from 8.0 on.
const SCHEDULE: &[(u32, u32, (i32, u32, u32))] = &[
    (8, 0, (2029, 10, 31)),
    (7, 0, (2027, 8, 31)),
    (6, 0, (2025, 7, 31)),
    (5, 0, (2024, 10, 31)),
    (4, 4, (2024, 2, 29)),
    (4, 2, (2023, 4, 30)),
    (4, 0, (2022, 4, 30)),
    (3, 6, (2021, 4, 30)),
    (3, 4, (2020, 1, 31)),
    (3, 2, (2018, 9, 30)),
    (3, 0, (2018, 2, 28)),
];

/// The release series of a version string ("6.0.5" → (6, 0)); `None` when
/// it does not start with two numbers.
pub fn series(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The end-of-life date of `version`'s series in MongoDB's schedule;
/// `None` when the schedule has none (a rapid or development release).
pub fn end_of_life(version: &str) -> Option<NaiveDate> {
    let (major, minor) = series(version)?;
    let minor = if major >= 8 { 0 } else { minor };
    SCHEDULE
        .iter()
        .find(|(ma, mi, _)| *ma == major && *mi == minor)
        .and_then(|(_, _, (y, m, d))| NaiveDate::from_ymd_opt(*y, *m, *d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(y: i32, m: u32, d: u32) -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(y, m, d)
    }

    #[test]
    fn each_series_has_mongodbs_date_and_rapid_releases_none() {
        assert_eq!(end_of_life("6.0.5"), date(2025, 7, 31));
        assert_eq!(end_of_life("7.0.14"), date(2027, 8, 31));
        assert_eq!(end_of_life("4.4.29"), date(2024, 2, 29));
        // 8.2 and later minors: until 8.0's date.
        assert_eq!(end_of_life("8.2.1"), date(2029, 10, 31));
        assert_eq!(end_of_life("8.0.4-rc0"), date(2029, 10, 31));
        // A rapid release before 8.0, a development series, garbage.
        assert_eq!(end_of_life("6.3.2"), None);
        assert_eq!(end_of_life("4.3.1"), None);
        assert_eq!(end_of_life("mongod"), None);
        assert_eq!(series("7.0.0-rc6"), Some((7, 0)));
    }

    #[test]
    fn every_date_in_the_schedule_exists_and_they_grow_with_the_version() {
        let dates: Vec<NaiveDate> = SCHEDULE
            .iter()
            .map(|(_, _, (y, m, d))| NaiveDate::from_ymd_opt(*y, *m, *d).unwrap())
            .collect();
        assert!(dates.windows(2).all(|w| w[0] > w[1]), "{dates:?}");
    }
}
