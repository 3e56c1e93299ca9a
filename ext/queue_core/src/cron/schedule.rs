//! A cron string parsed: five fields, or six with seconds first, and an optional IANA time zone at
//! the end (`"0 3 * * * Europe/Berlin"`), as sidekiq-cron's parser (fugit) reads them. Without a
//! zone the string runs in the process's local zone (fugit does the same: `TZ`, else the system's).
//! A named zone is read from the system's time zone database ([`NamedZone`]).
//!
//! The fields are `croner`'s (Vixie cron plus `L`, `W`, `#`, names, `@hourly`-style nicknames).
//! Across a daylight-saving change croner follows the Open Cron Pattern Specification: a fixed-time
//! schedule (`0 30 2 * * *`) whose time falls in a gap runs once, at the first time after the gap, and
//! once when its time happens twice (the first pass); an interval or wildcard schedule (`*/15 * * * *`)
//! runs at every real instant its fields match, in both passes of a repeated hour, none in a gap.

use chrono::{DateTime, Local, TimeZone, Utc};
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use thiserror::Error as ThisError;

use super::zone::NamedZone;

/// Why a schedule's cron string cannot be used. Each names the schedule.
#[derive(Debug, Clone, PartialEq, Eq, ThisError)]
pub enum CronError {
    #[error(
        "cron schedule {name:?}: {cron:?} has {count} fields; a cron string has 5 fields, or 6 with \
         seconds first, and may end with a time zone"
    )]
    FieldCount {
        name: String,
        cron: String,
        count: usize,
    },
    #[error("cron schedule {name:?}: unknown time zone {zone:?} in {cron:?} ({reason})")]
    TimeZone {
        name: String,
        cron: String,
        zone: String,
        reason: String,
    },
    #[error("cron schedule {name:?}: {cron:?} is not a cron string: {reason}")]
    Pattern {
        name: String,
        cron: String,
        reason: String,
    },
}

/// Where a schedule's fields are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zone {
    /// The process's local zone (`TZ`, else the system's).
    Local,
    Named(NamedZone),
}

#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Zone,
}

