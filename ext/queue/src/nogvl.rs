//! The one place the binding releases Ruby's GVL.
//!
//! Blocking work (a Redis round trip, a wait for a job) runs with the GVL released so other Ruby
//! threads keep running. The closure must be `Send` and must not touch any Ruby object: copy what it
//! needs out of Ruby values first. No unblock function is registered (with one, Ruby 3.1 starts a
//! helper thread per call when only one Ruby thread exists, halving throughput); instead every wait
//! is bounded (≤ 2 s) so interrupts are seen when the call returns. A panic inside is caught and
//! returned as an error rather than unwinding through Ruby's C frames.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub fn nogvl<F, R>(f: F) -> std::thread::Result<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    struct Call<F, R> {
        f: Option<F>,
        result: Option<std::thread::Result<R>>,
    }

    unsafe extern "C" fn trampoline<F, R>(data: *mut c_void) -> *mut c_void
    where
        F: FnOnce() -> R,
    {
        // SAFETY: `data` is the `Call` below, alive for the whole call and touched only here.
        let call = unsafe { &mut *(data as *mut Call<F, R>) };
        if let Some(f) = call.f.take() {
            call.result = Some(catch_unwind(AssertUnwindSafe(f)));
        }
        std::ptr::null_mut()
    }

    let mut call = Call {
        f: Some(f),
        result: None,
    };
    // SAFETY: the trampoline matches the C signature; `call` outlives the blocking call.
    unsafe {
        rb_sys::rb_thread_call_without_gvl(
            Some(trampoline::<F, R>),
            &mut call as *mut Call<F, R> as *mut c_void,
            None,
            std::ptr::null_mut(),
        );
    }
    call.result
        .unwrap_or_else(|| Err(Box::new("the call did not run")))
}
