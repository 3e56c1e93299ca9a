//! The Lua scripts behind every multi-step change of state. Each is loaded once per connection and
//! called by its SHA (`EVALSHA`, falling back to `EVAL` after a server restart), so a state change costs
//! one round trip and is atomic. The scripts themselves, with their KEYS/ARGV contracts, are in
//! `src/scripts/*.lua`.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("scripts/", $file))));
    };
}

/// A deduplication helper file followed by a script that uses it.
macro_rules! with_helper {
    ($helper:literal, $file:literal) => {
        concat!(
            include_str!(concat!("scripts/", $helper)),
            include_str!(concat!("scripts/", $file))
        )
    };
}

script!(FETCH, "fetch.lua");
script!(CRON_ENQUEUE, "cron_enqueue.lua");
script!(CRON_ADMIN, "cron_admin.lua");
pub static FAIL: LazyLock<Script> =
    LazyLock::new(|| Script::new(with_helper!("dedup_release_fn.lua", "fail.lua")));
pub static DEDUP_PUSH: LazyLock<Script> =
    LazyLock::new(|| Script::new(with_helper!("dedup_positions.lua", "dedup_push.lua")));
script!(DEDUP_PUSH_ONE, "dedup_push_one.lua");

/// `dedup_release.lua`, sent as `EVAL` with its text, since it is written unreplied where a
/// `NOSCRIPT` error would go unseen. Without its comments and indentation, to keep the bytes Redis
/// reads and hashes per job few.
pub static DEDUP_RELEASE_SOURCE: LazyLock<String> =
    LazyLock::new(|| compact(with_helper!("dedup_release_fn.lua", "dedup_release.lua")));

/// Lua source without comment lines, blank lines and indentation.
pub(crate) fn compact(source: &str) -> String {
    source
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_script_is_compacted() {
        assert!(
            DEDUP_RELEASE_SOURCE.len() < 700,
            "{}",
            DEDUP_RELEASE_SOURCE.len()
        );
        assert!(!DEDUP_RELEASE_SOURCE.contains("--"));
        assert!(DEDUP_RELEASE_SOURCE.contains("local function dedup_release"));
    }
}
script!(REQUEUE, "requeue.lua");

pub static BATCH_CHECK: LazyLock<Script> =
    LazyLock::new(|| Script::new(with_helper!("batch_lib.lua", "batch_check.lua")));
/// `fail.lua` with the batch's prelude (`batch_fail.lua`), for a failed job of a batch.
pub static BATCH_FAIL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("scripts/batch_lib.lua"),
        include_str!("scripts/dedup_release_fn.lua"),
        include_str!("scripts/batch_fail.lua"),
        include_str!("scripts/fail.lua")
    ))
});
pub static BATCH_OPEN: LazyLock<Script> =
    LazyLock::new(|| Script::new(with_helper!("batch_lib.lua", "batch_open.lua")));
pub static BATCH_CLOSE: LazyLock<Script> =
    LazyLock::new(|| Script::new(with_helper!("batch_lib.lua", "batch_close.lua")));
script!(BEAT, "beat.lua");
script!(ENQUEUE_DUE, "enqueue_due.lua");
script!(DUE, "due.lua");
script!(RELEASE, "release.lua");
script!(MIGRATE_LIST, "migrate_list.lua");
script!(MIGRATE_SET, "migrate_set.lua");
script!(MIGRATE_KEYS, "migrate_keys.lua");
script!(SHARD_TAKE_LIST, "shard_take_list.lua");
script!(SHARD_TAKE_SET, "shard_take_set.lua");
script!(SHARD_PUT, "shard_put.lua");
script!(ORDERED_LEASE, "ordered_lease.lua");
script!(FILTER, "filter.lua");
script!(DEDUP_FORGET, "dedup_forget.lua");
script!(GITLAB_REQUEUE, "gitlab_requeue.lua");
