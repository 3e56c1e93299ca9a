//! The configured Redis server, which dials every connection to it (async, and the plain sockets
//! under [`super::blocking::SyncConn`]), and the async connection that redials by itself.
//!
//! [`Redis`] is the configured server (URL, namespace, timeouts), cheap to clone and shared by
//! everything in a process. [`Conn`] is one connection that reconnects by itself: a command that fails
//! because the socket broke drops the connection, and the next command dials again. Two kinds exist:
//! command connections, whose replies must come within a response timeout, and blocking connections
//! (for `BLMOVE`), which have no response timeout and are never shared with other commands, because a
//! blocked command holds its connection.
//!
//! The redis crate's defaults are tuned here: its connection manager retries for ~9.5 s before it
//! reports "connection refused", which hides an outage; we dial once with a short timeout and surface
//! the error, and callers decide whether to back off.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, FromRedisValue, IntoConnectionInfo,
};

use crate::error::{Error, Result};
use crate::keys::Keys;

use super::connect_error::{mask, ConnectError, ConnectErrorKind};
use super::sentinel::{self, SentinelConfig, Sentinels};
use super::wait_replicas::WaitReplicas;

/// How long a command may wait for its reply. Long, because a timed-out command may still run on
/// the server: a reply that is merely slow must not be mistaken for a failure.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client's call polls for its reply unless configured (`busy_poll`): long enough for a
/// push to Redis on the same host, short enough that a miss costs little.
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(100);

/// The URL schemes the engine dials, as a user would write them.
const URL_FORMS: &str = "redis://[:PASSWORD@]HOST[:PORT][/DB], rediss://… for TLS, or \
                         unix:///PATH/TO/SOCKET[?db=DB]";

/// Server settings shared by every connection of one engine.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://`, `rediss://` (TLS) or `unix://` URL, with password if any.
    pub url: String,
    /// Prefix for every key, `""` for none.
    pub namespace: String,
    pub connect_timeout: Duration,
    /// A PEM file of the CA certificates to trust for `rediss://` instead of the system's
    /// (`ssl_params ca_file`); `None` for the system's (or the file `SSL_CERT_FILE` names).
    pub ca_file: Option<PathBuf>,
    /// How long a client's call polls for its reply before it sleeps (`busy_poll`); zero: never.
    pub busy_poll: Duration,
    /// The sentinels to ask where the master is, before every dial; `None` to dial the URL's host.
    /// With sentinels, the URL's host is not dialled (it is usually the master's name); its
    /// password, username, database and scheme are the master's.
    pub sentinel: Option<SentinelConfig>,
    /// How many replicas must acknowledge each push, and how long it waits for them
    /// (`wait_replicas:`, `wait_timeout:`); `None` to return once the master has it.
    pub wait_replicas: Option<WaitReplicas>,
}

impl RedisConfig {
    pub fn new(url: &str, namespace: &str) -> Self {
        RedisConfig {
            url: url.to_owned(),
            namespace: namespace.to_owned(),
            connect_timeout: Duration::from_secs(2),
            ca_file: None,
            busy_poll: DEFAULT_BUSY_POLL,
            sentinel: None,
            wait_replicas: None,
        }
    }

    /// Every push waits for this many replicas to acknowledge it (see [`super::wait_replicas`]).
    pub fn with_wait_replicas(mut self, wait: WaitReplicas) -> Self {
        self.wait_replicas = Some(wait);
        self
    }

    /// Finds the master through these sentinels on every dial (see [`super::sentinel`]).
    pub fn with_sentinel(mut self, sentinel: SentinelConfig) -> Self {
        self.sentinel = Some(sentinel);
        self
    }

    /// Polls for a client call's reply for up to `limit` before sleeping; zero never polls.
    pub fn with_busy_poll(mut self, limit: Duration) -> Self {
        self.busy_poll = limit;
        self
    }

    /// Trusts the CA certificates in `path` (PEM) for `rediss://`, instead of the system's.
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }
}

/// A configured Redis server: what every connection of a process dials.
#[derive(Clone)]
pub struct Redis {
    inner: Arc<RedisInner>,
}

