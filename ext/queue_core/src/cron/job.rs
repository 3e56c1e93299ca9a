//! The job a tick pushes, built from the schedule's hash as sidekiq-cron 1.8 builds it when its
//! process does not know the class (`Sidekiq::Client.push` of the stored message): the `message`
//! field (JSON: `class`, `queue`, the worker's options) with `args` replaced by the `args` field
//! (plus the time as a float when `date_as_argument`), or, for `active_job`, ActiveJob's Sidekiq
//! wrapper around the class and arguments. Then what Sidekiq's client adds to every push: its
//! defaults (`retry: true`, `queue: "default"`) where the message has none, a new `jid`,
//! `created_at` and `enqueued_at`.

use serde_json::{Map, Value};

use crate::clock::float_string;
use crate::error::{Error, Result};
use crate::job::Job;

/// The hash fields a tick reads, in this order (the last is read by the turn, not by [`build`]).
pub const FIELDS: [&str; 8] = [
    "message",
    "args",
    "date_as_argument",
    "active_job",
    "queue_name_prefix",
    "queue_name_delimiter",
    "description",
    "last_enqueue_time",
];
/// Where `last_enqueue_time` is in [`FIELDS`].
pub const LAST_ENQUEUE_TIME: usize = 7;

/// A job ready to push: its JSON, queue and jid.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub json: String,
    pub queue: String,
    pub jid: String,
}

/// sidekiq-cron's truth test for its flags: `true`, or a string matching `true|t|yes|y|1`.
pub fn flag(value: Option<&str>) -> bool {
    matches!(
        value.map(str::to_ascii_lowercase).as_deref(),
        Some("true" | "t" | "yes" | "y" | "1")
    )
}

/// Builds the job for schedule `name` from the values of [`FIELDS`] (`None` for a missing field),
/// at `now` (epoch seconds), with `jid`.
pub fn build(name: &str, fields: &[Option<String>], now: f64, jid: String) -> Result<Built> {
    let field = |i: usize| fields.get(i).and_then(|v| v.as_deref());
    let bad = |what: String| Error::InvalidJob(format!("cron schedule {name:?}: {what}"));
    let message: Map<String, Value> = match field(0) {
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(m)) => m,
            _ => return Err(bad(format!("its message is not a JSON object: {text:?}"))),
        },
        None => return Err(bad("it has no message".to_owned())),
    };
    let mut args = match field(1) {
        None | Some("") => Vec::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(a)) => a,
            Ok(other) => vec![other],
            // sidekiq-cron: args that are not JSON become a one-string array.
            Err(_) => vec![Value::String(text.to_owned())],
        },
    };
    if flag(field(2)) {
        args.push(float_value(now));
    }
    let queue = match message.get("queue") {
        Some(Value::String(q)) if !q.is_empty() => q.clone(),
        _ => "default".to_owned(),
    };
    let mut job = if flag(field(3)) {
        active_job(&message, &queue, args, field(4), field(5), field(6), &jid)
    } else {
        let mut m = Map::new();
        m.insert("retry".to_owned(), Value::Bool(true));
        m.insert("queue".to_owned(), Value::String(queue.clone()));
        for (k, v) in message {
            m.insert(k, v);
        }
        m.insert("args".to_owned(), Value::Array(args));
        m
    };
    let class_ok = matches!(job.get("class"), Some(Value::String(c)) if !c.is_empty());
    if !class_ok {
        return Err(bad("its message has no class".to_owned()));
    }
    let queue = match job.get("queue") {
        Some(Value::String(q)) if !q.is_empty() => q.clone(),
        _ => queue,
    };
    job.insert("queue".to_owned(), Value::String(queue.clone()));
    job.insert("jid".to_owned(), Value::String(jid.clone()));
    let mut job = Job::parse(serde_json::to_vec(&Value::Object(job)).unwrap_or_default())?;
    job.stamp("created_at", now);
    job.stamp("enqueued_at", now);
    Ok(Built {
        json: job.to_json(),
        queue,
        jid,
    })
}

fn float_value(x: f64) -> Value {
    serde_json::from_str(&float_string(x)).unwrap_or(Value::Null)
}

