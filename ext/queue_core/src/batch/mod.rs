//! Batches: groups of jobs with callbacks (Sidekiq Pro's `Sidekiq::Batch`), counted in the engine.
//!
//! A job joins a batch by carrying `"bid"` in its payload. Its batch's counters change with the
//! step that settles it: the acknowledgement of a finished job is plain commands, `SADD
//! <bid>:ok <jid>`, `LPUSH jq:batch-news b<bid>`, then the `LREM`, and the servers' checker
//! ([`checker`], `batch_check.lua`) counts how far each batch's set grew, so a jid recorded twice
//! (an ack written twice after a broken connection, or late) counts once; a failure runs
//! `batch_fail.lua` as the prelude of `fail.lua` (one script). When a count completes a
//! transition, the script pushes the batch's callback job (`JobQueue::Batch::Callback`, its jid
//! derived from bid and event) onto the batch's callback queue, guarded by `HSETNX <event>_at`, so
//! a callback is pushed exactly once; the callback job's own acknowledgement leaves a `d` marker
//! that marks `<event>_done`, which is what lets `success` follow `complete` and a parent batch
//! follow its children. A `kill -9` at any moment leaves either the old state (the job runs again
//! and is counted then), or its jid recorded with the job still in its working list (it runs
//! again and its jid counts once), or the new state.
//!
//! The rooms: [`member`] (is this job in a batch? one pass over its top-level keys), [`settle`]
//! (the ack packet and the failure prelude), [`checker`] (counts what the acks recorded),
//! [`push`] (pushes counted in the same `MULTI`), [`store`] (create, close, status, list,
//! invalidate). The Redis layout is in `keys.rs` and
//! ARCHITECTURE.md ("Batches"); it lives under `jq:batch:` so it never meets Sidekiq Pro's `b-<bid>`
//! keys in a shared Redis.

pub mod checker;
pub mod member;
pub mod push;
pub mod settle;
pub mod store;
pub mod validity;

pub use member::Member;

/// Finished batches' data is kept this long unless the batch or `config.batch_expiry` says otherwise
/// (Sidekiq Pro's 30 days).
pub const DEFAULT_EXPIRY_SECS: u64 = 30 * 24 * 60 * 60;
