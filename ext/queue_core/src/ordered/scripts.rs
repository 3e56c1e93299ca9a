//! The ordered scripts that share Lua: each is `ordered_lib.lua` (helpers for setting bad data aside
//! and for merging payloads) followed by its own chunk, and the settle-and-fetch script runs the very
//! same settle and fetch chunks as the two separate scripts. (The lease script stands alone, in
//! [`crate::scripts`].)

use std::sync::LazyLock;

use redis::Script;

macro_rules! lua {
    ($file:literal) => {
        include_str!(concat!("../scripts/", $file))
    };
}

/// `ordered_push.lua`.
pub static PUSH: LazyLock<Script> =
    LazyLock::new(|| Script::new(concat!(lua!("ordered_lib.lua"), lua!("ordered_push.lua"))));

/// `ordered_settle.lua` as a script of its own.
pub static SETTLE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lua!("ordered_lib.lua"),
        lua!("ordered_settle.lua"),
        "return ordered_settle(KEYS[1], ARGV)\n"
    ))
});

/// `ordered_fetch.lua` as a script of its own.
pub static FETCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lua!("ordered_lib.lua"),
        lua!("ordered_fetch.lua"),
        "return ordered_fetch(KEYS[1], KEYS[2], ARGV)\n"
    ))
});

/// Settle a batch and fetch the next in one call (`ordered_settle_fetch.lua`).
pub static SETTLE_FETCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lua!("ordered_lib.lua"),
        lua!("ordered_settle.lua"),
        lua!("ordered_fetch.lua"),
        lua!("ordered_settle_fetch.lua")
    ))
});

/// `ordered_recover.lua`.
pub static RECOVER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lua!("ordered_lib.lua"),
        lua!("ordered_recover.lua")
    ))
});

/// `ordered_admin.lua`.
pub static ADMIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(concat!(lua!("ordered_lib.lua"), lua!("ordered_admin.lua"))));
