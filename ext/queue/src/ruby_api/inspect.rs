//! The inspection API (`queue_core::api`) for Ruby: `Engine#api_*` methods behind `JobQueue::Queue`,
//! `RetrySet` and friends (`lib/queue/api/*.rb`). Each runs one engine call on the calling thread's
//! connection with the GVL released. Jobs cross as UTF-8 strings of the bytes stored; scores as
//! Floats. Set names (`schedule`, `retry`, `dead`) and actions are checked by the engine.

use magnus::{prelude::*, Error, RArray, RString, Ruby};
use queue_core::api::sets::{self, Action, JobSet};
use queue_core::api::{dedup, processes, queues, stats, Filtered};
use queue_core::pause;

use super::engine::{with_conn, Engine};
use super::{bytes_of, utf8_string};
use crate::errors::{blocking, to_ruby};

fn job_set(name: &str) -> Result<JobSet, Error> {
    JobSet::parse(name).map_err(to_ruby)
}

/// `[[job, score], ...]`.
fn entries_to_ruby(ruby: &Ruby, entries: &[(Vec<u8>, f64)]) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(entries.len());
    for (member, score) in entries {
        out.push((utf8_string(ruby, member), *score))?;
    }
    Ok(out)
}

/// `[next_start_or_nil, [[job, score_or_index], ...]]`.
fn filtered_to_ruby(ruby: &Ruby, f: &Filtered) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(2);
    out.push(f.next)?;
    out.push(entries_to_ruby(ruby, &f.entries)?)?;
    Ok(out)
}

