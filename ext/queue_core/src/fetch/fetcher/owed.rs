//! A batch's dirty mark, owed: an ack of a job of batch X that never failed adds its jid to
//! `<X>:ok` and marks X dirty (`SADD jq:batch-dirty X`) so the checker counts the set. When the next
//! job this fetcher will run is of X too, the mark is left out and owed: that job's ack, written
//! later on the same connection, marks X (or owes it again), and Redis runs one connection's
//! commands in order, so the checker that pops the mark sees every jid the owed acks added. A batch
//! drained by one thread marks itself once per buffer instead of once per job.
//!
//! Why a `kill -9` loses nothing: while a mark is owed, a job of X this fetcher took is still in its
//! working list, unacknowledged: at the front of its buffer (never stolen: [`Slot::owes_mark`]) or
//! running. Recovery runs it again, and its ack marks X. Every other turn of the fetcher pays the
//! mark first: a job of another batch starting, a wait, any call on the connection, closing.
//!
//! [`Slot::owes_mark`]: crate::fetch::shared::Slot

use crate::batch::settle::mark_packet;
use crate::batch::Member;
use crate::fetch::shared::lock;
use crate::fetch::Unit;
use crate::link::blocking::Due;

use super::Fetcher;

/// A mark owed for `bid`, to be written by the ack of the job `front` ([`unit_id`]).
#[derive(Debug)]
pub(super) struct OwedMark {
    bid: String,
    front: usize,
}

/// A job's identity while the fetcher holds it: where its bytes live (they never move).
pub(super) fn unit_id(unit: &Unit) -> usize {
    unit.raw.as_ptr() as usize
}

impl Fetcher {
    /// Whether the ack of `member`'s job writes the dirty mark (true) or leaves it owed. Pays a
    /// mark owed for another batch first. Owes only when `member`'s ack would mark and the job at
    /// the front of the buffer, which this fetcher runs next, marks the same batch: decided under
    /// the slot's lock with [`Slot::owes_mark`] set in it, so no sibling steals that job meanwhile.
    ///
    /// [`Slot::owes_mark`]: crate::fetch::shared::Slot
    pub(super) fn settle_mark(&mut self, member: &Member) -> bool {
        if self
            .owed_mark
            .as_ref()
            .is_some_and(|o| o.bid != member.bid())
        {
            self.pay_mark();
        }
        if !member.marks_dirty() {
            return true;
        }
        let front = {
            let mut s = lock(&self.slot);
            let front = s
                .buffer
                .front()
                .filter(|u| {
                    u.batch
                        .as_ref()
                        .is_some_and(|m| m.marks_dirty() && m.bid() == member.bid())
                })
                .map(unit_id);
            s.owes_mark = front.is_some();
            front
        };
        match front {
            Some(front) => {
                // A mark owed for another batch was paid above: one still owed is this batch's,
                // and moves on to the new front without copying the bid again.
                self.owed_mark
                    .get_or_insert_with(|| OwedMark {
                        bid: member.bid().to_owned(),
                        front,
                    })
                    .front = front;
                false
            }
            None => {
                // The ack marks: a mark owed for this batch is paid by it.
                self.owed_mark = None;
                true
            }
        }
    }

    /// Whether the job just started is the one the owed mark waits for (then the mark stays owed
    /// until its ack).
    pub(super) fn owes_for(&self, started: usize) -> bool {
        self.owed_mark.as_ref().is_some_and(|o| o.front == started)
    }

    /// Writes the owed mark, if any (unreplied, as the acks it covers).
    pub(super) fn pay_mark(&mut self) {
        let Some(owed) = self.owed_mark.take() else {
            return;
        };
        lock(&self.slot).owes_mark = false;
        let packet = mark_packet(self.shared.redis.keys(), &owed.bid);
        self.write_unreplied(&packet, Due::WithNextCall);
    }
}
