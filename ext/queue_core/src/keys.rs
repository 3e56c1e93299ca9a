//! Every Redis key the engine reads or writes, in one place.
//!
//! The Sidekiq keys are spelt exactly as Sidekiq 6.4 / 7.x spell them (as their `api.rb`, `fetch.rb` and `launcher.rb` read and write them), so Sidekiq's
//! client, API and dashboard work against our data. Keys that only this engine uses live under `jq:`
//! so they can never collide with a Sidekiq name. An optional namespace (GitLab runs Sidekiq under
//! `resque:gitlab:`) prefixes every key, ours included.
//!
//! Redis Cluster note: each multi-key script touches one queue (its list and its working lists) or one
//! sorted set, so a cluster layout only has to add hash tags here.

/// Sidekiq keeps daily stat keys (`stat:processed:<date>`) for five years.
pub const STATS_TTL_SECS: i64 = 5 * 365 * 24 * 60 * 60;

/// Key names under one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// `namespace` is used verbatim as a prefix (`"resque:gitlab:"`); pass `""` for none.
    pub fn new(namespace: &str) -> Self {
        Keys {
            prefix: namespace.to_owned(),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.prefix
    }

    pub(crate) fn key(&self, name: &str) -> String {
        self.joined(&[name])
    }

    /// The prefix and `parts` joined, without the formatting machinery: keys are built on every push.
    fn joined(&self, parts: &[&str]) -> String {
        let len = self.prefix.len() + parts.iter().map(|p| p.len()).sum::<usize>();
        let mut key = String::with_capacity(len);
        key.push_str(&self.prefix);
        for part in parts {
            key.push_str(part);
        }
        key
    }

    /// SET of every queue name that has had an immediate push.
    pub fn queues(&self) -> String {
        self.key("queues")
    }

    /// LIST of job JSON; clients LPUSH, servers take from the right.
    pub fn queue(&self, name: &str) -> String {
        self.joined(&["queue:", name])
    }

    /// ZSET of jobs to run later, scored by run-at epoch seconds.
    pub fn schedule(&self) -> String {
        self.key("schedule")
    }

    /// ZSET of failed jobs waiting for their next attempt.
    pub fn retry(&self) -> String {
        self.key("retry")
    }

    /// ZSET of jobs that will not be retried, scored by death time.
    pub fn dead(&self) -> String {
        self.key("dead")
    }

    /// HASH of one batch (`batch/`): `created_at`, `description`, `cbq` (callback queue),
    /// `callbacks` (JSON), `cb_<event>` (has callbacks), `expires_in`, `parent`, counters `total`,
    /// `pending`, `open`, `kids`, `kids_complete`, `kids_success`, `invalid`, and per event
    /// `<event>_at` (callback pushed) / `<event>_done` (callbacks ran). Beside it
    /// `jq:batch:<bid>:failed` and `jq:batch:<bid>:dead`, HASHes jid → failure info (JSON),
    /// `jq:batch:<bid>:ok`, the SET of the jids of the jobs that succeeded (their acks add them, the
    /// checker counts how far it grew), and `jq:batch:<bid>:done`, the SET of jids counted from the
    /// markers of servers of the version before (by the checker, once each).
    /// Not Sidekiq Pro's `b-<bid>`, so both can share a Redis.
    pub fn batch(&self, bid: &str) -> String {
        self.key(&format!("jq:batch:{bid}"))
    }

    /// SET of the jids of batch `bid`'s jobs that succeeded, as their acks recorded them
    /// (`batch::settle`); the checker counts how far it grew (`okn` in the batch hash).
    pub fn batch_ok(&self, bid: &str) -> String {
        self.key(&format!("jq:batch:{bid}:ok"))
    }

    /// SET of the bids whose jobs' acks added jids to `<bid>:ok` since the batch checker last
    /// counted them.
    pub fn batch_dirty(&self) -> String {
        self.key("jq:batch-dirty")
    }

    /// LIST of the markers the rarer acks leave for the servers' batch checker (`batch::settle`):
    /// `q<n>:<bid><jid>` (a job that failed before succeeded), `d <event>:<bid>` (its callbacks ran). Servers before it never read it, so none of them drops what they cannot parse.
    pub fn batch_news(&self) -> String {
        self.key("jq:batch-news")
    }

    /// LIST of markers (`s<n>:<bid><jid>` / `r<n>:<bid><jid>` a job done, `d <event>:<bid>` its
    /// callbacks ran) left by servers before `jq:batch-news`; still applied by the checker.
    pub fn batch_acks(&self) -> String {
        self.key("jq:batch-acks")
    }

    /// LIST of the markers (`c <bid>`, `d <event>:<bid>`) servers before `jq:batch-acks` left (their
    /// ack counted the job itself); the checker still applies them, so a rolling restart loses none.
    pub fn batch_checks(&self) -> String {
        self.key("jq:batch-checks")
    }

    /// ZSET of batch ids scored by creation time: the API's listing.
    pub fn batches(&self) -> String {
        self.key("jq:batches")
    }

    /// SET of live process identities.
    pub fn processes(&self) -> String {
        self.key("processes")
    }

    /// HASH describing one process (`info`, `busy`, `beat`, `quiet`, `rss`, `rtt_us`).
    pub fn process(&self, identity: &str) -> String {
        self.key(identity)
    }

    /// HASH of busy jobs as Sidekiq 6.4 reads it.
    pub fn workers(&self, identity: &str) -> String {
        self.key(&format!("{identity}:workers"))
    }

    /// HASH of busy jobs as Sidekiq 6.5+ and 7.x read it.
    pub fn work(&self, identity: &str) -> String {
        self.key(&format!("{identity}:work"))
    }

    /// LIST of signals (`TSTP`, `TERM`, `TTIN`) a dashboard sends to one process.
    pub fn signals(&self, identity: &str) -> String {
        self.key(&format!("{identity}-signals"))
    }

    pub fn stat_processed(&self) -> String {
        self.key("stat:processed")
    }

    pub fn stat_failed(&self) -> String {
        self.key("stat:failed")
    }

    /// Daily counter; `date` is `YYYY-MM-DD` in UTC.
    pub fn stat_processed_on(&self, date: &str) -> String {
        self.key(&format!("stat:processed:{date}"))
    }

    pub fn stat_failed_on(&self, date: &str) -> String {
        self.key(&format!("stat:failed:{date}"))
    }

    // ---- keys of our own -------------------------------------------------------------------

    /// ZSET identity → Redis time of its last liveness beat. Our own signal, independent of the
    /// 60 s expiry of Sidekiq's process hash, so orphaned work is found within seconds.
    pub fn alive(&self) -> String {
        self.key("jq:alive")
    }

    /// HASH working-list key → queue name, for every working list one process owns. Recovery reads
    /// it to know where each orphaned job goes back to.
    pub fn working_index(&self, identity: &str) -> String {
        self.key(&format!("jq:working:{identity}"))
    }

    /// LIST holding the jobs one fetcher of one process has taken from `queue` and not yet
    /// acknowledged. `slot` names the fetcher (a processor thread, or `idle` for the shared waiter).
    pub fn working(&self, queue: &str, identity: &str, slot: &str) -> String {
        self.key(&format!("jq:working:{identity}:{slot}:{queue}"))
    }

    /// HASH fetcher → `"<token> <pair> <count>"`: the last batch each fetcher of one process took, so
    /// a fetcher whose reply was lost (Redis went away mid-call) can find the jobs that call moved.
    pub fn fetch_marks(&self, identity: &str) -> String {
        self.key(&format!("jq:fetched:{identity}"))
    }

    /// STRING holding the jid of the job that holds an idempotency key (GitLab's deduplication):
    /// `duplicate:<queue>:<sha256 hex of "<class>:<args JSON>">`. Also the job's `idempotency_key`.
    pub fn duplicate(&self, queue: &str, digest: &str) -> String {
        self.joined(&["duplicate:", queue, ":", digest])
    }

    /// HASH beside an idempotency key (`<key>:meta`), of our own: `dropped` when a duplicate was
    /// dropped for a `reschedule_once` worker, and `wal:<name>` → the newest replication position of
    /// the dropped duplicates. Expires with the key.
    pub fn duplicate_meta(key: &str) -> String {
        format!("{key}:meta")
    }

    /// HASH of feature flags (name → "1"), read by the push script (`disable_<queue>_deduplication`).
    pub fn features(&self) -> String {
        self.key("jq:features")
    }

    /// HASH of the cluster-wide Prometheus counters (`metrics::field`): each server process adds its
    /// per-class-and-queue counts here every liveness beat, and the dedup push script its drops.
    pub fn metrics(&self) -> String {
        self.key("jq:metrics")
    }

    /// STRING: jobs dropped unrun because their `expires_at` had passed (`expires_in`), in all.
    pub fn stat_expired(&self) -> String {
        self.key("jq:stat:expired")
    }

    /// SET of paused queue names (`JobQueue::Queue#pause!`). Fetches skip them (`fetch.lua`,
    /// `ordered_fetch.lua`), and each server process's idle waiters leave them alone (`pause.rs`).
    /// Ours: Sidekiq Pro's pausing is closed source, and its key is not documented.
    pub fn paused(&self) -> String {
        self.key("jq:paused")
    }

    /// On the shard a queue moves away from (`shard_move/`): what one batch holds while it is on
    /// its way to the other shard. `kind` is `queue` (a LIST, oldest job first) or the sorted set's
    /// name, `schedule` or `retry` (a ZSET with the jobs' scores). Empty between batches.
    pub fn moving(&self, queue: &str, kind: &str) -> String {
        self.key(&format!("jq:moving:{queue}:{kind}"))
    }

    /// STRING beside [`Keys::moving`]: the batch's token, named on the receiving shard once its
    /// jobs are there.
    pub fn moving_token(&self, queue: &str, kind: &str) -> String {
        self.key(&format!("jq:moving:{queue}:{kind}:token"))
    }

    /// STRING on the receiving shard (a day's TTL): the batch with this token has been written
    /// there, so a move resumed after a crash does not write it twice.
    pub fn moved(&self, token: &str) -> String {
        self.key(&format!("jq:moved:{token}"))
    }

    // ---- concurrency and rate limits (`limits/`) ---------------------------------------------
    // A limit key (`lkey`) is the worker class, or `<class>[<key>]` for a keyed limit. The scripts
    // build the per-limit keys below from the namespace prefix themselves (their names depend on
    // what they read), so these functions and `scripts/limit_lib.lua` must spell them alike.

    /// HASH worker class → its concurrency limit, as last read (published by every server at start,
    /// by its refresh of lambda limits, and with each acquire).
    pub fn limits(&self) -> String {
        self.key("jq:limits")
    }

    /// HASH worker class → slots held (running jobs, and reservations of resumed ones), all keys.
    pub fn limits_running(&self) -> String {
        self.key("jq:limits:running")
    }

    /// HASH worker class → jobs deferred (waiting for a slot), all keys.
    pub fn limits_deferred(&self) -> String {
        self.key("jq:limits:deferred")
    }

    /// SET of limit keys that have deferred jobs: what the periodic pump looks at.
    pub fn limits_waiting(&self) -> String {
        self.key("jq:limits:waiting")
    }

    /// HASH jid → owner for one limit's slots: the identity of the process running the job, or
    /// `r:<ms>` for a deferred job resumed (pushed back to its queue) with a slot reserved for it.
    /// Also `L:<identity>:<n>` → identity: a slot the process leased (`limits/lease.rs`).
    pub fn limit_run(&self, lkey: &str) -> String {
        self.key(&format!("jq:limit:run:{lkey}"))
    }

    /// LIST of one limit's deferred jobs, oldest first: `<len>:<queue><len>:<jid><job JSON>`.
    pub fn limit_wait(&self, lkey: &str) -> String {
        self.key(&format!("jq:limit:wait:{lkey}"))
    }

    /// SET of `<jid> <lkey>` (or `<L:… field> <lkey>` for a leased slot): the slots one process
    /// holds, released when it is recovered.
    pub fn limit_held(&self, identity: &str) -> String {
        self.key(&format!("jq:limit:held:{identity}"))
    }

    /// ZSET (window: start times) or HASH (bucket: `tokens`, `at`) of one rate limit.
    pub fn limit_rate(&self, rkey: &str) -> String {
        self.key(&format!("jq:limit:rate:{rkey}"))
    }

    /// STRING: the extra weight of a rate window's leased tokens (`limits/lease.rs`): the sum of
    /// `n - 1` over its `#<n>#…` members.
    pub fn limit_rate_leased(&self, rkey: &str) -> String {
        self.key(&format!("jq:limit:rate:{rkey}:leased"))
    }

    // ---- gitlab-sidekiq-fetcher 0.8's keys (WIRE.md §6), read by `gitlab_fetch.rs` ----------

    /// `SCAN MATCH` pattern for gitlab-sidekiq-fetcher's working lists,
    /// `working:queue:<name>:<hostname>:<pid>:<nonce>` (glob characters in the namespace escaped).
    pub fn gitlab_working_pattern(&self) -> String {
        format!("{}working:queue:*", glob_escape(&self.prefix))
    }

    /// STRING a gitlab-sidekiq-fetcher process keeps alive (`SET … EX 60` every 20 s):
    /// `reliable-fetcher-heartbeat-<identity with every ':' as '-'>`.
    pub fn gitlab_heartbeat(&self, identity: &str) -> String {
        self.key(&format!(
            "reliable-fetcher-heartbeat-{}",
            identity.replace(':', "-")
        ))
    }

    /// STRING (ours): held by the server process that scans for gitlab-sidekiq-fetcher's working
    /// lists (`SET NX EX`, a second less than the scan interval), so one scan runs per interval however
    /// many servers there are.
    pub fn gitlab_scan_lease(&self) -> String {
        self.key("jq:gitlab-fetch:scan")
    }

    // ---- sidekiq-cron 1.8's keys (WIRE.md §5), read and written by `cron/` ---------------------

    /// sidekiq-cron's SET of every schedule's hash key (`cron_job:<name>`, as stored: unprefixed).
    pub fn cron_jobs(&self) -> String {
        self.key("cron_jobs")
    }

    /// sidekiq-cron's HASH of one schedule; `member` is an entry of [`Keys::cron_jobs`].
    pub fn cron_job(&self, member: &str) -> String {
        self.key(member)
    }

    /// Ours: a counter our API bumps on every change of a schedule, so the leader's index of
    /// schedules is refreshed at once rather than at its next periodic refresh.
    pub fn cron_changes(&self) -> String {
        self.key("jq:cron:changes")
    }

    /// HASH of an iterable job's progress (`ex`, `c`, `rt`, `cancelled`), Sidekiq 7.3's `it-<jid>`
    /// (`crate::iterable`).
    pub fn iteration(&self, jid: &str) -> String {
        self.key(&format!("it-{jid}"))
    }

    // Sidekiq 7/8 Metrics page keys (`j|…` hashes, histograms) are named by
    // `crate::metrics::sidekiq::count_keys` and `histogram_key`, under this prefix.

    /// STRING holding the identity of the process that currently runs the scheduler.
    pub fn scheduler_lock(&self) -> String {
        self.key("jq:scheduler:leader")
    }
}

