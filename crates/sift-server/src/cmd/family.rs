//! The commands of the registered families (`BF.*`, `CF.*`, and every family of
//! `sift_commands::families`): their handlers run in `sift_commands`, which the Redis module runs
//! too; this file gives them the keyspace as a [`Store`] ([`KeyAccess`]) and the server's
//! surroundings as an [`Env`] ([`ServerEnv`]).

use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use sift::compat::redisbloom::LoadLimits;
use sift_commands::{Command, Data, Defaults, Env, Held, Store};

use super::Ctx;
use crate::db::{Locked, Value};
use crate::frame::Frame;

/// The keyspace as a handler's store, noting whether the handler reached a key.
pub struct KeyAccess<'a, 'k> {
    keys: &'a mut Locked<'k>,
    reached: bool,
}

fn held(value: Option<&Value>) -> Held<&dyn Data> {
    match value {
        None => Held::Missing,
        Some(Value::Data(d)) => Held::Data(&**d),
        Some(Value::String(_)) => Held::Other,
    }
}

impl Store for KeyAccess<'_, '_> {
    fn read(&mut self, key: &[u8]) -> Held<&dyn Data> {
        self.reached = true;
        held(self.keys.get(key).map(|e| &e.value))
    }

    fn write(&mut self, key: &[u8]) -> Held<&mut dyn Data> {
        self.reached = true;
        match self.keys.get_mut(key).map(|e| &mut e.value) {
            None => Held::Missing,
            Some(Value::Data(d)) => Held::Data(&mut **d),
            Some(Value::String(_)) => Held::Other,
        }
    }

    fn read_many<'s>(&'s mut self, keys: &[&[u8]]) -> Vec<Held<&'s dyn Data>> {
        self.reached = true;
        self.keys.get_many(keys).into_iter().map(|e| held(e.map(|e| &e.value))).collect()
    }

    fn set(&mut self, key: &[u8], value: Box<dyn Data>) -> &mut dyn Data {
        self.reached = true;
        self.keys.insert(Bytes::copy_from_slice(key), Value::Data(value));
        match self.keys.get_mut(key).map(|e| &mut e.value) {
            Some(Value::Data(d)) => &mut **d,
            _ => unreachable!("stored just above under the same lock"),
        }
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        self.reached = true;
        self.keys.remove(key).is_some()
    }
}

/// The server's side of a request: the session's protocol, the configuration, the memory
/// budget, the clock and the command's propagation slot ([`Ctx::propagate`]).
pub struct ServerEnv<'a> {
    protocol: u8,
    server: &'a crate::shared::Shared,
    propagate: &'a mut Option<Vec<Vec<Bytes>>>,
    /// The time, read on first use (0: not yet): most commands never need it.
    now: Cell<u64>,
}

impl Env for ServerEnv<'_> {
    fn protocol(&self) -> u8 {
        self.protocol
    }

    fn defaults(&self) -> Defaults {
        self.server.config.read().filters.defaults()
    }

    /// `maxmemory` when set, else the library's default LOADCHUNK budget (4 GiB, enough for the
    /// largest realistic RedisBloom filter: 2^30 items at 10^-6 is 3.9 GB). RedisBloom allocates
    /// whatever it is asked (lazily, with calloc); this server zeroes what it allocates, so a
    /// request beyond the budget is refused before allocating, with the reply of a failed
    /// allocation.
    fn memory_budget(&mut self) -> u64 {
        let max = self.server.config.read().maxmemory;
        if max > 0 {
            max
        } else {
            LoadLimits::DEFAULT.max_bytes
        }
    }

    /// This server's clock: commands replayed from the log carry their time explicitly (the
    /// handlers propagate it so), never this.
    fn now_ms(&self) -> u64 {
        if self.now.get() == 0 {
            self.now.set(crate::db::now_ms());
        }
        self.now.get()
    }

    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        *self.propagate =
            Some(commands.into_iter().map(|c| c.into_iter().map(Bytes::from).collect()).collect());
    }

    /// The arguments copied into one buffer, each a slice of it: three allocations in all, where
    /// [`Env::propagate`]'s vectors cost one per argument (perf: 7% of the server's time under
    /// pipelined TOPK.ADD, whose calls are propagated in their seeded form).
    fn propagate_one(&mut self, argv: &[&[u8]]) {
        let mut buf = BytesMut::with_capacity(argv.iter().map(|a| a.len()).sum());
        for a in argv {
            buf.extend_from_slice(a);
        }
        let mut all = buf.freeze();
        *self.propagate = Some(vec![argv.iter().map(|a| all.split_to(a.len())).collect()]);
    }
}

/// Calls `f` with `argv` as byte slices: on the stack for the usual short requests.
fn with_slices<R>(argv: &[Bytes], f: impl FnOnce(&[&[u8]]) -> R) -> R {
    const INLINE: usize = 8;
    if argv.len() <= INLINE {
        let mut buf: [&[u8]; INLINE] = [&[]; INLINE];
        for (b, a) in buf.iter_mut().zip(argv) {
            *b = a;
        }
        f(&buf[..argv.len()])
    } else {
        f(&argv.iter().map(|a| &a[..]).collect::<Vec<_>>())
    }
}

