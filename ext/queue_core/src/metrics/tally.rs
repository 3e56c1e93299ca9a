//! What one process counted and has not flushed yet.
//!
//! Each fetcher records into a [`Tally`] of its own (behind a lock only the flush ever shares), per
//! queue (by its index in the process's queue order) and class: processed or failed, and the
//! duration in a fixed-bucket histogram; and expired, for jobs dropped unrun (`expires_at`). The class is read from the job's top-level keys in one pass
//! over its bytes, without parsing it (`wrapped` when present, as ActiveJob jobs carry the real class
//! there, else `class`).

use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fetch::shared::lock;
use crate::job_json::TopLevel;

use super::sidekiq::{self, Version};

/// Upper bounds of the duration histogram, in seconds (`+Inf` is implied).
pub const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Counts of one class on one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub processed: u64,
    pub failed: u64,
    /// Dropped unrun because their `expires_at` had passed (not in the histogram).
    pub expired: u64,
    /// Seconds, summed.
    pub sum: f64,
    /// Per bucket, not cumulative; the last is `+Inf`.
    pub buckets: [u64; BUCKETS.len() + 1],
    /// Sidekiq's Metrics page counts, by the UTC minute each job finished in (empty when those
    /// metrics are off).
    pub sidekiq: Vec<sidekiq::Minute>,
}

impl Series {
    fn observe(&mut self, elapsed: Duration, ok: bool, minute: Option<i64>) {
        if let Some(minute) = minute {
            sidekiq::observe(&mut self.sidekiq, minute, elapsed, ok);
        }
        if ok {
            self.processed += 1;
        } else {
            self.failed += 1;
        }
        let secs = elapsed.as_secs_f64();
        self.sum += secs;
        let i = BUCKETS
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(BUCKETS.len());
        self.buckets[i] += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.processed == 0 && self.failed == 0 && self.expired == 0
    }

    fn add(&mut self, other: &Series) {
        self.processed += other.processed;
        self.failed += other.failed;
        self.expired += other.expired;
        self.sum += other.sum;
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        sidekiq::merge(&mut self.sidekiq, &other.sidekiq);
    }
}

/// Series by queue index, then class (hashed with `FxHash`: every job looks its class up, with the
/// GVL held, and the names are the app's own classes, not input chosen to collide).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    queues: Vec<FxHashMap<String, Series>>,
    /// Also count for Sidekiq's Metrics page (each job then reads the clock once).
    sidekiq: bool,
}

impl Tally {
    /// A tally that also counts for Sidekiq's Metrics page when `sidekiq`.
    pub fn new(sidekiq: bool) -> Tally {
        Tally {
            queues: Vec::new(),
            sidekiq,
        }
    }

    /// Records one finished job of `raw` on queue `index`: processed when `ok`, else failed; for
    /// Sidekiq's page (when on) under the current UTC minute.
    pub fn record(&mut self, index: usize, raw: &[u8], elapsed: Duration, ok: bool) {
        let minute = self.sidekiq.then(sidekiq::now_minute);
        self.record_at(index, raw, None, elapsed, ok, minute);
    }

    /// Whether jobs are also counted for Sidekiq's Metrics page, by the minute they finished in (the
    /// `minute` that [`Tally::record_at`] takes).
    pub fn by_minute(&self) -> bool {
        self.sidekiq
    }

    /// [`Tally::record`] with the minute (epoch minutes) given: `None`, or a tally not counting for
    /// Sidekiq, counts nothing there. `class` when the caller already read it as [`job_class`] reads
    /// it (the binding, which built the job's Hash), sparing the pass over `raw`.
    pub fn record_at(
        &mut self,
        index: usize,
        raw: &[u8],
        class: Option<&str>,
        elapsed: Duration,
        ok: bool,
        minute: Option<i64>,
    ) {
        let class = class.map_or_else(|| job_class(raw), Cow::Borrowed);
        let minute = minute.filter(|_| self.sidekiq);
        self.observe(index, &class, elapsed, ok, minute);
    }

    fn observe(
        &mut self,
        index: usize,
        class: &str,
        elapsed: Duration,
        ok: bool,
        minute: Option<i64>,
    ) {
        if self.queues.len() <= index {
            self.queues.resize_with(index + 1, FxHashMap::default);
        }
        let classes = &mut self.queues[index];
        match classes.get_mut(class) {
            Some(series) => series.observe(elapsed, ok, minute),
            None => classes
                .entry(class.to_owned())
                .or_default()
                .observe(elapsed, ok, minute),
        }
    }

