//! The read side: what the CLI, the dashboard and tests ask about the data in Redis. Everything here
//! only reads.

use crate::connection::Conn;
use crate::error::Result;

/// Totals, as `Sidekiq::Stats` reports them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub processed: i64,
    pub failed: i64,
    pub scheduled_size: i64,
    pub retry_size: i64,
    pub dead_size: i64,
    pub processes_size: i64,
    /// Jobs waiting in all queues.
    pub enqueued: i64,
    /// Each known queue and its length, in name order.
    pub queues: Vec<(String, i64)>,
}

pub async fn stats(conn: &mut Conn) -> Result<Stats> {
    let keys = conn.keys().clone();
    let mut names: Vec<String> = conn.cmd(redis::cmd("SMEMBERS").arg(keys.queues())).await?;
    names.sort();
    let mut pipe = redis::pipe();
    pipe.cmd("GET").arg(keys.stat_processed());
    pipe.cmd("GET").arg(keys.stat_failed());
    pipe.cmd("ZCARD").arg(keys.schedule());
    pipe.cmd("ZCARD").arg(keys.retry());
    pipe.cmd("ZCARD").arg(keys.dead());
    pipe.cmd("SCARD").arg(keys.processes());
    for name in &names {
        pipe.cmd("LLEN").arg(keys.queue(name));
    }
    let replies: Vec<redis::Value> = conn.pipe(&pipe).await?;
    let ints: Vec<i64> = replies.iter().map(as_int).collect();
    let lengths = ints.get(6..).unwrap_or_default().to_vec();
    let at = |i: usize| ints.get(i).copied().unwrap_or(0);
    let queues: Vec<(String, i64)> = names.into_iter().zip(lengths).collect();
    Ok(Stats {
        processed: at(0),
        failed: at(1),
        scheduled_size: at(2),
        retry_size: at(3),
        dead_size: at(4),
        processes_size: at(5),
        enqueued: queues.iter().map(|(_, n)| n).sum(),
        queues,
    })
}

fn as_int(v: &redis::Value) -> i64 {
    match v {
        redis::Value::Int(i) => *i,
        redis::Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// Length of one queue.
pub async fn queue_size(conn: &mut Conn, queue: &str) -> Result<i64> {
    let key = conn.keys().queue(queue);
    conn.cmd(redis::cmd("LLEN").arg(key)).await
}

pub fn ping_cmd() -> redis::Cmd {
    redis::cmd("PING")
}

/// One round trip; fails with [`crate::Error::Connection`] if Redis cannot be reached.
pub async fn ping(conn: &mut Conn) -> Result<bool> {
    conn.cmd::<String>(&ping_cmd()).await.map(|_| true)
}
