//! The CMS.*, TOPK.* and TDIGEST.* commands against the real sift-server binary: the golden
//! transcript of RedisBloom's sketches (`suite/sketches.rs`, which `crates/sift-redis` runs
//! against redis-server with the module too), byte for byte in RESP2 and RESP3, with current
//! RedisBloom's replies and Redis ≥ 7.2's double texts.

// `common` and `suite` both include `suite/client.rs`: two module paths for one file, on purpose.
#![allow(clippy::duplicate_mod)]

mod common;
mod suite;
#[path = "common/suite_target.rs"]
mod suite_target;

use suite::sketches::{sketch_transcript_byte_exact, Doubles};
use suite_target::SiftServer;

#[test]
fn sketch_transcript_resp2_byte_exact() {
    sketch_transcript_byte_exact(&SiftServer, 2, Doubles::Current);
}

#[test]
fn sketch_transcript_resp3_byte_exact() {
    sketch_transcript_byte_exact(&SiftServer, 3, Doubles::Current);
}

#[test]
fn redis_py_sketch_commands() {
    suite::sketches::redis_py_sketch_commands(&SiftServer);
}

#[test]
fn absurd_sketch_inputs_are_refused() {
    suite::sketches::absurd_sketch_inputs_are_refused(&SiftServer);
}

#[test]
fn saving_compresses_the_live_digest() {
    suite::sketches::saving_compresses_the_live_digest(&SiftServer);
}

#[test]
fn golden_sketch_payloads_restore() {
    suite::sketches::golden_sketch_payloads_restore(&SiftServer, Doubles::Current);
}

/// The log replays sketches exactly: a TOPK.ADD that drew random numbers is logged with its seed,
/// a t-digest query that compressed is logged too (compressing changes later answers), so after
/// `kill -9` and a restart from the log, and after DEBUG RELOAD, every sketch is the one the
/// server held: same DUMP payloads, same TDIGEST.INFO.
#[test]
fn log_replay_and_reload_give_identical_sketches() {
    use common::{temp_dir, Proc};
    use suite::Raw;
    let dir = temp_dir("sketch-log");
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd(&["TOPK.RESERVE", "tk", "5", "4", "3", "0.9"]), b"+OK\r\n");
    for round in 0..20 {
        let mut args = vec!["TOPK.ADD".to_string(), "tk".into()];
        args.extend((0..30).map(|i| format!("i{}", (i * 7 + round * 13) % 40)));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&a)[0], b'*');
    }
    assert_eq!(c.cmd(&["TOPK.INCRBY", "tk", "i1", "50", "i2", "30", "i3", "x"])[..4], *b"*3\r\n");
    assert_eq!(c.cmd(&["CMS.INITBYPROB", "cms", "0.01", "0.01"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CMS.INCRBY", "cms", "a", "5", "b", "7"]), b"*2\r\n:5\r\n:7\r\n");
    assert_eq!(c.cmd(&["TDIGEST.CREATE", "td", "COMPRESSION", "5"]), b"+OK\r\n");
    for batch in 0..6 {
        let mut args = vec!["TDIGEST.ADD".to_string(), "td".into()];
        args.extend((0..7).map(|i| format!("{}", (i * 31 + batch * 17) % 50)));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&a), b"+OK\r\n");
        // A query between batches compresses: later answers depend on it.
        assert_eq!(c.cmd(&["TDIGEST.QUANTILE", "td", "0.5"])[0], b'*');
    }
    let state = |c: &mut Raw| -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = ["tk", "cms", "td"].iter().map(|k| c.cmd(&["DUMP", k])).collect();
        out.push(c.cmd(&["TDIGEST.INFO", "td"]));
        out.push(c.cmd(&["TOPK.LIST", "tk", "WITHCOUNT"]));
        out
    };
    let before = state(&mut c);
    let info = String::from_utf8_lossy(&before[3]).into_owned();
    assert!(
        info.contains("Total compressions\r\n:6\r\n") || info.contains("Total compressions\r\n:7\r\n"),
        "{info}"
    );
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(state(&mut c), before, "replayed from the log");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    let after = state(&mut c);
    assert_eq!(after[..3], before[..3], "DEBUG RELOAD: same payloads");
}

