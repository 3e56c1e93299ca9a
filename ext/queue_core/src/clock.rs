//! Wall-clock helpers in the units Sidekiq's wire format uses.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the epoch with a fractional part, as Sidekiq writes `enqueued_at`, `failed_at`, scores.
pub fn now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
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
