//! The order in which a fetch tries a process's queues, as Sidekiq's `-q name[,weight]` defines it.
//!
//! Strict order (Sidekiq's when no queue was given a weight): the first queue is always tried first,
//! so a lower queue runs only while the ones above it are empty. Weighted order (as soon as any queue
//! has a weight, even when all weights are equal): each fetch draws a fresh order. Sidekiq draws it
//! by shuffling a list that holds each queue `weight` times and dropping repeats; that puts a queue of
//! weight w first with probability w / Σw, and, given the first, each later place follows the same
//! rule among the queues left. [`QueueOrder::draw`] draws that order directly, place by place,
//! without building the list (whose length is the sum of the weights).

use rand::Rng;

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct QueueOrder {
    queues: Vec<(String, u32)>,
    strict: bool,
}

impl QueueOrder {
    /// `queues` in the order given, each with its weight (at least 1). `strict`: always try them in
    /// that order; every weight must then be 1, since a weight would mean nothing.
    pub fn new(queues: Vec<(String, u32)>, strict: bool) -> Result<QueueOrder> {
        if queues.is_empty() {
            return Err(Error::InvalidArgument(
                "at least one queue is needed".to_owned(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (name, weight) in &queues {
            crate::client::check_queue_name(name)?;
            if *weight == 0 {
                return Err(Error::InvalidArgument(format!(
                    "queue {name:?} has weight 0; weights must be 1 or more"
                )));
            }
            if strict && *weight != 1 {
                return Err(Error::InvalidArgument(format!(
                    "queue {name:?} has weight {weight}, but the order is strict (no weights)"
                )));
            }
            if !seen.insert(name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "queue {name:?} is listed twice"
                )));
            }
        }
        Ok(QueueOrder { queues, strict })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.queues.iter().map(|(n, _)| n.as_str())
    }

    pub fn len(&self) -> usize {
        self.queues.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Whether every fetch tries the queues in the order given (no weights).
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    pub fn name(&self, index: usize) -> &str {
        &self.queues[index].0
    }

    pub fn weights(&self) -> impl Iterator<Item = (&str, u32)> {
        self.queues.iter().map(|(n, w)| (n.as_str(), *w))
    }

    /// Queue indexes in the order this fetch should try them.
    pub fn draw(&self) -> Vec<usize> {
        self.draw_with(&mut rand::rng())
    }

    /// [`draw`](Self::draw) with a given source of randomness. Each place goes to one of the queues
    /// not yet placed, with probability proportional to its weight.
    fn draw_with(&self, rng: &mut impl Rng) -> Vec<usize> {
        let mut left: Vec<usize> = (0..self.queues.len()).collect();
        if self.strict {
            return left;
        }
        let weight = |i: usize| u64::from(self.queues[i].1);
        let mut total: u64 = left.iter().map(|&i| weight(i)).sum();
        let mut order = Vec::with_capacity(left.len());
        while left.len() > 1 {
            let mut ticket = rng.random_range(0..total);
            let mut place = 0;
            while ticket >= weight(left[place]) {
                ticket -= weight(left[place]);
                place += 1;
            }
            let chosen = left.remove(place);
            total -= weight(chosen);
            order.push(chosen);
        }
        order.extend(left);
        order
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    const DRAWS: usize = 10_000;

    fn order(q: &[(&str, u32)], strict: bool) -> QueueOrder {
        QueueOrder::new(q.iter().map(|(n, w)| (n.to_string(), *w)).collect(), strict)
            .expect("valid queues")
    }

    /// How many of `DRAWS` draws put each queue first. Seeded, so every run draws the same: the
    /// bounds checked are about three standard deviations wide, which an unseeded test would cross
    /// about once in a hundred runs.
    fn firsts(o: &QueueOrder, seed: u64) -> Vec<usize> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut counts = vec![0; o.len()];
        for _ in 0..DRAWS {
            let drawn = o.draw_with(&mut rng);
            let mut sorted = drawn.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..o.len()).collect::<Vec<_>>(), "{drawn:?}");
            counts[drawn[0]] += 1;
        }
        counts
    }