    /// Records one job of `raw` on queue `index` dropped unrun because it expired.
    pub fn record_expired(&mut self, index: usize, raw: &[u8]) {
        self.entry(index, &job_class(raw)).expired += 1;
    }

    /// Jobs counted as expired, over every series.
    pub fn expired(&self) -> u64 {
        self.series().map(|(_, _, s)| s.expired).sum()
    }

    /// Moves the counts out, leaving zeros (the classes stay, so the next jobs allocate nothing).
    pub fn take(&mut self) -> Tally {
        let mut out = Tally::default();
        for (index, classes) in self.queues.iter_mut().enumerate() {
            for (class, series) in classes.iter_mut() {
                if !series.is_empty() {
                    let taken = std::mem::take(series);
                    out.entry(index, class).add(&taken);
                }
            }
        }
        out
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Tally) {
        for (index, classes) in other.queues.iter().enumerate() {
            for (class, series) in classes {
                self.entry(index, class).add(series);
            }
        }
    }

    fn entry(&mut self, index: usize, class: &str) -> &mut Series {
        if self.queues.len() <= index {
            self.queues.resize_with(index + 1, FxHashMap::default);
        }
        self.queues[index].entry(class.to_owned()).or_default()
    }

    /// `(queue index, class, series)` of every non-empty series.
    pub fn series(&self) -> impl Iterator<Item = (usize, &str, &Series)> {
        self.queues.iter().enumerate().flat_map(|(index, classes)| {
            classes
                .iter()
                .filter(|(_, s)| !s.is_empty())
                .map(move |(c, s)| (index, c.as_str(), s))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.series().next().is_none()
    }
}

/// A process's counting: the queue names (by index) and every fetcher's tally.
#[derive(Debug)]
pub struct Metrics {
    queues: Vec<String>,
    /// Also write Sidekiq's Metrics page data, in this version's keys.
    sidekiq: Option<Version>,
    tallies: Mutex<Vec<Arc<Mutex<Tally>>>>,
    /// Counts taken by a flush that failed, added to the next one.
    pending: Mutex<Tally>,
}

impl Metrics {
    pub fn new(queues: Vec<String>) -> Metrics {
        Metrics::with_sidekiq(queues, None)
    }

    /// Metrics that also write Sidekiq's Metrics page data when `sidekiq` names a version.
    pub fn with_sidekiq(queues: Vec<String>, sidekiq: Option<Version>) -> Metrics {
        Metrics {
            queues,
            sidekiq,
            tallies: Mutex::new(Vec::new()),
            pending: Mutex::new(Tally::default()),
        }
    }

    /// Queue names by index.
    pub fn queues(&self) -> &[String] {
        &self.queues
    }

    /// Which Sidekiq's Metrics page data is written, if any.
    pub fn sidekiq(&self) -> Option<Version> {
        self.sidekiq
    }

    /// A new tally for one fetcher, included in every flush from now on.
    pub fn tally(&self) -> Arc<Mutex<Tally>> {
        let tally = Arc::new(Mutex::new(Tally::new(self.sidekiq.is_some())));
        lock(&self.tallies).push(tally.clone());
        tally
    }

    /// Everything counted since the last take, from every tally. A tally whose fetcher is gone is
    /// emptied and dropped.
    pub fn take(&self) -> Tally {
        let mut out = std::mem::take(&mut *lock(&self.pending));
        let mut tallies = lock(&self.tallies);
        for tally in tallies.iter() {
            out.merge(&lock(tally).take());
        }
        tallies.retain(|t| Arc::strong_count(t) > 1);
        out
    }

    /// Counts a flush could not write, kept for the next flush.
    pub fn put_back(&self, tally: &Tally) {
        lock(&self.pending).merge(tally);
    }
}

/// The class a job is counted under: top-level `wrapped` (ActiveJob's real class) if it is a string,
/// else `class`, else `unknown`. One pass over the bytes; a full parse only for escaped strings.
pub fn job_class(raw: &[u8]) -> Cow<'_, str> {
    let (mut class, mut wrapped) = (None, None);
    let mut escaped = false;
    for field in TopLevel::new(raw) {
        let slot = match field.key {
            b"class" => &mut class,
            b"wrapped" => &mut wrapped,
            _ => continue,
        };
        if let Some((value, esc)) = field.string {
            escaped |= esc;
            *slot = Some(value);
        }
    }
    if escaped {
        return parsed_class(raw);
    }
    match wrapped.or(class).and_then(|v| std::str::from_utf8(v).ok()) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Borrowed("unknown"),
    }
}

