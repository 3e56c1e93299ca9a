//! `JobQueue::Native.malloc_in_use`: the bytes glibc's malloc holds in use (nil where malloc is
//! not glibc's), for the server's malloc-driven minor GC (lib/queue/malloc_gc.rb).

use magnus::{Error, RModule};

fn malloc_in_use() -> Option<u64> {
    queue_core::memory::malloc_in_use()
}

pub fn define(native: &RModule) -> Result<(), Error> {
    native.define_module_function("malloc_in_use", magnus::function!(malloc_in_use, 0))?;
    Ok(())
}
