//! A named IANA time zone (`Europe/Berlin`), read from the system's time zone database as sidekiq-cron
//! reads it (fugit and et-orbi through tzinfo, which reads the same files): the TZif file under
//! `TZDIR` when that is set, else under the usual zoneinfo directories. Each name is read once per
//! process. `UTC` and its aliases work without a database.
//!
//! It is a [`chrono::TimeZone`], so croner computes ticks in it as it does in `Local`. The engine
//! once embedded the whole database (chrono-tz); its tables of `&'static str` names took ~30,000
//! load-time relocations, ~1.8 MB of every server's memory (ARCHITECTURE.md, "The floor, measured").

use std::collections::HashMap;
use std::fmt;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{FixedOffset, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone};
use thiserror::Error as ThisError;

/// Where zone files are looked for when `TZDIR` is not set.
const DIRECTORIES: [&str; 4] = [
    "/usr/share/zoneinfo",
    "/usr/lib/zoneinfo",
    "/usr/share/lib/zoneinfo",
    "/etc/zoneinfo",
];

/// Names that mean UTC when no database has them.
const UTC_NAMES: [&str; 10] = [
    "UTC",
    "Etc/UTC",
    "UCT",
    "Etc/UCT",
    "GMT",
    "Etc/GMT",
    "Zulu",
    "Etc/Zulu",
    "Universal",
    "Etc/Universal",
];

/// Why a name is not a zone.
#[derive(Debug, Clone, PartialEq, Eq, ThisError)]
pub enum ZoneError {
    #[error("not a time zone name")]
    BadName,
    #[error("no time zone file for it under {0}")]
    NotFound(String),
    #[error("its time zone file {path} cannot be read: {reason}")]
    Unreadable { path: String, reason: String },
}

/// A zone: its name and its rules, shared by every schedule that names it.
#[derive(Clone)]
pub struct NamedZone {
    name: Arc<str>,
    rules: Arc<tz::TimeZone>,
}

impl NamedZone {
    /// The zone called `name`: from the process's cache, else read from the database.
    pub fn get(name: &str) -> Result<NamedZone, ZoneError> {
        static CACHE: OnceLock<Mutex<HashMap<String, NamedZone>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(zone) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Ok(zone.clone());
        }
        let zone = NamedZone {
            name: name.into(),
            rules: Arc::new(read(name)?),
        };
        cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), zone.clone());
        Ok(zone)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its offset from UTC at `unix_time`. A file without rules past its last transition (TZif
    /// version 1) keeps that transition's offset.
    fn offset_at(&self, unix_time: i64) -> FixedOffset {
        let seconds = match self.rules.find_local_time_type(unix_time) {
            Ok(kind) => kind.ut_offset(),
            Err(_) => {
                let rules = tz::TimeZone::as_ref(&self.rules);
                let types = rules.local_time_types();
                let last = rules.transitions().last();
                last.and_then(|t| types.get(t.local_time_type_index()))
                    .or(types.first())
                    .map_or(0, |kind| kind.ut_offset())
            }
        };
        FixedOffset::east_opt(seconds).unwrap_or_else(|| chrono::Utc.fix())
    }

    fn offset(&self, fixed: FixedOffset) -> ZoneOffset {
        ZoneOffset {
            zone: self.clone(),
            fixed,
        }
    }
}

impl PartialEq for NamedZone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for NamedZone {}

impl fmt::Debug for NamedZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NamedZone({})", self.name)
    }
}

/// An offset in a [`NamedZone`]: the offset, and the zone it came from (chrono makes the zone back
/// from a date's offset).
#[derive(Clone, Debug)]
pub struct ZoneOffset {
    zone: NamedZone,
    fixed: FixedOffset,
}

impl Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl TimeZone for NamedZone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Self {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> LocalResult<ZoneOffset> {
        self.offset_from_local_datetime(&local.and_time(chrono::NaiveTime::MIN))
    }

