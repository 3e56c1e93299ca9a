//! Cron schedules in sidekiq-cron 1.8's Redis format (WIRE.md §5): schedules an app created with
//! sidekiq-cron keep running on our server, and sidekiq-cron's API lists, enables and disables the
//! ones we store.
//!
//! [`schedule`] parses a cron string (5 or 6 fields, optional time zone) and finds its ticks; [`zone`]
//! reads a named time zone from the system's database;
//! [`tab`] is the scheduler leader's turn: the index of next ticks and the pushes; [`job`] builds the
//! job a tick pushes from the schedule's hash.

pub mod job;
pub mod schedule;
pub mod store;
pub mod tab;
pub mod zone;

pub use schedule::{CronError, Schedule, Zone};
pub use tab::Crontab;
pub use zone::{NamedZone, ZoneError};
