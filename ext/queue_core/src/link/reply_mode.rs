//! Commands written without replies on a synchronous connection, with replies switched off once per
//! run of such writes instead of once per command.
//!
//! A fetcher writes one unreplied command per finished job (its acknowledgement) and makes one round
//! trip per batch. Prefixing each unreplied command with `CLIENT REPLY SKIP` costs Redis a second
//! command per job. Instead the first unreplied write after a round trip carries `CLIENT REPLY OFF`,
//! the following ones go out bare, and the next round trip carries `CLIENT REPLY ON` in the same write
//! as its own command (its `+OK` is read and dropped): two extra commands per batch instead of one
//! per job. Redis runs a connection's commands in order, so what each write means is unchanged.
//!
//! The mode belongs to one connection: a new connection starts with replies on.

use std::borrow::Cow;

use redis::{ConnectionLike, RedisError, RedisResult, Value};

/// `CLIENT REPLY OFF`: Redis answers nothing on this connection from here on (not even this).
pub const REPLY_OFF: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n";
/// `CLIENT REPLY ON`: Redis answers again, starting with `+OK` to this.
pub const REPLY_ON: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n";

/// Whether Redis answers a connection's commands right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replies {
    #[default]
    On,
    Off,
}

/// The bytes to write for an unreplied `packed` command (or several), given the connection's mode;
/// after writing them the mode is [`Replies::Off`].
pub fn unreplied(mode: Replies, packed: &[u8]) -> Cow<'_, [u8]> {
    match mode {
        Replies::Off => Cow::Borrowed(packed),
        Replies::On => Cow::Owned([REPLY_OFF, packed].concat()),
    }
}

/// A connection for one round trip, whose replies may be off: its first request switches them on
/// in the same write and drops the `+OK` before reading its own reply. It may also be given
/// something to do between each write and its first read (`busy_poll`'s wait for the reply).
pub struct SwitchOn<'a> {
    conn: &'a mut redis::Connection,
    mode: Replies,
    before_read: Option<&'a mut dyn FnMut()>,
}

impl<'a> SwitchOn<'a> {
    pub fn new(conn: &'a mut redis::Connection, mode: Replies) -> SwitchOn<'a> {
        SwitchOn {
            conn,
            mode,
            before_read: None,
        }
    }

    /// Calls `wait` after each write, before reading its replies (once per write: replies that
    /// came together are read without it).
    pub fn before_reading(mut self, wait: &'a mut dyn FnMut()) -> SwitchOn<'a> {
        self.before_read = Some(wait);
        self
    }

    /// The mode after the requests made through it.
    pub fn mode(&self) -> Replies {
        self.mode
    }

    /// Writes `CLIENT REPLY ON` before `packed` and reads its `+OK`, if replies are off.
    fn switch_on_with(&mut self, packed: &[u8]) -> RedisResult<bool> {
        if self.mode == Replies::On {
            return Ok(false);
        }
        self.send(&[REPLY_ON, packed].concat())?;
        // Sent: whatever happens next, Redis answers this connection again (or it is dropped).
        self.mode = Replies::On;
        match self.conn.recv_response()? {
            Value::Okay => Ok(true),
            other => Err(RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "CLIENT REPLY ON did not answer OK",
                format!("{other:?}"),
            ))),
        }
    }

    /// Writes `packed` and, if given something to do before reading, does it.
    fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        self.conn.send_packed_command(packed)?;
        if let Some(wait) = self.before_read.as_mut() {
            wait();
        }
        Ok(())
    }

    /// Writes `packed` and reads `count` replies, each as it is (a server error as a value): the
    /// replies read, and the failure that stopped it early if one did (the connection is then out
    /// of step and must not be used again). For a combined write (`combining`).
    pub fn exchange(&mut self, packed: &[u8], count: usize) -> (Vec<Value>, Option<RedisError>) {
        if let Err(e) = self.send_all(packed) {
            return (Vec::new(), Some(e));
        }
        self.receive(count)
    }

    /// Writes `packed`, commands whose replies are all wanted, switching replies on first if they
    /// are off; their replies are read by [`SwitchOn::receive`] (`combining`'s pipelined flights).
    pub fn send_all(&mut self, packed: &[u8]) -> RedisResult<()> {
        match self.switch_on_with(packed) {
            Ok(true) => Ok(()),
            Ok(false) => self.send(packed),
            Err(e) => Err(e),
        }
    }

    /// Reads `count` replies, each as it is: those read, and the failure that stopped it early if
    /// one did (the connection is then out of step and must not be used again).
    pub fn receive(&mut self, count: usize) -> (Vec<Value>, Option<RedisError>) {
        let mut values = Vec::with_capacity(count);
        while values.len() < count {
            match self.recv_reply() {
                Ok(value) => values.push(value),
                Err(e) => return (values, Some(e)),
            }
        }
        (values, None)
    }

    fn recv_reply(&mut self) -> RedisResult<Value> {
        loop {
            match self.conn.recv_response()? {
                Value::Push { .. } => continue,
                value => return Ok(value),
            }
        }
    }
}

impl ConnectionLike for SwitchOn<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        if self.switch_on_with(cmd)? {
            return self.recv_reply();
        }
        if self.before_read.is_none() {
            return self.conn.req_packed_command(cmd);
        }
        self.send(cmd)?;
        self.recv_reply()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        // Rare on these connections: switch on in a write of its own, then the pipeline as usual.
        self.switch_on_with(&[])?;
        // A transaction's replies (offset > 0) are the crate's to sort out.
        if self.before_read.is_none() || offset > 0 {
            return self.conn.req_packed_commands(cmd, offset, count);
        }
        // As the crate reads a plain pipeline's: every reply, a server error among them as a value,
        // and on a failed read still the rest, so that the connection stays in step.
        self.send(cmd)?;
        let mut first_err = None;
        let mut values = Vec::with_capacity(count);
        for _ in 0..count {
            match self.recv_reply() {
                Ok(value) => values.push(value),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(values), Err)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switches_are_the_client_reply_commands() {
        let packed = |mode: &str| {
            redis::cmd("CLIENT")
                .arg("REPLY")
                .arg(mode)
                .get_packed_command()
        };
        assert_eq!(REPLY_OFF, packed("OFF").as_slice());
        assert_eq!(REPLY_ON, packed("ON").as_slice());
    }

    #[test]
    fn only_the_first_unreplied_write_switches_replies_off() {
        let lrem = b"*4\r\n$4\r\nLREM\r\n$1\r\nw\r\n$2\r\n-1\r\n$1\r\nj\r\n";
        assert_eq!(unreplied(Replies::Off, lrem).as_ref(), lrem);
        assert_eq!(
            unreplied(Replies::On, lrem).as_ref(),
            [REPLY_OFF, lrem.as_slice()].concat().as_slice()
        );
    }
}