    /// The offsets under which `local` happens: none in a gap, two in a repeated hour (the earlier
    /// instant first). The offsets in force a day either side are the only candidates (zones change
    /// offset at most once in a day); one is right when the instant it gives has it.
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<ZoneOffset> {
        let wall = local.and_utc().timestamp();
        let mut found: Vec<FixedOffset> = Vec::with_capacity(2);
        for probe in [wall - 86_400, wall, wall + 86_400] {
            let offset = self.offset_at(probe);
            let instant = wall - i64::from(offset.local_minus_utc());
            if self.offset_at(instant) == offset && !found.contains(&offset) {
                found.push(offset);
            }
        }
        // The larger offset reaches the wall time at the earlier instant.
        found.sort_by_key(|o| std::cmp::Reverse(o.local_minus_utc()));
        match found.as_slice() {
            [] => LocalResult::None,
            [one] => LocalResult::Single(self.offset(*one)),
            [early, late, ..] => LocalResult::Ambiguous(self.offset(*early), self.offset(*late)),
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        self.offset_from_utc_datetime(&utc.and_time(chrono::NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        self.offset(self.offset_at(utc.and_utc().timestamp()))
    }
}

/// Reads the zone `name` from the database.
fn read(name: &str) -> Result<tz::TimeZone, ZoneError> {
    let sound = !name.is_empty()
        && name.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_+-".contains(&b))
        });
    if !sound {
        return Err(ZoneError::BadName);
    }
    let directories: Vec<PathBuf> = match std::env::var_os("TZDIR").filter(|d| !d.is_empty()) {
        Some(dir) => vec![PathBuf::from(dir)],
        None => DIRECTORIES.iter().map(PathBuf::from).collect(),
    };
    for directory in &directories {
        let path = directory.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => {
                return tz::TimeZone::from_tz_data(&bytes).map_err(|e| ZoneError::Unreadable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
            // Not here, or a directory of the database (`Europe`): not a zone here.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::NotFound | ErrorKind::IsADirectory | ErrorKind::NotADirectory
                ) =>
            {
                continue
            }
            Err(e) => {
                return Err(ZoneError::Unreadable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        }
    }
    if UTC_NAMES.contains(&name) {
        return Ok(tz::TimeZone::utc());
    }
    let searched: Vec<String> = directories
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    Err(ZoneError::NotFound(searched.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn berlin() -> NamedZone {
        NamedZone::get("Europe/Berlin").expect("the system's tzdata has Europe/Berlin")
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .expect("a time")
            .timestamp()
    }

    #[test]
    fn offsets_follow_daylight_saving() {
        let zone = berlin();
        let winter = zone.timestamp_opt(utc(2026, 1, 5, 12, 0), 0).unwrap();
        assert_eq!(winter.offset().fix().local_minus_utc(), 3600);
        let summer = zone.timestamp_opt(utc(2026, 7, 5, 12, 0), 0).unwrap();
        assert_eq!(summer.offset().fix().local_minus_utc(), 7200);
        // Far past the file's last listed transition: its footer's rule still applies.
        let later = zone.timestamp_opt(utc(2090, 7, 5, 12, 0), 0).unwrap();
        assert_eq!(later.offset().fix().local_minus_utc(), 7200);
    }

    #[test]
    fn a_local_time_in_the_gap_has_no_instant_and_one_in_the_repeat_has_two() {
        let zone = berlin();
        // 2026-03-29 02:30 never happens in Berlin.
        assert!(matches!(
            zone.with_ymd_and_hms(2026, 3, 29, 2, 30, 0),
            LocalResult::None
        ));
        // 2026-10-25 02:30 happens in CEST (00:30 UTC), then in CET (01:30 UTC).
        match zone.with_ymd_and_hms(2026, 10, 25, 2, 30, 0) {
            LocalResult::Ambiguous(early, late) => {
                assert_eq!(early.timestamp(), utc(2026, 10, 25, 0, 30));
                assert_eq!(late.timestamp(), utc(2026, 10, 25, 1, 30));
            }
            other => panic!("expected two instants, got {other:?}"),
        }
        let plain = zone.with_ymd_and_hms(2026, 6, 1, 9, 0, 0).single().unwrap();
        assert_eq!(plain.timestamp(), utc(2026, 6, 1, 7, 0));
    }

    #[test]
    fn a_zone_south_of_the_equator_and_one_without_daylight_saving() {
        let sydney = NamedZone::get("Australia/Sydney").expect("tzdata");
        let january = sydney
            .with_ymd_and_hms(2026, 1, 15, 12, 0, 0)
            .single()
            .unwrap();
        assert_eq!(january.offset().fix().local_minus_utc(), 11 * 3600);
        let kolkata = NamedZone::get("Asia/Kolkata").expect("tzdata");
        let any = kolkata
            .with_ymd_and_hms(2026, 7, 1, 12, 0, 0)
            .single()
            .unwrap();
        assert_eq!(any.offset().fix().local_minus_utc(), 5 * 3600 + 1800);
    }

    #[test]
    fn bad_and_unknown_names_are_refused() {
        for bad in [
            "",
            "../etc/passwd",
            "/etc/localtime",
            "Europe//Berlin",
            "Europe/./Berlin",
            "a b",
        ] {
            assert_eq!(
                NamedZone::get(bad).unwrap_err(),
                ZoneError::BadName,
                "{bad:?}"
            );
        }
        assert!(matches!(
            NamedZone::get("Nowhere/Land").unwrap_err(),
            ZoneError::NotFound(_)
        ));
        // A directory of the database is not a zone.
        assert!(matches!(
            NamedZone::get("Europe").unwrap_err(),
            ZoneError::NotFound(_)
        ));
    }

    #[test]
    fn utc_is_there_and_a_name_is_read_once() {
        let zone = NamedZone::get("Etc/UTC").expect("UTC");
        let t = zone.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap();
        assert_eq!(t.timestamp(), utc(2026, 1, 1, 0, 0));
        let (a, b) = (berlin(), berlin());
        assert!(Arc::ptr_eq(&a.rules, &b.rules));
        assert_eq!(a.name(), "Europe/Berlin");
    }
}