struct RedisInner {
    /// The client for the URL as given; with sentinels, only its settings are used (each dial makes
    /// a client for the address the sentinels give, [`Redis::client_at`]).
    client: redis::Client,
    /// What `client` was made from, for clients at other addresses.
    info: ConnectionInfo,
    /// The CA certificates (PEM) to trust for `rediss://` instead of the system's.
    root_cert: Option<Vec<u8>>,
    sentinels: Option<Sentinels>,
    keys: Keys,
    config: RedisConfig,
    /// A `rediss://` port has answered a TLS handshake once (see [`super::tls_probe`]).
    tls_answers: AtomicBool,
    /// What the server answered `AUTH` with, asked once after it refused the password.
    auth_reply: OnceLock<Option<String>>,
    /// The connection this process's client threads share (`combining`).
    combiner: super::combining::Registry,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("namespace", &self.inner.keys.namespace())
            .finish()
    }
}

impl Redis {
    /// Validates the URL; does not dial.
    pub fn new(config: RedisConfig) -> Result<Redis> {
        check_scheme(&config.url)?;
        let invalid = |e: redis::RedisError| {
            Error::InvalidArgument(format!(
                "invalid Redis URL {:?}: {e}; use {URL_FORMS}",
                redact(&config.url)
            ))
        };
        // Nagle's algorithm would hold a call written right after an unreplied one until Redis's
        // delayed ACK of the first (~40 ms): every fetch after an ack. The crate leaves it on.
        let info = config
            .url
            .as_str()
            .into_connection_info()
            .map_err(invalid)?
            .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
        let root_cert = match &config.ca_file {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                Error::InvalidArgument(format!(
                    "cannot read ssl_params ca_file {}: {e}",
                    path.display()
                ))
            })?),
        };
        let client = open_client(info.clone(), &root_cert).map_err(invalid)?;
        let sentinels = match &config.sentinel {
            None => None,
            Some(sentinel) => Some(Sentinels::new(check_sentinel(
                sentinel,
                &info,
                &config.url,
            )?)),
        };
        Ok(Redis {
            inner: Arc::new(RedisInner {
                client,
                info,
                root_cert,
                sentinels,
                keys: Keys::new(&config.namespace),
                config,
                tls_answers: AtomicBool::new(false),
                auth_reply: OnceLock::new(),
                combiner: Default::default(),
            }),
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    pub fn config(&self) -> &RedisConfig {
        &self.inner.config
    }

    /// A lazily dialled connection for ordinary commands.
    pub fn conn(&self) -> Conn {
        Conn {
            redis: self.clone(),
            conn: None,
            generation: 0,
            blocking: false,
            client_id: None,
        }
    }

    /// A lazily dialled connection for one blocking command at a time.
    pub fn blocking_conn(&self) -> Conn {
        Conn {
            redis: self.clone(),
            conn: None,
            generation: 0,
            blocking: true,
            client_id: None,
        }
    }

    /// How long a client's call polls for its reply (`RedisConfig::busy_poll`).
    pub fn busy_poll(&self) -> Duration {
        self.inner.config.busy_poll
    }

    /// Whether connections are plain TCP (not TLS, not a unix socket).
    pub(crate) fn is_plain_tcp(&self) -> bool {
        matches!(
            self.inner.client.get_connection_info().addr(),
            redis::ConnectionAddr::Tcp(..)
        )
    }

    /// How many replicas each push waits for, if any (`RedisConfig::wait_replicas`).
    pub fn wait_replicas(&self) -> Option<WaitReplicas> {
        self.inner.config.wait_replicas
    }

    /// The sentinels asked before each dial, if any.
    pub fn sentinels(&self) -> Option<&Sentinels> {
        self.inner.sentinels.as_ref()
    }

    /// The connection this process's client threads share (`combining`), made on first use.
    pub(crate) fn combiner(&self) -> std::sync::Arc<super::combining::Combiner> {
        self.inner.combiner.get(self)
    }

    /// How many times the master has moved since this process started watching (always 0 without
    /// sentinels): a connection dialled under an older generation dials again before its next call.
    pub fn generation(&self) -> u64 {
        self.inner
            .sentinels
            .as_ref()
            .map_or(0, Sentinels::generation)
    }

    /// The client to dial now, and the URL to name in its errors: the configured one, or with
    /// sentinels, one for the address they give now (blocking: it asks them).
    fn current_client(&self) -> Result<(redis::Client, String)> {
        let url = &self.inner.config.url;
        let Some(sentinels) = &self.inner.sentinels else {
            return Ok((self.inner.client.clone(), url.clone()));
        };
        let timeout = self.inner.config.connect_timeout;
        sentinels.watch(timeout);
        let (host, port) = sentinels
            .resolve(timeout, |host, port| self.client_at(host, port))
            .map_err(|no_master| {
                Error::from(ConnectError::new(
                    ConnectErrorKind::NoMaster,
                    url,
                    no_master.to_string(),
                ))
            })?;
        let client = self
            .client_at(&host, port)
            .map_err(|e| self.dial_error_at(url, e))?;
        let master = sentinels.config().master_name.as_str();
        Ok((client, format!("{url} (master {master} at {host}:{port})")))
    }

    /// A client for the configured server's settings (password, database, TLS) at another address.
    fn client_at(&self, host: &str, port: u16) -> redis::RedisResult<redis::Client> {
        let addr = match self.inner.info.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_owned(), port),
        };
        open_client(
            self.inner.info.clone().set_addr(addr),
            &self.inner.root_cert,
        )
    }

    /// A plain synchronous connection (no runtime), for one-command calls from a caller's thread.
    pub(crate) fn dial_sync(&self) -> Result<redis::Connection> {
        let (client, url) = self.current_client()?;
        self.check_tls_answers(&client, &url)?;
        let conn = client
            .get_connection_with_timeout(self.inner.config.connect_timeout)
            .map_err(|e| self.dial_error_at(&url, e))?;
        conn.set_read_timeout(Some(RESPONSE_TIMEOUT))
            .and_then(|_| conn.set_write_timeout(Some(RESPONSE_TIMEOUT)))
            .map_err(|e| self.dial_error_at(&url, e))?;
        Ok(conn)
    }

    /// Before the first synchronous dial of a `rediss://` URL, makes sure the port answers a TLS
    /// handshake at all: the redis crate's synchronous TLS handshake has no timeout, and a plain port
    /// never answers one.
    fn check_tls_answers(&self, client: &redis::Client, url: &str) -> Result<()> {
        if !self.tls_unchecked() {
            return Ok(());
        }
        if let redis::ConnectionAddr::TcpTls { host, port, .. } =
            client.get_connection_info().addr()
        {
            super::tls_probe::check(host, *port, self.inner.config.connect_timeout).map_err(
                |silent| {
                    Error::from(ConnectError::new(
                        ConnectErrorKind::Tls,
                        url,
                        silent.to_string(),
                    ))
                },
            )?;
        }
        self.inner.tls_answers.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// A `rediss://` URL whose port has not answered a TLS handshake yet.
    fn tls_unchecked(&self) -> bool {
        !self.inner.tls_answers.load(Ordering::Relaxed)
            && matches!(
                self.inner.client.get_connection_info().addr(),
                redis::ConnectionAddr::TcpTls { .. }
            )
    }

    /// An error from dialling: what stopped the connection, with the masked URL.
    pub(crate) fn dial_error(&self, e: redis::RedisError) -> Error {
        self.dial_error_at(&self.inner.config.url, e)
    }

    /// An error from dialling `url` (the configured URL, or with the address the sentinels gave).
    /// A refused password is reported with what the server said (see [`Redis::auth_reply`]).
    fn dial_error_at(&self, url: &str, e: redis::RedisError) -> Error {
        let db = self.inner.info.redis_settings().db();
        let error = ConnectError::classify(url, db, e);
        if error.kind != ConnectErrorKind::WrongPassword {
            return Error::from(error);
        }
        match self.auth_reply() {
            Some(reply) => Error::from(ConnectError::refused_auth(url, reply)),
            None => Error::from(error),
        }
    }

    /// What the server said when it refused the password: the redis crate reports every refused
    /// `AUTH` as "Password authentication failed", so a connection that sends no credentials asks
    /// again, once per engine. `None` when that connection cannot be made or `AUTH` succeeds.
    fn auth_reply(&self) -> Option<String> {
        self.inner
            .auth_reply
            .get_or_init(|| self.ask_auth())
            .clone()
    }

    fn ask_auth(&self) -> Option<String> {
        // The configured address: with sentinels its host is the master's name, not dialled, so
        // this finds nothing and the crate's own message stands.
        let info = &self.inner.info;
        let settings = info.redis_settings();
        let password = settings.password()?;
        let mut auth = redis::cmd("AUTH");
        if let Some(user) = settings.username() {
            auth.arg(user);
        }
        auth.arg(password);
        let bare = info.clone().set_redis_settings(
            redis::RedisConnectionInfo::default().set_protocol(settings.protocol()),
        );
        let client = open_client(bare, &self.inner.root_cert).ok()?;
        let mut conn = client
            .get_connection_with_timeout(self.inner.config.connect_timeout)
            .ok()?;
        conn.set_read_timeout(Some(self.inner.config.connect_timeout))
            .ok()?;
        let refused = auth.query::<()>(&mut conn).err()?;
        let words = [refused.code(), refused.detail()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        Some(if words.is_empty() {
            refused.to_string()
        } else {
            words
        })
    }

    /// An error from a command on a dialled connection. A server that needs a password lets a
    /// client without one connect and answers every command `NOAUTH`: that is reported as the
    /// connection's failure, like a dial error. A server that is no longer a master (`READONLY`,
    /// `UNBLOCKED`, `MASTERDOWN`: a failover demoted it) is too, so the connection is dropped and the
    /// next call dials again, through the sentinels to the new master; the command had no effect.
    pub(crate) fn command_error(&self, e: redis::RedisError) -> Error {
        if ConnectError::is_noauth(&e) {
            self.dial_error(e)
        } else if sentinel::is_role_change(&e) {
            Error::Connection {
                message: format!(
                    "Redis at {} is no longer the master ({e}): dialling again",
                    mask(&self.inner.config.url)
                ),
                source: Some(e),
            }
        } else {
            Error::from(e)
        }
    }

    async fn dial(&self, blocking: bool) -> Result<MultiplexedConnection> {
        // The asynchronous dial is bounded as a whole, but a timeout alone would not say why; the
        // same check as the synchronous dial's names a port that does not speak TLS.
        let (client, url) = if self.inner.sentinels.is_some() {
            // Asking the sentinels blocks (each step bounded by the connect timeout).
            let redis = self.clone();
            tokio::task::spawn_blocking(move || redis.current_client())
                .await
                .map_err(|e| Error::closed_by("the sentinel lookup did not finish", e.into()))??
        } else {
            (self.inner.client.clone(), self.inner.config.url.clone())
        };
        if self.tls_unchecked() {
            let (redis, client, url) = (self.clone(), client.clone(), url.clone());
            tokio::task::spawn_blocking(move || redis.check_tls_answers(&client, &url))
                .await
                .map_err(|e| Error::closed_by("the TLS check did not finish", e.into()))??;
        }
        let response_timeout = if blocking {
            None
        } else {
            Some(RESPONSE_TIMEOUT)
        };
        let cfg = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.inner.config.connect_timeout))
            .set_response_timeout(response_timeout);
        client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
            .map_err(|e| self.dial_error_at(&url, e))
    }
}

