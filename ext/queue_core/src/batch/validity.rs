//! Whether a batch is valid (not invalidated), as one server's fetchers see it: read once a second
//! per batch for all of them, not once per job (the `JobQueue::Batch::Validity` of the Ruby path,
//! for the jobs the binding runs itself).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an answer is used before the batch is read again.
pub const TTL: Duration = Duration::from_secs(1);
/// Batches remembered at most; past it the stalest answers are dropped.
const LIMIT: usize = 1000;

#[derive(Debug, Default)]
pub struct Validity {
    answers: Mutex<HashMap<String, (bool, Instant)>>,
}

impl Validity {
    /// The answer read less than [`TTL`] ago, if there is one.
    pub fn cached(&self, bid: &str, now: Instant) -> Option<bool> {
        self.cached_at(bid, now).map(|(valid, _)| valid)
    }

    /// [`Validity::cached`] with when it was read.
    pub fn cached_at(&self, bid: &str, now: Instant) -> Option<(bool, Instant)> {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers
            .get(bid)
            .filter(|(_, at)| now.duration_since(*at) < TTL)
            .copied()
    }

    /// Keeps an answer read at `at`.
    pub fn remember(&self, bid: &str, valid: bool, at: Instant) {
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        if answers.len() >= LIMIT && !answers.contains_key(bid) {
            answers.retain(|_, (_, read)| at.duration_since(*read) < TTL);
            if answers.len() >= LIMIT {
                answers.clear();
            }
        }
        answers.insert(bid.to_owned(), (valid, at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_used_for_a_second() {
        let validity = Validity::default();
        let t0 = Instant::now();
        assert_eq!(validity.cached("b1", t0), None);
        validity.remember("b1", false, t0);
        assert_eq!(
            validity.cached("b1", t0 + Duration::from_millis(999)),
            Some(false)
        );
        assert_eq!(validity.cached("b1", t0 + TTL), None);
        assert_eq!(validity.cached("b2", t0), None);
    }

    #[test]
    fn it_forgets_rather_than_grow_past_its_limit() {
        let validity = Validity::default();
        let t0 = Instant::now();
        for n in 0..LIMIT {
            validity.remember(&format!("b{n}"), true, t0);
        }
        let later = t0 + TTL;
        validity.remember("new", true, later);
        assert_eq!(validity.cached("new", later), Some(true));
        assert_eq!(validity.cached("b0", t0), None, "the stale answers went");
    }
}