/// sidekiq-cron's `active_job_message`: the wrapper with the queue name prefixed as ActiveJob's
/// `queue_name_prefix` would.
fn active_job(
    message: &Map<String, Value>,
    queue: &str,
    args: Vec<Value>,
    prefix: Option<&str>,
    delimiter: Option<&str>,
    description: Option<&str>,
    jid: &str,
) -> Map<String, Value> {
    let class = message.get("class").cloned().unwrap_or(Value::Null);
    let queue = match prefix.filter(|p| !p.is_empty()) {
        Some(p) => format!(
            "{p}{}{queue}",
            delimiter.filter(|d| !d.is_empty()).unwrap_or("_")
        ),
        None => queue.to_owned(),
    };
    let mut inner = Map::new();
    inner.insert("job_class".to_owned(), class.clone());
    inner.insert("job_id".to_owned(), Value::String(uuid_from(jid)));
    inner.insert("queue_name".to_owned(), Value::String(queue.clone()));
    inner.insert("arguments".to_owned(), Value::Array(args));
    let mut m = Map::new();
    m.insert("retry".to_owned(), Value::Bool(true));
    m.insert(
        "class".to_owned(),
        Value::String("ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper".to_owned()),
    );
    m.insert("wrapped".to_owned(), class);
    m.insert("queue".to_owned(), Value::String(queue));
    m.insert(
        "description".to_owned(),
        description.map_or(Value::Null, |d| Value::String(d.to_owned())),
    );
    m.insert("args".to_owned(), Value::Array(vec![Value::Object(inner)]));
    m
}

/// A random UUID (version 4 layout) for ActiveJob's `job_id`.
fn uuid_from(_jid: &str) -> String {
    let b: [u8; 16] = rand::random();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-{}{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        ["8", "9", "a", "b"][(b[8] & 3) as usize],
        &hex[17..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(v: &[Option<&str>]) -> Vec<Option<String>> {
        v.iter().map(|x| x.map(str::to_owned)).collect()
    }

    #[test]
    fn a_worker_message_gets_args_jid_and_times() {
        let f = fields(&[
            Some(r#"{"retry":3,"queue":"low","class":"HardWorker","args":[]}"#),
            Some(r#"[1,"a"]"#),
        ]);
        let b = build("n", &f, 1700000000.5, "abc".into()).expect("builds");
        assert_eq!(b.queue, "low");
        assert_eq!(
            b.json,
            r#"{"retry":3,"queue":"low","class":"HardWorker","args":[1,"a"],"jid":"abc","created_at":1700000000.5,"enqueued_at":1700000000.5}"#
        );
    }

    #[test]
    fn sidekiq_client_defaults_fill_a_bare_message() {
        let f = fields(&[Some(r#"{"class":"W","args":[]}"#), None, Some("true")]);
        let b = build("n", &f, 1700000000.0, "j".into()).expect("builds");
        assert_eq!(b.queue, "default");
        assert_eq!(
            b.json,
            r#"{"retry":true,"queue":"default","class":"W","args":[1700000000.0],"jid":"j","created_at":1700000000.0,"enqueued_at":1700000000.0}"#
        );
    }

    #[test]
    fn non_json_args_become_one_string() {
        let f = fields(&[Some(r#"{"class":"W"}"#), Some("hello")]);
        let b = build("n", &f, 1.5, "j".into()).expect("builds");
        assert!(b.json.contains(r#""args":["hello"]"#), "{}", b.json);
    }

    #[test]
    fn active_job_is_wrapped_with_its_prefixed_queue() {
        let f = fields(&[
            Some(r#"{"class":"MyJob","queue":"mail"}"#),
            Some("[]"),
            None,
            Some("true"),
            Some("prod"),
            None,
            Some("d"),
        ]);
        let b = build("n", &f, 1.5, "j".into()).expect("builds");
        assert_eq!(b.queue, "prod_mail");
        let v: Value = serde_json::from_str(&b.json).expect("json");
        assert_eq!(
            v["class"],
            "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
        );
        assert_eq!(v["wrapped"], "MyJob");
        assert_eq!(v["args"][0]["job_class"], "MyJob");
        assert_eq!(v["args"][0]["queue_name"], "prod_mail");
        assert_eq!(v["args"][0]["job_id"].as_str().map(str::len), Some(36));
    }

    #[test]
    fn a_message_without_class_is_an_error_naming_the_schedule() {
        let e = build("nightly", &fields(&[Some("{}")]), 1.0, "j".into()).unwrap_err();
        assert!(e.to_string().contains("\"nightly\""), "{e}");
        let e = build("nightly", &fields(&[Some("[")]), 1.0, "j".into()).unwrap_err();
        assert!(e.to_string().contains("\"nightly\""), "{e}");
    }
}
