//! One file per Ruby class under `JobQueue::Native`.

pub mod args_json;
pub mod batch;
pub mod cron;
pub mod engine;
pub mod fetcher;
pub mod inspect;
pub mod iterable;
pub mod job_hash;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod ordered;
pub mod push_template;
pub mod server;
pub mod start_server;
pub mod thread_policy;

use magnus::{RString, Ruby};

/// Copies a Ruby string's bytes out, so they can cross to a thread without the GVL.
pub fn bytes_of(s: RString) -> Vec<u8> {
    // SAFETY: the slice is copied at once, before any Ruby code (or GC) can run.
    unsafe { s.as_slice().to_vec() }
}

/// A UTF-8 Ruby string from bytes read from Redis (which may not be valid UTF-8; Ruby's JSON parser
/// then rejects them and the job goes to the dead set).
pub fn utf8_string(ruby: &Ruby, bytes: &[u8]) -> RString {
    ruby.enc_str_new(bytes, ruby.utf8_encoding())
}
