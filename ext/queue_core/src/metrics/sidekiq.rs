//! The data behind Sidekiq's own Metrics page (Sidekiq 7.0+), written by the engine in Sidekiq's
//! format so that page shows the jobs our servers ran.
//!
//! Sidekiq's `ExecutionTracker` (`lib/sidekiq/metrics/tracking.rb`, `shared.rb`, at v7.3.10 and
//! v8.0.10) counts per class (`wrapped || class`): `<Class>|p` every job that ran (failed ones
//! included), `<Class>|f` the failed ones, `<Class>|ms` the integer milliseconds of the successful
//! ones only; and a histogram of the successful ones' milliseconds in 26 buckets (`ms < 20`, `< 30`,
//! … `< 335000`, then "slow"). Each beat it `HINCRBY`s the counts into a minute hash and
//! `BITFIELD … OVERFLOW SAT INCRBY u16 #<bucket> <n>`s the histogram, every key expiring in 8 h:
//!
//! | | counts | histogram |
//! |---|---|---|
//! | 7.x | `j\|%Y%m%d\|%-H:%-M` | `<Class>-%d-%H:%-M` |
//! | 8.x | `j\|%y%m%d\|%-H:%M`, and the ten-minute `j\|%y%m%d\|%-H:%M` less its last digit (72 h) | `h\|<Class>-%-d-%-H:%-M` |
//!
//! Sidekiq files a beat's jobs under the minute of the beat (every 10 s). We file each job under
//! the UTC minute it finished in, read once per job (a `SystemTime::now()` and a division) and kept
//! with its counts, so a job finished at 08:42:59 is in 08:42 even when the beat that writes it runs
//! at 08:43:01: the page's per-minute figures do not depend on when the beats fall.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;

use crate::error::{Error, Result};
use crate::keys::Keys;

/// Upper bounds (exclusive) of Sidekiq's histogram buckets, in ms; a 26th bucket takes the rest.
pub const BUCKET_MS: [u64; 25] = [
    20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1100, 1700, 2500, 3800, 5750, 8500, 13000, 20000,
    30000, 45000, 65000, 100000, 150000, 225000, 335000,
];

/// Number of histogram buckets (`u16` counters `#0` … `#25`).
pub const BUCKETS: usize = BUCKET_MS.len() + 1;

/// Every key expires 8 h after its last write (Sidekiq's `SHORT_TERM`, `HISTOGRAM_TTL`).
pub const SHORT_TERM: u64 = 8 * 60 * 60;
/// Sidekiq 8's ten-minute hashes expire in 72 h (`MID_TERM`).
pub const MID_TERM: u64 = 3 * 24 * 60 * 60;

/// Which Sidekiq's keys to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Sidekiq 7.x: `j|20250214|8:3`, `Class-14-08:3`.
    V7,
    /// Sidekiq 8.x: `j|250214|8:03`, `j|250214|8:0`, `h|Class-14-8:3`.
    V8,
}

impl Version {
    /// `7` or `8`; anything else is an [`Error::InvalidArgument`].
    pub fn from_major(major: i64) -> Result<Version> {
        match major {
            7 => Ok(Version::V7),
            8 => Ok(Version::V8),
            other => Err(Error::InvalidArgument(format!(
                "sidekiq_metrics must be 7, 8 or false, got {other}"
            ))),
        }
    }
}

/// The bucket of a successful job of `ms` milliseconds: the first whose bound is above it.
pub fn bucket(ms: u64) -> usize {
    BUCKET_MS
        .iter()
        .position(|&bound| ms < bound)
        .unwrap_or(BUCKET_MS.len())
}

/// The current UTC minute, as minutes since the epoch.
pub fn now_minute() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (secs / 60) as i64
}

/// What one class did in one minute.
#[derive(Debug, Clone, PartialEq)]
pub struct Minute {
    /// Minutes since the epoch (UTC).
    pub minute: i64,
    /// Jobs run, failed ones included (Sidekiq's `p`).
    pub processed: u64,
    /// Of which failed (`f`).
    pub failed: u64,
    /// Milliseconds of the successful ones, each truncated to whole ms (`ms`).
    pub ms: u64,
    /// The successful ones by [`bucket`].
    pub buckets: [u64; BUCKETS],
}

impl Minute {
    pub fn new(minute: i64) -> Minute {
        Minute {
            minute,
            processed: 0,
            failed: 0,
            ms: 0,
            buckets: [0; BUCKETS],
        }
    }

