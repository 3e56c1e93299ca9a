//! `Engine#start_server(identity, queues, options)`: starts the engine's side of a server process
//! (`queue_core::server::Server`) and hands it to Ruby as `JobQueue::Native::Server`.
//!
//! `queues` is `[[name, weight], ...]` in priority order. `options` is a Hash with Symbol keys, one
//! per field of `ServerConfig` that Ruby sets (`JobQueue::Launcher#server_options`); a new server
//! setting is a new key here and there, never a new positional argument. An unknown key raises
//! ArgumentError, so a misspelt one in Ruby fails at once instead of being ignored.
//!
//! `capsules` (optional) lists the capsules besides the default one (`queues`, `strict`,
//! `concurrency`): `[[name, [[queue, weight], ...], strict, concurrency], ...]`.

use std::time::Duration;

use magnus::{prelude::*, r_hash::ForEach, Error, RHash, Ruby, Symbol, TryConvert, Value};
use queue_core::capsules::CapsuleConfig;
use queue_core::metrics::sidekiq::Version;
use queue_core::server::{self, ServerConfig};
use queue_core::supervisor::Supervisor;

use super::engine::Engine;
use super::server::Server;
use crate::errors::{blocking, to_ruby};

/// The keys `options` may hold.
const KEYS: &[&str] = &[
    "strict",
    "concurrency",
    "max_batch",
    "info_json",
    "scheduler",
    "supervised",
    "gitlab_fetch_scan",
    "sidekiq_metrics",
    "capsules",
    "malloc_arena_max",
    "malloc_trim_interval",
];

/// `options` read once, each key converted where it is taken.
struct Options {
    hash: RHash,
}

impl Options {
    fn new(ruby: &Ruby, hash: RHash) -> Result<Self, Error> {
        hash.foreach(|key: Symbol, _: Value| {
            let name = key.name()?;
            if KEYS.contains(&name.as_ref()) {
                Ok(ForEach::Continue)
            } else {
                Err(Error::new(
                    ruby.exception_arg_error(),
                    format!(
                        "start_server: unknown option {name:?} (known: {})",
                        KEYS.join(", ")
                    ),
                ))
            }
        })?;
        Ok(Self { hash })
    }

    /// The value under `key`, or `default` when the key is absent or nil.
    fn get<T: TryConvert>(&self, key: &str, default: T) -> Result<T, Error> {
        match self.hash.get(Ruby::get_with(self.hash).to_symbol(key)) {
            Some(value) if !value.is_nil() => T::try_convert(value),
            _ => Ok(default),
        }
    }
}

impl Engine {
    fn start_server(
        ruby: &Ruby,
        rb_self: &Self,
        identity: String,
        queues: Vec<(String, u32)>,
        options: RHash,
    ) -> Result<Server, Error> {
        let options = Options::new(ruby, options)?;
        let sidekiq_metrics = options
            .get::<Option<i64>>("sidekiq_metrics", None)?
            .map(Version::from_major)
            .transpose()
            .map_err(to_ruby)?;
        // `supervised`: report to the service manager named by `NOTIFY_SOCKET`; false for a server
        // embedded in another program (Puma), which owns that socket.
        let supervised = options.get("supervised", true)?;
        let capsules = options
            .get::<Vec<(String, Vec<(String, u32)>, bool, usize)>>("capsules", Vec::new())?
            .into_iter()
            .map(|(name, queues, strict, concurrency)| CapsuleConfig {
                name,
                queues,
                strict,
                concurrency,
            })
            .collect();
        let config = ServerConfig {
            identity,
            queues,
            strict: options.get("strict", false)?,
            concurrency: options.get("concurrency", 10)?,
            max_batch: options.get("max_batch", 1)?,
            info_json: options.get("info_json", String::from("{}"))?,
            scheduler: options.get("scheduler", true)?,
            gitlab_fetch_scan: options
                .get::<Option<u64>>("gitlab_fetch_scan", None)?
                .map(Duration::from_secs),
            sidekiq_metrics,
            capsules,
            malloc_arena_max: options.get("malloc_arena_max", None)?,
            malloc_trim_interval: trim_interval(ruby, options.get("malloc_trim_interval", None)?)?,
        };
        let redis = rb_self.redis.clone();
        let server = blocking(move || {
            if supervised {
                server::Server::start(redis, config)
            } else {
                server::Server::start_supervised(redis, config, Supervisor::new(None, None))
            }
        })?;
        Ok(Server::new(server))
    }
}

/// `malloc_trim_interval` (seconds, > 0) as a Duration; nil: no periodic trim.
fn trim_interval(ruby: &Ruby, seconds: Option<f64>) -> Result<Option<Duration>, Error> {
    let Some(seconds) = seconds else {
        return Ok(None);
    };
    match Duration::try_from_secs_f64(seconds) {
        Ok(every) if !every.is_zero() => Ok(Some(every)),
        _ => Err(Error::new(
            ruby.exception_arg_error(),
            format!("malloc_trim_interval must be a positive number of seconds, got {seconds}"),
        )),
    }
}

pub fn define(native: &magnus::RModule) -> Result<(), Error> {
    let engine = native.const_get::<_, magnus::RClass>("Engine")?;
    engine.define_method("start_server", magnus::method!(Engine::start_server, 3))
}
