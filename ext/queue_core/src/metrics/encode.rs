//! A [`Snapshot`] as Prometheus exposition text, written by the `prometheus-client` crate (its
//! OpenMetrics text encoder: names, `# HELP`/`# TYPE`/`# UNIT`, label escaping, `_total`, `_bucket`,
//! `_sum`, `_count` and `# EOF` are the crate's). The snapshot is registered as a
//! [`Collector`] of constant values, since the figures are cluster-wide totals read from Redis, not
//! this process's live metrics.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::error::{Error, Result};

use super::scrape::{Counted, Snapshot};

/// The media type of what [`encode`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric is named `queue_…`.
const PREFIX: &str = "queue";

/// The snapshot as exposition text.
pub fn encode(snapshot: Snapshot) -> Result<String> {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(snapshot));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|_| Error::InvalidArgument("metrics could not be encoded".to_owned()))?;
    Ok(out)
}

type Fmt = std::result::Result<(), std::fmt::Error>;

/// One counter per `(queue, class)`.
fn per_class(
    encoder: &mut DescriptorEncoder,
    snapshot: &Snapshot,
    name: &str,
    help: &str,
    value: impl Fn(&Counted) -> u64,
) -> Fmt {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for ((queue, class), c) in &snapshot.counted {
        let labels = [("class", class.as_str()), ("queue", queue.as_str())];
        ConstCounter::new(value(c)).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: i64) -> Fmt {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Fmt {
        let e = &mut encoder;
        per_class(
            e,
            self,
            "jobs_processed",
            "Jobs that finished without raising, by class and queue.",
            |c| c.processed,
        )?;
        per_class(
            e,
            self,
            "jobs_failed",
            "Jobs that raised (retried, dead or discarded), by class and queue.",
            |c| c.failed,
        )?;
        {
            let mut family = e.encode_descriptor(
                "job_duration",
                "How long jobs ran, processed and failed alike, by class and queue.",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for ((queue, class), c) in &self.counted {
                let labels = [("class", class.as_str()), ("queue", queue.as_str())];
                family
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(c.sum, c.count(), &c.buckets, None)?;
            }
        }
        per_class(
            e,
            self,
            "dedup_dropped",
            "Pushes dropped as duplicates of a job holding their idempotency key, by class and queue.",
            |c| c.dropped,
        )?;
        per_class(
            e,
            self,
            "jobs_expired",
            "Jobs dropped unrun because their expires_in ran out before they could start, by class and queue.",
            |c| c.expired,
        )?;
        {
            let mut family = e.encode_descriptor(
                "queue_size",
                "Jobs waiting in the queue.",
                None,
                MetricType::Gauge,
            )?;
            for q in &self.queues {
                ConstGauge::new(q.size)
                    .encode(family.encode_family(&[("queue", q.name.as_str())])?)?;
            }
        }
        {
            let mut family = e.encode_descriptor(
                "queue_latency",
                "How long the oldest job of the queue has waited (0 when it is empty).",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            for q in &self.queues {
                ConstGauge::new(q.latency)
                    .encode(family.encode_family(&[("queue", q.name.as_str())])?)?;
            }
        }
        {
            let mut family = e.encode_descriptor(
                "queue_paused",
                "1 while the queue is paused (no process fetches from it), else 0.",
                None,
                MetricType::Gauge,
            )?;
            for q in &self.queues {
                ConstGauge::new(i64::from(q.paused))
                    .encode(family.encode_family(&[("queue", q.name.as_str())])?)?;
            }
        }
        gauge(
            e,
            "scheduled_size",
            "Jobs in the schedule set.",
            self.scheduled,
        )?;
        gauge(e, "retry_size", "Jobs waiting for a retry.", self.retry)?;
        gauge(e, "dead_size", "Jobs in the dead set.", self.dead)?;
        gauge(
            e,
            "processes",
            "Server processes alive (their process hash has not expired).",
            self.processes,
        )?;
        gauge(
            e,
            "busy",
            "Jobs running now, over all processes.",
            self.busy,
        )?;
        if !self.limits.is_empty() {
            let rows = [
                ("concurrency_limit", "The worker's concurrency limit."),
                (
                    "concurrency_running",
                    "Concurrency slots held: the worker's jobs running, and deferred ones resumed on their way.",
                ),
                (
                    "concurrency_deferred",
                    "The worker's jobs deferred by its concurrency limit.",
                ),
            ];
            for (i, (name, help)) in rows.iter().enumerate() {
                let mut family = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
                for s in &self.limits {
                    let value = match i {
                        0 => match s.limit {
                            Some(limit) => limit,
                            None => continue,
                        },
                        1 => s.running,
                        _ => s.deferred,
                    };
                    let labels = [("worker", s.class.as_str())];
                    ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        if !self.ordered.is_empty() {
            let rows = [
                (
                    "ordered_queue_size",
                    "Ids queued for the ordered worker.",
                    None,
                ),
                (
                    "ordered_morgue_size",
                    "Ids in the ordered worker's morgue.",
                    None,
                ),
                (
                    "ordered_lag",
                    "How late the ordered worker's oldest due id is.",
                    Some(Unit::Seconds),
                ),
            ];
            for (i, (name, help, unit)) in rows.iter().enumerate() {
                let mut family =
                    e.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
                for (worker, s) in &self.ordered {
                    let labels = [("worker", worker.as_str())];
                    let fam = family.encode_family(&labels)?;
                    match i {
                        0 => ConstGauge::new(s.length as i64).encode(fam)?,
                        1 => ConstGauge::new(s.morgue_length as i64).encode(fam)?,
                        _ => ConstGauge::new(s.lag).encode(fam)?,
                    }
                }
            }
        }
        Ok(())
    }
}
