//! A job's Hash built by the engine from its JSON, as `JSON.parse` would build it, and what a
//! processor needs to know of it, read on the way.
//!
//! The reading is `queue_core::plain_json`: it declines everything it cannot read exactly as the
//! json gem does (a `\u` escape, a Bignum, a long float, a comment…), and then the job takes Ruby's
//! `JSON.parse` as before. What it builds is what the gem builds: a Hash whose keys are the
//! interned frozen Strings `Hash#[]=` makes of the gem's keys, unfrozen UTF-8 Strings, Integers,
//! Floats, Arrays, Hashes, true, false and nil (`spec/api/native_job_hash_spec.rb` compares the two
//! on generated and hand-written JSON).
//!
//! Built with Ruby's C API directly: none of the functions used raises (short of running out of
//! memory), and every value is stored in its parent as soon as it is made, so the garbage collector
//! finds it from the root on the stack.

use std::ffi::c_long;
use std::sync::OnceLock;

use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{prelude::*, Ruby, Value};
use queue_core::job_outline::{Marks, Outline};
use queue_core::plain_json::{self, Build};
use rb_sys::VALUE;

/// The top-level fields of a job the processor looks at, as the Hash holds them (the last of a
/// duplicated key).
#[derive(Clone, Copy)]
pub struct Top {
    pub class: Value,
    pub jid: Value,
    pub args: Value,
    /// Its `idempotency_key` is neither nil nor false.
    pub idempotency_key: bool,
    /// The `idempotency_key` itself (nil for none).
    pub key: Value,
    /// Its batch's bid (nil for none).
    pub bid: Value,
    /// The keys looked for only by their presence.
    pub marks: Marks,
}

/// A job's Hash, with its [`Top`] fields; `None` when the reader declined the JSON or it is not an
/// object.
pub fn build(ruby: &Ruby, raw: &[u8]) -> Option<(Value, Top)> {
    let mut builder = RubyBuild::new(ruby);
    let value = plain_json::parse(raw, &mut builder)?;
    // SAFETY: a VALUE this builder just made, or a special constant.
    let hash = unsafe { Value::from_raw(value) };
    // Keys at depth 1 come only from an object at the top, which this checks for.
    magnus::RHash::from_value(hash)?;
    Some((hash, builder.top))
}

/// What the binding needs of a job it runs itself, read from its JSON without building the job's
/// Hash: `args`, `jid`, `bid` and `idempotency_key` built as the Hash would hold them (the other
/// [`Top`] fields noted by their keys; `class` left nil), and where the class name lies. The JSON
/// was checked whole as it was fetched ([`Outline`], with the GVL released): only those four values
/// are read here, each from its own bytes, so [`build`] accepts every JSON this accepts; the Hash is
/// built from the same bytes only if something asks for it (a log line's context, a failure).
pub struct Lean {
    /// `args` set only when it is no Array; an Array's items are in [`Lean::args`].
    pub top: Top,
    /// The job's arguments, as `perform` takes them; `None` when `args` is no Array.
    pub args: Option<Args>,
    /// The last `class` value, as written (quotes included).
    class: Option<std::ops::Range<usize>>,
}

/// Arguments held inline at most: most jobs take a few.
pub const INLINE_ARGS: usize = 8;

/// A job's arguments for `perform(*args)`. A job read without its Hash never hands its `args`
/// Array to Ruby code (`perform` gets them spread), so up to [`INLINE_ARGS`] of them are kept here,
/// on the stack of the frames that run the job (where the collector's scan finds them), and no
/// Array is made: one object fewer a job for the collector to sweep.
pub enum Args {
    Inline {
        len: usize,
        items: [VALUE; INLINE_ARGS],
    },
    Array(magnus::RArray),
}

impl Args {
    /// The count and first of the arguments, for a call made at once: nothing may run in between
    /// that could change an Array's contents.
    pub fn argv(&self) -> (usize, *const VALUE) {
        match self {
            Args::Inline { len, items } => (*len, items.as_ptr()),
            Args::Array(array) => {
                // SAFETY: read for a call made at once (above).
                let items = unsafe { array.as_slice() };
                (items.len(), items.as_ptr().cast())
            }
        }
    }

