//! What the engine says when Redis cannot be used, against real failing servers: a refused port, a
//! server with `requirepass` (no password, wrong password), a password sent to a server without one,
//! a database index past `databases`, and a TLS server whose certificate the client does not trust.
//! Both connection kinds are checked: the synchronous one (pushes, fetchers) and the async one
//! (server tasks).

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use queue_core::link::blocking::{BlockingConn, SyncConn};
use queue_core::{ConnectErrorKind, Error, Redis, RedisConfig};

const REDIS_SERVER: &str = "/usr/bin/redis-server";
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Tests run one at a time: a port one test found free must not be taken by another's server.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A redis-server on a private loopback port with extra arguments, killed when dropped.
struct TcpRedis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl TcpRedis {
    fn start(args: &[&str], tls: bool) -> TcpRedis {
        let dir = tempfile::Builder::new()
            .prefix("qc-connerr-")
            .tempdir()
            .expect("create a temporary directory");
        let port = free_port();
        let mut cmd = Command::new(REDIS_SERVER);
        if tls {
            write_certificate(dir.path());
            let cert = dir.path().join("cert.pem");
            let key = dir.path().join("key.pem");
            cmd.arg("--port")
                .arg("0")
                .arg("--tls-port")
                .arg(port.to_string());
            cmd.arg("--tls-cert-file")
                .arg(&cert)
                .arg("--tls-key-file")
                .arg(&key);
            cmd.arg("--tls-ca-cert-file").arg(&cert);
            cmd.arg("--tls-auth-clients").arg("no");
        } else {
            cmd.arg("--port").arg(port.to_string());
        }
        let child = cmd
            .arg("--bind")
            .arg("127.0.0.1")
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let mut server = TcpRedis {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + EVENT_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait().expect("poll redis-server") {
                panic!("redis-server exited before it listened: {status}");
            }
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Listening on the port is not enough: it must be this server that listens.
        if let Some(status) = server.child.try_wait().expect("poll redis-server") {
            panic!("redis-server exited (port {port} taken?): {status}");
        }
        server
    }

    /// The self-signed certificate of a TLS server (its own CA).
    fn cert(&self) -> std::path::PathBuf {
        self._dir.path().join("cert.pem")
    }
}

impl Drop for TcpRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A self-signed certificate for localhost, made with the openssl command.
fn write_certificate(dir: &Path) {
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl req failed");
}

fn redis(url: &str) -> Redis {
    Redis::new(RedisConfig::new(url, "")).expect("a valid URL")
}

/// PING on a synchronous connection and on an async one; both must fail the same way.
fn both_fail(url: &str) -> Vec<Error> {
    let redis = redis(url);
    let sync = SyncConn::new(&redis)
        .cmd::<String>(&redis::cmd("PING"))
        .expect_err("the sync PING fails");
    let mut blocking = BlockingConn::new(&redis).expect("a runtime");
    let not_sync = blocking
        .run(async |c| c.cmd::<String>(&redis::cmd("PING")).await)
        .expect_err("the async PING fails");
    vec![sync, not_sync]
}

fn assert_kind(errors: &[Error], kind: ConnectErrorKind, starts: &str, hint: &str) {
    for e in errors {
        let connect = e
            .connect_error()
            .unwrap_or_else(|| panic!("a connect error, got {e:?}"));
        assert_eq!(connect.kind, kind, "{e}");
        assert!(e.is_connection(), "{e}");
        let text = e.to_string();
        assert!(text.starts_with(starts), "{text}");
        assert!(text.contains(hint), "{text}");
        assert!(
            !text.contains("s3cret") && !text.contains("wrong-one"),
            "{text}"
        );
    }
}

#[test]
fn a_refused_port_names_the_url() {
    let _serial = serial();
    let port = free_port();
    let url = format!("redis://:s3cret@127.0.0.1:{port}/0");
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::Refused,
        &format!("Redis at redis://:****@127.0.0.1:{port}/0 refused the connection"),
        "is redis-server running there? Set REDIS_URL or config.redis = {url: ...}",
    );
}

