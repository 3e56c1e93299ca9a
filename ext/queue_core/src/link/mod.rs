//! How the engine reaches Redis: dialling, the connections themselves, and the ways a call waits on
//! one. The rest of the engine (the job system at the crate's root) decides what to write; this
//! room decides how the bytes get there and back. (It is called `link` because `redis` is the crate
//! it drives, and `conn` the name of every connection variable.)
//!
//! The rooms:
//! - [`connection`]: the configured server ([`Redis`], [`RedisConfig`]: URL, namespace, timeouts),
//!   which dials every connection, and the async connection that redials by itself
//!   ([`connection::Conn`]), which background tasks use and [`blocking::BlockingConn`] drives;
//! - [`blocking`]: synchronous access on the caller's own thread — [`blocking::SyncConn`], one
//!   plain connection per Ruby thread or fetcher, and [`blocking::BlockingConn`], which drives an
//!   async operation on a current-thread runtime;
//! - [`combining`]: the connection a process's client threads share, their concurrent calls
//!   coalesced into one write (automatic pipelining);
//! - [`busy_poll`]: a client call polls its socket for the reply for a moment before it sleeps;
//! - [`process_id`]: the process's id kept in memory (renewed in a forked child by a
//!   `pthread_atfork` handler), for the fork check every client call makes;
//! - `tcp_socket`: the socket under a synchronous TCP connection — unreplied writes held in the
//!   kernel until the next round trip (`MSG_MORE`), and the non-blocking look for a reply that
//!   `busy_poll` makes;
//! - [`reply_mode`]: replies switched off once per run of unreplied writes (`CLIENT REPLY OFF`,
//!   then `ON`), not once per write;
//! - [`tls_probe`]: whether a `rediss://` port answers a TLS handshake at all, before the first
//!   synchronous dial (whose handshake has no timeout);
//! - [`connect_error`]: why Redis could not be used at all ([`ConnectError`]), in words a user can
//!   act on;
//! - [`sentinel`]: finding the current master through Redis Sentinel before every dial, and which
//!   replies mean a connection is on a demoted master (`READONLY`) and must be dialled again.
//!
//! - [`wait_replicas`]: a push that returns only once enough replicas have it (`WAIT` at the end of
//!   its pipeline), so a failover does not discard it.
//!
//! Redis shards (`config.redis_shards`) need nothing here: each shard is a `Redis` of its own (one
//! `JobQueue::Native::Engine` per shard, made by the Ruby side), dialled as any server is, and the
//! choice of shard is made per push in Ruby, before the engine is called. Moving a queue between
//! shards is job-system work ([`crate::shard_move`]). The shards of an ordered queue are keys on one
//! server, and belong to [`crate::ordered`].
//!
//! The crate's root re-exports the types a caller configures a process with and matches its errors
//! on ([`Redis`], [`RedisConfig`], [`ConnectError`], [`ConnectErrorKind`]); everything else is
//! named by its room here (`link::blocking::SyncConn`, `link::connection::Conn`).
//!
//! [`Redis`]: connection::Redis
//! [`RedisConfig`]: connection::RedisConfig
//! [`ConnectError`]: connect_error::ConnectError
//! [`ConnectErrorKind`]: connect_error::ConnectErrorKind

pub mod blocking;
pub mod busy_poll;
pub mod combining;
pub mod connect_error;
pub mod connection;
pub mod process_id;
pub mod reply_mode;
pub mod sentinel;
mod tcp_socket;
pub mod tls_probe;
pub mod wait_replicas;
