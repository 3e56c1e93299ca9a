//! Finding the current primary through Redis Sentinel.
//!
//! With sentinels configured, the URL's host is not an address but the master's *name*
//! (`redis://mymaster/0`). Every dial asks the sentinels where that master is now
//! ([`Sentinels::resolve`]): `SENTINEL get-master-addr-by-name <name>` to each sentinel in turn,
//! starting with the one that answered last, and a `ROLE` on the address it gives to make sure it is a
//! master (a sentinel's view can be stale while another's is current). The first address that
//! answers `master` is the one dialled. Nothing is cached between dials: a connection dropped after a
//! failover (the sentinels close the demoted master's clients; a command on it gets `READONLY`) dials
//! again and lands on the new primary.
//!
//! This is our own resolver, not the redis crate's `sentinel` feature: the crate's asks
//! `SENTINEL MASTERS`, dials its sentinels without a timeout, and reports only the last sentinel's
//! error. A configuration mistake (a wrong port, a master name the sentinels do not know) must say
//! what every sentinel said ([`NoMaster`]).
//!
//! The calls here are synchronous and bounded by the configured connect timeout (each dial, and each
//! reply); an async dial runs them on the runtime's blocking pool.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, Value};
use thiserror::Error as ThisError;

/// One sentinel's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelAddr {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for SentinelAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The sentinels of one master, as configured (`config.redis = {sentinels: [...], name: ...}`).
#[derive(Debug, Clone)]
pub struct SentinelConfig {
    /// The name the sentinels monitor the master under (`sentinel monitor <name> ...`).
    pub master_name: String,
    pub sentinels: Vec<SentinelAddr>,
    /// Credentials for the sentinels themselves (`sentinel_username:`, `sentinel_password:`), not
    /// the master's (those are the URL's).
    pub username: Option<String>,
    pub password: Option<String>,
}

impl SentinelConfig {
    pub fn new(master_name: &str, sentinels: Vec<SentinelAddr>) -> SentinelConfig {
        SentinelConfig {
            master_name: master_name.to_owned(),
            sentinels,
            username: None,
            password: None,
        }
    }

    pub fn with_password(mut self, password: Option<String>) -> Self {
        self.password = password;
        self
    }

    pub fn with_username(mut self, username: Option<String>) -> Self {
        self.username = username;
        self
    }
}

