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
    fn delete(&mut self, key: &[u8]) -> bool {
        self.0.remove(key).is_some()
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

fn bulk(f: Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(b) => b.to_vec(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

fn exec_bytes(store: &mut MapStore, env: &mut FixedEnv, args: &[&[u8]]) -> Frame {
    let cmd = lookup(args[0]).expect("a command");
    env.propagated = None;
    run(cmd, store, env, args)
}

/// The SF family over the same store: auto-create propagated as an explicit SF.RESERVE, kinds
/// that cannot delete named in the error, SF.LOAD of a corrupt file changing nothing, and
/// SF.LOADCHUNK swapping the filter in only with its last piece.
#[test]
fn sf_commands_run_over_a_hash_map() {
    let mut store = MapStore::default();
    let mut env = FixedEnv { protocol: 2, budget: 1 << 30, propagated: None };
    assert_eq!(exec(&mut store, &mut env, &["SF.ADD", "a", "x"]), Frame::Boolean(true));
    let p = env.propagated.take().expect("the auto-create is propagated");
    let reserve: Vec<&[u8]> = p[0].iter().map(|a| &a[..]).collect();
    assert_eq!(reserve, [&b"SF.RESERVE"[..], b"a", b"0.01", b"100", b"EXPANSION", b"2"]);
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "a", "x"]), Frame::Boolean(true));
    assert_eq!(
        exec(&mut store, &mut env, &["SF.DEL", "a", "x"]),
        Frame::error(
            "ERR a scalable-bloom filter cannot delete items (KIND counting, cuckoo and quotient can)"
        )
    );
    assert_eq!(exec(&mut store, &mut env, &["SF.DEL", "nokey", "x"]), Frame::error("ERR not found"));
    assert_eq!(
        exec(&mut store, &mut env, &["SF.RESERVE", "c", "0.01", "1000", "KIND", "cuckoo"]),
        Frame::ok()
    );
    assert_eq!(
        exec(&mut store, &mut env, &["SF.MADD", "c", "x", "y"]),
        Frame::Array(vec![Frame::Boolean(true); 2])
    );
    assert_eq!(
        exec(&mut store, &mut env, &["SF.MDEL", "c", "x", "z"]),
        Frame::Array(vec![Frame::Boolean(true), Frame::Boolean(false)])
    );
    assert_eq!(exec(&mut store, &mut env, &["SF.CARD", "c"]), Frame::Integer(1));
    assert_eq!(
        exec(&mut store, &mut env, &["SF.RESERVE", "c", "0.01", "10"]),
        Frame::error("ERR item exists")
    );
    assert_eq!(
        exec(&mut store, &mut env, &["SF.RESERVE", "huge", "0.01", "1000000000000"]),
        Frame::error("ERR Insufficient memory to create filter")
    );
    // SF.INFO answers for a BF key too, with the estimate.
    exec(&mut store, &mut env, &["BF.ADD", "bf", "x"]);
    let Frame::Map(fields) = exec(&mut store, &mut env, &["SF.INFO", "bf"]) else { panic!("a map") };
    assert_eq!(fields[0], (Frame::Simple("Kind".into()), Frame::Bulk("redisbloom-bf".into())));
    assert!(matches!(fields[5].1, Frame::Double(e) if (0.0..1e-6).contains(&e)), "{:?}", fields[5]);
    assert_eq!(
        exec(&mut store, &mut env, &["SF.INFO", "bf", "items"]),
        Frame::Array(vec![Frame::Integer(1)])
    );

    // Dump, corrupt, load: refused, the key unchanged.
    let file = bulk(exec(&mut store, &mut env, &["SF.DUMP", "c"]));
    let mut bad = file.clone();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    exec(&mut store, &mut env, &["SF.ADD", "c", "kept"]);
    let r = exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"c", &bad]);
    assert!(matches!(&r, Frame::Error(e) if e.starts_with("ERR bad sift file")), "{r:?}");
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "c", "kept"]), Frame::Boolean(true));
    assert_eq!(exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"c", &file]), Frame::ok());
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "c", "kept"]), Frame::Boolean(false));
    // A BF file goes into a BF key (and not over a sift-filt one).
    let bf = bulk(exec(&mut store, &mut env, &["SF.DUMP", "bf"]));
    assert!(
        matches!(exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"c", &bf]), Frame::Error(e) if e.starts_with("WRONGTYPE"))
    );
    assert_eq!(exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"bf2", &bf]), Frame::ok());
    assert_eq!(exec(&mut store, &mut env, &["BF.EXISTS", "bf2", "x"]), Frame::Boolean(true));

    // In pieces: the old filter answers until the last piece; a wrong offset changes nothing.
    exec(&mut store, &mut env, &["SF.RESERVE", "p", "0.01", "100"]);
    exec(&mut store, &mut env, &["SF.ADD", "p", "old"]);
    let (a, b) = file.split_at(40);
    let left = (file.len() - 40) as i64;
    assert_eq!(
        exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"p", &iterator(0, a), a]),
        Frame::Integer(left)
    );
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "p", "old"]), Frame::Boolean(true));
    assert!(matches!(
        exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"p", &iterator(41, b), b]),
        Frame::Error(_)
    ));
    assert_eq!(
        exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"p", &iterator(40, b), b]),
        Frame::Integer(0)
    );
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "p", "old"]), Frame::Boolean(false));
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "p", "y"]), Frame::Boolean(true));
    // A corrupt last piece: error, the filter as it was.
    let (a2, b2) = bad.split_at(40);
    exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"p", &iterator(0, a2), a2]);
    assert!(matches!(
        exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"p", &iterator(40, b2), b2]),
        Frame::Error(_)
    ));
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "p", "y"]), Frame::Boolean(true));
}