    /// The arguments as an Array (the spec helper's view).
    fn to_array(&self, ruby: &Ruby) -> magnus::RArray {
        match self {
            Args::Inline { len, items } => {
                // SAFETY: VALUEs built for this job, held by `items` on the caller's stack.
                ruby.ary_from_iter(items[..*len].iter().map(|&v| unsafe { Value::from_raw(v) }))
            }
            Args::Array(array) => *array,
        }
    }
}

impl Lean {
    /// The class name in `raw` (the JSON this was read from): a string written without escapes.
    pub fn class_name<'r>(&self, raw: &'r [u8]) -> Option<&'r [u8]> {
        let written = raw.get(self.class.clone()?)?;
        let name = written.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        (!name.contains(&b'\\')).then_some(name)
    }
}

/// The job's [`Lean`] reading from `raw` and its [`Outline`]; `None` where a value declines to be
/// read alone (which a value the outline's reading accepted does not).
pub fn lean(ruby: &Ruby, raw: &[u8], outline: &Outline) -> Option<Lean> {
    let mut builder = RubyBuild::new(ruby);
    let args = match &outline.args {
        Some(at) => read_args(raw.get(at.clone())?, &mut builder)?,
        None => None,
    };
    let read: [(&[u8], &Option<std::ops::Range<usize>>); 3] = [
        (b"jid", &outline.jid),
        (b"bid", &outline.bid),
        (b"idempotency_key", &outline.idempotency_key),
    ];
    for (key, at) in read {
        if let Some(at) = at {
            // The value of a key of the outermost object: at depth 1, as it was in the whole.
            let value = plain_json::parse_at(raw.get(at.clone())?, 1, &mut builder)?;
            // Held by the `Top` from here on (on this frame's stack, then its caller's, where the
            // collector's scan finds it), as a Hash's pairs are held before they go in.
            builder.note_top(key, value);
        }
    }
    builder.top.marks = outline.marks;
    Some(Lean {
        top: builder.top,
        args,
        class: outline.class.clone(),
    })
}

/// The `args` value `written` holds: `Some(None)` when it is no Array, `None` when it declines.
fn read_args(written: &[u8], builder: &mut RubyBuild) -> Option<Option<Args>> {
    if written.first() != Some(&b'[') {
        // Built all the same, as the Hash would hold it (no job of this shape runs here).
        let value = plain_json::parse_at(written, 1, builder)?;
        builder.note_top(b"args", value);
        return Some(None);
    }
    let mut spread = Spread {
        inner: builder,
        outer: Outer::Unopened,
        len: 0,
        items: [0; INLINE_ARGS],
    };
    plain_json::parse_at(written, 1, &mut spread)?;
    Some(Some(match spread.outer {
        // SAFETY: the Array this reading made.
        Outer::Spilled(array) => Args::Array(magnus::RArray::from_value(unsafe {
            Value::from_raw(array)
        })?),
        _ => Args::Inline {
            len: spread.len,
            items: spread.items,
        },
    }))
}

/// The state of the outermost Array of a [`Spread`] reading.
enum Outer {
    Unopened,
    /// Its items go to `items`; the reader holds [`SPREAD`] for it.
    Inline,
    /// More than fit inline: they went into this Array.
    Spilled(VALUE),
}

/// The reader's handle on the outermost Array while its items are kept inline (`Qundef`, which no
/// value the reader builds is).
const SPREAD: VALUE = rb_sys::Qundef as VALUE;

/// Reads an `args` Array keeping its items inline, as [`RubyBuild`] builds everything else. The
/// reader opens the outermost Array before anything in it, so the first `array` is that one.
struct Spread<'b> {
    inner: &'b mut RubyBuild,
    outer: Outer,
    len: usize,
    items: [VALUE; INLINE_ARGS],
}