    /// One job: failures are counted but not timed, as Sidekiq does.
    pub fn observe(&mut self, elapsed: Duration, ok: bool) {
        self.processed += 1;
        if ok {
            let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
            self.ms = self.ms.saturating_add(ms);
            self.buckets[bucket(ms)] += 1;
        } else {
            self.failed += 1;
        }
    }

    pub fn add(&mut self, other: &Minute) {
        self.processed += other.processed;
        self.failed += other.failed;
        self.ms = self.ms.saturating_add(other.ms);
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
    }
}

/// Adds `elapsed` to the entry for `minute` in `minutes` (a class's few minutes since the last
/// flush, newest last; almost always one).
pub fn observe(minutes: &mut Vec<Minute>, minute: i64, elapsed: Duration, ok: bool) {
    match minutes.iter_mut().rev().find(|m| m.minute == minute) {
        Some(m) => m.observe(elapsed, ok),
        None => {
            let mut m = Minute::new(minute);
            m.observe(elapsed, ok);
            minutes.push(m);
        }
    }
}

/// Adds every minute of `from` to `into`.
pub fn merge(into: &mut Vec<Minute>, from: &[Minute]) {
    for m in from {
        match into.iter_mut().find(|x| x.minute == m.minute) {
            Some(x) => x.add(m),
            None => into.push(m.clone()),
        }
    }
}

/// The UTC date and time of `minute`.
fn utc(minute: i64) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(minute.saturating_mul(60))
        .map_err(|e| Error::InvalidArgument(format!("minute {minute} out of range: {e}")))
}

/// The minute hash(es) of `minute` with their TTLs: 7.x one, 8.x the minute and the ten-minute.
pub fn count_keys(keys: &Keys, version: Version, minute: i64) -> Result<Vec<(String, u64)>> {
    let t = utc(minute)?;
    let (h, m) = (t.hour(), t.minute());
    Ok(match version {
        Version::V7 => {
            let date = format!("{:04}{:02}{:02}", t.year(), u8::from(t.month()), t.day());
            vec![(keys.key(&format!("j|{date}|{h}:{m}")), SHORT_TERM)]
        }
        Version::V8 => {
            let date = format!(
                "{:02}{:02}{:02}",
                t.year().rem_euclid(100),
                u8::from(t.month()),
                t.day()
            );
            vec![
                (keys.key(&format!("j|{date}|{h}:{}", m / 10)), MID_TERM),
                (keys.key(&format!("j|{date}|{h}:{m:02}")), SHORT_TERM),
            ]
        }
    })
}

/// The histogram key of `class` in `minute`.
pub fn histogram_key(keys: &Keys, version: Version, class: &str, minute: i64) -> Result<String> {
    let t = utc(minute)?;
    let (d, h, m) = (t.day(), t.hour(), t.minute());
    Ok(match version {
        Version::V7 => keys.key(&format!("{class}-{d:02}-{h:02}:{m}")),
        Version::V8 => keys.key(&format!("h|{class}-{d}-{h}:{m}")),
    })
}

