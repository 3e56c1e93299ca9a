//! How much one fetch takes, and when a batch must make way for a higher queue. Pure logic, one per
//! fetcher: no locks, no I/O.
//!
//! **Batch size.** A batch should hold about a budget of work, from the measured durations of the
//! queue's jobs (a moving average per queue): [`PLAIN_BATCH_BUDGET`] for a processor thread's plain
//! jobs, [`BATCH_BUDGET`] for an ordered queue's ids. Blank jobs come `max_batch` at a time (100 by
//! default), 10 ms jobs about 4 at a time, a 60 ms job alone, as Sidekiq fetches. A queue whose jobs
//! have not been timed yet is fetched one job at a time until one has.
//!
//! The plain budget is what makes I/O-bound jobs cheap: each fetch is a round trip with the GVL
//! released and taken back, so at 2 ms a 1 ms job paid one per job, and at 20 ms a 10 ms job still
//! did (ARCHITECTURE.md, "I/O-bound jobs"). Nothing else holds a batch to a small budget: priority is
//! kept by the look-up below, idle siblings steal, and a shallow queue is shared by `fetch.lua`'s
//! fair-share cap.
//!
//! **Priority.** A job waiting in a higher queue must not wait behind this thread's prefetched jobs. So
//! before it starts a buffered job, a fetcher whose batch was taken more than [`LOOK_UP_AFTER`] ago
//! looks at the queues that outrank the batch's queue — the earlier ones in strict order; with weights,
//! those a fresh weighted draw puts first — and if one has work, takes it and hands the unstarted
//! jobs back. A batch of blank jobs rarely lives that long; a batch of slower jobs taken from a queue
//! that others outrank makes one look-up round trip per 5 ms of its work.

use std::time::{Duration, Instant};

use super::QueueOrder;

/// About how much work one batch of an ordered queue's ids holds ([`Pace::new`]).
pub const BATCH_BUDGET: Duration = Duration::from_millis(2);
/// About how much work one batch of a processor thread's plain jobs holds ([`Pace::plain`]).
pub const PLAIN_BATCH_BUDGET: Duration = Duration::from_millis(50);
/// How old a batch may grow before the higher queues are looked at again.
pub const LOOK_UP_AFTER: Duration = Duration::from_millis(5);
/// Weight of the newest duration in the moving average.
const SMOOTHING: f64 = 0.25;

#[derive(Debug, Clone)]
pub struct Pace {
    max_batch: usize,
    /// About how much work one batch holds.
    budget: Duration,
    /// Moving average of job durations, in seconds, per queue index.
    average: Vec<Option<f64>>,
    /// When the batch in the buffer was taken (or last made sure of its place).
    taken_at: Option<Instant>,
}

impl Pace {
    /// A pace of [`BATCH_BUDGET`].
    pub fn new(queues: usize, max_batch: usize) -> Pace {
        Pace {
            max_batch: max_batch.max(1),
            budget: BATCH_BUDGET,
            average: vec![None; queues],
            taken_at: None,
        }
    }

    /// A processor thread's pace: batches of [`PLAIN_BATCH_BUDGET`].
    pub fn plain(queues: usize, max_batch: usize) -> Pace {
        Pace {
            budget: PLAIN_BATCH_BUDGET,
            ..Pace::new(queues, max_batch)
        }
    }

    /// Most jobs to take from queue `index` in one fetch.
    pub fn batch_for(&self, index: usize) -> usize {
        self.fitting(index, self.budget)
    }

    /// How many jobs of queue `index` make about [`BATCH_BUDGET`] of work (at least one, at most
    /// `max_batch`): how far ahead of its start a buffered job's idempotency key may be released
    /// (`Fetcher::release_buffered_early`), whatever the batch holds.
    pub fn early_window(&self, index: usize) -> usize {
        self.fitting(index, BATCH_BUDGET)
    }

    fn fitting(&self, index: usize, budget: Duration) -> usize {
        match self.average.get(index).copied().flatten() {
            None => 1,
            Some(avg) if avg <= 0.0 => self.max_batch,
            Some(avg) => {
                let fits = budget.as_secs_f64() / avg;
                (fits.floor() as usize).clamp(1, self.max_batch)
            }
        }
    }

    /// A job of queue `index` ran for `took`.
    pub fn record(&mut self, index: usize, took: Duration) {
        let Some(average) = self.average.get_mut(index) else {
            return;
        };
        let sample = took.as_secs_f64();
        *average = Some(match *average {
            None => sample,
            Some(avg) => avg + SMOOTHING * (sample - avg),
        });
    }

    /// A batch was taken (or its place was confirmed) at `now`.
    pub fn taken(&mut self, now: Instant) {
        self.taken_at = Some(now);
    }

