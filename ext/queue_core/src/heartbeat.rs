//! The process heartbeat, written exactly as Sidekiq writes it, so `Sidekiq::ProcessSet`,
//! `Sidekiq::Workers` and the Sidekiq dashboard show our processes and their busy jobs.
//!
//! Every [`INTERVAL`] one `MULTI` writes: the busy jobs to `<identity>:workers` (Sidekiq 6.4) and
//! `<identity>:work` (6.5+/7.x), each thread id → `{"queue", "payload" (the raw job JSON string),
//! "run_at"}`; the process hash (`info`, `busy`, `beat`, `rtt_us`, `quiet`, `rss`) with a 60 s expiry;
//! the identity in `processes`; and it pops one signal a dashboard left in `<identity>-signals`.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::clock::{float_string, now_f64};
use crate::error::Result;
use crate::fetch::{Busy, FetchShared};
use crate::link::connection::Conn;

/// Sidekiq 6.x beats every 5 seconds.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// Sidekiq's expiry of the process hash and busy-job hashes; kept as it is.
pub const EXPIRY_SECS: i64 = 60;

/// One beat. `info_json` is the process description (hostname, pid, queues, …). Returns a signal
/// name a dashboard asked for, if any.
pub async fn beat(
    conn: &mut Conn,
    shared: &FetchShared,
    info_json: &str,
) -> Result<Option<String>> {
    beat_with(
        conn,
        &shared.identity,
        &shared.busy(),
        shared.is_quiet(),
        info_json,
    )
    .await
}

/// One beat of process `identity` running `busy` (every capsule's jobs, `crate::capsules`).
pub async fn beat_with(
    conn: &mut Conn,
    identity: &str,
    busy: &[Busy],
    quiet: bool,
    info_json: &str,
) -> Result<Option<String>> {
    let rtt_start = Instant::now();
    conn.cmd::<String>(&redis::cmd("PING")).await?;
    let rtt_us = rtt_start.elapsed().as_micros() as u64;

    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for busy_key in [keys.workers(identity), keys.work(identity)] {
        pipe.cmd("UNLINK").arg(&busy_key).ignore();
        for b in busy {
            let entry = json!({
                "queue": b.queue,
                "payload": String::from_utf8_lossy(&b.raw),
                "run_at": b.run_at,
            });
            pipe.cmd("HSET")
                .arg(&busy_key)
                .arg(&b.tid)
                .arg(entry.to_string())
                .ignore();
        }
        pipe.cmd("EXPIRE").arg(&busy_key).arg(EXPIRY_SECS).ignore();
    }
    let process = keys.process(identity);
    pipe.cmd("SADD")
        .arg(keys.processes())
        .arg(identity)
        .ignore();
    pipe.cmd("HSET")
        .arg(&process)
        .arg("info")
        .arg(info_json)
        .arg("busy")
        .arg(busy.len())
        .arg("beat")
        .arg(float_string(now_f64()))
        .arg("rtt_us")
        .arg(rtt_us)
        .arg("quiet")
        .arg(if quiet { "true" } else { "false" })
        .arg("rss")
        .arg(rss_kb())
        .ignore();
    pipe.cmd("EXPIRE").arg(&process).arg(EXPIRY_SECS).ignore();
    pipe.cmd("RPOP").arg(keys.signals(identity));
    let (signal,): (Option<String>,) = conn.pipe(&pipe).await?;
    Ok(signal)
}

/// Removes the process from `processes` and deletes its hashes, as Sidekiq does on a clean stop.
pub async fn clear(conn: &mut Conn, identity: &str) -> Result<()> {
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    pipe.cmd("SREM")
        .arg(keys.processes())
        .arg(identity)
        .ignore();
    pipe.cmd("UNLINK")
        .arg(keys.process(identity))
        .arg(keys.workers(identity))
        .arg(keys.work(identity))
        .ignore();
    conn.pipe::<()>(&pipe).await
}

/// Resident set size in KB, from /proc (0 where there is none).
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}