/// The iterator `SF.LOADCHUNK` takes with a piece starting at byte `start` (BF.SCANDUMP's
/// convention: the piece's end offset plus one).
fn iterator(start: usize, piece: &[u8]) -> Vec<u8> {
    (start + piece.len() + 1).to_string().into_bytes()
}

/// A failed load changes nothing: an `SF.LOADCHUNK` upload into a missing key whose last piece
/// is corrupt leaves no key behind (the first piece created it), and neither does a corrupt
/// `SF.LOAD` or one of bytes that are not a sift file.
#[test]
fn sf_failed_loads_leave_no_key() {
    let mut store = MapStore::default();
    let mut env = FixedEnv { protocol: 2, budget: 1 << 30, propagated: None };
    exec(&mut store, &mut env, &["SF.RESERVE", "src", "0.01", "1000"]);
    exec(&mut store, &mut env, &["SF.ADD", "src", "x"]);
    let file = bulk(exec(&mut store, &mut env, &["SF.DUMP", "src"]));
    let mut bad = file.clone();
    let at = bad.len() - 10;
    bad[at] ^= 1;
    let (a, b) = bad.split_at(40);
    let r = exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"new", &iterator(0, a), a]);
    assert_eq!(r, Frame::Integer((bad.len() - 40) as i64));
    assert!(store.0.contains_key(&b"new"[..]), "the upload in progress is kept with its key");
    let r = exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"new", &iterator(40, b), b]);
    assert!(matches!(&r, Frame::Error(e) if e.starts_with("ERR bad sift file")), "{r:?}");
    assert!(!store.0.contains_key(&b"new"[..]), "a failed upload left its key behind");
    for bytes in [&bad[..], b"not a filter", &file[..file.len() - 1]] {
        let r = exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"new", bytes]);
        assert!(matches!(&r, Frame::Error(e) if e.starts_with("ERR bad sift file")), "{r:?}");
        assert!(!store.0.contains_key(&b"new"[..]));
    }
    // Into a key that serves a filter, the failed upload leaves that filter.
    exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"src", &iterator(0, a), a]);
    exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"src", &iterator(40, b), b]);
    assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "src", "x"]), Frame::Boolean(true));
}