/// Runs a family's command on this server's keyspace and surroundings (its arity was checked
/// by the dispatcher, its keys locked).
///
/// WATCH: a module's command that changes data opens its keys for writing when it first looks
/// them up, and Redis signals such a key as modified when the module closes it, whatever the
/// command did (an item already present, a filter not found, even an error reply after the
/// lookup). So such a command that reached its keys counts as modifying the keys it opens for
/// writing (those of its first key spec) here too, changed or not (checked against redis-server
/// 7.0.15 with the sift-redis module, which opens keys as RedisBloom does). Keys that do change
/// are signalled by the keyspace itself ([`crate::db`]).
pub(crate) fn run(ctx: &mut Ctx<'_, '_>, cmd: &'static Command, argv: &[Bytes]) -> Frame {
    let mut env = ServerEnv {
        protocol: ctx.session.protocol,
        server: ctx.server,
        propagate: &mut ctx.propagate,
        now: Cell::new(0),
    };
    let mut store = KeyAccess { keys: ctx.keys, reached: false };
    let reply = with_slices(argv, |args| (cmd.handler)(&mut store, &mut env, args));
    if store.reached && cmd.flags.changes_data() && ctx.server.db.watched() {
        for i in cmd.main_key_positions(argv) {
            ctx.keys.signal_modified(&argv[i]);
        }
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
    }

    /// Records every write the dispatcher logs, to replay it elsewhere.
    #[derive(Default)]
    struct Recorder(std::sync::Arc<parking_lot::Mutex<Vec<Vec<Bytes>>>>);

    impl crate::persist::Persistence for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn aof_enabled(&self) -> bool {
            true
        }
        fn load(&self, _: &mut Locked<'_>) -> Result<usize, crate::persist::PersistError> {
            Ok(0)
        }
        fn record(&self, argv: &[Bytes]) {
            self.0.lock().push(argv.to_vec());
        }
        fn commit(&self) -> Result<(), crate::persist::PersistError> {
            Ok(())
        }
        fn save(&self, _: &mut Locked<'_>) -> Result<(), crate::persist::PersistError> {
            Ok(())
        }
        fn bgsave(
            &self,
            _: &mut Locked<'_>,
            _: crate::persist::BgsaveWhen,
        ) -> Result<crate::persist::BgsaveStart, crate::persist::PersistError> {
            Ok(crate::persist::BgsaveStart::Started)
        }
        fn bgsave_in_progress(&self) -> bool {
            false
        }
        fn last_save_unix(&self) -> u64 {
            0
        }
    }

    fn run(server: &crate::shared::Shared, s: &mut crate::cmd::Session, argv: Vec<Bytes>) -> Frame {
        crate::cmd::execute(server, s, argv).expect("a reply")
    }

    fn full_dump(
        server: &crate::shared::Shared,
        s: &mut crate::cmd::Session,
        p: &str,
        key: &str,
    ) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut it = 0i64;
        loop {
            let r = run(server, s, args(&[&format!("{p}.SCANDUMP"), key, &it.to_string()]));
            let Frame::Array(pair) = &r else { panic!("{r:?}") };
            let Frame::Integer(next) = pair[0] else { panic!("{r:?}") };
            out.push(r.clone());
            if next == 0 {
                return out;
            }
            it = next;
        }
    }

    /// The writes the dispatcher records (CF.COMPACT included, although it is registered
    /// read-only) rebuild every filter exactly when replayed on an empty server: what an
    /// append-only log relies on.
    #[test]
    fn recorded_writes_replay_to_identical_filters() {
        use crate::shared::Shared;
        let rec = Recorder::default();
        let log = rec.0.clone();
        let a = Shared::new(crate::config::Params::default(), Box::new(rec));
        let mut s = crate::cmd::Session::new(1, true);
        let mut cmds: Vec<Vec<String>> = vec![
            vec!["BF.RESERVE".into(), "b".into(), "0.01".into(), "10".into()],
            vec![
                "BF.INSERT".into(),
                "i".into(),
                "NONSCALING".into(),
                "CAPACITY".into(),
                "3".into(),
                "ITEMS".into(),
            ],
            vec!["CF.RESERVE".into(), "c".into(), "8".into(), "EXPANSION".into(), "2".into()],
            vec!["BF.ADD".into(), "auto".into(), "x".into()],
            vec!["BF.RESERVE".into(), "b".into(), "0.01".into(), "10".into()],
        ];
        cmds[1].extend((0..6).map(|i| format!("n{i}")));
        let mut madd = vec!["BF.MADD".to_string(), "b".into()];
        madd.extend((0..50).map(|i| format!("m{i}")));
        cmds.push(madd);
        let mut ins = vec!["CF.INSERT".to_string(), "c".into(), "ITEMS".into()];
        ins.extend((0..60).map(|i| format!("c{i}")));
        cmds.push(ins);
        for i in 0..20 {
            cmds.push(vec!["CF.DEL".into(), "c".into(), format!("c{i}")]);
        }
        cmds.push(vec!["CF.COMPACT".into(), "c".into()]);
        cmds.push(vec!["CF.ADDNX".into(), "c".into(), "c50".into()]);
        for c in &cmds {
            let argv: Vec<&str> = c.iter().map(String::as_str).collect();
            run(&a, &mut s, args(&argv));
        }
        let recorded = log.lock().clone();
        assert!(recorded.iter().any(|c| c[0].eq_ignore_ascii_case(b"CF.COMPACT")), "CF.COMPACT is logged");
        let creates_b = recorded.iter().filter(|c| c.len() > 1 && c[1] == b"b"[..]).count();
        // `b`: its creation (as LOADCHUNK of its header) and the BF.MADD.
        assert_eq!(
            creates_b, 2,
            "the refused second BF.RESERVE (item exists) changed nothing and is not logged"
        );
        let b =
            Shared::new(crate::config::Params::default(), Box::new(crate::persist::MemoryOnly::default()));
        let mut t = crate::cmd::Session::new(2, true);
        for argv in recorded {
            run(&b, &mut t, argv);
        }
        for (p, key) in [("BF", "b"), ("BF", "i"), ("BF", "auto"), ("CF", "c")] {
            assert_eq!(full_dump(&a, &mut s, p, key), full_dump(&b, &mut t, p, key), "{key}");
            let debug = args(&[&format!("{p}.DEBUG"), key]);
            assert_eq!(run(&a, &mut s, debug.clone()), run(&b, &mut t, debug), "{key}");
        }
    }

    /// A filter auto-created with the configured defaults is logged as `LOADCHUNK <header>` and
    /// the command: replayed under another configuration (a restart with other flags), it is the
    /// same filter. Logging the bare command would rebuild it with the replaying server's
    /// defaults.
    #[test]
    fn auto_create_replays_under_another_configuration() {
        use crate::shared::Shared;
        let rec = Recorder::default();
        let log = rec.0.clone();
        let mut params = crate::config::Params::default();
        for (n, v) in [
            ("bf-error-rate", "0.001"),
            ("bf-initial-size", "500"),
            ("bf-expansion-factor", "0"),
            ("cf-initial-size", "64"),
            ("cf-expansion-factor", "3"),
            ("cf-max-iterations", "7"),
        ] {
            params.set(n, v.as_bytes(), true).unwrap();
        }
        let a = Shared::new(params, Box::new(rec));
        let mut s = crate::cmd::Session::new(1, true);
        for c in [
            &["BF.ADD", "b", "x"][..],
            &["BF.MADD", "m", "x", "y"],
            &["BF.INSERT", "i", "ITEMS", "x"],
            &["CF.ADD", "c", "x"],
            &["CF.ADDNX", "n", "x"],
            &["CF.INSERT", "ci", "ITEMS", "x"],
            &["CF.INSERTNX", "cx", "ITEMS", "x"],
            &["BF.ADD", "b", "y"],
        ] {
            let r = run(&a, &mut s, args(c));
            assert!(!matches!(r, Frame::Error(_)), "{c:?}: {r:?}");
        }
        let recorded = log.lock().clone();
        let names: Vec<String> =
            recorded.iter().map(|c| String::from_utf8_lossy(&c[0]).to_ascii_uppercase()).collect();
        assert_eq!(
            names,
            [
                "BF.LOADCHUNK",
                "BF.ADD",
                "BF.LOADCHUNK",
                "BF.MADD",
                "BF.LOADCHUNK",
                "BF.INSERT",
                "CF.LOADCHUNK",
                "CF.ADD",
                "CF.LOADCHUNK",
                "CF.ADDNX",
                "CF.LOADCHUNK",
                "CF.INSERT",
                "CF.LOADCHUNK",
                "CF.INSERTNX",
                "BF.ADD",
            ]
        );
        let b =
            Shared::new(crate::config::Params::default(), Box::new(crate::persist::MemoryOnly::default()));
        let mut t = crate::cmd::Session::new(2, true);
        for argv in recorded {
            run(&b, &mut t, argv);
        }
        for (p, key) in
            [("BF", "b"), ("BF", "m"), ("BF", "i"), ("CF", "c"), ("CF", "n"), ("CF", "ci"), ("CF", "cx")]
        {
            assert_eq!(full_dump(&a, &mut s, p, key), full_dump(&b, &mut t, p, key), "{key}");
            let debug = args(&[&format!("{p}.DEBUG"), key]);
            assert_eq!(run(&a, &mut s, debug.clone()), run(&b, &mut t, debug), "{key}");
        }
    }
}
