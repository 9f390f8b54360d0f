//! A data type added to `sift_commands` in one file and one line of its family list is served by
//! this server with no change here: the test family `tally` (`sift_commands::tally`, behind the
//! `test-family` feature that this crate's tests enable) is dispatched, locked (a command on
//! several keys), reported by `COMMAND`, copied, measured, kept in snapshots and in the log, and
//! reloaded — a `kill -9` and a restart, a `SAVE`, a `DEBUG RELOAD`.

mod common;

use common::{temp_dir, Proc, Raw, TestServer};

fn int(reply: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(reply);
    s.strip_prefix(':')
        .and_then(|s| s.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("not an integer: {s:?}"))
}

/// What a client can observe of the tallies `keys`: type, size and when each item was added.
fn observe(c: &mut Raw, keys: &[&str], items: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for k in keys {
        out.push(c.cmd(&["TYPE", k]));
        out.push(c.cmd(&["TALLY.CARD", k]));
        for i in items {
            out.push(c.cmd(&["TALLY.WHEN", k, i]));
        }
    }
    out
}

#[test]
fn the_test_family_is_served_by_the_generic_table() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["TALLY.ADD", "t", "a", "b"]), b":2\r\n");
    assert_eq!(c.cmd(&["tally.add", "t", "a", "c"]), b":1\r\n");
    assert_eq!(c.cmd(&["TYPE", "t"]), b"+siftTally\r\n");
    assert_eq!(c.cmd(&["TALLY.CARD", "t"]), b":3\r\n");
    assert_eq!(c.cmd(&["TALLY.CARD", "missing"]), b":0\r\n");
    assert_eq!(c.cmd(&["TALLY.WHEN", "t", "nope"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["TALLY.ADDAT", "t", "5", "z"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.WHEN", "t", "z"]), b":5\r\n");
    assert_eq!(c.cmd(&["TALLY.ADDAT", "t", "-5", "z"]), b"-ERR invalid time\r\n");
    // Arity from the declaration; WRONGTYPE both ways between the families and strings.
    assert_eq!(c.cmd(&["TALLY.WHEN", "t"]), b"-ERR wrong number of arguments for 'tally.when' command\r\n");
    assert_eq!(c.cmd(&["SET", "s", "v"]), b"+OK\r\n");
    let wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    assert_eq!(c.cmd(&["TALLY.ADD", "s", "x"]), wrongtype);
    assert_eq!(c.cmd(&["BF.ADD", "t", "x"]), wrongtype);
    assert_eq!(c.cmd(&["GET", "t"]), wrongtype);
    assert_eq!(c.cmd(&["BF.ADD", "bf", "x"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.ADD", "bf", "x"]), wrongtype);
    // The type's COPY (BF refuses it, as Redis refuses a module type without a copy callback).
    assert_eq!(c.cmd(&["COPY", "t", "t2"]), b":1\r\n");
    assert_eq!(
        observe(&mut c, &["t2"], &["a", "b", "c", "z"]),
        observe(&mut c, &["t"], &["a", "b", "c", "z"])
    );
    assert_eq!(c.cmd(&["COPY", "bf", "bf2"]), b"-ERR not supported for this module key\r\n");
    // MEMORY USAGE: the type's measure plus the key overhead; it grows with the value.
    let small = int(&c.cmd(&["MEMORY", "USAGE", "t"]));
    let items: Vec<String> = (0..100).map(|i| format!("item-{i}")).collect();
    let mut add = vec!["TALLY.ADD", "t"];
    add.extend(items.iter().map(String::as_str));
    assert_eq!(c.cmd(&add), b":100\r\n");
    assert!(int(&c.cmd(&["MEMORY", "USAGE", "t"])) >= small + 100 * 6, "{small}");
    // A command on several keys: the destination and counted sources are locked together (keys
    // spread over many shards: an undeclared one would not be locked), read, merged, written.
    let sources: Vec<String> = (0..20).map(|i| format!("src{i}")).collect();
    for (i, s) in sources.iter().enumerate() {
        assert_eq!(c.cmd(&["TALLY.ADDAT", s, &(100 + i).to_string(), "shared", s]), b":2\r\n");
    }
    let n = sources.len().to_string();
    let mut merge = vec!["TALLY.MERGE", "dest", &n];
    merge.extend(sources.iter().map(String::as_str));
    assert_eq!(c.cmd(&merge), b"+OK\r\n");
    assert_eq!(c.cmd(&["TALLY.CARD", "dest"]), b":21\r\n");
    assert_eq!(c.cmd(&["TALLY.WHEN", "dest", "shared"]), b":100\r\n", "the earliest time wins");
    assert_eq!(c.cmd(&["TALLY.WHEN", "dest", "src7"]), b":107\r\n");
    assert_eq!(c.cmd(&["TALLY.MERGE", "dest", "2", "src1", "s"]), wrongtype);
    assert_eq!(
        c.cmd(&["TALLY.MERGE", "dest", "3", "src1", "src2"]),
        b"-ERR wrong number of arguments for 'tally.merge' command\r\n"
    );
    assert_eq!(c.cmd(&["TALLY.CARD", "dest"]), b":21\r\n", "a refused merge changes nothing");
    // COMMAND: the declaration's arity, flags and key specs, the keynum spec included.
    let info = c.cmd_text(&["COMMAND", "INFO", "tally.merge"]);
    assert!(
        info.starts_with("*1\r\n*10\r\n$11\r\ntally.merge\r\n:-4\r\n*4\r\n+write\r\n+denyoom\r\n+module\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n"),
        "{info}"
    );
    assert!(info.contains("$4\r\ntype\r\n$6\r\nkeynum\r\n"), "{info}");
    assert_eq!(
        c.cmd_text(&["COMMAND", "GETKEYS", "tally.merge", "d", "2", "a", "b"]),
        "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
}

#[test]
fn the_test_family_is_persisted_and_reloaded() {
    let dir = temp_dir("registry-persisted");
    let keys = ["t", "u", "merged"];
    let items = ["a", "b", "c", "only-u"];
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd(&["TALLY.ADD", "t", "a", "b"]), b":2\r\n");
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(c.cmd(&["TALLY.ADD", "t", "c"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.ADDAT", "u", "7", "a", "only-u"]), b":2\r\n");
    assert_eq!(c.cmd(&["TALLY.MERGE", "merged", "2", "t", "u"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["PEXPIRE", "u", "100000000"]), b":1\r\n");
    let before = observe(&mut c, &keys, &items);
    assert!(int(&before[2]) > 1_600_000_000_000, "TALLY.ADD records the time: {:?}", before[2]);
    // The log: replayed after kill -9, each item keeps the time the first server gave it (the
    // command is logged with its time made explicit, never replayed on the restarted clock).
    drop(c);
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(observe(&mut c, &keys, &items), before, "after replaying the log");
    assert!(int(&c.cmd(&["PTTL", "u"])) > 0);
    // A snapshot: the type's tag and dump chunks, then kill -9 and load.
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    drop(c);
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(observe(&mut c, &keys, &items), before, "after loading the snapshot");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(observe(&mut c, &keys, &items), before, "after DEBUG RELOAD");
    let _ = std::fs::remove_dir_all(&dir);
}