impl Build for Spread<'_> {
    type Value = VALUE;

    fn null(&mut self) -> VALUE {
        self.inner.null()
    }

    fn boolean(&mut self, value: bool) -> VALUE {
        self.inner.boolean(value)
    }

    fn integer(&mut self, value: i64) -> VALUE {
        self.inner.integer(value)
    }

    fn float(&mut self, value: f64) -> VALUE {
        self.inner.float(value)
    }

    fn string(&mut self, value: &[u8]) -> VALUE {
        self.inner.string(value)
    }

    fn array(&mut self) -> VALUE {
        if let Outer::Unopened = self.outer {
            self.outer = Outer::Inline;
            return SPREAD;
        }
        self.inner.array()
    }

    fn push(&mut self, array: VALUE, item: VALUE) {
        if array != SPREAD {
            return self.inner.push(array, item);
        }
        match self.outer {
            Outer::Inline if self.len < INLINE_ARGS => {
                self.items[self.len] = item;
                self.len += 1;
            }
            Outer::Inline => {
                let spilled = self.inner.array();
                for &held in &self.items[..self.len] {
                    self.inner.push(spilled, held);
                }
                self.inner.push(spilled, item);
                self.outer = Outer::Spilled(spilled);
            }
            Outer::Spilled(spilled) => self.inner.push(spilled, item),
            Outer::Unopened => {}
        }
    }

    fn object(&mut self, depth: usize) -> VALUE {
        self.inner.object(depth)
    }

    fn insert(&mut self, object: VALUE, key: &[u8], value: VALUE, depth: usize) {
        self.inner.insert(object, key, value, depth)
    }

    fn close(&mut self, object: VALUE, depth: usize) {
        self.inner.close(object, depth)
    }
}

struct RubyBuild {
    /// UTF-8's encoding index, in place in a String's flags.
    utf8: VALUE,
    /// The outermost object's pairs, key and value, not inserted yet: they go in together
    /// (`rb_hash_bulk_insert`) when it closes or this is full. The builder lives on `build`'s
    /// frame, where the collector's scan of the stack finds them meanwhile.
    pending: [VALUE; 2 * PENDING_PAIRS],
    pending_len: usize,
    nil: VALUE,
    yes: VALUE,
    no: VALUE,
    top: Top,
}

impl Build for RubyBuild {
    type Value = VALUE;

    fn null(&mut self) -> VALUE {
        self.nil
    }

    fn boolean(&mut self, value: bool) -> VALUE {
        if value {
            self.yes
        } else {
            self.no
        }
    }

    fn integer(&mut self, value: i64) -> VALUE {
        // SAFETY: allocates a Bignum at most; does not raise.
        unsafe { rb_sys::rb_ll2inum(value) }
    }

    fn float(&mut self, value: f64) -> VALUE {
        // SAFETY: a flonum, or a heap Float for extreme exponents; does not raise.
        unsafe { rb_sys::rb_float_new(value) }
    }

    fn string(&mut self, value: &[u8]) -> VALUE {
        // The String `rb_utf8_str_new` makes, with its code range known: the reader hands over
        // valid UTF-8, so the String is 7-bit when every byte is ASCII and valid otherwise, which is
        // what Ruby would find when it first scans it (a String's code range is a cache of that
        // scan). The flags are set as the headers' inline `RB_ENCODING_SET_INLINED` and
        // `RB_ENC_CODERANGE_SET` set them, on a String no one else holds yet: `rb_utf8_str_new`
        // would look the encoding up and check it for every String.
        let range = if value.is_ascii() {
            CODERANGE_7BIT
        } else {
            CODERANGE_VALID
        };
        // SAFETY: a new binary String (encoding index 0, code range unknown), the bytes copied; its
        // flags are changed before any other code sees it.
        unsafe {
            let string = rb_sys::rb_str_new(value.as_ptr().cast(), value.len() as c_long);
            let basic = string as *mut rb_sys::RBasic;
            (*basic).flags =
                ((*basic).flags & !(ENCODING_MASK | CODERANGE_MASK)) | self.utf8 | range;
            string
        }
    }

    fn array(&mut self) -> VALUE {
        // SAFETY: a new empty Array.
        unsafe { rb_sys::rb_ary_new() }
    }

    fn push(&mut self, array: VALUE, item: VALUE) {
        // SAFETY: `array` is an unfrozen Array this builder made.
        unsafe {
            rb_sys::rb_ary_push(array, item);
        }
    }

    fn object(&mut self, _depth: usize) -> VALUE {
        // SAFETY: a new empty Hash.
        unsafe { rb_sys::rb_hash_new() }
    }

    fn insert(&mut self, object: VALUE, key: &[u8], value: VALUE, depth: usize) {
        if depth != 1 {
            // SAFETY: `object` is an unfrozen Hash this builder made; the key is a frozen String.
            unsafe {
                rb_sys::rb_hash_aset(object, interned(key), value);
            }
            return;
        }
        if self.pending_len == self.pending.len() {
            self.close(object, depth);
        }
        self.pending[self.pending_len] = interned(key);
        self.pending[self.pending_len + 1] = value;
        self.pending_len += 2;
        self.note_top(key, value);
    }

