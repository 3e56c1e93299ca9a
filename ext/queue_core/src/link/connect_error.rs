//! Why Redis could not be used at all, in words a user can act on: the server refused the
//! connection, wants a password, rejected the one given, has no such database, or its TLS
//! certificate is not trusted. Each message names the URL with its password masked and says what to
//! change.
//!
//! [`ConnectError::classify`] reads what the redis crate reports while dialling (and a `NOAUTH` reply
//! to a command, which is how a server that needs a password answers a client that sent none).

use std::error::Error as _;
use std::fmt;

/// What went wrong while connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectErrorKind {
    /// Nothing listens there (TCP connection refused, or no unix socket at that path).
    Refused,
    /// The connection or the server's first reply did not come in time.
    TimedOut,
    /// The server requires a password and none was sent (`NOAUTH`).
    NoAuth,
    /// The server rejected the password (`WRONGPASS`, `invalid password`).
    WrongPassword,
    /// A password was sent to a server that has none configured (`AUTH <password> called without
    /// any password configured`).
    PasswordNotConfigured,
    /// `SELECT` of the URL's database failed (`ERR DB index is out of range`).
    NoSuchDatabase(i64),
    /// The TLS handshake failed because the server's certificate is not trusted.
    TlsUntrusted,
    /// The TLS handshake failed for another reason (e.g. the port does not speak TLS).
    Tls,
    /// No configured sentinel gave the address of a master by the configured name: the detail
    /// names every sentinel tried and what it said.
    NoMaster,
    /// Anything else that stopped the connection from being made.
    Other,
}

/// A connection that could not be made (or used at all), with the masked URL and the detail the
/// redis crate or the server gave.
#[derive(Debug)]
pub struct ConnectError {
    pub kind: ConnectErrorKind,
    /// The URL dialled, password masked.
    pub url: String,
    /// What the redis crate or the server said, for the end of the message.
    pub detail: String,
    source: Option<redis::RedisError>,
}

impl ConnectError {
    pub fn new(kind: ConnectErrorKind, url: &str, detail: impl Into<String>) -> ConnectError {
        ConnectError {
            kind,
            url: mask(url),
            detail: detail.into(),
            source: None,
        }
    }

    /// Classifies an error from dialling `url` (database `db`), keeping it as the source.
    pub fn classify(url: &str, db: i64, e: redis::RedisError) -> ConnectError {
        let detail = describe(&e);
        let kind = kind_of(&e, &detail, db, url.starts_with("rediss:"));
        ConnectError {
            kind,
            url: mask(url),
            detail,
            source: Some(e),
        }
    }

    /// The server refused `AUTH`, in its own words (`reply`): a password sent to a server without
    /// one, or a wrong one.
    pub fn refused_auth(url: &str, reply: String) -> ConnectError {
        let kind = if reply.contains("without any password configured") {
            ConnectErrorKind::PasswordNotConfigured
        } else {
            ConnectErrorKind::WrongPassword
        };
        ConnectError::new(kind, url, reply)
    }

    /// True for the reply a server that needs a password gives a command from a client that sent
    /// none: the error to report as [`ConnectErrorKind::NoAuth`] even after the dial succeeded.
    /// A pipeline's failure counts when any of its commands got `NOAUTH`.
    pub fn is_noauth(e: &redis::RedisError) -> bool {
        e.code() == Some("NOAUTH")
            || e.clone()
                .into_server_errors()
                .is_some_and(|errors| errors.iter().any(|(_, err)| err.code() == "NOAUTH"))
    }
}

fn kind_of(e: &redis::RedisError, detail: &str, db: i64, tls: bool) -> ConnectErrorKind {
    let text = detail.to_ascii_lowercase();
    if ConnectError::is_noauth(e)
        || text.contains("noauth")
        || text.contains("authentication required")
    {
        return ConnectErrorKind::NoAuth;
    }
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || e.code() == Some("WRONGPASS")
        || text.contains("wrongpass")
        || text.contains("invalid password")
    {
        return ConnectErrorKind::WrongPassword;
    }
    if text.contains("db index is out of range") || text.contains("refused to switch database") {
        return ConnectErrorKind::NoSuchDatabase(db);
    }
    if e.is_connection_refusal() {
        return ConnectErrorKind::Refused;
    }
    if e.is_timeout() {
        return ConnectErrorKind::TimedOut;
    }
    let handshake = text.contains("ssl") || text.contains("tls") || text.contains("handshake");
    if tls && (handshake || text.contains("certificate")) {
        let untrusted = [
            "certificate verify failed",
            "self-signed",
            "self signed",
            "unable to get local issuer",
            "unknown ca",
            "not trusted",
        ];
        if untrusted.iter().any(|s| text.contains(s)) {
            return ConnectErrorKind::TlsUntrusted;
        }
        return ConnectErrorKind::Tls;
    }
    ConnectErrorKind::Other
}

