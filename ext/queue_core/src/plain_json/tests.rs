//! The reader against `serde_json` on what it accepts, and on what it must decline.

use serde_json::{json, Map, Value};

use super::{parse, plain_byte, plain_run, Build, MAX_NESTING};

/// Builds `serde_json` values in an arena (the trait's values are `Copy` handles).
#[derive(Default)]
struct Arena {
    nodes: Vec<Value>,
    top_keys: Vec<String>,
}

impl Arena {
    fn add(&mut self, value: Value) -> usize {
        self.nodes.push(value);
        self.nodes.len() - 1
    }

    fn take(&mut self, at: usize) -> Value {
        std::mem::take(&mut self.nodes[at])
    }
}

impl Build for Arena {
    type Value = usize;

    fn null(&mut self) -> usize {
        self.add(Value::Null)
    }

    fn boolean(&mut self, value: bool) -> usize {
        self.add(Value::Bool(value))
    }

    fn integer(&mut self, value: i64) -> usize {
        self.add(json!(value))
    }

    fn float(&mut self, value: f64) -> usize {
        self.add(json!(value))
    }

    fn string(&mut self, value: &[u8]) -> usize {
        let text = std::str::from_utf8(value).expect("the reader hands over UTF-8");
        self.add(Value::String(text.to_owned()))
    }

    fn array(&mut self) -> usize {
        self.add(Value::Array(Vec::new()))
    }

    fn push(&mut self, array: usize, item: usize) {
        let item = self.take(item);
        self.nodes[array]
            .as_array_mut()
            .expect("an array")
            .push(item);
    }

    fn object(&mut self, _depth: usize) -> usize {
        self.add(Value::Object(Map::new()))
    }

    fn insert(&mut self, object: usize, key: &[u8], value: usize, depth: usize) {
        let key = std::str::from_utf8(key).expect("UTF-8 key").to_owned();
        if depth == 1 {
            self.top_keys.push(key.clone());
        }
        let value = self.take(value);
        self.nodes[object]
            .as_object_mut()
            .expect("an object")
            .insert(key, value);
    }
}

fn read(raw: &str) -> Option<Value> {
    let mut arena = Arena::default();
    let at = parse(raw.as_bytes(), &mut arena)?;
    Some(arena.take(at))
}

#[test]
fn a_sidekiq_job_reads_as_serde_json_reads_it() {
    let raw = r#"{"class":"HardWorker","args":[1,"two",{"three":[3.5,null,true,false]}],"retry":true,"queue":"default","jid":"0123456789abcdef01234567","created_at":1764294000.1234567,"enqueued_at":1764294000.123}"#;
    let expected: Value = serde_json::from_str(raw).expect("valid JSON");
    assert_eq!(read(raw), Some(expected));
}

#[test]
fn whitespace_escapes_and_unicode_text() {
    let raw = " {\n\t\"a\" : [ 1 , -2 , 0 , -0 ] ,\r\n \"b\\n\\\"q\\\"\" : \"x\\\\y\\/z\\b\\f\\n\\r\\t\" , \"ü\" : \"日本\" } ";
    let expected = json!({"a": [1, -2, 0, 0], "b\n\"q\"": "x\\y/z\u{8}\u{c}\n\r\t", "ü": "日本"});
    assert_eq!(read(raw), Some(expected));
}

#[test]
fn any_value_at_the_top_and_empty_containers() {
    assert_eq!(read("[]"), Some(json!([])));
    assert_eq!(read("{}"), Some(json!({})));
    assert_eq!(read("\"s\""), Some(json!("s")));
    assert_eq!(read("12"), Some(json!(12)));
    assert_eq!(read("null"), Some(Value::Null));
    assert_eq!(read(" [ [ ] , { } ] "), Some(json!([[], {}])));
}

