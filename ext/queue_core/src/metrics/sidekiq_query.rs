//! Reading back the Sidekiq 7/8 Metrics data ([`super::sidekiq`]) for our dashboard's Metrics page:
//! per class, over the last `minutes` minutes, jobs processed and failed, the milliseconds of the
//! successful ones, and one class's histogram.
//!
//! Two pipelined round trips, whatever the range: one `HGETALL` per minute hash (the 7.x hash, or
//! 8.x's per-minute one), then one `BITFIELD … GET u16 #i` per minute in which the chosen class ran
//! successfully. Redis work is O(minutes × classes), never O(jobs). Keys older than 8 h have
//! expired (Sidekiq's `SHORT_TERM`), so a longer range reads nothing more.

use std::collections::BTreeMap;

use super::sidekiq::{count_keys, histogram_key, Version, BUCKETS, SHORT_TERM};
use crate::error::{Error, Result};
use crate::link::connection::Conn;

/// The most minutes one query reads: the keys' lifetime.
pub const MAX_MINUTES: u32 = (SHORT_TERM / 60) as u32;

/// One class's totals over the range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassTotals {
    /// Jobs run, failed ones included.
    pub processed: u64,
    pub failed: u64,
    /// Milliseconds of the successful ones.
    pub ms: u64,
}

/// What the page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Every class seen in the range, by name.
    pub classes: BTreeMap<String, ClassTotals>,
    /// The histogram of `histogram_class` over the range: counts of successful jobs in Sidekiq's
    /// 26 buckets (`super::sidekiq::BUCKET_MS`), or `None` when no class was asked for.
    pub histogram: Option<[u64; BUCKETS]>,
}

/// The last `minutes` minutes up to `now_minute` (minutes since the epoch, UTC), the histogram of
/// `histogram_class` if given.
pub async fn query(
    conn: &mut Conn,
    version: Version,
    now_minute: i64,
    minutes: u32,
    histogram_class: Option<&str>,
) -> Result<Report> {
    if minutes == 0 || minutes > MAX_MINUTES {
        return Err(Error::InvalidArgument(format!(
            "metrics range must be 1 to {MAX_MINUTES} minutes, got {minutes}"
        )));
    }
    let keys = conn.keys().clone();
    let range: Vec<i64> = (0..i64::from(minutes)).map(|i| now_minute - i).collect();
    let mut pipe = redis::pipe();
    for &minute in &range {
        let hash = count_keys(&keys, version, minute)?
            .into_iter()
            .find(|(_, ttl)| *ttl == SHORT_TERM)
            .map(|(k, _)| k)
            .ok_or_else(|| Error::InvalidArgument("no minute key".to_owned()))?;
        pipe.cmd("HGETALL").arg(hash);
    }
    let hashes: Vec<Vec<(String, String)>> = conn.pipe(&pipe).await?;

    let mut classes: BTreeMap<String, ClassTotals> = BTreeMap::new();
    let mut ran_in: Vec<i64> = Vec::new();
    for (&minute, fields) in range.iter().zip(&hashes) {
        let mut succeeded_here = (0, 0);
        for (field, value) in fields {
            let Some((class, metric)) = field.rsplit_once('|') else {
                continue;
            };
            let n: u64 = value.trim().parse().unwrap_or(0);
            let totals = classes.entry(class.to_owned()).or_default();
            match metric {
                "p" => totals.processed += n,
                "f" => totals.failed += n,
                "ms" => totals.ms += n,
                _ => continue,
            }
            if Some(class) == histogram_class {
                match metric {
                    "p" => succeeded_here.0 += n,
                    "f" => succeeded_here.1 += n,
                    _ => {}
                }
            }
        }
        if succeeded_here.0 > succeeded_here.1 {
            ran_in.push(minute);
        }
    }

    let histogram = match histogram_class {
        None => None,
        Some(_) if ran_in.is_empty() => Some([0; BUCKETS]),
        Some(class) => {
            let mut pipe = redis::pipe();
            for &minute in &ran_in {
                let cmd = pipe
                    .cmd("BITFIELD")
                    .arg(histogram_key(&keys, version, class, minute)?);
                for i in 0..BUCKETS {
                    cmd.arg("GET").arg("u16").arg(format!("#{i}"));
                }
            }
            let rows: Vec<Vec<u64>> = conn.pipe(&pipe).await?;
            let mut sum = [0u64; BUCKETS];
            for row in rows {
                for (total, n) in sum.iter_mut().zip(row) {
                    *total += n;
                }
            }
            Some(sum)
        }
    };
    Ok(Report { classes, histogram })
}
