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

script!(FETCH, "fetch.lua");
script!(FAIL, "fail.lua");
script!(REQUEUE, "requeue.lua");
script!(BEAT, "beat.lua");
script!(ENQUEUE_DUE, "enqueue_due.lua");
script!(DUE, "due.lua");
script!(RELEASE, "release.lua");