/// `SF.LOAD` takes a Guava filter converted to a sift file (`sift convert --from guava`), and
/// answers as Guava does; Guava's raw `writeTo` bytes get an error that says how to convert them.
#[test]
fn sf_load_serves_a_guava_filter() {
    use sift::compat::guava::GuavaBloom;
    use sift::Persist;
    let mut g = GuavaBloom::new(1000, 0.01).unwrap();
    for i in 0..500 {
        g.put(format!("in-{i}").as_bytes());
    }
    let mut store = MapStore::default();
    let mut env = FixedEnv { protocol: 2, budget: 1 << 30, propagated: None };
    let r = exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"g", &g.write_to()]);
    assert_eq!(r, Frame::error(sift_commands::sf::NOT_A_SIFT_FILE));
    assert!(!store.0.contains_key(&b"g"[..]));
    let file = Persist::to_bytes(&g);
    assert_eq!(exec_bytes(&mut store, &mut env, &[b"SF.LOAD", b"g", &file]), Frame::ok());
    for i in 0..2000 {
        let item = format!("in-{i}");
        let want = Frame::Boolean(g.might_contain(item.as_bytes()));
        assert_eq!(exec(&mut store, &mut env, &["SF.EXISTS", "g", &item]), want, "{item}");
    }
    assert_eq!(exec(&mut store, &mut env, &["SF.ADD", "g", "new"]), Frame::Boolean(true));
    g.put(b"new");
    assert_eq!(bulk(exec(&mut store, &mut env, &["SF.DUMP", "g"])), Persist::to_bytes(&g));
    let Frame::Map(info) = exec(&mut store, &mut env, &["SF.INFO", "g"]) else { panic!("a map") };
    assert_eq!(info[0].1, Frame::Bulk("guava-bloom".into()));
}

/// A filter larger than one 16 MiB piece comes back from `SF.DUMP key <iterator>` in pieces
/// (BF.SCANDUMP's convention), which `SF.LOADCHUNK` loads into another key as the same filter;
/// `SF.DUMP key` refuses to answer it whole.
#[test]
fn sf_dump_iterates_pieces_that_loadchunk_takes() {
    let mut store = MapStore::default();
    let mut env = FixedEnv { protocol: 2, budget: 1 << 30, propagated: None };
    // About 41 MB: three pieces.
    assert_eq!(exec(&mut store, &mut env, &["SF.RESERVE", "big", "0.01", "30000000"]), Frame::ok());
    for i in 0..1000 {
        exec(&mut store, &mut env, &["SF.ADD", "big", &format!("i{i}")]);
    }
    let r = exec(&mut store, &mut env, &["SF.DUMP", "big"]);
    assert!(matches!(&r, Frame::Error(e) if e.contains("SF.DUMP key <iterator>")), "{r:?}");
    let mut it = 0i64;
    let mut pieces = Vec::new();
    let mut file = Vec::new();
    loop {
        let Frame::Array(pair) = exec(&mut store, &mut env, &["SF.DUMP", "big", &it.to_string()]) else {
            panic!("a pair")
        };
        let (Frame::Integer(next), Frame::Bulk(data)) = (&pair[0], &pair[1]) else { panic!("{pair:?}") };
        if *next == 0 {
            assert!(data.is_empty());
            break;
        }
        assert!(data.len() <= 16 << 20);
        assert_eq!(*next as usize, file.len() + data.len() + 1);
        file.extend_from_slice(data);
        pieces.push((*next, data.to_vec()));
        it = *next;
    }
    assert_eq!(pieces.len(), 3, "{} bytes", file.len());
    let mut left = file.len() as i64;
    for (next, data) in &pieces {
        left -= data.len() as i64;
        let r =
            exec_bytes(&mut store, &mut env, &[b"SF.LOADCHUNK", b"copy", next.to_string().as_bytes(), data]);
        assert_eq!(r, Frame::Integer(left));
    }
    assert!((0..1000).all(
        |i| exec(&mut store, &mut env, &["SF.EXISTS", "copy", &format!("i{i}")]) == Frame::Boolean(true)
    ));
    let Frame::Array(last) = exec(&mut store, &mut env, &["SF.DUMP", "copy", &pieces[2].0.to_string()])
    else {
        panic!()
    };
    assert_eq!(last, vec![Frame::Integer(0), Frame::Bulk(Default::default())]);
    for (next, data) in &pieces {
        // The iterator of a piece's first byte is its start offset plus one.
        let first = (*next as usize - data.len()).to_string();
        let Frame::Array(pair) = exec(&mut store, &mut env, &["SF.DUMP", "copy", &first]) else { panic!() };
        assert_eq!(pair[1], Frame::Bulk(data.clone().into()), "the copy's file is the original's");
    }
    // Negative iterators end, as in BF.SCANDUMP.
    let Frame::Array(end) = exec(&mut store, &mut env, &["SF.DUMP", "big", "-3"]) else { panic!() };
    assert_eq!(end[0], Frame::Integer(0));
}

