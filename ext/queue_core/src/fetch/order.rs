//! The order in which a fetch tries a process's queues, as Sidekiq's `-q name,weight` defines it.
//!
//! With no weights (every weight 1) the order is strict: the first queue is always tried first. With
//! weights, each fetch draws a fresh order in which a queue of weight w comes first with probability
//! proportional to w — the same distribution Sidekiq gets by shuffling a list holding each name w
//! times and dropping repeats.

use rand::seq::SliceRandom;

use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct QueueOrder {
    queues: Vec<(String, u32)>,
    weighted: bool,
    expanded: Vec<usize>,
}

impl QueueOrder {
    /// `queues` in the order given, each with its weight (at least 1).
    pub fn new(queues: Vec<(String, u32)>) -> Result<QueueOrder> {
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
            if !seen.insert(name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "queue {name:?} is listed twice"
                )));
            }
        }
        let weighted = queues.iter().any(|(_, w)| *w > 1);
        let expanded = queues
            .iter()
            .enumerate()
            .flat_map(|(i, (_, w))| std::iter::repeat_n(i, *w as usize))
            .collect();
        Ok(QueueOrder {
            queues,
            weighted,
            expanded,
        })
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

    pub fn name(&self, index: usize) -> &str {
        &self.queues[index].0
    }

    pub fn weights(&self) -> impl Iterator<Item = (&str, u32)> {
        self.queues.iter().map(|(n, w)| (n.as_str(), *w))
    }

    /// Queue indexes in the order this fetch should try them.
    pub fn draw(&self) -> Vec<usize> {
        if !self.weighted {
            return (0..self.queues.len()).collect();
        }
        let mut pool = self.expanded.clone();
        pool.shuffle(&mut rand::rng());
        let mut seen = vec![false; self.queues.len()];
        pool.into_iter()
            .filter(|&i| !std::mem::replace(&mut seen[i], true))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(q: &[(&str, u32)]) -> QueueOrder {
        QueueOrder::new(q.iter().map(|(n, w)| (n.to_string(), *w)).collect()).unwrap()
    }

    #[test]
    fn strict_without_weights() {
        let o = order(&[("a", 1), ("b", 1), ("c", 1)]);
        for _ in 0..20 {
            assert_eq!(o.draw(), vec![0, 1, 2]);
        }
    }

    #[test]
    fn weights_set_the_odds_of_going_first() {
        let o = order(&[("a", 3), ("b", 1)]);
        let firsts = (0..4000).filter(|_| o.draw()[0] == 0).count();
        // Expected 3000; the bound is many standard deviations wide.
        assert!((2700..3300).contains(&firsts), "{firsts}");
        assert_eq!(o.draw().len(), 2);
    }

    #[test]
    fn rejects_bad_specs() {
        assert!(QueueOrder::new(vec![]).is_err());
        assert!(QueueOrder::new(vec![("a".into(), 0)]).is_err());
        assert!(QueueOrder::new(vec![("a".into(), 1), ("a".into(), 2)]).is_err());
    }
}