fn parsed_class(raw: &[u8]) -> Cow<'static, str> {
    let job: serde_json::Value = serde_json::from_slice(raw).unwrap_or_default();
    ["wrapped", "class"]
        .iter()
        .find_map(|k| job.get(k).and_then(|v| v.as_str()).map(str::to_owned))
        .map_or(Cow::Borrowed("unknown"), Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_is_read_from_top_level_keys() {
        assert_eq!(
            job_class(br#"{"args":[{"class":"Inner"}],"class":"Outer","jid":"x"}"#),
            "Outer"
        );
        assert_eq!(
            job_class(br#"{"class":"ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper","wrapped":"MyJob","args":[]}"#),
            "MyJob"
        );
        assert_eq!(job_class(br#"{"class": "Spaced"}"#), "Spaced");
        assert_eq!(job_class(br#"{"class":"Q\"uote"}"#), "Q\"uote");
        assert_eq!(job_class(br#"{"wrapped":null,"class":"C"}"#), "C");
        assert_eq!(job_class(b"not json"), "unknown");
        assert!(matches!(job_class(br#"{"class":"C"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn durations_fall_in_their_bucket() {
        let mut t = Tally::default();
        let job = br#"{"class":"W"}"#;
        t.record(1, job, Duration::from_millis(3), true);
        t.record(1, job, Duration::from_millis(5), true);
        t.record(1, job, Duration::from_millis(70), false);
        t.record(1, job, Duration::from_secs(400), true);
        let all: Vec<_> = t.series().collect();
        assert_eq!(all.len(), 1);
        let (index, class, s) = all[0];
        assert_eq!((index, class, s.processed, s.failed), (1, "W", 3, 1));
        assert_eq!(s.buckets[0], 2, "3 ms and 5 ms are both <= 0.005");
        assert_eq!(s.buckets[4], 1, "70 ms is in (0.05, 0.1]");
        assert_eq!(s.buckets[BUCKETS.len()], 1, "400 s is +Inf");
        assert!((s.sum - 400.078).abs() < 1e-9);
    }

    #[test]
    fn an_expired_job_is_counted_apart_and_untimed() {
        let mut t = Tally::default();
        t.record_expired(2, br#"{"class":"W","expires_at":1.5}"#);
        t.record_expired(2, br#"{"class":"W"}"#);
        let all: Vec<_> = t.series().collect();
        assert_eq!(all.len(), 1, "an expired-only series is not empty");
        let (index, class, s) = all[0];
        assert_eq!(
            (index, class, s.expired, s.processed, s.failed),
            (2, "W", 2, 0, 0)
        );
        assert_eq!(
            s.buckets.iter().sum::<u64>(),
            0,
            "never ran, so never timed"
        );
        assert_eq!(t.expired(), 2);
        let mut merged = Tally::default();
        merged.merge(&t.take());
        assert_eq!(merged.expired(), 2);
        assert!(t.is_empty());
    }

    #[test]
    fn take_leaves_zeros_and_merges_tallies() {
        let m = Metrics::new(vec!["a".into(), "b".into()]);
        let t1 = m.tally();
        let t2 = m.tally();
        lock(&t1).record(0, br#"{"class":"W"}"#, Duration::ZERO, true);
        lock(&t2).record(0, br#"{"class":"W"}"#, Duration::ZERO, false);
        let taken = m.take();
        let s: Vec<_> = taken.series().collect();
        assert_eq!((s[0].2.processed, s[0].2.failed), (1, 1));
        assert!(m.take().is_empty());
        m.put_back(&taken);
        drop(t2);
        assert_eq!(m.take(), taken);
        assert_eq!(
            lock(&m.tallies).len(),
            1,
            "the dropped fetcher's tally is gone"
        );
    }
}