#[test]
fn duplicate_keys_reach_the_builder_in_order_and_the_last_wins() {
    let mut arena = Arena::default();
    let at = parse(br#"{"a":1,"b":2,"a":3}"#, &mut arena).expect("read");
    assert_eq!(arena.top_keys, ["a", "b", "a"]);
    assert_eq!(arena.take(at), json!({"a": 3, "b": 2}));
}

#[test]
fn only_the_outermost_keys_are_depth_one() {
    let mut arena = Arena::default();
    parse(
        br#"{"args":[{"class":"Nested"}],"class":"Top"}"#,
        &mut arena,
    )
    .expect("read");
    assert_eq!(arena.top_keys, ["args", "class"]);
}

#[test]
fn integers_to_the_edges_of_i64() {
    assert_eq!(read("9223372036854775807"), Some(json!(i64::MAX)));
    assert_eq!(read("-9223372036854775808"), Some(json!(i64::MIN)));
    assert_eq!(
        read("9223372036854775808"),
        None,
        "a Bignum is Ruby's to read"
    );
    assert_eq!(read("-9223372036854775809"), None);
}

#[test]
fn floats_the_gem_reads_alike() {
    for text in [
        "0.1",
        "1.5",
        "-2.25",
        "1e3",
        "1E+3",
        "2.5e-3",
        "1764294000.1234567",
        "0.30000000000000004",
        "1.7976931348623157e308",
        "2.2250738585072014e-308",
        "12345678901234567e1",
        "0.00000000000000000000012345678901234567",
    ] {
        let expected: f64 = text.parse().expect("a float");
        assert_eq!(read(text), Some(json!(expected)), "{text}");
    }
    assert_eq!(read("0.0"), Some(json!(0.0)));
    assert_eq!(read("0e7"), Some(json!(0.0)));
    let negative_zero = read("-0.0").expect("read");
    assert!(negative_zero.as_f64().expect("a float").is_sign_negative());
}

#[test]
fn floats_it_leaves_to_ruby() {
    for text in [
        "1.2345678901234567891",  // 20 significant digits
        "1e400",                  // overflow: the gem warns and gives Infinity
        "1e-400",                 // underflow: a warning and zero
        "4.9e-324",               // subnormal
        "1.50000000000000000000", // trailing zeros count
    ] {
        assert_eq!(read(text), None, "{text}");
    }
}

#[test]
fn what_it_declines() {
    let nested_too_deep = format!(
        "{}{}",
        "[".repeat(MAX_NESTING + 1),
        "]".repeat(MAX_NESTING + 1)
    );
    let nested_at_the_limit = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
    assert!(read(&nested_at_the_limit).is_some());
    for text in [
        "",
        " ",
        "{",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "[01]",
        "[1.]",
        "[.5]",
        "[-]",
        "[1e]",
        "[+1]",
        "[1.2.3]",
        "[NaN]",
        "[Infinity]",
        "[-Infinity]",
        "[tru]",
        "[nul]",
        "[true1]",
        "\"\\u00e9\"",
        "\"\\a\"",
        "\"tab\there\"",
        "\"unterminated",
        "[1] [2]",
        "[1] x",
        "/* c */ [1]",
        "[1 // c\n]",
        "\u{feff}[1]",
        "'single'",
        &nested_too_deep,
    ] {
        assert_eq!(read(text), None, "{text:?}");
    }
    assert_eq!(
        parse(b"\"\xff\"", &mut Arena::default()),
        None,
        "invalid UTF-8"
    );
    assert_eq!(parse(b"[\"\xc3\"]", &mut Arena::default()), None);
}

#[test]
fn escaped_keys_keep_their_text_while_the_value_reuses_the_buffer() {
    let raw = r#"{"k\"1":"v\"1","k\\2":["x\ty"]}"#;
    assert_eq!(read(raw), Some(json!({"k\"1": "v\"1", "k\\2": ["x\ty"]})));
}

/// An arena that builds only the outermost `a` and notes where every other outermost value lies.
#[derive(Default)]
struct Picky {
    arena: Arena,
    skipped: Vec<(String, std::ops::Range<usize>)>,
}

impl Build for Picky {
    type Value = usize;
    fn null(&mut self) -> usize {
        self.arena.null()
    }
    fn boolean(&mut self, value: bool) -> usize {
        self.arena.boolean(value)
    }
    fn integer(&mut self, value: i64) -> usize {
        self.arena.integer(value)
    }
    fn float(&mut self, value: f64) -> usize {
        self.arena.float(value)
    }
    fn string(&mut self, value: &[u8]) -> usize {
        self.arena.string(value)
    }
    fn array(&mut self) -> usize {
        self.arena.array()
    }
    fn push(&mut self, array: usize, item: usize) {
        self.arena.push(array, item)
    }
    fn object(&mut self, depth: usize) -> usize {
        self.arena.object(depth)
    }
    fn insert(&mut self, object: usize, key: &[u8], value: usize, depth: usize) {
        self.arena.insert(object, key, value, depth)
    }
    fn wants(&mut self, key: &[u8], depth: usize) -> bool {
        depth > 1 || key == b"a"
    }
    fn skipped(&mut self, key: &[u8], at: std::ops::Range<usize>, depth: usize) {
        assert_eq!(depth, 1);
        let key = String::from_utf8(key.to_vec()).expect("UTF-8 key");
        self.skipped.push((key, at));
    }
}

#[test]
fn a_value_not_wanted_is_read_and_checked_but_not_built() {
    let raw = r#"{"b":[1,{"c":"d\"e"}], "a" :{"x":[2.5]},"e":"f" , "g":null}"#;
    let mut picky = Picky::default();
    let at = parse(raw.as_bytes(), &mut picky).expect("read");
    assert_eq!(picky.arena.take(at), json!({"a": {"x": [2.5]}}));
    let skipped: Vec<(&str, &str)> = picky
        .skipped
        .iter()
        .map(|(key, at)| (key.as_str(), &raw[at.clone()]))
        .collect();
    assert_eq!(
        skipped,
        [("b", r#"[1,{"c":"d\"e"}]"#), ("e", r#""f""#), ("g", "null")]
    );
    // Whatever the reader declines, it declines unbuilt too, and a broken document stays broken.
    for declined in [
        r#"{"b":1e400,"a":1}"#,
        r#"{"b":"\u0041","a":1}"#,
        r#"{"b":[1,],"a":1}"#,
        r#"{"b":12345678901234567890,"a":1}"#,
        r#"{"b":"x","a":1"#,
    ] {
        assert_eq!(
            parse(declined.as_bytes(), &mut Picky::default()),
            None,
            "{declined}"
        );
        assert_eq!(read(declined), None, "{declined}");
    }
}

#[test]
fn a_number_not_built_is_accepted_exactly_where_a_built_one_is() {
    let mut numbers: Vec<String> = [
        "0",
        "-0",
        "0.0",
        "-0.0",
        "1",
        "-1",
        "01",
        "1.",
        ".5",
        "1.5e",
        "1e5",
        "1E-5",
        "-1.5e+5",
        "999999999999999999",
        "-999999999999999999",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "12345678901234567890",
        "1.2345678901234567",
        "1.23456789012345678",
        "0.00000000000000000012345678901234567",
        "1764294000.1234567",
        "1e400",
        "1e-400",
        "4.9e-324",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "1.7976931348623159e308",
    ]
    .iter()
    .map(|n| n.to_string())
    .collect();
    // Tiny decimals without an exponent: normal down to ~2.2e-308, then subnormal (declined).
    for zeros in [290, 297, 298, 299, 300, 305, 306, 307, 308, 320] {
        numbers.push(format!("0.{}1", "0".repeat(zeros)));
        numbers.push(format!("-0.{}123", "0".repeat(zeros)));
        numbers.push(format!("0.{}", "0".repeat(zeros)));
    }
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let digits: String = (0..1 + seed % 22)
            .map(|i| char::from(b'0' + ((seed >> (i % 60)) % 10) as u8))
            .collect();
        let point = (seed >> 8) as usize % (digits.len() + 1);
        let mut number = format!("{}.{}", &digits[..point], &digits[point..]);
        number = number.trim_start_matches('0').to_owned();
        if number.starts_with('.') {
            number.insert(0, '0');
        }
        if number.ends_with('.') {
            number.push('0');
        }
        if seed % 3 == 0 {
            number.push_str(&format!("e{}", (seed >> 20) as i64 % 640 - 320));
        }
        if seed % 5 == 0 {
            number = number.split('.').next().unwrap_or("0").to_owned();
        }
        numbers.push(number);
    }
    for number in numbers {
        let raw = format!(r#"{{"b":{number},"a":1}}"#);
        let built = read(&raw).is_some();
        let skipped = parse(raw.as_bytes(), &mut Picky::default()).is_some();
        assert_eq!(skipped, built, "{number}");
    }
}

#[test]
fn the_plain_run_stops_at_the_first_byte_a_string_cannot_pass_over() {
    // Every byte value at every place of the first two words and the tail, after plain bytes and
    // after bytes that borrow ("\x00", "\x1f") or carry the high bit, against the byte-by-byte rule.
    let fillers: [&[u8]; 4] = [
        b"abcdefghijklmnopqrstuvwx",
        b"\x7f !~#[]{}\x7f !~#[]{}\x7f !~#",
        b"a\x00b\x1fc\x80d\xffefghijklmnopqrs",
        b"\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\",
    ];
    for filler in fillers {
        for len in 0..=filler.len() {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut bytes = filler[..len].to_vec();
                    bytes[at] = byte;
                    let expected = bytes.iter().take_while(|&&b| plain_byte(b)).count();
                    assert_eq!(plain_run(&bytes), expected, "{bytes:?}");
                }
            }
        }
    }
    assert_eq!(plain_run(b""), 0);
}