impl Engine {
    fn run<T: Send>(
        &self,
        op: impl AsyncFnOnce(&mut queue_core::link::connection::Conn) -> queue_core::Result<T> + Send,
    ) -> Result<T, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_conn(redis, id, op))
    }

    // ---- queues -------------------------------------------------------------------------------

    fn api_queue_names(&self) -> Result<Vec<String>, Error> {
        self.run(async |c| queues::names(c).await)
    }

    fn api_queue_page(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        offset: usize,
        count: usize,
    ) -> Result<RArray, Error> {
        let jobs = rb_self.run(async |c| queues::page(c, &queue, offset, count).await)?;
        let out = ruby.ary_new_capa(jobs.len());
        for job in &jobs {
            out.push(utf8_string(ruby, job))?;
        }
        Ok(out)
    }

    fn api_queue_latency(&self, queue: String) -> Result<f64, Error> {
        self.run(async |c| queues::latency(c, &queue).await)
    }

    /// `api_queue_filter(queue, needle, start, window, limit)`.
    fn api_queue_filter(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        needle: String,
        start: usize,
        window: usize,
        limit: usize,
    ) -> Result<RArray, Error> {
        let f = rb_self
            .run(async |c| queues::filter(c, &queue, &needle, start, window, limit).await)?;
        filtered_to_ruby(ruby, &f)
    }

    fn api_queue_delete(&self, queue: String, job: RString) -> Result<bool, Error> {
        let job = bytes_of(job);
        self.run(async |c| queues::delete(c, &queue, &job).await)
    }

    fn api_queue_clear(&self, queue: String) -> Result<(), Error> {
        self.run(async |c| queues::clear(c, &queue).await)
    }

    fn api_queue_pause(&self, queue: String) -> Result<bool, Error> {
        self.run(async |c| pause::pause(c, &queue).await)
    }

    fn api_queue_unpause(&self, queue: String) -> Result<bool, Error> {
        self.run(async |c| pause::unpause(c, &queue).await)
    }

    fn api_paused_queues(&self) -> Result<Vec<String>, Error> {
        self.run(async |c| pause::paused(c).await)
    }

    // ---- schedule, retry, dead ----------------------------------------------------------------

    fn api_set_size(&self, set: String) -> Result<i64, Error> {
        let set = job_set(&set)?;
        self.run(async |c| sets::size(c, set).await)
    }

    fn api_set_page(
        ruby: &Ruby,
        rb_self: &Self,
        set: String,
        offset: usize,
        count: usize,
    ) -> Result<RArray, Error> {
        let set = job_set(&set)?;
        let entries = rb_self.run(async |c| sets::page(c, set, offset, count).await)?;
        entries_to_ruby(ruby, &entries)
    }

    /// `api_set_scan(set, pattern, cursor, count)` → `[next_cursor, [[job, score], ...]]`.
    fn api_set_scan(
        ruby: &Ruby,
        rb_self: &Self,
        set: String,
        pattern: String,
        cursor: u64,
        count: usize,
    ) -> Result<RArray, Error> {
        let set = job_set(&set)?;
        let (next, entries) =
            rb_self.run(async |c| sets::scan(c, set, &pattern, cursor, count).await)?;
        let out = ruby.ary_new_capa(2);
        out.push(next)?;
        out.push(entries_to_ruby(ruby, &entries)?)?;
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn api_set_filter(
        ruby: &Ruby,
        rb_self: &Self,
        set: String,
        needle: String,
        start: usize,
        window: usize,
        limit: usize,
    ) -> Result<RArray, Error> {
        let set = job_set(&set)?;
        let f = rb_self.run(async |c| sets::filter(c, set, &needle, start, window, limit).await)?;
        filtered_to_ruby(ruby, &f)
    }

    /// `api_set_fetch(set, [min, max], jid_or_nil)`.
    fn api_set_fetch(
        ruby: &Ruby,
        rb_self: &Self,
        set: String,
        range: (f64, f64),
        jid: Option<String>,
    ) -> Result<RArray, Error> {
        let set = job_set(&set)?;
        let (min, max) = range;
        let entries =
            rb_self.run(async |c| sets::fetch_range(c, set, min, max, jid.as_deref()).await)?;
        entries_to_ruby(ruby, &entries)
    }

    fn api_set_delete(&self, set: String, job: RString) -> Result<bool, Error> {
        let set = job_set(&set)?;
        let job = bytes_of(job);
        self.run(async |c| sets::delete(c, set, &job).await)
    }

    fn api_set_delete_by_jid(&self, set: String, score: f64, jid: String) -> Result<bool, Error> {
        let set = job_set(&set)?;
        self.run(async |c| sets::delete_by_jid(c, set, score, &jid).await)
    }

    /// `api_set_act(set, action, job_or_nil, score, jid)`: `retry`, `add_to_queue` or `kill` one job.
    fn api_set_act(
        &self,
        set: String,
        action: String,
        job: Option<RString>,
        score: f64,
        jid: String,
    ) -> Result<bool, Error> {
        let set = job_set(&set)?;
        let action = Action::parse(&action).map_err(to_ruby)?;
        let job = job.map(bytes_of);
        self.run(async |c| sets::act(c, set, action, job.as_deref(), score, &jid).await)
    }

    fn api_set_act_all(&self, set: String, action: String) -> Result<usize, Error> {
        let set = job_set(&set)?;
        let action = Action::parse(&action).map_err(to_ruby)?;
        self.run(async |c| sets::act_on_all(c, set, action).await)
    }

    fn api_set_add(&self, set: String, at: f64, job: RString) -> Result<bool, Error> {
        let set = job_set(&set)?;
        let job = bytes_of(job);
        self.run(async |c| sets::add(c, set, at, &job).await)
    }

    fn api_set_reschedule(&self, set: String, job: RString, at: f64) -> Result<bool, Error> {
        let set = job_set(&set)?;
        let job = bytes_of(job);
        self.run(async |c| sets::reschedule(c, set, &job, at).await)
    }

    fn api_set_clear(&self, set: String) -> Result<(), Error> {
        let set = job_set(&set)?;
        self.run(async |c| sets::clear(c, set).await)
    }

    fn api_dead_bury(&self, job: RString) -> Result<(), Error> {
        let job = bytes_of(job);
        self.run(async |c| sets::bury(c, &job).await)
    }

    // ---- processes ----------------------------------------------------------------------------

    /// `[[identity, info_json_or_nil, busy, beat, quiet, rss, rtt_us], ...]`.
    fn api_processes(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let rows = rb_self.run(async |c| processes::list(c).await)?;
        let out = ruby.ary_new_capa(rows.len());
        for p in rows {
            let row = ruby.ary_new_capa(7);
            row.push(p.identity)?;
            row.push(p.info)?;
            row.push(p.busy)?;
            row.push(p.beat)?;
            row.push(p.quiet)?;
            row.push(p.rss)?;
            row.push(p.rtt_us)?;
            out.push(row)?;
        }
        Ok(out)
    }

    fn api_processes_cleanup(&self) -> Result<i64, Error> {
        self.run(async |c| processes::cleanup(c).await)
    }

    fn api_signal(&self, identity: String, signal: String) -> Result<(), Error> {
        self.run(async |c| processes::signal(c, &identity, &signal).await)
    }

    /// `[[identity, thread_id, work_json], ...]`.
    fn api_work(&self) -> Result<Vec<(String, String, String)>, Error> {
        self.run(async |c| processes::work(c).await)
    }

    // ---- stats --------------------------------------------------------------------------------

    fn api_history(&self, counter: String, dates: Vec<String>) -> Result<Vec<i64>, Error> {
        let counter = stats::Counter::parse(&counter).map_err(to_ruby)?;
        self.run(async |c| stats::history(c, counter, &dates).await)
    }

    fn api_stats_reset(&self, counters: Vec<String>) -> Result<(), Error> {
        let counters = counters
            .iter()
            .map(|n| stats::Counter::parse(n))
            .collect::<queue_core::Result<Vec<_>>>()
            .map_err(to_ruby)?;
        self.run(async |c| stats::reset(c, &counters).await)
    }

    // ---- deduplication keys -------------------------------------------------------------------

    /// `api_dedup_keys(cursor, count, queue_or_nil)`: one `SCAN` step,
    /// `[next_cursor, [[key, queue_or_nil, jid, ttl_ms], ...]]` (cursor 0 once the walk is over).
    fn api_dedup_keys(
        ruby: &Ruby,
        rb_self: &Self,
        cursor: u64,
        count: usize,
        queue: Option<String>,
    ) -> Result<RArray, Error> {
        let step = rb_self.run(async |c| dedup::page(c, cursor, count, queue.as_deref()).await)?;
        let keys = ruby.ary_new_capa(step.keys.len());
        for k in step.keys {
            keys.push((k.key, k.queue, k.jid, k.ttl_ms))?;
        }
        let out = ruby.ary_new_capa(2);
        out.push(step.cursor)?;
        out.push(keys)?;
        Ok(out)
    }

    /// `api_dedup_release(key, jid_or_nil)`: whether the key was held (and is released now).
    fn api_dedup_release(&self, key: String, jid: Option<String>) -> Result<bool, Error> {
        self.run(async |c| dedup::release(c, &key, jid.as_deref()).await)
    }
}