/// What one sentinel said when asked for the master, when that was not a usable master.
#[derive(Debug, ThisError)]
pub enum Answer {
    /// The sentinel could not be reached or did not answer in time.
    #[error("unreachable: {0}")]
    Unreachable(#[source] redis::RedisError),
    /// The sentinel answered the question with an error (`NOAUTH`, `WRONGPASS`, not a sentinel).
    #[error("answered with an error: {0}")]
    Refused(#[source] redis::RedisError),
    /// The sentinel does not monitor a master by that name.
    #[error("knows no master named {0:?}")]
    UnknownMaster(String),
    /// The sentinel named an address that could not be reached, or did not answer `ROLE`.
    #[error("named {addr}, which could not be asked its ROLE: {source}")]
    MasterUnreachable {
        addr: String,
        #[source]
        source: redis::RedisError,
    },
    /// The sentinel named an address that is not (or no longer) a master.
    #[error("named {addr}, whose ROLE is {role:?}, not master")]
    NotMaster { addr: String, role: String },
}

/// No sentinel gave the address of a master: every sentinel tried, with what it said.
#[derive(Debug, ThisError)]
#[error("no sentinel gave the address of master {master:?} (tried {})", describe(.tried))]
pub struct NoMaster {
    pub master: String,
    pub tried: Vec<(SentinelAddr, Answer)>,
}

fn describe(tried: &[(SentinelAddr, Answer)]) -> String {
    tried
        .iter()
        .map(|(addr, answer)| format!("sentinel {addr} {answer}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The configured sentinels, which of them to ask first, and how many failovers the watcher has
/// heard of.
#[derive(Debug)]
pub struct Sentinels {
    config: SentinelConfig,
    shared: Arc<Shared>,
    /// The process whose watcher thread runs (a forked child starts its own).
    watching: Mutex<Option<u32>>,
}

#[derive(Debug, Default)]
struct Shared {
    /// The sentinel that answered last, or announced the last failover: asked first.
    first: AtomicUsize,
    /// Bumped by the watcher on each `+switch-master` of this master: a connection dialled under an
    /// older generation is on the old master and dials again before its next call.
    generation: AtomicU64,
}

impl Sentinels {
    pub fn new(config: SentinelConfig) -> Sentinels {
        Sentinels {
            config,
            shared: Arc::new(Shared::default()),
            watching: Mutex::new(None),
        }
    }

    pub fn config(&self) -> &SentinelConfig {
        &self.config
    }

    /// How many failovers of this master the watcher has heard of (in this process).
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// Starts this process's watcher thread, once: it subscribes to a sentinel's `+switch-master`
    /// and bumps [`Sentinels::generation`] when this master moves, so connections still on the old
    /// master leave it at their next call instead of when the sentinels reconfigure it as a replica
    /// (~10 s later, during which it takes writes its resync discards). It ends when these sentinels
    /// are dropped.
    pub fn watch(&self, timeout: Duration) {
        let pid = std::process::id();
        let mut watching = self
            .watching
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *watching == Some(pid) {
            return;
        }
        *watching = Some(pid);
        let (config, shared) = (self.config.clone(), Arc::downgrade(&self.shared));
        let started = std::thread::Builder::new()
            .name("queue-sentinel-watch".to_owned())
            .spawn(move || watch(&config, &shared, timeout));
        if let Err(e) = started {
            tracing::warn!(error = %e, "cannot start the sentinel watcher; connections move to a new master when the old one drops them");
            *watching = None;
        }
    }

    /// Asks the sentinels, in turn, where the master is now, and returns the first address that
    /// answers `ROLE` as a master. `master` is how to reach the master once found (its password,
    /// username and database, and TLS), with any address: `at` puts the found one in.
    pub fn resolve(
        &self,
        timeout: Duration,
        at: impl Fn(&str, u16) -> redis::RedisResult<redis::Client>,
    ) -> Result<(String, u16), NoMaster> {
        let count = self.config.sentinels.len();
        let start = self.shared.first.load(Ordering::Relaxed) % count.max(1);
        let mut tried = Vec::with_capacity(count);
        for i in 0..count {
            let index = (start + i) % count;
            let sentinel = &self.config.sentinels[index];
            match self.ask(sentinel, timeout, &at) {
                Ok(found) => {
                    self.shared.first.store(index, Ordering::Relaxed);
                    return Ok(found);
                }
                Err(answer) => {
                    tracing::warn!(sentinel = %sentinel, master = %self.config.master_name, %answer, "sentinel gave no usable master");
                    tried.push((sentinel.clone(), answer));
                }
            }
        }
        Err(NoMaster {
            master: self.config.master_name.clone(),
            tried,
        })
    }

    fn ask(
        &self,
        sentinel: &SentinelAddr,
        timeout: Duration,
        at: &impl Fn(&str, u16) -> redis::RedisResult<redis::Client>,
    ) -> Result<(String, u16), Answer> {
        let mut conn = self
            .sentinel_info(sentinel)
            .and_then(redis::Client::open)
            .and_then(|client| client.get_connection_with_timeout(timeout))
            .and_then(|conn| bounded(conn, timeout))
            .map_err(|e| {
                // A sentinel with requirepass refuses the AUTH sent while dialling.
                if e.kind() == redis::ErrorKind::AuthenticationFailed || e.code().is_some() {
                    Answer::Refused(e)
                } else {
                    Answer::Unreachable(e)
                }
            })?;
        let reply: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.config.master_name)
            .query(&mut conn)
            .map_err(|e| {
                if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                    Answer::Unreachable(e)
                } else {
                    Answer::Refused(e)
                }
            })?;
        let (host, port) =
            reply.ok_or_else(|| Answer::UnknownMaster(self.config.master_name.clone()))?;
        let addr = format!("{host}:{port}");
        let role = at(&host, port)
            .and_then(|client| client.get_connection_with_timeout(timeout))
            .and_then(|conn| bounded(conn, timeout))
            .and_then(|mut conn| redis::cmd("ROLE").query::<Vec<Value>>(&mut conn))
            .map_err(|source| Answer::MasterUnreachable {
                addr: addr.clone(),
                source,
            })?;
        match role.first() {
            Some(Value::BulkString(r)) if r.as_slice() == b"master" => Ok((host, port)),
            other => Err(Answer::NotMaster {
                addr,
                role: match other {
                    Some(Value::BulkString(r)) => String::from_utf8_lossy(r).into_owned(),
                    other => format!("{other:?}"),
                },
            }),
        }
    }

    fn sentinel_info(&self, sentinel: &SentinelAddr) -> redis::RedisResult<ConnectionInfo> {
        sentinel_info(&self.config, sentinel)
    }
}

fn sentinel_info(
    config: &SentinelConfig,
    sentinel: &SentinelAddr,
) -> redis::RedisResult<ConnectionInfo> {
    let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
    if let Some(username) = &config.username {
        settings = settings.set_username(username);
    }
    if let Some(password) = &config.password {
        settings = settings.set_password(password);
    }
    Ok(ConnectionAddr::Tcp(sentinel.host.clone(), sentinel.port)
        .into_connection_info()?
        .set_redis_settings(settings))
}

/// How long the watcher waits for a message before it looks whether it is still wanted.
const WATCH_SLICE: Duration = Duration::from_secs(1);

/// The watcher thread: subscribed to `+switch-master` on one sentinel at a time (the next one when
/// that fails), until the sentinels it serves are dropped.
fn watch(config: &SentinelConfig, shared: &Weak<Shared>, timeout: Duration) {
    let count = config.sentinels.len();
    let mut index = 0;
    while shared.strong_count() > 0 && count > 0 {
        let sentinel = &config.sentinels[index % count];
        let subscribed = sentinel_info(config, sentinel)
            .and_then(redis::Client::open)
            .and_then(|client| client.get_connection_with_timeout(timeout));
        let mut conn = match subscribed {
            Ok(conn) => conn,
            Err(e) => {
                tracing::debug!(sentinel = %sentinel, error = %e, "sentinel watcher cannot connect");
                index += 1;
                if index % count == 0 {
                    std::thread::sleep(WATCH_SLICE);
                }
                continue;
            }
        };
        let mut pubsub = conn.as_pubsub();
        if let Err(e) = pubsub
            .set_read_timeout(Some(WATCH_SLICE))
            .and_then(|()| pubsub.subscribe("+switch-master"))
        {
            tracing::debug!(sentinel = %sentinel, error = %e, "sentinel watcher cannot subscribe");
            index += 1;
            continue;
        }
        loop {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            match pubsub.get_message() {
                Ok(msg) => {
                    let payload: String = msg.get_payload().unwrap_or_default();
                    if payload.split(' ').next() == Some(config.master_name.as_str()) {
                        shared.first.store(index % count, Ordering::Relaxed);
                        shared.generation.fetch_add(1, Ordering::AcqRel);
                        tracing::info!(sentinel = %sentinel, switch = %payload, "the master moved (+switch-master): connections dial the new one");
                    }
                }
                Err(e) if e.is_timeout() => {}
                Err(e) => {
                    tracing::debug!(sentinel = %sentinel, error = %e, "sentinel watcher lost its sentinel");
                    index += 1;
                    break;
                }
            }
        }
    }
}

/// A connection whose replies (and writes) must come within `timeout`.
fn bounded(conn: redis::Connection, timeout: Duration) -> redis::RedisResult<redis::Connection> {
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    Ok(conn)
}

/// True for a reply that says the connection is not talking to a master any more, so it must be
/// dropped and dialled again (through the sentinels, to the new one): `READONLY` (a write on a
/// demoted master), `UNBLOCKED` (a blocked command ended because the server became a replica),
/// `MASTERDOWN` (a replica that lost its master). A pipeline's failure counts when any of its
/// commands got one. Such a command had no effect: a replica refuses every write.
pub fn is_role_change(e: &redis::RedisError) -> bool {
    const CODES: [&str; 3] = ["READONLY", "UNBLOCKED", "MASTERDOWN"];
    e.code().is_some_and(|code| CODES.contains(&code))
        || e.clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, err)| CODES.contains(&err.code())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_master_names_every_sentinel_and_its_answer() {
        let e = NoMaster {
            master: "mymaster".to_owned(),
            tried: vec![
                (
                    SentinelAddr {
                        host: "127.0.0.1".to_owned(),
                        port: 1,
                    },
                    Answer::Unreachable(redis::RedisError::from(std::io::Error::from(
                        std::io::ErrorKind::ConnectionRefused,
                    ))),
                ),
                (
                    SentinelAddr {
                        host: "10.0.0.2".to_owned(),
                        port: 26379,
                    },
                    Answer::UnknownMaster("mymaster".to_owned()),
                ),
            ],
        };
        let text = e.to_string();
        assert!(text.starts_with("no sentinel gave the address of master \"mymaster\""));
        assert!(text.contains("sentinel 127.0.0.1:1 unreachable"), "{text}");
        assert!(
            text.contains("sentinel 10.0.0.2:26379 knows no master named \"mymaster\""),
            "{text}"
        );
    }
}
