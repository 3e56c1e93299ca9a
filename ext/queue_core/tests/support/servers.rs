//! Servers a test starts itself beside [`super::TestRedis`]: a primary and its replica, sentinels.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One process, killed by its pid when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `redis-server` on `port` with its files in `dir/name`; `extra` arguments after ours
/// (`--replicaof`, …).
pub fn redis_server(dir: &Path, name: &str, port: u16, extra: &[String]) -> Process {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).expect("a server directory");
    let child = Command::new("/usr/bin/redis-server")
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    Process(child)
}