/// A client for `info`, trusting `root_cert` (PEM) for TLS instead of the system's when given.
fn open_client(
    info: ConnectionInfo,
    root_cert: &Option<Vec<u8>>,
) -> redis::RedisResult<redis::Client> {
    match root_cert {
        None => redis::Client::open(info),
        Some(root_cert) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert.clone()),
            },
        ),
    }
}

/// Sentinels need a TCP URL (its host is the master's name, not dialled) and at least one sentinel.
fn check_sentinel(
    sentinel: &SentinelConfig,
    info: &ConnectionInfo,
    url: &str,
) -> Result<SentinelConfig> {
    if sentinel.sentinels.is_empty() {
        return Err(Error::InvalidArgument(
            "redis option sentinels: needs at least one sentinel (host and port)".to_owned(),
        ));
    }
    if sentinel.master_name.is_empty() {
        return Err(Error::InvalidArgument(
            "Redis Sentinel needs the master's name (name:, or the URL's host)".to_owned(),
        ));
    }
    if matches!(info.addr(), ConnectionAddr::Unix(_)) {
        return Err(Error::InvalidArgument(format!(
            "redis option sentinels: needs a redis:// or rediss:// URL (its host names the master), not {:?}",
            redact(url)
        )));
    }
    Ok(sentinel.clone())
}

