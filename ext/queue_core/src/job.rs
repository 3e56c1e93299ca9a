//! A Sidekiq job hash, kept verbatim.
//!
//! Apps and middleware add their own fields to jobs, and Sidekiq peers must read back exactly what they
//! wrote, so a `Job` keeps every field it does not understand, in its original order, and every number
//! in its original digits (`serde_json` with `preserve_order` and `arbitrary_precision`: a 30-digit
//! integer or a float such as `0.1` survives a read and a write byte for byte).

use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// Sidekiq's default number of retries when a job says `"retry": true`.
pub const DEFAULT_MAX_RETRIES: i64 = 25;

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    fields: Map<String, Value>,
}

/// What a job's `retry` field allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// `retry: false`: a failure is final and the job is not kept.
    Disabled,
    /// Retry until `retry_count` reaches this many (`retry: true` means 25, `retry: 0` means none).
    UpTo(i64),
}

impl Job {
    /// Parses job JSON read from Redis. Anything but a JSON object is an [`Error::InvalidJob`].
    pub fn parse(raw: impl AsRef<[u8]>) -> Result<Job> {
        match serde_json::from_slice::<Value>(raw.as_ref()) {
            Ok(Value::Object(fields)) => Ok(Job { fields }),
            Ok(other) => Err(Error::InvalidJob(format!(
                "job must be a JSON object, found {}",
                kind_of(&other)
            ))),
            Err(e) => Err(Error::InvalidJob(format!("job is not valid JSON: {e}"))),
        }
    }

    pub fn to_json(&self) -> String {
        // Serializing a map of JSON values cannot fail.
        serde_json::to_string(&self.fields).unwrap_or_else(|_| "{}".to_owned())
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.fields.get(field)
    }

    pub fn str(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(Value::as_str)
    }

    pub fn queue(&self) -> Option<&str> {
        self.str("queue")
    }

    pub fn jid(&self) -> Option<&str> {
        self.str("jid")
    }

    pub fn class(&self) -> Option<&str> {
        self.str("class")
    }

    pub fn set(&mut self, field: &str, value: Value) {
        self.fields.insert(field.to_owned(), value);
    }

    pub fn set_float(&mut self, field: &str, x: f64) {
        let value = Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null);
        self.set(field, value);
    }

    pub fn remove(&mut self, field: &str) -> Option<Value> {
        self.fields.shift_remove(field)
    }

    /// The job's `retry` field as a policy. A missing or `null` field means Sidekiq's default.
    pub fn retry_policy(&self) -> RetryPolicy {
        match self.fields.get("retry") {
            Some(Value::Bool(false)) => RetryPolicy::Disabled,
            Some(Value::Number(n)) => RetryPolicy::UpTo(n.as_i64().unwrap_or(DEFAULT_MAX_RETRIES)),
            _ => RetryPolicy::UpTo(DEFAULT_MAX_RETRIES),
        }
    }

    /// `retry_count` after the previous failure, or `None` if the job never failed.
    pub fn retry_count(&self) -> Option<i64> {
        self.fields.get("retry_count").and_then(Value::as_i64)
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_unknown_fields_order_and_digits() {
        let raw = r#"{"class":"W","args":[123456789012345678901234567890,0.1,1e-7,"ünï"],"zz":{"b":1,"a":2},"queue":"q","jid":"abc","created_at":1700000000.123456}"#;
        let job = Job::parse(raw).unwrap();
        assert_eq!(job.to_json(), raw);
    }

    #[test]
    fn set_float_keeps_a_fraction() {
        let mut job = Job::parse(r#"{"class":"W"}"#).unwrap();
        job.set_float("enqueued_at", 1700000000.0);
        assert_eq!(job.to_json(), r#"{"class":"W","enqueued_at":1700000000.0}"#);
    }

    #[test]
    fn rejects_non_objects() {
        assert!(matches!(Job::parse("[1]"), Err(Error::InvalidJob(_))));
        assert!(matches!(Job::parse("{nope"), Err(Error::InvalidJob(_))));
    }

    #[test]
    fn retry_policy_follows_sidekiq() {
        let p = |s: &str| Job::parse(s).unwrap().retry_policy();
        assert_eq!(p(r#"{"retry":true}"#), RetryPolicy::UpTo(25));
        assert_eq!(p(r#"{}"#), RetryPolicy::UpTo(25));
        assert_eq!(p(r#"{"retry":false}"#), RetryPolicy::Disabled);
        assert_eq!(p(r#"{"retry":3}"#), RetryPolicy::UpTo(3));
        assert_eq!(p(r#"{"retry":0}"#), RetryPolicy::UpTo(0));
    }
}
