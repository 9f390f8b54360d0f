//! The key table's and shards' unit tests.

use super::*;

fn s(v: &str) -> Value {
    Value::String(Bytes::copy_from_slice(v.as_bytes()))
}

#[test]
fn insert_get_remove_and_expiry_index() {
    let db = Db::new();
    let mut l = db.lock_keys([&b"a"[..], b"b"]);
    assert!(l.insert(Bytes::from_static(b"a"), s("1")).is_none());
    assert!(l.insert(Bytes::from_static(b"a"), s("2")).is_some());
    let now = l.now_ms();
    assert!(l.set_expiry(b"a", Some(now + 100_000)));
    assert!(!l.set_expiry(b"b", Some(now)));
    assert!(l.contains(b"a"));
    assert_eq!(l.mutations(), 3);
    drop(l);
    assert_eq!(db.counts(), (1, 1));
    // A deadline in the past: the key is gone on access and from the index.
    let mut l = db.lock_keys([&b"a"[..]]);
    let past = l.now_ms() - 1;
    l.set_expiry(b"a", Some(past));
    assert!(l.get(b"a").is_none());
    drop(l);
    assert_eq!(db.counts(), (0, 0));
}

#[test]
fn active_expire_removes_only_expired() {
    let db = Db::new();
    let mut l = db.lock_all();
    let now = l.now_ms();
    for i in 0..100u32 {
        let k = Bytes::from(format!("k{i}"));
        l.insert(k.clone(), s("v"));
        l.set_expiry(&k, Some(if i % 2 == 0 { now - 1 } else { now + 100_000 }));
    }
    drop(l);
    assert_eq!(db.active_expire(1000), 50);
    assert_eq!(db.counts(), (50, 50));
}

#[test]
fn memory_is_charged_on_every_change() {
    let db = Db::new();
    let (a, b) = (Bytes::from_static(b"a"), Bytes::from_static(b"b"));
    let size = |k: &[u8], v: &str| entry_size(k, &s(v)) as u64;
    let mut l = db.lock_keys([&a[..], &b[..]]);
    l.insert(a.clone(), s("12345"));
    l.insert(b.clone(), s("x"));
    assert_eq!(db.used_memory(), size(b"a", "12345") + size(b"b", "x"));
    l.insert(a.clone(), s("1"));
    assert_eq!(db.used_memory(), size(b"a", "1") + size(b"b", "x"));
    // Changed in place: re-measured when the view is dropped.
    l.get_mut(b"b").unwrap().value = s("a longer value");
    drop(l);
    assert_eq!(db.used_memory(), size(b"a", "1") + size(b"b", "a longer value"));
    let mut l = db.lock_keys([&a[..], &b[..]]);
    l.remove(b"b");
    assert_eq!(db.used_memory(), size(b"a", "1"));
    // An expired key is uncharged when it is found expired, lazily or by the sweep.
    let now = l.now_ms();
    l.set_expiry(b"a", Some(now - 1));
    assert!(!l.contains(b"a"));
    assert_eq!(db.used_memory(), 0);
    l.insert(a.clone(), s("v"));
    l.set_expiry(b"a", Some(now - 1));
    drop(l);
    assert_eq!(db.active_expire(10), 1);
    assert_eq!(db.used_memory(), 0);
    let mut l = db.lock_all();
    for i in 0..100 {
        l.insert(Bytes::from(format!("k{i}")), s("v"));
    }
    assert!(db.used_memory() > 0);
    l.clear();
    assert_eq!(db.used_memory(), 0);
}

/// The order index against std's ordered set, through inserts (new and repeated), removals
/// (present and absent) and range reads, with values drawn from a small range so that
/// leaves fill, pass values to their neighbours, split and merge.
#[test]
fn the_order_index_is_an_ordered_set() {
    use proptest::prelude::*;
    let ops = proptest::collection::vec((any::<bool>(), 0u64..3000), 0..6000);
    proptest::proptest!(ProptestConfig::with_cases(24), |(ops in ops)| {
        let mut order = Order::default();
        let mut model = BTreeSet::new();
        for (i, (add, h)) in ops.into_iter().enumerate() {
            if add {
                order.insert(h);
                model.insert(h);
            } else {
                order.remove(h);
                model.remove(&h);
            }
            if i % 97 == 0 {
                prop_assert!(order.leaves.iter().all(|l| !l.is_empty() && l.len() <= ORDER_LEAF));
                prop_assert!(order.from(h).eq(model.range(h..).copied()));
            }
        }
        prop_assert!(order.from(0).eq(model.iter().copied()));
    });
}