/// One connection that redials after it breaks.
pub struct Conn {
    redis: Redis,
    conn: Option<MultiplexedConnection>,
    /// [`Redis::generation`] when `conn` was dialled.
    generation: u64,
    blocking: bool,
    /// Server-side id of a blocking connection, so a stopping process can `CLIENT UNBLOCK` it.
    client_id: Option<i64>,
}

impl Conn {
    pub fn redis(&self) -> &Redis {
        &self.redis
    }

    pub fn keys(&self) -> &Keys {
        self.redis.keys()
    }

    async fn connection(&mut self) -> Result<&mut MultiplexedConnection> {
        let generation = self.redis.generation();
        if self.conn.is_some() && self.generation != generation {
            // The master moved (Sentinel): this connection is on the old one. Nothing is unconfirmed
            // on a multiplexed connection (every call waited for its reply), so it just dials again.
            self.conn = None;
            self.client_id = None;
        }
        if self.conn.is_none() {
            self.generation = generation;
            let mut conn = self.redis.dial(self.blocking).await?;
            if self.blocking {
                let id = redis::cmd("CLIENT").arg("ID").query_async(&mut conn).await;
                self.client_id = Some(self.check(id)?);
            }
            self.conn = Some(conn);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| Error::connection("not connected"))
    }

