//! A forked child pushes through a connection of its own (`link::combining`'s registry is keyed by
//! pid). Its own test binary: a child forked here inherits every descriptor of the process, and in
//! a binary of its own those are this test's alone (another test's closed connection would stay open
//! in Redis's client list while a child holds it).

mod support;

use std::sync::Arc;
use std::thread;

use queue_core::client;
use queue_core::link::blocking::SyncConn;

use support::*;

/// A child forked while other threads push (and take handles, as new threads of an app do) pushes
/// through a connection of its own: it never waits on a lock that one of the parent's threads held
/// at the fork, since that thread does not exist in the child to release it.
#[test]
fn a_child_forked_while_other_threads_push_pushes_on_its_own_connection() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let redis = r.redis();
    let mut watch = SyncConn::combined(&redis);
    client::push_sync(&mut watch, "default", &[job("default", 0)]).expect("pushed");
    let stop = Arc::new(AtomicBool::new(false));
    let pushers: Vec<_> = (0..6)
        .map(|t| {
            let (redis, stop) = (redis.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    // Taking a handle looks the process's connection up; most of the time goes there.
                    for _ in 0..200 {
                        drop(SyncConn::combined(&redis));
                    }
                    let mut conn = SyncConn::combined(&redis);
                    n += 1;
                    client::push_sync(&mut conn, "default", &[job("default", t * 1_000_000 + n)])
                        .expect("pushed");
                }
            })
        })
        .collect();
    wait_for("the pushers to push", || {
        llen(&mut check, &r.key("queue:default")) > 100
    });

    const FORKS: usize = 40;
    let mut stuck = 0;
    for n in 0..FORKS {
        // SAFETY: the child only pushes through the engine and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // A handle is its process's (`SyncConn::pid`; the binding takes a new one in a child).
            std::mem::forget(watch);
            let mut own = SyncConn::combined(&redis);
            let pushed = client::push_sync(&mut own, "forked", &[job("forked", n)]).is_ok();
            let again = client::push_sync(&mut own, "forked", &[job("forked", n + 1000)]).is_ok();
            unsafe { libc::_exit(if pushed && again { 0 } else { 1 }) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut status = 0;
        let exited = loop {
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            thread::sleep(Duration::from_millis(2));
        };
        if !exited {
            stuck += 1;
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            break;
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child {n} could not push (status {status})"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for p in pushers {
        p.join().expect("pusher");
    }
    assert_eq!(stuck, 0, "a forked child hung on a lock its parent held");
    assert_eq!(llen(&mut check, &r.key("queue:forked")), (FORKS * 2) as i64);
}
