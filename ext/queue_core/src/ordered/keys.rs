//! The Lowkiq v1 key layout (WIRE.md §3), spelt exactly as Lowkiq spells it — including the misspelt
//! `all_ids_scored_by_perfrom_in` — so a queue written by Lowkiq is read by us and the reverse, and
//! the keys of our own (shard leases) under `jq:`, where no Lowkiq name can collide with them.
//!
//! The scripts build the per-id and per-shard keys from [`OrderedKeys::prefix`] (an id's payload key
//! is only known once the script reads the id), exactly as Lowkiq's own scripts do. That is why this
//! layout cannot run on Redis Cluster: the keys of one queue share no hash tag, as in Lowkiq.

/// Every key of one ordered queue, under an optional namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedKeys {
    namespace: String,
    queue: String,
    prefix: String,
}

impl OrderedKeys {
    /// `namespace` is used verbatim (`"resque:gitlab:"`, or `""`); `queue` is the queue name (Lowkiq's
    /// default is the worker module's name).
    pub fn new(namespace: &str, queue: &str) -> OrderedKeys {
        OrderedKeys {
            namespace: namespace.to_owned(),
            queue: queue.to_owned(),
            prefix: format!("{namespace}lowkiq:A:v1:{queue}:"),
        }
    }

    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// `<namespace>lowkiq:A:v1:<queue>:`, which every Lowkiq key of the queue starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    /// ZSET id → 0: every queued id.
    pub fn all_ids_lex(&self) -> String {
        self.key("all_ids_lex")
    }

    /// ZSET id → perform_in. Lowkiq's real key name is misspelt; it must stay so.
    pub fn all_ids_scored_by_perform_in(&self) -> String {
        self.key("all_ids_scored_by_perfrom_in")
    }

    /// ZSET id → retry_count (-1 fresh, 0 after the first failure).
    pub fn all_ids_scored_by_retry_count(&self) -> String {
        self.key("all_ids_scored_by_retry_count")
    }

    /// ZSET id → perform_in of one shard: what the shard's owner polls.
    pub fn ids_scored_by_perform_in(&self, shard: u32) -> String {
        self.key(&format!("ids_scored_by_perform_in:{shard}"))
    }

    /// ZSET payload bytes → score, of one queued id.
    pub fn payloads(&self, id: &str) -> String {
        self.key(&format!("payloads:{id}"))
    }

    /// HASH id → last error text of queued ids.
    pub fn errors(&self) -> String {
        self.key("errors")
    }

    pub fn processed(&self) -> String {
        self.key("processed")
    }

    pub fn failed(&self) -> String {
        self.key("failed")
    }

    /// HASH shard → ids in flight.
    pub fn processing_length_by_shard(&self) -> String {
        self.key("processing_length_by_shard")
    }

    pub fn processing_ids_with_perform_in(&self, shard: u32) -> String {
        self.key(&format!("processing:ids_with_perform_in:{shard}"))
    }

    pub fn processing_ids_with_retry_count(&self, shard: u32) -> String {
        self.key(&format!("processing:ids_with_retry_count:{shard}"))
    }

    pub fn processing_errors(&self, shard: u32) -> String {
        self.key(&format!("processing:errors:{shard}"))
    }

    pub fn processing_payloads(&self, id: &str) -> String {
        self.key(&format!("processing:payloads:{id}"))
    }

    pub fn morgue_all_ids_lex(&self) -> String {
        self.key("morgue:all_ids_lex")
    }

    pub fn morgue_all_ids_scored_by_updated_at(&self) -> String {
        self.key("morgue:all_ids_scored_by_updated_at")
    }

    pub fn morgue_payloads(&self, id: &str) -> String {
        self.key(&format!("morgue:payloads:{id}"))
    }

    pub fn morgue_errors(&self) -> String {
        self.key("morgue:errors")
    }

    /// Not Lowkiq's: where a value that should have been a sorted set but was not (bad data) is kept
    /// when its id goes to the morgue — `suffix` is its own key's suffix, as `payloads:<id>`.
    pub fn morgue_invalid(&self, suffix: &str) -> String {
        self.key(&format!("morgue:invalid:{suffix}"))
    }

    /// Ours: HASH shard → identity of the process that holds the shard's lease.
    pub fn leases(&self) -> String {
        format!("{}jq:ordered:{}:leases", self.namespace, self.queue)
    }

    /// Ours: ZSET identity → Redis time of its last lease beat, for the processes that run this
    /// queue's shards. Not `jq:alive`, because not every live process runs every ordered queue: a
    /// shard assigned to a process that never claims it would stall.
    pub fn members(&self) -> String {
        format!("{}jq:ordered:{}:members", self.namespace, self.queue)
    }

    /// The engine's SET of paused queue names (`Keys::paused`), which plain and ordered queues share.
    pub fn paused(&self) -> String {
        crate::keys::Keys::new(&self.namespace).paused()
    }
}

/// The shard of an id: CRC-32 (IEEE) of the id's bytes modulo `shards_count`, as Lowkiq computes it
/// (`Zlib.crc32(id) % shards_count`), so both put an id in the same shard. `shards_count` must be > 0.
pub fn shard_of(id: &str, shards_count: u32) -> u32 {
    crc32fast::hash(id.as_bytes()) % shards_count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_match_zlib_crc32() {
        // Expected values from Python's zlib.crc32, computed independently of this crate.
        assert_eq!(crc32fast::hash(b"123456789"), 3_421_780_262);
        assert_eq!(crc32fast::hash(b"1"), 2_212_294_583);
        assert_eq!(crc32fast::hash("заказ".as_bytes()), 3_381_189_620);
        assert_eq!(shard_of("", 5), 0);
        assert_eq!(shard_of("1", 5), 3);
        assert_eq!(shard_of("1", 24), 23);
        assert_eq!(shard_of("a", 5), 2);
        assert_eq!(shard_of("order-42", 24), 22);
        assert_eq!(shard_of("заказ", 24), 20);
    }

    #[test]
    fn lowkiq_names_exactly() {
        let k = OrderedKeys::new("", "ATestWorker");
        assert_eq!(
            k.all_ids_scored_by_perform_in(),
            "lowkiq:A:v1:ATestWorker:all_ids_scored_by_perfrom_in"
        );
        assert_eq!(
            k.ids_scored_by_perform_in(3),
            "lowkiq:A:v1:ATestWorker:ids_scored_by_perform_in:3"
        );
        assert_eq!(
            k.processing_ids_with_retry_count(0),
            "lowkiq:A:v1:ATestWorker:processing:ids_with_retry_count:0"
        );
        assert_eq!(
            k.morgue_payloads("7"),
            "lowkiq:A:v1:ATestWorker:morgue:payloads:7"
        );
        let ns = OrderedKeys::new("resque:gitlab:", "Q");
        assert_eq!(ns.payloads("1"), "resque:gitlab:lowkiq:A:v1:Q:payloads:1");
        assert_eq!(ns.leases(), "resque:gitlab:jq:ordered:Q:leases");
        assert_eq!(ns.members(), "resque:gitlab:jq:ordered:Q:members");
        assert_eq!(ns.paused(), "resque:gitlab:jq:paused");
    }
}