    /// Each queue's share of first places is within 5% (relative) of weight / Σ weights.
    fn assert_shares_match_weights(weights: &[u32], seed: u64) {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("q{i}")).collect();
        let o = QueueOrder::new(
            names.into_iter().zip(weights.iter().copied()).collect(),
            false,
        )
        .expect("valid queues");
        let counts = firsts(&o, seed);
        let total: u32 = weights.iter().sum();
        for (i, (&w, &count)) in weights.iter().zip(&counts).enumerate() {
            let expected = f64::from(w) / f64::from(total);
            let share = count as f64 / DRAWS as f64;
            assert!(
                (share - expected).abs() <= 0.05 * expected,
                "queue {i} (weight {w} of {total}) came first in {share:.4} of draws, expected {expected:.4}: {counts:?}"
            );
        }
    }

    #[test]
    fn weighted_draws_match_the_weights_within_5_percent() {
        assert_shares_match_weights(&[3, 1], 1);
        assert_shares_match_weights(&[5, 3, 2], 2);
        assert_shares_match_weights(&[1, 1, 1, 1], 3);
    }

    #[test]
    fn huge_weights_cost_nothing_extra() {
        let o = order(&[("a", u32::MAX), ("b", u32::MAX), ("c", 1)], false);
        let counts = firsts(&o, 4);
        assert!(
            counts[0] > DRAWS * 45 / 100 && counts[1] > DRAWS * 45 / 100,
            "{counts:?}"
        );
    }

    #[test]
    fn later_places_follow_the_weights_of_the_queues_left() {
        // Sidekiq's shuffle-and-dedupe gives P(a, b, c) = 5/10 · 3/5 = 0.3 and P(c, b, a) =
        // 2/10 · 3/8 = 0.075 for weights 5:3:2.
        let o = order(&[("a", 5), ("b", 3), ("c", 2)], false);
        let mut rng = StdRng::seed_from_u64(5);
        let draws: Vec<Vec<usize>> = (0..DRAWS).map(|_| o.draw_with(&mut rng)).collect();
        let share = |want: &[usize]| {
            draws.iter().filter(|d| d[..] == want[..]).count() as f64 / DRAWS as f64
        };
        assert!(
            (share(&[0, 1, 2]) - 0.3).abs() < 0.3 * 0.05,
            "{}",
            share(&[0, 1, 2])
        );
        assert!(
            (share(&[2, 1, 0]) - 0.075).abs() < 0.075 * 0.15,
            "{}",
            share(&[2, 1, 0])
        );
    }

    #[test]
    fn strict_order_is_the_order_given() {
        let o = order(&[("a", 1), ("b", 1), ("c", 1)], true);
        assert!(o.is_strict());
        for _ in 0..100 {
            assert_eq!(o.draw(), vec![0, 1, 2]);
        }
    }

    #[test]
    fn equal_weights_are_a_fair_random_order_not_a_strict_one() {
        let o = order(&[("a", 1), ("b", 1)], false);
        assert!(!o.is_strict());
        let counts = firsts(&o, 6);
        // Strict order would give [10000, 0].
        assert!(counts[1] > DRAWS * 45 / 100, "{counts:?}");
        assert!(counts[0] > DRAWS * 45 / 100, "{counts:?}");
    }

    #[test]
    fn a_single_queue_is_always_first() {
        for strict in [true, false] {
            let o = order(&[("only", 1)], strict);
            assert_eq!(o.draw(), vec![0]);
        }
    }

    #[test]
    fn rejects_bad_specs() {
        let err = |q: Vec<(&str, u32)>, strict: bool| {
            QueueOrder::new(
                q.into_iter().map(|(n, w)| (n.to_owned(), w)).collect(),
                strict,
            )
            .expect_err("invalid queues")
            .to_string()
        };
        assert!(err(vec![], false).contains("at least one queue"));
        assert!(err(vec![("a", 0)], false).contains("weight 0"));
        assert!(err(vec![("a", 1), ("a", 2)], false).contains("listed twice"));
        assert!(err(vec![("a", 2), ("b", 1)], true).contains("strict"));
    }
}