impl Schedule {
    /// Parses `cron` for the schedule `name` (named in the error).
    pub fn parse(name: &str, cron: &str) -> Result<Schedule, CronError> {
        let mut fields: Vec<&str> = cron.split_whitespace().collect();
        let mut zone = Zone::Local;
        if let Some(last) = fields.last().copied() {
            if looks_like_zone(last) && fields.len() > 1 {
                match NamedZone::get(last) {
                    Ok(named) => {
                        zone = Zone::Named(named);
                        fields.pop();
                    }
                    Err(e) => {
                        return Err(CronError::TimeZone {
                            name: name.to_owned(),
                            cron: cron.to_owned(),
                            zone: last.to_owned(),
                            reason: e.to_string(),
                        })
                    }
                }
            }
        }
        let nickname = fields.len() == 1 && fields[0].starts_with('@');
        if !nickname && !(5..=6).contains(&fields.len()) {
            return Err(CronError::FieldCount {
                name: name.to_owned(),
                cron: cron.to_owned(),
                count: fields.len(),
            });
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        let cron_parsed = parser
            .parse(&fields.join(" "))
            .map_err(|e| CronError::Pattern {
                name: name.to_owned(),
                cron: cron.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(Schedule {
            cron: cron_parsed,
            zone,
        })
    }

    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// The latest tick at or before `now` (epoch seconds), if any.
    pub fn tick_at_or_before(&self, now: i64) -> Option<i64> {
        let utc = DateTime::<Utc>::from_timestamp(now, 0)?;
        match &self.zone {
            Zone::Local => previous(&self.cron, &utc.with_timezone(&Local)),
            Zone::Named(zone) => previous(&self.cron, &utc.with_timezone(zone)),
        }
    }

    /// The first tick strictly after `now` (epoch seconds), if any.
    pub fn tick_after(&self, now: i64) -> Option<i64> {
        let utc = DateTime::<Utc>::from_timestamp(now, 0)?;
        match &self.zone {
            Zone::Local => next(&self.cron, &utc.with_timezone(&Local)),
            Zone::Named(zone) => next(&self.cron, &utc.with_timezone(zone)),
        }
    }
}

fn previous<Z: TimeZone>(cron: &Cron, at: &DateTime<Z>) -> Option<i64> {
    cron.find_previous_occurrence(at, true)
        .ok()
        .map(|t| t.timestamp())
}

fn next<Z: TimeZone>(cron: &Cron, at: &DateTime<Z>) -> Option<i64> {
    cron.find_next_occurrence(at, false)
        .ok()
        .map(|t| t.timestamp())
}

/// A trailing word is a zone when it could not be a cron field: it has a letter and is not a
/// month or weekday name (with `L`, `W`, `#`, ranges and lists of those).
fn looks_like_zone(word: &str) -> bool {
    if word.contains('/') && word.chars().any(|c| c.is_ascii_alphabetic()) {
        return true;
    }
    if !word.chars().any(|c| c.is_ascii_alphabetic()) {
        return false;
    }
    const NAMES: [&str; 19] = [
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC", "SUN",
        "MON", "TUE", "WED", "THU", "FRI", "SAT",
    ];
    let upper = word.to_ascii_uppercase();
    let rest = NAMES
        .iter()
        .fold(upper, |w, name| w.replace(name, ""))
        .replace(['L', 'W', '?'], "");
    rest.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .expect("a time")
            .timestamp()
    }

    fn named(name: &str) -> Zone {
        Zone::Named(NamedZone::get(name).expect("the system's tzdata has it"))
    }

    #[test]
    fn five_fields_tick_every_minute_at_second_zero() {
        let s = Schedule::parse("m", "* * * * * UTC").expect("parses");
        let now = utc(2026, 1, 5, 10, 7, 31);
        assert_eq!(s.tick_at_or_before(now), Some(utc(2026, 1, 5, 10, 7, 0)));
        assert_eq!(s.tick_after(now), Some(utc(2026, 1, 5, 10, 8, 0)));
    }

    #[test]
    fn six_fields_have_seconds_first() {
        let s = Schedule::parse("s", "*/5 * * * * * Etc/UTC").expect("parses");
        let now = utc(2026, 1, 5, 10, 7, 31);
        assert_eq!(s.tick_at_or_before(now), Some(utc(2026, 1, 5, 10, 7, 30)));
        assert_eq!(s.tick_after(now), Some(utc(2026, 1, 5, 10, 7, 35)));
        // A tick is its own "at or before", and not its own "after".
        let tick = utc(2026, 1, 5, 10, 7, 35);
        assert_eq!(s.tick_at_or_before(tick), Some(tick));
        assert_eq!(s.tick_after(tick), Some(utc(2026, 1, 5, 10, 7, 40)));
    }

    #[test]
    fn a_time_zone_moves_the_tick() {
        let s = Schedule::parse("berlin", "0 3 * * * Europe/Berlin").expect("parses");
        assert_eq!(s.zone(), &named("Europe/Berlin"));
        // Winter: 03:00 in Berlin is 02:00 UTC; summer: 01:00 UTC.
        assert_eq!(
            s.tick_after(utc(2026, 1, 5, 0, 0, 0)),
            Some(utc(2026, 1, 5, 2, 0, 0))
        );
        assert_eq!(
            s.tick_after(utc(2026, 7, 5, 0, 0, 0)),
            Some(utc(2026, 7, 5, 1, 0, 0))
        );
    }

    #[test]
    fn weekday_and_month_names_are_fields_not_zones() {
        let s = Schedule::parse("w", "0 9 * JAN MON").expect("parses");
        assert_eq!(s.zone(), &Zone::Local);
        let s = Schedule::parse("w", "0 0 9 ? * MON-FRI UTC").expect("parses");
        assert_eq!(s.zone(), &named("UTC"));
        assert!(Schedule::parse("l", "0 0 L * *").is_ok());
    }

    // Europe/Berlin springs forward on 2026-03-29: 02:00 → 03:00, so 02:30 never happens.
    #[test]
    fn a_fixed_time_in_the_spring_gap_runs_once_right_after_it() {
        let s = Schedule::parse("gap", "30 2 * * * Europe/Berlin").expect("parses");
        let before = utc(2026, 3, 28, 23, 0, 0);
        let tick = s.tick_after(before).expect("a tick");
        // 03:00 CEST, the first moment after the gap, is 01:00 UTC.
        assert_eq!(tick, utc(2026, 3, 29, 1, 0, 0));
        // The next one is the next day's 02:30 CEST (00:30 UTC), not a second one in the gap.
        assert_eq!(s.tick_after(tick), Some(utc(2026, 3, 30, 0, 30, 0)));
    }

    // Europe/Berlin falls back on 2026-10-25: 03:00 CEST → 02:00 CET, so 02:00–02:59 happens twice.
    #[test]
    fn a_fixed_time_in_the_repeated_hour_runs_once() {
        let s = Schedule::parse("repeat", "30 2 * * * Europe/Berlin").expect("parses");
        let first = s.tick_after(utc(2026, 10, 24, 22, 0, 0)).expect("a tick");
        // The first pass: 02:30 CEST = 00:30 UTC.
        assert_eq!(first, utc(2026, 10, 25, 0, 30, 0));
        // Not again at 02:30 CET (01:30 UTC): next is the next day's.
        assert_eq!(s.tick_after(first), Some(utc(2026, 10, 26, 1, 30, 0)));
    }

    #[test]
    fn an_interval_schedule_runs_in_both_passes_of_the_repeated_hour() {
        let s = Schedule::parse("every", "30 * * * * Europe/Berlin").expect("parses");
        let first = s.tick_after(utc(2026, 10, 24, 23, 45, 0)).expect("a tick");
        assert_eq!(first, utc(2026, 10, 25, 0, 30, 0)); // 02:30 CEST
        assert_eq!(s.tick_after(first), Some(utc(2026, 10, 25, 1, 30, 0))); // 02:30 CET
    }

    #[test]
    fn an_interval_schedule_skips_the_gap() {
        let s = Schedule::parse("every", "30 * * * * Europe/Berlin").expect("parses");
        let first = s.tick_after(utc(2026, 3, 29, 0, 0, 0)).expect("a tick");
        assert_eq!(first, utc(2026, 3, 29, 0, 30, 0)); // 01:30 CET
                                                       // 02:30 does not exist; next is 03:30 CEST = 01:30 UTC.
        assert_eq!(s.tick_after(first), Some(utc(2026, 3, 29, 1, 30, 0)));
    }

    #[test]
    fn bad_strings_name_the_schedule() {
        let e = Schedule::parse("nightly", "0 3 * *").unwrap_err();
        assert!(matches!(e, CronError::FieldCount { count: 4, .. }));
        assert!(e.to_string().contains("\"nightly\""), "{e}");

        let e = Schedule::parse("nightly", "0 3 * * * Nowhere/Land").unwrap_err();
        assert!(matches!(e, CronError::TimeZone { ref zone, .. } if zone == "Nowhere/Land"));
        assert!(e.to_string().contains("\"nightly\""), "{e}");
        assert!(e.to_string().contains("no time zone file"), "{e}");

        let e = Schedule::parse("nightly", "61 3 * * *").unwrap_err();
        assert!(matches!(e, CronError::Pattern { .. }), "{e:?}");
        assert!(e.to_string().contains("\"nightly\""), "{e}");

        assert!(Schedule::parse("n", "0 0 3 * * * 2026").is_err());
        assert!(Schedule::parse("n", "").is_err());
    }

    #[test]
    fn nicknames_parse() {
        let s = Schedule::parse("h", "@hourly").expect("parses");
        let now = utc(2026, 1, 5, 10, 7, 31);
        let next = s.tick_after(now).expect("a tick");
        assert!(next > now && next - now <= 3600, "{next}");
        assert_eq!(s.tick_after(next), Some(next + 3600));
    }
}