pub fn define(_ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method(
        "api_queue_names",
        magnus::method!(Engine::api_queue_names, 0),
    )?;
    e.define_method("api_queue_page", magnus::method!(Engine::api_queue_page, 3))?;
    e.define_method(
        "api_queue_latency",
        magnus::method!(Engine::api_queue_latency, 1),
    )?;
    e.define_method(
        "api_queue_filter",
        magnus::method!(Engine::api_queue_filter, 5),
    )?;
    e.define_method(
        "api_queue_delete",
        magnus::method!(Engine::api_queue_delete, 2),
    )?;
    e.define_method(
        "api_queue_clear",
        magnus::method!(Engine::api_queue_clear, 1),
    )?;
    e.define_method(
        "api_queue_pause",
        magnus::method!(Engine::api_queue_pause, 1),
    )?;
    e.define_method(
        "api_queue_unpause",
        magnus::method!(Engine::api_queue_unpause, 1),
    )?;
    e.define_method(
        "api_paused_queues",
        magnus::method!(Engine::api_paused_queues, 0),
    )?;
    e.define_method("api_set_size", magnus::method!(Engine::api_set_size, 1))?;
    e.define_method("api_set_page", magnus::method!(Engine::api_set_page, 3))?;
    e.define_method("api_set_scan", magnus::method!(Engine::api_set_scan, 4))?;
    e.define_method("api_set_filter", magnus::method!(Engine::api_set_filter, 5))?;
    e.define_method("api_set_fetch", magnus::method!(Engine::api_set_fetch, 3))?;
    e.define_method("api_set_delete", magnus::method!(Engine::api_set_delete, 2))?;
    e.define_method(
        "api_set_delete_by_jid",
        magnus::method!(Engine::api_set_delete_by_jid, 3),
    )?;
    e.define_method("api_set_act", magnus::method!(Engine::api_set_act, 5))?;
    e.define_method(
        "api_set_act_all",
        magnus::method!(Engine::api_set_act_all, 2),
    )?;
    e.define_method("api_set_add", magnus::method!(Engine::api_set_add, 3))?;
    e.define_method(
        "api_set_reschedule",
        magnus::method!(Engine::api_set_reschedule, 3),
    )?;
    e.define_method("api_set_clear", magnus::method!(Engine::api_set_clear, 1))?;
    e.define_method("api_dead_bury", magnus::method!(Engine::api_dead_bury, 1))?;
    e.define_method("api_processes", magnus::method!(Engine::api_processes, 0))?;
    e.define_method("api_dedup_keys", magnus::method!(Engine::api_dedup_keys, 3))?;
    e.define_method(
        "api_dedup_release",
        magnus::method!(Engine::api_dedup_release, 2),
    )?;
    e.define_method(
        "api_processes_cleanup",
        magnus::method!(Engine::api_processes_cleanup, 0),
    )?;
    e.define_method("api_signal", magnus::method!(Engine::api_signal, 2))?;
    e.define_method("api_work", magnus::method!(Engine::api_work, 0))?;
    e.define_method("api_history", magnus::method!(Engine::api_history, 2))?;
    e.define_method(
        "api_stats_reset",
        magnus::method!(Engine::api_stats_reset, 1),
    )?;
    Ok(())
}
