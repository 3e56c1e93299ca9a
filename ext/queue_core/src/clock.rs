//! Wall-clock helpers in the units Sidekiq's wire format uses.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch with a fractional part, as Sidekiq writes `enqueued_at`, `failed_at`, scores.
pub fn now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The wall clock read through the monotonic one, for what is stamped once per job: a
/// [`SystemTime`] read (~30 ns here) is taken at most once a second, and an [`Instant`] the caller
/// already holds is turned into seconds since the epoch from it. Between two reads the monotonic
/// clock's slewing moves the answer by at most ~0.5 ms; a step of the wall clock is seen within
/// a second.
#[derive(Debug, Default)]
pub struct WallClock {
    /// A monotonic instant and the wall-clock time read beside it.
    anchor: Option<(Instant, Duration)>,
}

impl WallClock {
    /// How long an anchor serves before the wall clock is read again.
    const REREAD: Duration = Duration::from_secs(1);

    /// Time since the epoch at `at`.
    pub fn since_epoch(&mut self, at: Instant) -> Duration {
        if let Some((mono, wall)) = self.anchor {
            if let Some(gone) = at.checked_duration_since(mono) {
                if gone < Self::REREAD {
                    return wall + gone;
                }
            }
        }
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.anchor = Some((at, wall));
        wall
    }

    /// Minutes since the epoch (UTC) at `at`, as Sidekiq's Metrics page buckets jobs.
    pub fn minute(&mut self, at: Instant) -> i64 {
        (self.since_epoch(at).as_secs() / 60) as i64
    }
}

/// Seconds since the epoch, whole, at `at` (an instant in the past): for a time kept as an
/// [`Instant`] and shown rarely, such as when a running job started.
pub fn unix_secs_at(at: Instant) -> i64 {
    (now_f64() - at.elapsed().as_secs_f64()) as i64
}

/// Today's date in UTC as `YYYY-MM-DD`, for Sidekiq's daily stat keys.
pub fn utc_date() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

/// A float that JSON and Redis both print with a fractional part (`1700000000.0`, never `1700000000`),
/// as Ruby's `Float#to_s` does.
pub fn float_string(x: f64) -> String {
    if x.fract() == 0.0 && x.is_finite() {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_follows_the_instant_it_is_given() {
        let mut clock = WallClock::default();
        let t0 = Instant::now();
        let first = clock.since_epoch(t0);
        let direct = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        assert!(direct.abs_diff(first) < Duration::from_millis(50));
        // Within the second: no new read, the difference of the instants.
        let later = t0 + Duration::from_millis(400);
        assert_eq!(clock.since_epoch(later), first + Duration::from_millis(400));
        // Past it: read again, and anchored there.
        let much_later = t0 + Duration::from_secs(5);
        let reread = clock.since_epoch(much_later);
        assert!(direct.abs_diff(reread) < Duration::from_millis(50));
        assert_eq!(
            clock.since_epoch(much_later + Duration::from_millis(10)),
            reread + Duration::from_millis(10)
        );
        // An instant before the anchor reads the clock again instead of going backwards from it.
        assert!(direct.abs_diff(clock.since_epoch(t0)) < Duration::from_millis(50));
    }

    #[test]
    fn minute_is_whole_minutes_since_the_epoch() {
        let mut clock = WallClock::default();
        let now = Instant::now();
        let expected = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
            / 60;
        let got = clock.minute(now) as u64;
        assert!(got == expected || got + 1 == expected || got == expected + 1);
    }

    #[test]
    fn unix_secs_at_an_earlier_instant() {
        let wall = now_f64() as i64;
        let at = Instant::now();
        assert!((unix_secs_at(at) - wall).abs() <= 1);
        if let Some(earlier) = at.checked_sub(Duration::from_secs(90)) {
            assert!((unix_secs_at(earlier) - (wall - 90)).abs() <= 1);
        }
    }
}