/// Appends the writes for `(class, minute)` pairs to `pipe`: per minute hash an `HINCRBY` per
/// field and an `EXPIRE`; per class and minute with a successful job a `BITFIELD` and an `EXPIRE`.
pub fn writes<'a>(
    pipe: &mut redis::Pipeline,
    keys: &Keys,
    version: Version,
    classes: impl IntoIterator<Item = (&'a str, &'a Minute)>,
) -> Result<()> {
    let mut hashes: Vec<(String, u64)> = Vec::new();
    for (class, m) in classes {
        if m.processed == 0 {
            continue;
        }
        let succeeded = m.processed - m.failed;
        for (hash, ttl) in count_keys(keys, version, m.minute)? {
            let mut incr = |field: &str, by: u64| {
                pipe.cmd("HINCRBY")
                    .arg(&hash)
                    .arg(format!("{class}|{field}"))
                    .arg(by)
                    .ignore();
            };
            incr("p", m.processed);
            if m.failed > 0 {
                incr("f", m.failed);
            }
            if succeeded > 0 {
                incr("ms", m.ms);
            }
            if !hashes.iter().any(|(k, _)| *k == hash) {
                hashes.push((hash, ttl));
            }
        }
        if succeeded > 0 {
            let key = histogram_key(keys, version, class, m.minute)?;
            let bitfield = pipe.cmd("BITFIELD").arg(&key).arg("OVERFLOW").arg("SAT");
            for (i, &n) in m.buckets.iter().enumerate() {
                if n > 0 {
                    bitfield
                        .arg("INCRBY")
                        .arg("u16")
                        .arg(format!("#{i}"))
                        .arg(n.min(u64::from(u16::MAX)));
                }
            }
            bitfield.ignore();
            pipe.cmd("EXPIRE").arg(&key).arg(SHORT_TERM).ignore();
        }
    }
    for (hash, ttl) in hashes {
        pipe.cmd("EXPIRE").arg(hash).arg(ttl).ignore();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2025-02-14 08:03 UTC and 2025-02-04 18:43 UTC, as epoch minutes.
    const FEB14_0803: i64 = 1_739_520_180 / 60;
    const FEB04_1843: i64 = 1_738_694_580 / 60;

    #[test]
    fn buckets_are_sidekiqs() {
        assert_eq!(BUCKETS, 26);
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(19), 0);
        assert_eq!(bucket(20), 1, "the bound is exclusive: ms < 20");
        assert_eq!(bucket(30), 2);
        assert_eq!(bucket(280), 7, "shared.rb: 280 ms increments bucket[7]");
        assert_eq!(bucket(334_999), 24);
        assert_eq!(bucket(335_000), 25, "slow");
        assert_eq!(bucket(u64::MAX), 25);
    }

    #[test]
    fn keys_are_sidekiq_7s() {
        let keys = Keys::new("");
        assert_eq!(
            count_keys(&keys, Version::V7, FEB14_0803).unwrap(),
            vec![("j|20250214|8:3".to_owned(), SHORT_TERM)]
        );
        assert_eq!(
            histogram_key(&keys, Version::V7, "HardJob", FEB14_0803).unwrap(),
            "HardJob-14-08:3"
        );
        assert_eq!(
            histogram_key(&keys, Version::V7, "HardJob", FEB04_1843).unwrap(),
            "HardJob-04-18:43"
        );
        let ns = Keys::new("ns:");
        assert_eq!(
            count_keys(&ns, Version::V7, FEB04_1843).unwrap()[0].0,
            "ns:j|20250204|18:43"
        );
    }

    #[test]
    fn keys_are_sidekiq_8s() {
        let keys = Keys::new("");
        assert_eq!(
            count_keys(&keys, Version::V8, FEB14_0803).unwrap(),
            vec![
                ("j|250214|8:0".to_owned(), MID_TERM),
                ("j|250214|8:03".to_owned(), SHORT_TERM)
            ]
        );
        assert_eq!(
            count_keys(&keys, Version::V8, FEB04_1843).unwrap(),
            vec![
                ("j|250204|18:4".to_owned(), MID_TERM),
                ("j|250204|18:43".to_owned(), SHORT_TERM)
            ]
        );
        assert_eq!(
            histogram_key(&keys, Version::V8, "HardJob", FEB04_1843).unwrap(),
            "h|HardJob-4-18:43"
        );
    }

    #[test]
    fn failures_are_counted_not_timed() {
        let mut minutes = Vec::new();
        observe(&mut minutes, 5, Duration::from_millis(31), true);
        observe(&mut minutes, 5, Duration::from_micros(19_999), true);
        observe(&mut minutes, 5, Duration::from_secs(9), false);
        observe(&mut minutes, 6, Duration::from_millis(1), true);
        assert_eq!(minutes.len(), 2);
        let m = &minutes[0];
        assert_eq!((m.minute, m.processed, m.failed, m.ms), (5, 3, 1, 50));
        assert_eq!(m.buckets[0], 1, "19.999 ms is 19 ms");
        assert_eq!(m.buckets[2], 1);
        assert_eq!(m.buckets.iter().sum::<u64>(), 2);
        let mut into = vec![minutes[1].clone()];
        merge(&mut into, &minutes);
        assert_eq!(into.len(), 2);
        assert_eq!(into[0].processed, 2, "minute 6 merged with itself");
    }

    #[test]
    fn bad_versions_are_refused() {
        assert_eq!(Version::from_major(7).unwrap(), Version::V7);
        assert_eq!(Version::from_major(8).unwrap(), Version::V8);
        assert!(matches!(
            Version::from_major(6),
            Err(Error::InvalidArgument(_))
        ));
    }
}