/// A window by time: SF.ADD runs at the request's time and is propagated with it as
/// SF.MADDAT, which a replica or the log applies at that time, never at its own.
#[test]
fn sf_window_by_time_propagates_its_time() {
    let mut store = MapStore::default();
    let mut env = FixedEnv { protocol: 3, budget: 1 << 30, propagated: None };
    let r = exec(&mut store, &mut env, &["SF.RESERVE", "w", "0.01", "1000", "KIND", "aging", "TTL", "60"]);
    assert_eq!(r, Frame::ok());
    assert!(env.propagated.is_none(), "SF.RESERVE is deterministic: propagated as received");
    assert_eq!(
        exec(&mut store, &mut env, &["SF.MADD", "w", "a", "b"]),
        Frame::Array(vec![Frame::Boolean(true); 2])
    );
    let p = env.propagated.take().expect("a timed add is propagated with its time");
    let want: Vec<Vec<u8>> =
        ["SF.MADDAT", "w", "1700000000000", "a", "b"].iter().map(|a| a.as_bytes().to_vec()).collect();
    assert_eq!(p, vec![want]);
    // The replica's copy, built from the propagated commands, is the same filter.
    let mut replica = MapStore::default();
    exec(&mut replica, &mut env, &["SF.RESERVE", "w", "0.01", "1000", "KIND", "aging", "TTL", "60"]);
    assert_eq!(
        exec(&mut replica, &mut env, &["SF.MADDAT", "w", "1700000000000", "a", "b"]),
        Frame::Array(vec![Frame::Boolean(true); 2])
    );
    assert_eq!(
        exec(&mut replica, &mut env, &["SF.DUMP", "w"]),
        exec(&mut store, &mut env, &["SF.DUMP", "w"])
    );
    let Frame::Map(info) = exec(&mut store, &mut env, &["SF.INFO", "w"]) else { panic!("a map in RESP3") };
    assert_eq!(info[0].1, Frame::Bulk("time-limited-bloom".into()));
    assert_eq!(info[8], (Frame::Simple("TTL".into()), Frame::Integer(60)));
    assert_eq!(
        exec(&mut store, &mut env, &["SF.DEL", "w", "a"]),
        Frame::error(
            "ERR a time-limited-bloom filter cannot delete items (KIND counting, cuckoo and quotient can)"
        )
    );
    assert_eq!(
        exec(&mut store, &mut env, &["SF.RESERVE", "x", "0.01", "1000", "KIND", "aging", "WINDOW", "500"]),
        Frame::ok()
    );
    assert_eq!(
        exec(&mut store, &mut env, &["SF.INFO", "x", "window"]),
        Frame::Map(vec![(Frame::Simple("Window".into()), Frame::Integer(500))])
    );
}