#[test]
fn the_order_index_follows_the_map() {
    let db = Db::new();
    let mut l = db.lock_all();
    for i in 0..500 {
        l.insert(Bytes::from(format!("k{i}")), s("v"));
    }
    l.insert(Bytes::from_static(b"k7"), s("again"));
    l.remove(b"k8");
    let mut all = Vec::new();
    l.for_each_shard(|i, sh| {
        assert_eq!(sh.keys_from(0).count(), sh.len());
        for (h, k) in sh.keys_from(0) {
            assert_eq!(shard_of(k), i);
            assert_eq!(h, key_hash(k));
            all.push(h);
        }
    });
    assert_eq!(all.len(), 499);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "shard after shard, in hash order");
}

/// WATCH's registry: what marks a watcher dirty (changes, the removal of a key that expired
/// while watched, FLUSHALL of an existing key) and what does not (reads, other keys, the
/// removal of a key that had already expired when watched).
#[test]
fn watchers_see_changes_expiry_and_clear() {
    let db = Db::new();
    let (a, b) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let take = |f: &AtomicBool| f.swap(false, Ordering::AcqRel);
    let k = Bytes::from_static(b"k");
    let mut l = db.lock_all();
    assert!(!db.watched());
    assert!(l.watch(&k, 1, &a));
    assert!(!l.watch(&k, 1, &a), "once per client");
    assert!(l.watch(&k, 2, &b));
    assert!(db.watched());
    l.get(b"k");
    l.contains(b"k");
    l.insert(Bytes::from_static(b"other"), s("v"));
    l.remove(b"missing");
    assert!(!take(&a) && !take(&b), "reads and other keys are no change");
    l.insert(k.clone(), s("v"));
    assert!(take(&a) && take(&b));
    assert!(l.get_mut(b"k").is_some());
    assert!(take(&a));
    l.signal_modified(b"k");
    assert!(take(&a));
    // Expires while watched: EXEC's check sees it before anyone removes it; the removal is a
    // change.
    let now = l.now_ms();
    l.set_expiry(b"k", Some(now - 1));
    take(&a);
    assert!(l.watched_key_expired(b"k", 1));
    assert!(!l.contains(b"k"));
    assert!(take(&a));
    // Already expired when watched (client 3): neither its removal nor the check count.
    let c = Arc::new(AtomicBool::new(false));
    l.insert(k.clone(), s("v"));
    l.set_expiry(b"k", Some(now - 1));
    take(&a);
    assert!(l.watch(&k, 3, &c));
    assert!(!l.watched_key_expired(b"k", 3));
    assert!(l.watched_key_expired(b"k", 1));
    assert!(!l.contains(b"k"));
    assert!(!take(&c) && take(&a));
    // ... but a write after the removal does.
    l.insert(k.clone(), s("v"));
    assert!(take(&c));
    // FLUSHALL: a watched key that exists is changed; one that does not exist is not.
    l.clear();
    assert!(take(&a) && take(&c));
    l.clear();
    assert!(!take(&a));
    for client in [1, 2, 3] {
        l.unwatch(b"k", client);
    }
    assert!(!db.watched());
    l.insert(k.clone(), s("v"));
    assert!(!take(&a));
    drop(l);
    // The sweep's removal counts too.
    let mut l = db.lock_all();
    l.watch(&k, 1, &a);
    let now = l.now_ms();
    l.set_expiry(b"k", Some(now - 1));
    take(&a);
    drop(l);
    assert_eq!(db.active_expire(10), 1);
    assert!(take(&a));
}

/// A value of a registered data type is one box behind the same 32 bytes as a string: the
/// per-key cost does not grow with the number of registered types.
#[test]
fn a_value_is_a_string_or_one_box() {
    assert_eq!(std::mem::size_of::<Value>(), 32);
    let v = Value::Data(Box::new(sift::compat::redisbloom::BloomChain::new(100, 0.01, 2, false).unwrap()));
    assert_eq!(v.type_name(), "MBbloom--");
    assert!(v.copy_value().is_none(), "RedisBloom's types refuse COPY");
}

#[test]
#[should_panic(expected = "key not locked")]
fn touching_an_undeclared_key_is_a_bug() {
    let db = Db::new();
    let mut l = db.unlocked();
    l.contains(b"x");
}
