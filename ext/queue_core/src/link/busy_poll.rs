//! Waiting for a reply by polling the socket for a moment before sleeping in the kernel.
//!
//! A client call (`perform_async`) is one round trip, and most of its time is neither ours nor
//! Redis's work: a thread that sleeps in `recv` until the reply comes leaves its CPU idle, and
//! waking an idle CPU is slow — on a virtual machine it is a halt and an interrupt between virtual
//! CPUs, ~20 µs each way here. Redis on the same host answers a push in ~10–45 µs, so for that long
//! the calling thread instead asks the socket, without blocking, whether the reply is there, and
//! sleeps only after the limit (`config.busy_poll_us`, 100 µs unless set). Neither side then pays the
//! wake-up: a bare round trip takes a third of the time, a push half, and both less CPU in all (the
//! sleeping and waking cost more CPU than the polling; ARCHITECTURE.md has the figures). This is what
//! the kernel's `busy_poll` does for network devices, which loopback does not have.
//!
//! A Redis farther away never answers within the limit, so the polling backs off: after a miss the
//! next 2 calls sleep at once, after two misses in a row the next 4, and so on up to 1,024; a reply
//! that comes in time resets it. Against a remote Redis that is one wasted poll per ~1,000 calls. A
//! process that may run on one CPU only never polls: its polling would only keep a local Redis from
//! running. The Ruby thread's lock (GVL) is released meanwhile, as for any wait on Redis.
//!
//! Between two looks at the socket the thread yields its CPU (`sched_yield`), it does not spin. The
//! scheduler may wake Redis on the CPU this thread polls on (the request's loopback delivery runs
//! there): a spinning poller then keeps Redis from answering until the limit runs out, and the call
//! is a miss that cost 100 µs of CPU. Measured, one thread, 20,000 pushes, 2 vCPUs: spinning missed
//! ~1 call in 11 (and the 2 after each miss slept), yielding none; 31,000 → 44,000 pushes a
//! second and 20 → 10.7 µs of client CPU a push. With nothing else to run, the yield returns at once
//! and costs a system call, as the look at the socket does.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::tcp_socket::TcpSocket;

/// Misses in a row after which the backoff stops growing: then 2^10 calls sleep between polls.
const MAX_BACKOFF: u32 = 10;

/// One connection's polling: its limit and how its recent replies came. One per connection (and so
/// per thread), never shared.
#[derive(Debug)]
pub struct BusyPoll {
    limit: Duration,
    /// Polls in a row whose reply did not come within the limit.
    misses: u32,
    /// Calls left that sleep without polling.
    skip: u32,
    counts: PollCounts,
}

/// What a connection's polling has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PollCounts {
    /// Replies found while polling.
    pub hits: u64,
    /// Polls that reached the limit first (the call then slept for its reply).
    pub misses: u64,
    /// Calls that slept without polling, backing off after misses.
    pub skipped: u64,
}

impl BusyPoll {
    /// Polling for up to `limit`, or `None` when it is zero or this process may use only one CPU.
    pub fn new(limit: Duration) -> Option<BusyPoll> {
        (!limit.is_zero() && several_cpus()).then(|| BusyPoll::with_limit(limit))
    }

    fn with_limit(limit: Duration) -> BusyPoll {
        BusyPoll {
            limit,
            misses: 0,
            skip: 0,
            counts: PollCounts::default(),
        }
    }

    pub fn counts(&self) -> PollCounts {
        self.counts
    }

    /// Returns when `socket` has a reply to read or the limit has passed (or at once, backing off).
    pub(crate) fn wait(&mut self, socket: &TcpSocket) {
        self.wait_for(|| socket.has_input());
    }

    /// Polls `ready` until it answers true or the limit passes, and keeps the backoff.
    fn wait_for(&mut self, mut ready: impl FnMut() -> bool) {
        if self.skip > 0 {
            self.skip -= 1;
            self.counts.skipped += 1;
            return;
        }
        let start = Instant::now();
        loop {
            if ready() {
                self.misses = 0;
                self.counts.hits += 1;
                return;
            }
            if start.elapsed() >= self.limit {
                self.misses = (self.misses + 1).min(MAX_BACKOFF);
                self.skip = 1 << self.misses;
                self.counts.misses += 1;
                return;
            }
            // Lets Redis run if the scheduler put it on this CPU (see the module's doc).
            std::thread::yield_now();
        }
    }
}

/// Whether this process may run on more than one CPU (its affinity and cgroup quota allowing).
fn several_cpus() -> bool {
    static SEVERAL: OnceLock<bool> = OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_micros(20);

    #[test]
    fn a_reply_already_there_is_a_hit() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        poll.wait_for(|| true);
        assert_eq!(
            poll.counts(),
            PollCounts {
                hits: 1,
                ..PollCounts::default()
            }
        );
    }

    #[test]
    fn a_reply_that_comes_while_polling_is_a_hit() {
        let mut poll = BusyPoll::with_limit(Duration::from_secs(5));
        let mut asked = 0;
        poll.wait_for(|| {
            asked += 1;
            asked == 3
        });
        assert_eq!(asked, 3, "polled until the reply came");
        assert_eq!(poll.counts().hits, 1);
    }

    #[test]
    fn misses_in_a_row_double_the_calls_that_sleep_at_once() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        let mut polled = Vec::new();
        for _ in 0..13 {
            let mut asked = false;
            poll.wait_for(|| {
                asked = true;
                false
            });
            polled.push(asked);
        }
        // A miss, 2 skipped, a miss, 4 skipped, a miss, 8 skipped (of which 4 here).
        let expected = [
            true, false, false, true, false, false, false, false, true, false, false, false, false,
        ];
        assert_eq!(polled, expected);
        assert_eq!(
            poll.counts(),
            PollCounts {
                hits: 0,
                misses: 3,
                skipped: 10
            }
        );
    }

    #[test]
    fn a_hit_resets_the_backoff() {
        let mut poll = BusyPoll::with_limit(LIMIT);
        poll.wait_for(|| false);
        poll.wait_for(|| false);
        poll.wait_for(|| false);
        poll.wait_for(|| true);
        assert_eq!(poll.counts().hits, 1, "polled again after the 2 skipped");
        poll.wait_for(|| false);
        assert_eq!(poll.skip, 2, "one miss after a hit skips 2, not 8");
    }

    #[test]
    fn the_backoff_stops_growing_at_1024_calls() {
        let mut poll = BusyPoll::with_limit(Duration::from_nanos(1));
        for _ in 0..30 {
            poll.skip = 0;
            poll.wait_for(|| false);
        }
        assert_eq!(poll.skip, 1024);
    }

    #[test]
    fn no_limit_no_polling() {
        assert!(BusyPoll::new(Duration::ZERO).is_none());
    }
}