    fn close(&mut self, object: VALUE, depth: usize) {
        if depth != 1 || self.pending_len == 0 {
            return;
        }
        // SAFETY: `object` is the unfrozen Hash this builder made for the outermost object; the
        // pairs are frozen String keys and values this builder made. Inserted in order, each as
        // `Hash#[]=` would (a repeated key keeps its place and takes the later value), without the
        // per-call checks `rb_hash_aset` makes of a Hash and key that cannot need them.
        unsafe {
            rb_sys::rb_hash_bulk_insert(self.pending_len as c_long, self.pending.as_ptr(), object);
        }
        self.pending_len = 0;
    }
}

/// Pairs of the outermost object held back at most (as many as Ruby keeps in a Hash's small table).
const PENDING_PAIRS: usize = 8;

const ENCODING_MASK: VALUE = rb_sys::ruby_encoding_consts::RUBY_ENCODING_MASK as VALUE;
const ENCODING_SHIFT: VALUE = rb_sys::ruby_encoding_consts::RUBY_ENCODING_SHIFT as VALUE;
const CODERANGE_MASK: VALUE = rb_sys::ruby_coderange_type::RUBY_ENC_CODERANGE_MASK as VALUE;
const CODERANGE_7BIT: VALUE = rb_sys::ruby_coderange_type::RUBY_ENC_CODERANGE_7BIT as VALUE;
const CODERANGE_VALID: VALUE = rb_sys::ruby_coderange_type::RUBY_ENC_CODERANGE_VALID as VALUE;

/// UTF-8's encoding index where a String's flags hold it.
fn utf8_flags() -> VALUE {
    static FLAGS: OnceLock<VALUE> = OnceLock::new();
    // SAFETY: reads Ruby's fixed index of UTF-8 (below the inline maximum).
    *FLAGS.get_or_init(|| (unsafe { rb_sys::rb_utf8_encindex() } as VALUE) << ENCODING_SHIFT)
}

/// The key `Hash#[]=` stores for the gem's String: the interned frozen String of the same text
/// (the same object, where one exists already).
fn interned(key: &[u8]) -> VALUE {
    if let Some(at) = known_key(key) {
        return KNOWN.get_or_init(intern_known)[at];
    }
    // SAFETY: valid UTF-8 bytes, copied if new.
    unsafe { intern(key) }
}

/// # Safety
/// With the GVL; `key` valid UTF-8.
unsafe fn intern(key: &[u8]) -> VALUE {
    rb_sys::rb_enc_interned_str(
        key.as_ptr().cast(),
        key.len() as c_long,
        rb_sys::rb_utf8_encoding(),
    )
}

/// Keys that Sidekiq, ActiveJob and GitLab write into most jobs, interned once and kept for the
/// life of the process (Ruby would collect an interned String no one holds), so that building a job
/// does not look each of them up in Ruby's table of interned Strings. The order is `known_key`'s
/// (`spec/api/native_job_hash_spec.rb` builds a job holding every one).
const KNOWN_KEYS: [&str; 24] = [
    "class",
    "args",
    "retry",
    "queue",
    "jid",
    "created_at",
    "enqueued_at",
    "bid",
    "wrapped",
    "retry_count",
    "retried_at",
    "failed_at",
    "error_message",
    "error_class",
    "backtrace",
    "tags",
    "at",
    "job_class",
    "job_id",
    "provider_job_id",
    "queue_name",
    "arguments",
    "executions",
    "locale",
];

fn known_key(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"class" => 0,
        b"args" => 1,
        b"retry" => 2,
        b"queue" => 3,
        b"jid" => 4,
        b"created_at" => 5,
        b"enqueued_at" => 6,
        b"bid" => 7,
        b"wrapped" => 8,
        b"retry_count" => 9,
        b"retried_at" => 10,
        b"failed_at" => 11,
        b"error_message" => 12,
        b"error_class" => 13,
        b"backtrace" => 14,
        b"tags" => 15,
        b"at" => 16,
        b"job_class" => 17,
        b"job_id" => 18,
        b"provider_job_id" => 19,
        b"queue_name" => 20,
        b"arguments" => 21,
        b"executions" => 22,
        b"locale" => 23,
        _ => return None,
    })
}

