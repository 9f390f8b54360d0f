//! The command layer over the smallest possible store: a `HashMap` and a fixed environment. What
//! a third consumer (an embedded store, a Valkey module) implements, and a check that the
//! handlers depend on nothing else: replies, errors, RESP3 shapes, propagation of auto-creates
//! and the memory budget all come out of `sift_commands` alone.

use std::collections::HashMap;

use sift::compat::redisbloom::{BloomChain, CuckooFilter};
use sift_commands::{lookup, run, BloomDefaults, CuckooDefaults, Env, FilterStore, Frame, Read, Slot, Write};

enum Value {
    Bloom(BloomChain),
    Cuckoo(CuckooFilter),
    Text,
}

#[derive(Default)]
struct MapStore(HashMap<Vec<u8>, Value>);

impl FilterStore for MapStore {
    fn lookup(&mut self, key: &[u8]) -> Read<'_> {
        match self.0.get(key) {
            None => Slot::Missing,
            Some(Value::Bloom(b)) => Slot::Bloom(b),
            Some(Value::Cuckoo(c)) => Slot::Cuckoo(c),
            Some(Value::Text) => Slot::Other,
        }
    }
    fn lookup_mut(&mut self, key: &[u8]) -> Write<'_> {
        match self.0.get_mut(key) {
            None => Slot::Missing,
            Some(Value::Bloom(b)) => Slot::Bloom(b),
            Some(Value::Cuckoo(c)) => Slot::Cuckoo(c),
            Some(Value::Text) => Slot::Other,
        }
    }
    fn create_bloom(&mut self, key: &[u8], chain: BloomChain) -> &mut BloomChain {
        self.0.insert(key.to_vec(), Value::Bloom(chain));
        match self.0.get_mut(key) {
            Some(Value::Bloom(b)) => b,
            _ => unreachable!(),
        }
    }
    fn create_cuckoo(&mut self, key: &[u8], filter: CuckooFilter) -> &mut CuckooFilter {
        self.0.insert(key.to_vec(), Value::Cuckoo(filter));
        match self.0.get_mut(key) {
            Some(Value::Cuckoo(c)) => c,
            _ => unreachable!(),
        }
    }
}

struct FixedEnv {
    protocol: u8,
    budget: u64,
    propagated: Option<Vec<Vec<Vec<u8>>>>,
}

impl Env for FixedEnv {
    fn protocol(&self) -> u8 {
        self.protocol
    }
    fn bloom_defaults(&self) -> BloomDefaults {
        BloomDefaults::default()
    }
    fn cuckoo_defaults(&self) -> CuckooDefaults {
        CuckooDefaults::default()
    }
    fn memory_budget(&mut self) -> u64 {
        self.budget
    }
    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        self.propagated = Some(commands);
    }
}

fn exec(store: &mut MapStore, env: &mut FixedEnv, args: &[&str]) -> Frame {
    let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let (i, _) = lookup(argv[0]).expect("a BF/CF command");
    env.propagated = None;
    run(i, store, env, &argv)
}

#[test]
fn commands_run_over_a_hash_map() {
    let mut store = MapStore::default();
    let mut env = FixedEnv { protocol: 2, budget: 1 << 20, propagated: None };
    assert_eq!(exec(&mut store, &mut env, &["BF.ADD", "b", "x"]), Frame::Boolean(true));
    // The auto-create is propagated as the header of the chain it built, then the command.
    let p = env.propagated.take().expect("propagation of an auto-create");
    assert_eq!(p.len(), 2);
    assert_eq!((&p[0][0][..], &p[0][2][..]), (&b"BF.LOADCHUNK"[..], &b"1"[..]));
    assert_eq!(p[1], vec![b"BF.ADD".to_vec(), b"b".to_vec(), b"x".to_vec()]);
    assert_eq!(exec(&mut store, &mut env, &["BF.ADD", "b", "x"]), Frame::Boolean(false));
    assert!(env.propagated.is_none(), "an existing key is propagated as received");
    assert_eq!(
        exec(&mut store, &mut env, &["bf.add", "b"]),
        Frame::error("ERR wrong number of arguments for 'bf.add' command")
    );
    store.0.insert(b"s".to_vec(), Value::Text);
    assert_eq!(
        exec(&mut store, &mut env, &["CF.ADD", "s", "x"]),
        Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(exec(&mut store, &mut env, &["CF.DEL", "s", "x"]), Frame::error("Not found"));
    // RESP2 / RESP3 shapes that are not the mechanical downgrade.
    assert_eq!(
        exec(&mut store, &mut env, &["BF.INFO", "b", "CAPACITY"]),
        Frame::Array(vec![Frame::Integer(100)])
    );
    env.protocol = 3;
    assert_eq!(
        exec(&mut store, &mut env, &["BF.INFO", "b", "CAPACITY"]),
        Frame::Map(vec![(Frame::Simple("Capacity".into()), Frame::Integer(100))])
    );
    // The memory budget bounds creation.
    env.budget = 1000;
    assert_eq!(
        exec(&mut store, &mut env, &["CF.RESERVE", "big", "100000"]),
        Frame::error("ERR Insufficient memory to create filter")
    );
    assert!(!store.0.contains_key(&b"big"[..]));
}
