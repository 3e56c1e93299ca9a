//! The Ruby binding of the queue engine: `JobQueue::Native`.
//!
//! A thin layer over `queue_core` (which knows nothing of Ruby): one file per Ruby class under
//! `ruby_api/`, one helper that releases the GVL (`nogvl`), and one place that maps engine errors to
//! Ruby exceptions (`errors`). The Ruby side (`lib/queue/`) wraps these in the public API.

mod errors;
mod nogvl;
mod ruby_api;

use magnus::{prelude::*, Error, Ruby};

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
    ruby_api::ordered::define(ruby, &native)?; // after engine: adds Engine's ordered_* methods
    Ok(())
}

/// Engine logs go to stderr; `QUEUE_LOG` (e.g. `info`, `queue_core=debug`) sets the level, `warn` by
/// default.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("QUEUE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
