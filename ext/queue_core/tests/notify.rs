//! sd_notify against real datagram sockets: the protocol (path and abstract sockets, errors), and a
//! real server against a real Redis telling a bound socket READY, STATUS, WATCHDOG and STOPPING.

mod support;

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use queue_core::notify::{Notifier, NotifyError};
use queue_core::server::Server;
use queue_core::supervisor::Supervisor;

use support::*;

/// The manager's end: a datagram socket bound in a temporary directory.
struct Manager {
    socket: UnixDatagram,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Manager {
    fn bind() -> Manager {
        let dir = tempfile::Builder::new()
            .prefix("qc-notify-")
            .tempdir()
            .expect("temp dir");
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind");
        Manager {
            socket,
            path,
            _dir: dir,
        }
    }

    fn address(&self) -> String {
        self.path.to_str().expect("utf-8 path").to_owned()
    }

    /// The next message, waiting up to [`EVENT_TIMEOUT`].
    fn recv(&self) -> String {
        recv(&self.socket)
    }

    /// Receives until a message satisfies `wanted`; returns it with what came before.
    fn await_message(&self, what: &str, wanted: impl Fn(&str) -> bool) -> (String, Vec<String>) {
        let deadline = Instant::now() + EVENT_TIMEOUT;
        let mut before = Vec::new();
        loop {
            assert!(Instant::now() < deadline, "no {what} among {before:?}");
            let message = self.recv();
            if wanted(&message) {
                return (message, before);
            }
            before.push(message);
        }
    }
}

fn recv(socket: &UnixDatagram) -> String {
    socket
        .set_read_timeout(Some(EVENT_TIMEOUT))
        .expect("read timeout");
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a message within the timeout");
    String::from_utf8(buf[..n].to_vec()).expect("utf-8 message")
}

#[test]
fn messages_reach_a_socket_bound_at_a_path() {
    let manager = Manager::bind();
    let notifier = Notifier::connect(&manager.address()).expect("connect");
    notifier.ready().expect("ready");
    notifier.status("two\nlines").expect("status");
    notifier.watchdog().expect("watchdog");
    notifier.stopping().expect("stopping");
    assert_eq!(manager.recv(), "READY=1");
    assert_eq!(manager.recv(), "STATUS=two lines");
    assert_eq!(manager.recv(), "WATCHDOG=1");
    assert_eq!(manager.recv(), "STOPPING=1");
}

#[cfg(target_os = "linux")]
#[test]
fn messages_reach_an_abstract_socket_named_with_an_at_sign() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;

    let name = format!("queue-core-notify-test-{}", std::process::id());
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract address");
    let socket = UnixDatagram::bind_addr(&address).expect("bind abstract");
    let notifier = Notifier::connect(&format!("@{name}")).expect("connect");
    notifier.ready().expect("ready");
    assert_eq!(recv(&socket), "READY=1");
}

#[test]
fn a_socket_nobody_listens_on_is_a_send_error_naming_it() {
    let manager = Manager::bind();
    let address = manager.address();
    drop(manager); // the directory and the socket file are gone
    let notifier = Notifier::connect(&address).expect("connect needs no listener");
    let err = notifier.ready().expect_err("nobody listens");
    assert!(matches!(err, NotifyError::Send { .. }), "{err}");
    assert!(err.to_string().contains(&address), "{err}");
    assert!(err.to_string().contains("READY=1"), "{err}");
}

#[test]
fn a_server_reports_ready_status_watchdog_and_stopping() {
    let t = TestRedis::start();
    let manager = Manager::bind();
    let notifier = Notifier::connect(&manager.address()).expect("connect");
    let supervisor = Supervisor::new(Some(notifier), Some(Duration::from_millis(20)));
    let config = server_config("host:1:notifynotify", &[("default", 1)]);
    let server = Server::start_supervised(t.redis(), config, supervisor).expect("server starts");

    // Pings start with the server; the status says it is starting. No READY before the fetchers.
    let (_, before) = manager.await_message("second WATCHDOG=1", |m| m == "WATCHDOG=1");
    let (_, between) = manager.await_message("another WATCHDOG=1", |m| m == "WATCHDOG=1");
    let early: Vec<_> = before.iter().chain(&between).collect();
    assert!(
        early.iter().any(|m| m.starts_with("STATUS=starting")),
        "{early:?}"
    );
    assert!(!early.iter().any(|m| *m == "READY=1"), "{early:?}");

    // READY once every processor thread (concurrency 2) has its fetcher.
    let mut first = server.fetcher("t1").expect("fetcher");
    let (_, before) = manager.await_message("WATCHDOG=1", |m| m == "WATCHDOG=1");
    assert!(!before.iter().any(|m| m == "READY=1"), "{before:?}");
    let mut second = server.fetcher("t2").expect("fetcher");
    manager.await_message("READY=1", |m| m == "READY=1");
    manager.await_message("processing status", |m| {
        m == "STATUS=processing: 0 of 2 threads busy"
    });

    server.quiet();
    manager.await_message("quiet status", |m| {
        m.starts_with("STATUS=quiet (taking no new jobs)")
    });

    server.stopping();
    manager.await_message("STOPPING=1", |m| m == "STOPPING=1");
    manager.await_message("stopping status", |m| {
        m == "STATUS=stopping: waiting for 0 of 2 threads"
    });
    // The watchdog keeps beating while the processors drain.
    manager.await_message("WATCHDOG=1 while stopping", |m| m == "WATCHDOG=1");

    first.close().expect("close");
    second.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn with_capsules_ready_waits_for_every_capsules_threads() {
    let t = TestRedis::start();
    let manager = Manager::bind();
    let notifier = Notifier::connect(&manager.address()).expect("connect");
    let supervisor = Supervisor::new(Some(notifier), Some(Duration::from_millis(20)));
    let config = queue_core::server::ServerConfig {
        capsules: vec![queue_core::capsules::CapsuleConfig {
            name: "single".to_owned(),
            queues: vec![("single".to_owned(), 1)],
            strict: true,
            concurrency: 1,
        }],
        ..server_config("host:3:capsulenotif", &[("default", 1)])
    };
    let server = Server::start_supervised(t.redis(), config, supervisor).expect("server starts");
    let mut fetchers = vec![
        server.fetcher("t1").expect("fetcher"),
        server.fetcher("t2").expect("fetcher"),
    ];
    // The default capsule's two threads are not all of them: no READY yet.
    let (_, before) = manager.await_message("WATCHDOG=1", |m| m == "WATCHDOG=1");
    let (_, between) = manager.await_message("WATCHDOG=1", |m| m == "WATCHDOG=1");
    assert!(
        !before.iter().chain(&between).any(|m| m == "READY=1"),
        "{before:?} {between:?}"
    );
    fetchers.push(server.fetcher_in(1, "s1").expect("fetcher"));
    manager.await_message("READY=1", |m| m == "READY=1");
    manager.await_message("processing status", |m| {
        m == "STATUS=processing: 0 of 3 threads busy"
    });
    server.stopping();
    for mut f in fetchers {
        f.close().expect("close");
    }
    server.stop().expect("stop");
}

#[test]
fn an_inert_supervisor_spawns_nothing_and_sends_nothing() {
    let t = TestRedis::start();
    let supervisor = Supervisor::new(None, Some(Duration::from_millis(20)));
    assert!(supervisor.is_inert());
    let config = server_config("host:2:inertinertine", &[("default", 1)]);
    let server = Server::start_supervised(t.redis(), config, supervisor).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    server.stopping();
    fetcher.close().expect("close");
    server.stop().expect("stop");
}