/// `DUMP` compresses the live t-digest first, as RedisBloom's save does (sketches spec §10.5),
/// and the compression reaches the log: after `kill -9` and a restart the digest is the one the
/// server held, not the log's ADDs replayed onto the uncompressed digest.
#[test]
fn dump_compresses_the_live_digest_and_logs_it() {
    use common::Raw;
    use common::{temp_dir, Proc};
    let dir = temp_dir("td-dump");
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd(&["TDIGEST.CREATE", "td", "COMPRESSION", "100"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["TDIGEST.ADD", "td", "1", "2", "3"]), b"+OK\r\n");
    let info = String::from_utf8_lossy(&c.cmd(&["TDIGEST.INFO", "td"])).into_owned();
    assert!(
        info.contains("Unmerged nodes\r\n:3\r\n") && info.contains("Total compressions\r\n:0\r\n"),
        "{info}"
    );
    assert_eq!(c.cmd(&["DUMP", "td"])[0], b'$');
    let live = c.cmd(&["TDIGEST.INFO", "td"]);
    let info = String::from_utf8_lossy(&live).into_owned();
    assert!(
        info.contains("Merged nodes\r\n:3\r\n")
            && info.contains("Unmerged nodes\r\n:0\r\n")
            && info.contains("Total compressions\r\n:1\r\n"),
        "DUMP did not compress the live digest: {info}"
    );
    // Later values land on the compressed digest, live and after the restart alike.
    assert_eq!(c.cmd(&["TDIGEST.ADD", "td", "4", "5", "6", "7"]), b"+OK\r\n");
    let before = c.cmd(&["TDIGEST.INFO", "td"]);
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(
        String::from_utf8_lossy(&c.cmd(&["TDIGEST.INFO", "td"])),
        String::from_utf8_lossy(&before),
        "after kill -9 and a restart"
    );
    // A DUMP that changed nothing is no change (not counted, not logged).
    let dumped = c.cmd(&["DUMP", "td"]);
    let changes = common::info_number(&mut c, "persistence", "rdb_changes_since_last_save");
    assert_eq!(c.cmd(&["DUMP", "td"]), dumped, "a second DUMP changes nothing");
    assert_eq!(common::info_number(&mut c, "persistence", "rdb_changes_since_last_save"), changes);
}

/// Every snapshot compresses the live t-digests at its epoch, so the snapshot with the log
/// replayed after it gives back exactly the digest the server held: `TDIGEST.INFO` and the
/// answers of QUANTILE / CDF are the same before and after `kill -9` and a restart, whichever
/// snapshot came between the ADDs (SAVE, or BGSAVE, whose background job is the log's rewrite's
/// too).
#[test]
fn snapshots_compress_the_live_digest_so_restarts_answer_the_same() {
    use common::Raw;
    use common::{info_number, temp_dir, wait_until, Proc};
    for (kind, cmd, background) in [("save", "SAVE", false), ("bgsave", "BGSAVE", true)] {
        let dir = temp_dir(&format!("td-snap-{kind}"));
        let p = Proc::started(&dir);
        let mut c = Raw::connect(p.addr);
        assert_eq!(c.cmd(&["TDIGEST.CREATE", "td", "COMPRESSION", "100"]), b"+OK\r\n");
        let mut args: Vec<String> = vec!["TDIGEST.ADD".into(), "td".into()];
        args.extend((0..40).map(|i| format!("{}", (i * 37) % 101)));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&a), b"+OK\r\n");
        assert_ne!(c.cmd(&[cmd])[0], b'-', "{kind}");
        // Right after BGSAVE was asked: its epoch comes before or after this ADD (its copy of the
        // shard is then taken just before the ADD changes it).
        assert_eq!(c.cmd(&["TDIGEST.ADD", "td", "1000", "2000", "-5"]), b"+OK\r\n");
        if background {
            wait_until("BGSAVE finished", || {
                info_number(&mut c, "persistence", "rdb_bgsave_in_progress") == 0
            });
        }
        assert_eq!(c.cmd(&["TDIGEST.ADD", "td", "7", "8", "9"]), b"+OK\r\n");
        let info = c.cmd(&["TDIGEST.INFO", "td"]);
        let text = String::from_utf8_lossy(&info).into_owned();
        assert!(text.contains("Total compressions\r\n:1\r\n"), "{kind} compressed the live digest: {text}");
        let buffered = if background { &[3, 6][..] } else { &[6][..] };
        assert!(
            buffered.iter().any(|n| text.contains(&format!("Unmerged nodes\r\n:{n}\r\n"))),
            "{kind}: {text}"
        );
        let answers = |c: &mut Raw| {
            [
                c.cmd(&["TDIGEST.QUANTILE", "td", "0.01", "0.1", "0.5", "0.9", "0.99"]),
                c.cmd(&["TDIGEST.CDF", "td", "-5", "3", "50", "99", "1500"]),
                c.cmd(&["TDIGEST.INFO", "td"]),
            ]
        };
        let live = answers(&mut c);
        p.kill9();
        let p = Proc::started(&dir);
        let mut c = Raw::connect(p.addr);
        assert_eq!(
            String::from_utf8_lossy(&c.cmd(&["TDIGEST.INFO", "td"])),
            String::from_utf8_lossy(&live[2]),
            "{kind}: the recovered digest"
        );
        assert_eq!(answers(&mut c), live, "{kind}: the answers after the restart");
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
