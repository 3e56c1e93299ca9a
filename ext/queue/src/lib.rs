//! The Ruby binding of the queue engine: `JobQueue::Native`.
//!
//! A thin layer over `queue_core` (which knows nothing of Ruby): one file per Ruby class under
//! `ruby_api/`, one helper that releases the GVL (`nogvl`), and one place that maps engine errors to
//! Ruby exceptions (`errors`). The Ruby side (`lib/queue/`) wraps these in the public API.

mod errors;
mod nogvl;
mod ruby_api;

use std::sync::OnceLock;

use magnus::{prelude::*, Error, Ruby};
use tracing_subscriber::prelude::*;
use tracing_subscriber::{reload, EnvFilter, Registry};

#[magnus::init(name = "queue")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    init_logging();
    let module = ruby.define_module("JobQueue")?;
    let native = module.define_module("Native")?;
    ruby_api::engine::define(ruby, &native)?;
    ruby_api::server::define(ruby, &native)?;
    ruby_api::fetcher::define(ruby, &native)?;
    ruby_api::push_template::define(ruby, &native)?;
    ruby_api::log::define(ruby, &native)?;
    ruby_api::job_hash::define(&native)?;
    ruby_api::thread_policy::define(&native)?;
    ruby_api::ordered::define(ruby, &native)?; // after engine: adds Engine's ordered_* methods
    ruby_api::inspect::define(ruby, &native)?; // after engine: adds Engine's api_* methods
    ruby_api::metrics::define(ruby, &native)?; // after engine: adds Engine#metrics_text
    ruby_api::cron::define(&native)?; // after engine: adds Engine's cron_* methods
    ruby_api::iterable::define(&native)?; // after engine: adds Engine's iteration_* methods
    ruby_api::limits::define(&native)?; // after engine: adds Engine's limits_* methods
    ruby_api::batch::define(&native)?; // after engine: adds Engine's batch_* methods
    ruby_api::start_server::define(&native)?; // after engine: adds Engine#start_server
    Ok(())
}

/// The engine's log filter, replaceable while the process runs (`JobQueue::Native.log_level=`).
static LOG_FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Engine logs go to stderr; `QUEUE_LOG` (e.g. `info`, `queue_core=debug`) sets the level, `warn` by
/// default. `queue -v` turns the engine's debug lines on through [`set_log_level`].
fn init_logging() {
    let filter = EnvFilter::try_from_env("QUEUE_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let (filter, handle) = reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    if tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = LOG_FILTER.set(handle);
    }
}

/// `JobQueue::Native.log_level = "debug"`: the engine's filter from now on, in `QUEUE_LOG`'s syntax.
/// A level alone applies to the engine's own lines; other crates stay at `warn`.
pub(crate) fn set_log_level(ruby: &Ruby, level: String) -> Result<(), Error> {
    let directives = match level.parse::<tracing::Level>() {
        Ok(level) => format!("warn,queue_core={level},queue={level}"),
        Err(_) => level.clone(),
    };
    let filter = EnvFilter::try_new(&directives).map_err(|e| {
        Error::new(
            ruby.exception_arg_error(),
            format!("invalid engine log level {level:?}: {e}"),
        )
    })?;
    if let Some(handle) = LOG_FILTER.get() {
        handle.reload(filter).map_err(|e| {
            Error::new(
                ruby.exception_runtime_error(),
                format!("cannot change the engine log level: {e}"),
            )
        })?;
    }
    Ok(())
}
