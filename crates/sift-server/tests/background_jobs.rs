//! `BGSAVE`, `BGSAVE SCHEDULE`, `BGREWRITEAOF` and `SAVE` while a background snapshot or log
//! rewrite runs, sent in the same order to a real redis-server 7.0 (`appendonly yes`) and to
//! sift-server: the same replies, the same `INFO persistence` fields (`rdb_bgsave_in_progress`,
//! `aof_rewrite_in_progress`, `aof_rewrite_scheduled`), and a scheduled job that runs once the
//! running one has ended.
//!
//! Each sequence is one pipelined batch, so both servers read all of it while the first job
//! runs. Redis's jobs are made slow with its `rdb-key-save-delay` (per key saved, also in the
//! rewrite's RDB preamble); sift-server's last as long as writing a large filter takes. A batch
//! only counts for sift-server when the job it started was still running at the batch's last
//! `INFO` (its `aof_rewrites`, bumped when a snapshot ends, unchanged); otherwise it is run again
//! with a filter twice the size, a few times at most (then the test fails: it never passes on a
//! batch that did not test what it says).

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::Command;

use common::{Raw, TestServer};
use sift_testkit::RedisProcess;

/// One step of a batch.
type Step = &'static [&'static str];

const INFO: Step = &["INFO", "persistence"];

struct Scenario {
    name: &'static str,
    batch: &'static [Step],
    /// Redis's `rdb_saves` and `aof_rewrites` after the batch and everything it scheduled.
    redis_counts: (u64, u64),
    /// sift-server's snapshots (`aof_rewrites` counts every one, SAVE and BGSAVE too).
    sift_snapshots: u64,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "during a rewrite",
        batch: &[
            &["BGREWRITEAOF"],
            &["BGSAVE"],
            &["BGREWRITEAOF"],
            INFO,
            &["BGSAVE", "SCHEDULE"],
            &["BGSAVE", "schedule"],
            &["BGSAVE"],
            INFO,
        ],
        // The rewrite, then the scheduled BGSAVE (once, though asked twice).
        redis_counts: (1, 1),
        sift_snapshots: 2,
    },
    Scenario {
        name: "during a BGSAVE",
        batch: &[
            &["BGSAVE"],
            &["BGSAVE"],
            &["BGSAVE", "SCHEDULE"],
            INFO,
            &["BGREWRITEAOF"],
            &["BGREWRITEAOF"],
            &["SAVE"],
            INFO,
        ],
        // The BGSAVE, then the scheduled rewrite; SAVE refused.
        redis_counts: (1, 1),
        sift_snapshots: 2,
    },
    Scenario {
        name: "SAVE during a rewrite",
        batch: &[&["BGREWRITEAOF"], &["BGSAVE", "SCHEDULE"], INFO, &["SAVE"]],
        // Redis: the rewrite, SAVE, the scheduled BGSAVE. sift-server: the SAVE's snapshot takes
        // the rewrite's place (it restarts the log), then the scheduled BGSAVE.
        redis_counts: (2, 1),
        sift_snapshots: 2,
    },
    Scenario {
        name: "inside MULTI/EXEC",
        batch: &[&["MULTI"], &["BGSAVE"], &["BGREWRITEAOF"], INFO, &["EXEC"]],
        // Both scheduled, none started inside the transaction; then both run.
        redis_counts: (1, 1),
        sift_snapshots: 2,
    },
];

/// A reply as compared: its raw RESP text, but for an `INFO` reply (also one inside an `EXEC`
/// array) only the fields this test is about.
fn render(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    if !text.contains("# Persistence") {
        return text.into_owned();
    }
    let kept: Vec<&str> = text
        .split("\r\n")
        .filter(|l| {
            l.starts_with(['+', '-', ':', '*'])
                || ["rdb_bgsave_in_progress:", "aof_rewrite_in_progress:", "aof_rewrite_scheduled:"]
                    .iter()
                    .any(|f| l.starts_with(f))
        })
        .collect();
    kept.join(" ")
}

fn field(info: &str, name: &str) -> u64 {
    let prefix = format!("{name}:");
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .parse()
        .unwrap()
}

fn info(addr: SocketAddr) -> String {
    Raw::connect(addr).cmd_text(&["INFO", "persistence"])
}

/// Sends the batch in one write and reads every reply.
fn run_batch(addr: SocketAddr, batch: &[Step]) -> Vec<Vec<u8>> {
    let mut c = Raw::connect(addr);
    let bytes: Vec<u8> = batch.iter().flat_map(|s| common::encode(s)).collect();
    c.send(&bytes);
    batch.iter().map(|_| c.reply()).collect()
}