    /// Whether the next buffered job, of queue `index`, should wait for a look at the higher queues:
    /// its batch is old, and some queue can outrank it. Cheap; no draw.
    pub fn look_up_due(&self, index: usize, order: &QueueOrder, now: Instant) -> bool {
        let old = self
            .taken_at
            .is_none_or(|t| now.duration_since(t) >= LOOK_UP_AFTER);
        old && order.len() > 1 && (!order.is_strict() || index > 0)
    }
}

/// The queues to look at before a job of queue `index` starts, most important first: in strict order
/// the ones listed before it; with weights, those that this fetch's draw puts ahead of it.
pub fn outranking(order: &QueueOrder, index: usize) -> Vec<usize> {
    if order.is_strict() {
        return (0..index.min(order.len())).collect();
    }
    order
        .draw()
        .into_iter()
        .take_while(|&q| q != index)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights of 1 throughout give a strict order (as when no weight is given); any other, a
    /// weighted one.
    fn order(q: &[(&str, u32)]) -> QueueOrder {
        let strict = q.iter().all(|(_, w)| *w == 1);
        QueueOrder::new(q.iter().map(|(n, w)| (n.to_string(), *w)).collect(), strict)
            .expect("order")
    }

    #[test]
    fn untimed_queues_are_fetched_one_job_at_a_time() {
        let pace = Pace::new(2, 20);
        assert_eq!(pace.batch_for(0), 1);
        assert_eq!(pace.batch_for(7), 1);
    }

    #[test]
    fn batches_hold_about_the_budget_of_work() {
        let mut pace = Pace::new(3, 20);
        pace.record(0, Duration::from_micros(10));
        pace.record(1, Duration::from_micros(400));
        pace.record(2, Duration::from_millis(20));
        assert_eq!(pace.batch_for(0), 20, "blank jobs: capped by max_batch");
        assert_eq!(pace.batch_for(1), 5, "2 ms / 400 µs");
        assert_eq!(pace.batch_for(2), 1, "slow jobs come alone");
    }

    #[test]
    fn plain_batches_hold_more_of_slower_jobs() {
        let mut pace = Pace::plain(3, 50);
        pace.record(0, Duration::from_micros(10));
        pace.record(1, Duration::from_millis(12));
        pace.record(2, Duration::from_millis(60));
        assert_eq!(pace.batch_for(0), 50, "blank jobs: capped by max_batch");
        assert_eq!(pace.batch_for(1), 4, "50 ms / 12 ms");
        assert_eq!(pace.batch_for(2), 1, "slow jobs come alone");
        assert_eq!(Pace::plain(1, 50).batch_for(0), 1, "untimed: one at a time");
        assert_eq!(pace.early_window(0), 50);
        assert_eq!(pace.early_window(1), 1, "keys go out at most ~2 ms ahead");
        assert_eq!(pace.early_window(2), 1);
    }

    #[test]
    fn the_average_follows_a_change_of_pace() {
        let mut pace = Pace::new(1, 20);
        pace.record(0, Duration::from_micros(10));
        assert_eq!(pace.batch_for(0), 20);
        for _ in 0..12 {
            pace.record(0, Duration::from_millis(20));
        }
        assert_eq!(pace.batch_for(0), 1);
        for _ in 0..40 {
            pace.record(0, Duration::from_micros(10));
        }
        assert_eq!(pace.batch_for(0), 20);
    }

    #[test]
    fn a_young_batch_or_a_top_queue_needs_no_look_up() {
        let strict = order(&[("critical", 1), ("default", 1)]);
        let mut pace = Pace::new(2, 20);
        let t0 = Instant::now();
        pace.taken(t0);
        assert!(!pace.look_up_due(1, &strict, t0 + Duration::from_millis(1)));
        assert!(pace.look_up_due(1, &strict, t0 + LOOK_UP_AFTER));
        assert!(
            !pace.look_up_due(0, &strict, t0 + LOOK_UP_AFTER),
            "nothing outranks the first queue"
        );
        let single = order(&[("default", 1)]);
        assert!(!Pace::new(1, 20).look_up_due(0, &single, t0 + Duration::from_secs(1)));
    }

    #[test]
    fn strict_order_looks_at_every_earlier_queue() {
        let strict = order(&[("a", 1), ("b", 1), ("c", 1)]);
        assert_eq!(outranking(&strict, 0), Vec::<usize>::new());
        assert_eq!(outranking(&strict, 2), vec![0, 1]);
    }

    #[test]
    fn weighted_order_looks_at_what_the_draw_puts_ahead() {
        let weighted = order(&[("critical", 3), ("default", 1)]);
        let draws = 4000;
        let looked_up = (0..draws)
            .filter(|_| outranking(&weighted, 1) == vec![0])
            .count();
        // critical is drawn ahead of default with probability 3/4.
        assert!((2700..3300).contains(&looked_up), "{looked_up}");
        assert!((0..100).all(|_| !outranking(&weighted, 0).contains(&0)));
    }
}