/// The error and every source below it, once each (the redis crate often repeats its source).
fn describe(e: &redis::RedisError) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.url;
        let detail = &self.detail;
        match self.kind {
            ConnectErrorKind::Refused => write!(
                f,
                "Redis at {url} refused the connection ({detail}): is redis-server running there? \
                 Set REDIS_URL or config.redis = {{url: ...}}"
            ),
            ConnectErrorKind::TimedOut => write!(
                f,
                "Redis at {url} did not answer in time ({detail}): is the host reachable and the \
                 port right? Set REDIS_URL or config.redis = {{url: ...}}"
            ),
            ConnectErrorKind::NoAuth => write!(
                f,
                "Redis at {url} requires a password (NOAUTH): set config.redis = {{password: ...}} \
                 or put it in the URL (redis://:PASSWORD@host:port/db)"
            ),
            ConnectErrorKind::WrongPassword => write!(
                f,
                "Redis at {url} rejected the password (WRONGPASS/invalid password): check \
                 config.redis = {{password: ...}} or the password in the URL"
            ),
            ConnectErrorKind::PasswordNotConfigured => write!(
                f,
                "Redis at {url} has no password configured but was sent one (Redis said: {detail}): \
                 remove the password from config.redis = {{password: ...}} or the URL, or set \
                 requirepass on the server"
            ),
            ConnectErrorKind::NoSuchDatabase(db) => write!(
                f,
                "Redis at {url} has no database {db} (ERR DB index is out of range): use a db below \
                 the server's `databases` setting (16 by default), in the URL's path or \
                 config.redis = {{db: ...}}"
            ),
            ConnectErrorKind::TlsUntrusted => write!(
                f,
                "TLS handshake with Redis at {url} failed: certificate not trusted ({detail}): set \
                 ssl_params ca_file (or SSL_CERT_FILE) to the CA certificate that signed the \
                 server's, or ssl_params verify_mode: OpenSSL::SSL::VERIFY_NONE to skip the check"
            ),
            ConnectErrorKind::Tls => write!(
                f,
                "TLS handshake with Redis at {url} failed ({detail}): does that port speak TLS \
                 (redis-server --tls-port)? Use redis:// for a plain port"
            ),
            ConnectErrorKind::NoMaster => write!(
                f,
                "cannot find the Redis master for {url} through Sentinel: {detail}: check \
                 config.redis sentinels: (each sentinel's host and port), name: (or the URL's \
                 host: the name in `sentinel monitor <name>`) and sentinel_password:"
            ),
            ConnectErrorKind::Other => write!(f, "cannot connect to Redis at {url}: {detail}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The URL with its password replaced by `****` (the userinfo's password part, or a unix URL's
/// `pass` parameter), for messages and logs.
pub fn mask(url: &str) -> String {
    let masked = match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = match userinfo.split_once(':') {
                Some((user, _)) => user,
                None => "",
            };
            format!("{}://{user}:****{}", &url[..scheme_end], &url[at..])
        }
        _ => url.to_owned(),
    };
    mask_query_password(&masked)
}

fn mask_query_password(url: &str) -> String {
    let Some((base, rest)) = url.split_once('?') else {
        return url.to_owned();
    };
    let (query, fragment) = match rest.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (rest, None),
    };
    let query = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key @ ("pass" | "password"), _)) => format!("{key}=****"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&");
    match fragment {
        Some(f) => format!("{base}?{query}#{f}"),
        None => format!("{base}?{query}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_the_password_only() {
        assert_eq!(
            mask("rediss://user:secret@host:6380/1"),
            "rediss://user:****@host:6380/1"
        );
        assert_eq!(
            mask("redis://:secret@127.0.0.1:6390/0"),
            "redis://:****@127.0.0.1:6390/0"
        );
        assert_eq!(mask("redis://secret@host/0"), "redis://:****@host/0");
        assert_eq!(mask("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            mask("unix:///tmp/r.sock?db=2&pass=secret"),
            "unix:///tmp/r.sock?db=2&pass=****"
        );
        assert_eq!(
            mask("rediss://:p@h:1/0#insecure"),
            "rediss://:****@h:1/0#insecure"
        );
    }

    #[test]
    fn a_password_sent_to_a_server_without_one_says_what_redis_said() {
        let reply =
            "ERR AUTH <password> called without any password configured for the default user. \
                     Are you sure your configuration is correct?";
        let e = ConnectError::refused_auth("redis://:pw@127.0.0.1:6390/0", reply.to_owned());
        assert_eq!(e.kind, ConnectErrorKind::PasswordNotConfigured);
        let text = e.to_string();
        assert!(text.starts_with(
            "Redis at redis://:****@127.0.0.1:6390/0 has no password configured but was sent one"
        ));
        assert!(text.contains(&format!("(Redis said: {reply})")));
        assert!(!text.contains("WRONGPASS"));
    }

    #[test]
    fn a_refused_dial_names_the_url_and_what_to_do() {
        let refused =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let e = ConnectError::classify("redis://:pw@127.0.0.1:6390/0", 0, refused);
        assert_eq!(e.kind, ConnectErrorKind::Refused);
        let text = e.to_string();
        assert!(text.starts_with("Redis at redis://:****@127.0.0.1:6390/0 refused the connection"));
        assert!(text.contains("Set REDIS_URL"));
        assert!(!text.contains("pw"));
    }
}