/// A `SCAN MATCH` glob matching `text` literally: its glob characters escaped.
pub fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidekiq_names_without_namespace() {
        let k = Keys::new("");
        assert_eq!(k.queue("default"), "queue:default");
        assert_eq!(k.queues(), "queues");
        assert_eq!(k.workers("h:1:abc"), "h:1:abc:workers");
        assert_eq!(k.work("h:1:abc"), "h:1:abc:work");
        assert_eq!(k.signals("h:1:abc"), "h:1:abc-signals");
        assert_eq!(
            k.stat_processed_on("2026-01-02"),
            "stat:processed:2026-01-02"
        );
    }

    #[test]
    fn namespace_prefixes_everything() {
        let k = Keys::new("resque:gitlab:");
        assert_eq!(k.queue("default"), "resque:gitlab:queue:default");
        assert_eq!(k.dead(), "resque:gitlab:dead");
        assert_eq!(k.alive(), "resque:gitlab:jq:alive");
        assert_eq!(k.paused(), "resque:gitlab:jq:paused");
        assert_eq!(
            k.limit_run("Sync[42]"),
            "resque:gitlab:jq:limit:run:Sync[42]"
        );
        assert_eq!(
            k.limit_held("h:1:abc"),
            "resque:gitlab:jq:limit:held:h:1:abc"
        );
        assert_eq!(
            k.duplicate("authorized_projects", "ab12"),
            "resque:gitlab:duplicate:authorized_projects:ab12"
        );
        assert_eq!(
            k.working("mail", "h:1:abc", "3"),
            "resque:gitlab:jq:working:h:1:abc:3:mail"
        );
    }
}
