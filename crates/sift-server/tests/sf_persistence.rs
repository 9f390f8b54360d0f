//! `SF.*` keys are kept like every other key: in the log (replayed after `kill -9`), in
//! snapshots, through `DEBUG RELOAD`, with their time to live; an unfinished `SF.LOADCHUNK`
//! upload survives too and completes after the restart.

mod common;

use common::{temp_dir, Proc, Raw};

/// What a client can observe of the keys: type, the sift file, and whether a TTL is set.
fn observe(c: &mut Raw, keys: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for k in keys {
        out.push(c.cmd(&["TYPE", k]));
        out.push(c.cmd(&["SF.DUMP", k]));
        out.push(c.cmd(&["SF.CARD", k]));
        let ttl = c.cmd_text(&["TTL", k]);
        out.push(if ttl.starts_with(":-") { ttl.into_bytes() } else { b"ttl set".to_vec() });
    }
    out
}

#[test]
fn sf_keys_survive_kill9_snapshots_and_reloads() {
    let dir = temp_dir("sf-persisted");
    let keys = ["b", "grow", "n", "c", "q", "auto", "x", "w"];
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    for (k, extra) in [
        ("b", &["KIND", "blocked"][..]),
        ("grow", &["EXPANSION", "2"][..]),
        ("n", &["KIND", "counting"][..]),
        ("c", &["KIND", "cuckoo", "FINGERPRINT", "16"][..]),
        ("q", &["KIND", "quotient"][..]),
    ] {
        let mut args = vec!["SF.RESERVE", k, "0.01", "100"];
        args.extend_from_slice(extra);
        assert_eq!(c.cmd(&args), b"+OK\r\n", "{k}");
    }
    for i in 0..300 {
        let item = format!("item-{i}");
        for k in ["b", "grow", "n", "c", "q", "auto"] {
            let r = c.cmd(&["SF.ADD", k, &item]);
            assert!(r == b":1\r\n" || r == b":0\r\n" || k == "c" || k == "q", "{k}: {r:?}");
        }
    }
    assert_eq!(c.cmd(&["SF.MDEL", "n", "item-1", "item-2"]), b"*2\r\n:1\r\n:1\r\n");
    assert_eq!(c.cmd(&["SF.DEL", "q", "item-3"]), b":1\r\n");
    let xor = {
        let items: Vec<String> = (0..50).map(|i| format!("s{i}")).collect();
        sift::Persist::to_bytes(&sift::Xor8::build_with(&items, sift::Hasher::default()).unwrap())
    };
    assert_eq!(c.cmd_bytes(&[&b"SF.LOAD"[..], b"x", &xor]), b"+OK\r\n");
    assert_eq!(c.cmd(&["EXPIRE", "c", "100000"]), b":1\r\n");
    // A window by time: each add logged with the time it ran at, replayed at that time.
    assert_eq!(c.cmd(&["SF.RESERVE", "w", "0.01", "1000", "KIND", "aging", "TTL", "3600"]), b"+OK\r\n");
    for i in 0..20 {
        assert_eq!(c.cmd(&["SF.ADD", "w", &format!("w{i}")]), b":1\r\n");
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    // An upload left unfinished: its first piece only.
    assert_eq!(
        c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"b", b"41", &xor[..40]]),
        format!(":{}\r\n", xor.len() - 40).as_bytes()
    );
    let before = observe(&mut c, &keys);
    drop(c);
    p.kill9();
    // The log, replayed.
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(observe(&mut c, &keys), before, "after replaying the log");
    // A snapshot, then kill -9.
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    drop(c);
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(observe(&mut c, &keys), before, "after loading the snapshot");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(observe(&mut c, &keys), before, "after DEBUG RELOAD");
    // The upload resumes where it stopped, and swaps the xor filter in.
    let last = (xor.len() + 1).to_string();
    assert_eq!(c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"b", last.as_bytes(), &xor[40..]]), b":0\r\n");
    assert_eq!(
        c.cmd_bytes(&[&b"SF.DUMP"[..], b"b"]),
        [format!("${}\r\n", xor.len()).into_bytes(), xor.clone(), b"\r\n".to_vec()].concat()
    );
    // COPY and MEMORY USAGE.
    assert_eq!(c.cmd(&["COPY", "q", "q2"]), b":1\r\n");
    assert_eq!(c.cmd(&["SF.DUMP", "q2"]), c.cmd(&["SF.DUMP", "q"]));
    let usage = c.cmd_text(&["MEMORY", "USAGE", "grow"]);
    assert!(usage.trim_start_matches(':').trim().parse::<i64>().unwrap() > 100, "{usage}");
    drop(c);
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
}