/// Interned VALUEs of [`KNOWN_KEYS`], made on the first job (a Ruby thread with the GVL).
static KNOWN: OnceLock<Vec<VALUE>> = OnceLock::new();

fn intern_known() -> Vec<VALUE> {
    KNOWN_KEYS
        .iter()
        .map(|key| {
            // SAFETY: called with the GVL (building a job); the String is marked for ever, so the
            // VALUE stays valid and stays the interned String of its text.
            unsafe {
                let value = intern(key.as_bytes());
                rb_sys::rb_gc_register_mark_object(value);
                value
            }
        })
        .collect()
}

impl RubyBuild {
    fn new(ruby: &Ruby) -> RubyBuild {
        let nil = ruby.qnil().as_value();
        RubyBuild {
            utf8: utf8_flags(),
            pending: [0; 2 * PENDING_PAIRS],
            pending_len: 0,
            nil: nil.as_raw(),
            yes: ruby.qtrue().as_value().as_raw(),
            no: ruby.qfalse().as_value().as_raw(),
            top: Top {
                class: nil,
                jid: nil,
                args: nil,
                idempotency_key: false,
                key: nil,
                bid: nil,
                marks: Marks::default(),
            },
        }
    }

    fn note_top(&mut self, key: &[u8], value: VALUE) {
        // SAFETY: a VALUE this builder just made or one of the special constants.
        let as_value = || unsafe { Value::from_raw(value) };
        match key {
            b"class" => self.top.class = as_value(),
            b"jid" => self.top.jid = as_value(),
            b"args" => self.top.args = as_value(),
            b"idempotency_key" => {
                self.top.idempotency_key = value != self.nil && value != self.no;
                self.top.key = as_value();
            }
            b"bid" => self.top.bid = as_value(),
            _ => self.top.marks.note(key),
        }
    }
}

/// `JobQueue::Native.job_hash(json)`: the Hash a server builds from a job's JSON, or nil where it
/// leaves the JSON to `JSON.parse` (or it is not an object). For the specs that compare the two.
fn job_hash(ruby: &Ruby, json: magnus::RString) -> Option<Value> {
    // SAFETY: the bytes are read before any Ruby object is made; a job's JSON is not changed
    // while it is read (no Ruby code runs).
    let raw = unsafe { json.as_slice() }.to_vec();
    build(ruby, &raw).map(|(hash, _)| hash)
}

/// `JobQueue::Native.job_lean(json)`: what a server reads of a job it runs itself without building
/// its Hash ([`lean`]), as a Hash of the [`Top`] fields (`class` the name, or nil where it is not a
/// plain string), or nil where it declines the JSON. For the specs that compare it with `JSON.parse`.
fn job_lean(ruby: &Ruby, json: magnus::RString) -> Result<Option<magnus::RHash>, magnus::Error> {
    // SAFETY: as in `job_hash`.
    let raw = unsafe { json.as_slice() }.to_vec();
    let Some(lean) = Outline::of(&raw).and_then(|outline| lean(ruby, &raw, &outline)) else {
        return Ok(None);
    };
    let top = lean.top;
    let args = lean.args.as_ref().map(|args| args.to_array(ruby));
    let out = ruby.hash_new();
    let class = lean
        .class_name(&raw)
        .and_then(|name| std::str::from_utf8(name).ok());
    out.aset("class", class.map(|name| ruby.str_new(name)))?;
    for (name, value) in [
        ("jid", top.jid),
        ("args", args.map_or(top.args, |args| args.as_value())),
        ("bid", top.bid),
        ("key", top.key),
    ] {
        out.aset(name, value)?;
    }
    for (name, flag) in [
        ("idempotency_key", top.idempotency_key),
        ("duplicate_of", top.marks.duplicate_of),
        ("wal_locations", top.marks.wal_locations),
        ("expires_at", top.marks.expires_at),
        ("meta", top.marks.meta),
        ("wrapped", top.marks.wrapped),
    ] {
        out.aset(name, flag)?;
    }
    Ok(Some(out))
}

pub fn define(native: &magnus::RModule) -> Result<(), magnus::Error> {
    native.define_module_function("job_hash", magnus::function!(job_hash, 1))?;
    native.define_module_function("job_lean", magnus::function!(job_lean, 1))
}
