//! How much memory a server process keeps: the limit on glibc's malloc arenas, and the periodic
//! trim ([`trim`]) that gives malloc's free pages back.
//!
//! glibc gives a thread that allocates its own arena while there are fewer than 8 per core, and
//! an arena keeps the pages it freed. A server's processor threads (Ruby's) and the engine's
//! threads each allocate, so a `-c 10` process ends with ~14 arenas whose free space grows with
//! the jobs it runs: ARCHITECTURE.md, "Memory", measured 40.7 MB of arenas after 150,000 jobs, 16
//! MB of it free, against 2 arenas holding about the same in use. Limiting the arenas, as
//! `MALLOC_ARENA_MAX=2` does for a process started with it, is set here at the server's start,
//! before its threads allocate: glibc fixes its limit only once a process has 8 arenas, so a limit
//! set before then holds.

pub mod trim;

/// Limits glibc's malloc to `max` arenas (`mallopt(M_ARENA_MAX)`). Returns whether the limit was
/// set: false where malloc is not glibc's, or when glibc refused it.
pub fn limit_malloc_arenas(max: u32) -> bool {
    set_arena_max(max)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(max: u32) -> bool {
    let Ok(max) = libc::c_int::try_from(max) else {
        return false;
    };
    // SAFETY: mallopt only stores the setting; any value is valid input.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, max) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_max: u32) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_the_limit_on_glibc() {
        assert_eq!(
            limit_malloc_arenas(64),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
    }

    #[test]
    fn trims_on_glibc() {
        // 4 MB of free chunks kept below the top of the heap by the small blocks between them.
        let mut kept = Vec::new();
        let mut freed = Vec::new();
        for _ in 0..64 {
            freed.push(vec![1u8; 64 << 10]);
            kept.push(vec![1u8; 64]);
        }
        drop(freed);
        assert_eq!(
            trim::trim(),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
        drop(kept);
    }
}