#[test]
fn a_missing_password_is_noauth() {
    let _serial = serial();
    let server = TcpRedis::start(&["--requirepass", "s3cret"], false);
    let url = format!("redis://127.0.0.1:{}/0", server.port);
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::NoAuth,
        &format!("Redis at {url} requires a password (NOAUTH)"),
        "set config.redis = {password: ...} or put it in the URL",
    );
    // A pipeline (a push's shape) on a connection that could be made gets NOAUTH for each command.
    let redis = redis(&url);
    let mut pipe = redis::pipe();
    pipe.cmd("PING").cmd("PING");
    let e = SyncConn::new(&redis)
        .pipe::<Vec<String>>(&pipe)
        .expect_err("the pipeline fails");
    assert_kind(
        &[e],
        ConnectErrorKind::NoAuth,
        &format!("Redis at {url} requires a password (NOAUTH)"),
        "put it in the URL",
    );
    // With a database to select, the password is missing just the same.
    let url = format!("redis://127.0.0.1:{}/3", server.port);
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::NoAuth,
        &format!("Redis at {url} requires a password (NOAUTH)"),
        "put it in the URL",
    );
}

#[test]
fn a_wrong_password_is_rejected() {
    let _serial = serial();
    let server = TcpRedis::start(&["--requirepass", "s3cret"], false);
    let url = format!("redis://:wrong-one@127.0.0.1:{}/0", server.port);
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::WrongPassword,
        &format!(
            "Redis at redis://:****@127.0.0.1:{}/0 rejected the password",
            server.port
        ),
        "(WRONGPASS/invalid password)",
    );
}

#[test]
fn a_password_sent_to_a_server_without_one_says_what_redis_said() {
    let _serial = serial();
    let server = TcpRedis::start(&[], false);
    let url = format!("redis://:not-configured@127.0.0.1:{}/0", server.port);
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::PasswordNotConfigured,
        &format!(
            "Redis at redis://:****@127.0.0.1:{}/0 has no password configured but was sent one \
             (Redis said: ERR AUTH <password> called without any password configured",
            server.port
        ),
        "remove the password from config.redis = {password: ...} or the URL",
    );
}

#[test]
fn a_database_past_the_last_is_named() {
    let _serial = serial();
    let server = TcpRedis::start(&["--databases", "16"], false);
    let url = format!("redis://127.0.0.1:{}/99", server.port);
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::NoSuchDatabase(99),
        &format!("Redis at {url} has no database 99 (ERR DB index is out of range)"),
        "config.redis = {db: ...}",
    );
}

#[test]
fn an_untrusted_certificate_fails_the_handshake() {
    let _serial = serial();
    let server = TcpRedis::start(&[], true);
    let url = format!("rediss://localhost:{}/0", server.port);
    assert_kind(
        &both_fail(&url),
        ConnectErrorKind::TlsUntrusted,
        &format!("TLS handshake with Redis at {url} failed: certificate not trusted"),
        "SSL_CERT_FILE",
    );
}

/// The raw texts, for a reader checking what users see (`cargo test -- --nocapture`).
#[test]
fn every_message_as_printed() {
    let _serial = serial();
    let refused = free_port();
    let password = TcpRedis::start(&["--requirepass", "s3cret"], false);
    let tls = TcpRedis::start(&[], true);
    let urls = [
        format!("redis://:s3cret@127.0.0.1:{refused}/0"),
        format!("redis://127.0.0.1:{}/0", password.port),
        format!("redis://:wrong-one@127.0.0.1:{}/0", password.port),
        format!("redis://:s3cret@127.0.0.1:{}/99", password.port),
        format!("rediss://localhost:{}/0", tls.port),
    ];
    for url in &urls {
        for e in both_fail(url) {
            println!("{e}");
            assert!(e.connect_error().is_some(), "{e}");
        }
    }
}

#[test]
fn a_ca_file_is_trusted_instead_of_the_system_store() {
    let _serial = serial();
    let server = TcpRedis::start(&[], true);
    let url = format!("rediss://localhost:{}/0", server.port);
    let redis =
        Redis::new(RedisConfig::new(&url, "").with_ca_file(server.cert())).expect("a valid URL");
    let pong: String = SyncConn::new(&redis)
        .cmd(&redis::cmd("PING"))
        .expect("the sync PING over TLS");
    assert_eq!(pong, "PONG");
    let mut blocking = BlockingConn::new(&redis).expect("a runtime");
    let pong = blocking
        .run(async |c| c.cmd::<String>(&redis::cmd("PING")).await)
        .expect("the async PING over TLS");
    assert_eq!(pong, "PONG");

    let missing = RedisConfig::new(&url, "").with_ca_file(server.cert().with_extension("missing"));
    let e = Redis::new(missing).expect_err("an unreadable ca_file");
    assert!(
        e.to_string().starts_with("cannot read ssl_params ca_file"),
        "{e}"
    );
}