    fn check<T>(&mut self, result: redis::RedisResult<T>) -> Result<T> {
        result.map_err(|e| {
            let err = self.redis.command_error(e);
            if err.is_connection() {
                self.conn = None;
                self.client_id = None;
            }
            err
        })
    }

    /// Dials now if not connected (a blocking connection also learns its client id).
    pub async fn connect(&mut self) -> Result<()> {
        self.connection().await.map(|_| ())
    }

    /// The server's id for this connection, once a blocking connection is connected.
    pub fn client_id(&self) -> Option<i64> {
        self.client_id
    }

    pub async fn cmd<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T> {
        let c = self.connection().await?;
        let r = cmd.query_async(c).await;
        self.check(r)
    }

    /// One page of `SCAN cursor MATCH pattern COUNT count`: the next cursor ("0" when done) and the
    /// keys of this page, as Redis sent them (they may not be UTF-8).
    pub async fn scan(
        &mut self,
        cursor: &str,
        pattern: &str,
        count: usize,
    ) -> Result<(String, Vec<redis::Value>)> {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        self.cmd(&scan).await
    }

    /// One page of `ZSCAN set cursor COUNT count`: the next cursor ("0" when done) and the page's
    /// members and scores, alternating, as Redis sent them.
    pub async fn zscan(
        &mut self,
        set: &str,
        cursor: &str,
        count: usize,
    ) -> Result<(String, Vec<Vec<u8>>)> {
        let mut zscan = redis::cmd("ZSCAN");
        zscan.arg(set).arg(cursor).arg("COUNT").arg(count);
        self.cmd(&zscan).await
    }

    pub async fn pipe<T: FromRedisValue>(&mut self, pipe: &redis::Pipeline) -> Result<T> {
        let c = self.connection().await?;
        let r = pipe.query_async(c).await;
        self.check(r)
    }

    pub async fn script<T: FromRedisValue>(
        &mut self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        let c = self.connection().await?;
        let r = invocation.invoke_async(c).await;
        self.check(r)
    }
}

/// Refuses a URL whose scheme Redis does not speak (`http://`, a bare `host:port`), naming the
/// accepted forms; the redis crate would only say "did not parse".
fn check_scheme(url: &str) -> Result<()> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    match scheme {
        Some("redis" | "rediss" | "unix" | "redis+unix" | "valkey" | "valkeys" | "valkey+unix") => {
            Ok(())
        }
        Some(other) => Err(Error::InvalidArgument(format!(
            "invalid Redis URL {:?}: {other}:// is not a Redis scheme; use {URL_FORMS}",
            redact(url)
        ))),
        None => Err(Error::InvalidArgument(format!(
            "invalid Redis URL {:?}: no scheme; use {URL_FORMS}",
            redact(url)
        ))),
    }
}

/// The URL with any password replaced, for error messages and logs.
pub fn redact(url: &str) -> String {
    mask(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("rediss://user:secret@host:6380/1"),
            "rediss://user:****@host:6380/1"
        );
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
    }

    #[test]
    fn bad_url_is_an_invalid_argument() {
        let e = Redis::new(RedisConfig::new("http://nope", "")).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
    }

    #[test]
    fn a_url_of_another_scheme_names_the_accepted_ones() {
        let e = Redis::new(RedisConfig::new("http://:pw@127.0.0.1:6379/0", "")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"http://:****@127.0.0.1:6379/0\": http:// is not a Redis scheme"));
        assert!(text.contains("redis://[:PASSWORD@]HOST[:PORT][/DB], rediss://"));
        assert!(text.contains("unix:///PATH/TO/SOCKET"));
        assert!(!text.contains("pw@"));
    }
}
