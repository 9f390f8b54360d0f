//! The command layer over the smallest possible store: a `HashMap` and a fixed environment. What
//! a third consumer (an embedded store, a Valkey module) implements, and a check that the
//! handlers depend on nothing else: replies, errors, RESP3 shapes, propagation of auto-creates
//! and the memory budget all come out of `sift_commands` alone.

use std::collections::HashMap;

use sift_commands::{lookup, run, Data, Defaults, Env, Frame, Held, Store};

enum Value {
    Data(Box<dyn Data>),
    Text,
}

#[derive(Default)]
struct MapStore(HashMap<Vec<u8>, Value>);

impl Store for MapStore {
    fn read(&mut self, key: &[u8]) -> Held<&dyn Data> {
        match self.0.get(key) {
            None => Held::Missing,
            Some(Value::Data(d)) => Held::Data(&**d),
            Some(Value::Text) => Held::Other,
        }
    }
    fn write(&mut self, key: &[u8]) -> Held<&mut dyn Data> {
        match self.0.get_mut(key) {
            None => Held::Missing,
            Some(Value::Data(d)) => Held::Data(&mut **d),
            Some(Value::Text) => Held::Other,
        }
    }
    fn read_many<'s>(&'s mut self, keys: &[&[u8]]) -> Vec<Held<&'s dyn Data>> {
        let map = &self.0;
        keys.iter()
            .map(|k| match map.get(*k) {
                None => Held::Missing,
                Some(Value::Data(d)) => Held::Data(&**d),
                Some(Value::Text) => Held::Other,
            })
            .collect()
    }
    fn set(&mut self, key: &[u8], value: Box<dyn Data>) -> &mut dyn Data {
        self.0.insert(key.to_vec(), Value::Data(value));
        match self.0.get_mut(key) {
            Some(Value::Data(d)) => &mut **d,
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
    fn defaults(&self) -> Defaults {
        Defaults::default()
    }
    fn memory_budget(&mut self) -> u64 {
        self.budget
    }
    fn now_ms(&self) -> u64 {
        1_700_000_000_000
    }
    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        self.propagated = Some(commands);
    }
}

fn exec(store: &mut MapStore, env: &mut FixedEnv, args: &[&str]) -> Frame {
    let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let cmd = lookup(argv[0]).expect("a BF/CF command");
    env.propagated = None;
    run(cmd, store, env, &argv)
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
