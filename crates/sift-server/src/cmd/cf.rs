//! The RedisBloom cuckoo commands (`CF.*`, spec §8): thin adapters from the command table to the
//! shared command layer, `sift_commands::cf` (the store and environment are in [`super::bf`]).

use bytes::Bytes;

use super::bf::{adapters, run};
use super::Ctx;
use crate::frame::Frame;

adapters!(cf: reserve, add, addnx, insert, insertnx, exists, mexists, count, del, compact, info, scandump, loadchunk, debug);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Locked;

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
        fn bgsave(&self, _: &mut Locked<'_>) -> Result<(), crate::persist::PersistError> {
            Ok(())
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