/// Waits until no job runs or is scheduled: `counted(info)` reaches `want` and stays there with
/// nothing in progress, for longer than either server waits before it starts a scheduled job.
fn settle(addr: SocketAddr, what: &str, counted: impl Fn(&str) -> u64, want: u64) {
    let idle = |i: &str| {
        field(i, "rdb_bgsave_in_progress") == 0
            && field(i, "aof_rewrite_in_progress") == 0
            && field(i, "aof_rewrite_scheduled") == 0
    };
    common::wait_until(what, || {
        let i = info(addr);
        counted(&i) >= want && idle(&i)
    });
    // Redis starts a scheduled job within a `serverCron` tick (100 ms), sift-server within a
    // worker tick (50 ms): after 500 ms idle, nothing more is coming.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let i = info(addr);
    assert!(idle(&i), "{what}: a job ran after the expected ones: {i}");
    assert_eq!(counted(&i), want, "{what}: {i}");
}

/// redis-server 7.0 with the log on, 200 keys, 5 ms per key saved: each job lasts about a
/// second (a rewrite writes the same RDB preamble).
fn real_redis(dir: &std::path::Path) -> Option<RedisProcess> {
    let install = "apt-get install redis-server; scripts/test.sh does it";
    if Command::new("redis-server").arg("--version").output().is_err() {
        common::external::missing("redis-server", install);
        return None;
    }
    let args = ["--appendonly", "yes", "--rdb-key-save-delay", "5000"];
    let redis = RedisProcess::start(OsStr::new("redis-server"), dir, &args, install)
        .unwrap_or_else(|log| panic!("redis-server did not start:\n{log}"));
    let steps: Vec<Vec<String>> =
        (0..200).map(|i| vec!["SET".to_string(), format!("key:{i}"), format!("value {i}")]).collect();
    let mut c = Raw::connect(redis.addr);
    for s in &steps {
        let args: Vec<&str> = s.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&args), b"+OK\r\n");
    }
    Some(redis)
}

#[test]
fn bgsave_bgrewriteaof_and_save_while_a_job_runs_answer_as_redis_7() {
    let redis_dir = common::temp_dir("jobs-redis");
    let Some(redis) = real_redis(&redis_dir) else { return };
    for sc in SCENARIOS {
        // Redis: one run, its jobs last a second.
        let before = info(redis.addr);
        let (saves, rewrites) = (field(&before, "rdb_saves"), field(&before, "aof_rewrites"));
        let expected: Vec<String> = run_batch(redis.addr, sc.batch).iter().map(|r| render(r)).collect();
        settle(
            redis.addr,
            &format!("redis-server {}: rdb_saves", sc.name),
            |i| field(i, "rdb_saves"),
            saves + sc.redis_counts.0,
        );
        assert_eq!(
            field(&info(redis.addr), "aof_rewrites"),
            rewrites + sc.redis_counts.1,
            "redis-server {}",
            sc.name
        );

        // sift-server: a fresh server for each try, its filter larger each time.
        let mut capacity: u64 = 2_000_000;
        let mut tries = 0;
        loop {
            tries += 1;
            assert!(
                tries <= 5,
                "{}: sift-server's snapshot of a {capacity}-item filter ended within the batch every time",
                sc.name
            );
            let sift = TestServer::start(&["--appendonly", "yes"]);
            let mut c = sift.raw();
            let reserved = c.cmd_text(&["BF.RESERVE", "big", "0.01", &capacity.to_string()]);
            assert_eq!(reserved, "+OK\r\n");
            assert_eq!(c.cmd_text(&["BF.ADD", "big", "member"]), ":1\r\n");
            let start = field(&info(sift.addr), "aof_rewrites");
            let replies = run_batch(sift.addr, sc.batch);
            // Every INFO of the batch (the last one inside EXEC's reply too) from before the
            // first job ended?
            let ended = replies.iter().any(|r| {
                let t = String::from_utf8_lossy(r);
                t.contains("# Persistence") && field(&t, "aof_rewrites") != start
            });
            if ended {
                capacity *= 2;
                continue;
            }
            let got: Vec<String> = replies.iter().map(|r| render(r)).collect();
            assert_eq!(got, expected, "{}: sift-server (left) and redis-server 7.0 (right)", sc.name);
            settle(
                sift.addr,
                &format!("sift-server {}: snapshots", sc.name),
                |i| field(i, "aof_rewrites"),
                start + sc.sift_snapshots,
            );
            break;
        }
    }
}
