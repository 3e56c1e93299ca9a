//! Fields of the `jq:metrics` hash: `<kind>:<queue length>:<queue>:<class>`.
//!
//! Kinds: `p` processed, `f` failed, `s` the sum of durations (seconds, a float), `d` dropped by
//! deduplication, `x` expired (dropped unrun past `expires_at`), and `b<le>` one histogram bucket — the jobs whose duration was at most `le` and
//! above the previous bound (`b+Inf` for the rest), *not* cumulative, so every process adds to it
//! alone. A bucket is named by its bound, not its index, so a version with other bounds adds new
//! fields instead of miscounting old ones. The queue is length-prefixed so neither a queue nor a
//! class name can make a field ambiguous (both may hold `:`); the dedup script builds the same shape.

/// What a field counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Processed,
    Failed,
    Sum,
    Dropped,
    Expired,
    /// Upper bound of a bucket (`f64::INFINITY` for `+Inf`).
    Bucket(f64),
}

/// The field for `kind` of `class` on `queue`.
pub fn name(kind: Kind, queue: &str, class: &str) -> String {
    let tag = match kind {
        Kind::Processed => "p".to_owned(),
        Kind::Failed => "f".to_owned(),
        Kind::Sum => "s".to_owned(),
        Kind::Dropped => "d".to_owned(),
        Kind::Expired => "x".to_owned(),
        Kind::Bucket(le) if le.is_infinite() => "b+Inf".to_owned(),
        Kind::Bucket(le) => format!("b{le}"),
    };
    format!("{tag}:{}:{queue}:{class}", queue.len())
}

/// A field read back: `(kind, queue, class)`; `None` for anything else (ignored by a scrape).
pub fn parse(field: &str) -> Option<(Kind, &str, &str)> {
    let (tag, rest) = field.split_once(':')?;
    let kind = match tag {
        "p" => Kind::Processed,
        "f" => Kind::Failed,
        "s" => Kind::Sum,
        "d" => Kind::Dropped,
        "x" => Kind::Expired,
        "b+Inf" => Kind::Bucket(f64::INFINITY),
        bucket => {
            let le: f64 = bucket.strip_prefix('b')?.parse().ok()?;
            if !le.is_finite() {
                return None;
            }
            Kind::Bucket(le)
        }
    };
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    let queue = rest.get(..len)?;
    let class = rest.get(len..)?.strip_prefix(':')?;
    Some((kind, queue, class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_with_colons_in_names() {
        for kind in [
            Kind::Processed,
            Kind::Failed,
            Kind::Sum,
            Kind::Dropped,
            Kind::Expired,
            Kind::Bucket(0.005),
            Kind::Bucket(300.0),
            Kind::Bucket(f64::INFINITY),
        ] {
            let f = name(kind, "a:b", "Mod::Klass");
            assert_eq!(parse(&f), Some((kind, "a:b", "Mod::Klass")), "{f}");
        }
        assert_eq!(name(Kind::Bucket(1.0), "q", "C"), "b1:1:q:C");
        assert_eq!(name(Kind::Dropped, "default", "W"), "d:7:default:W");
        assert_eq!(name(Kind::Expired, "default", "W"), "x:7:default:W");
    }

    #[test]
    fn foreign_fields_are_ignored() {
        assert_eq!(parse("z:1:q:C"), None);
        assert_eq!(parse("p:9:q:C"), None);
        assert_eq!(parse("bNaN:1:q:C"), None);
        assert_eq!(parse("p:1:qC"), None);
    }
}
