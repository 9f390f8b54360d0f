//! A connection's pipelined requests, run as one batch: consecutive commands on the same
//! shards share one lock acquisition.
//!
//! [`execute_batch`] gives the same replies, keyspace changes and log records as calling
//! [`super::execute`] on each request in order. The only difference is when shard locks are
//! taken: a plain key command (no MULTI open, authenticated, not a script, no `maxmemory` or
//! log failure to report) whose keys live in the shards the previous command of the batch
//! locked runs under that same view ([`Locked::restart_clock`] gives it its own time), instead
//! of unlocking and locking again. Every other request runs through [`super::execute`] with no
//! lock held by the batch. A view is kept for at most [`RUN_MAX`] commands and
//! [`RUN_MAX_ARGS`] arguments, and never across an `.await` (the batch is synchronous; the
//! connection commits and flushes after it).
//!
//! Why: with `redis-benchmark -c 50 -P 64 BF.ADD bf ...` both runtime threads work on the one
//! key's shard, and a lock per command made them collide: `perf` showed parking_lot's spin
//! (`sched_yield`) at 5% of the server's CPU, plus two allocations per command for the shard
//! list and the guards (see docs/BENCHMARKS.md, "BF.ADD pipelined with `appendfsync always`: requests run as
//! batches").

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use sift::compat::redisbloom::BloomChain;
use sift_commands::sf::SiftFilter;

use super::table::{self, CommandSpec, LockPlan};
use super::{execute, is_script, resolve, run_locked, After, Session};
use crate::db::{shard_of, shards_of, Locked, Value};
use crate::frame::Frame;
use crate::shared::Shared;

/// Most commands run under one lock acquisition, so a client pipelining thousands of requests
/// on one key does not keep other clients off that key's shard for the whole read.
pub const RUN_MAX: usize = 64;

/// Most arguments (all commands together) run under one lock acquisition: a run of large
/// requests (BF.MADD of 100 items) releases the shard after a few of them, as a run of 64 small
/// ones does, so another runtime thread waiting for the shard waits about as long.
pub const RUN_MAX_ARGS: usize = 512;

/// The command `argv` names if it may run under a view the batch holds: the conditions under
/// which [`super::execute`] would only lock the command's shards and run it. `None` sends the
/// request through `execute`, which then also produces any error reply (unknown command, arity,
/// NOAUTH, OOM, MISCONF, queueing in a MULTI).
fn plain(server: &Shared, session: &Session, argv: &[Bytes]) -> Option<&'static CommandSpec> {
    if session.multi.is_some() || !session.authenticated {
        return None;
    }
    let spec = resolve(argv).ok()?;
    if spec.lock_plan() != LockPlan::Keys || is_script(spec) || spec.name == "exec" {
        return None;
    }
    // A script waiting for or holding shards: `execute` takes the locks off the runtime.
    if server.scripting.pending.load(Ordering::SeqCst) != 0 {
        return None;
    }
    if spec.flags & table::DENYOOM != 0 && server.over_maxmemory() {
        return None;
    }
    if spec.flags & table::WRITE != 0 && server.persistence.write_error().is_some() {
        return None;
    }
    Some(spec)
}

/// Does `keys` hold exactly the shards of `spec`'s keys in `argv`?
fn holds_exactly(keys: &Locked<'_>, spec: &CommandSpec, argv: &[Bytes]) -> bool {
    let mut held = keys.shards();
    let mut wanted = spec.keys(argv);
    // The common case, one key: no allocation.
    if let (Some(h), Some(k)) = (held.next(), wanted.next()) {
        if held.next().is_none() && shard_of(k) == h && wanted.all(|k| shard_of(k) == h) {
            return true;
        }
    }
    shards_of(spec.keys(argv).map(|k| &k[..])).into_iter().eq(keys.shards())
}

/// How many requests ahead of the running one [`prefetch_ahead`] requests a filter's cache
/// lines: the distance `BloomChain::add_many` uses between items of one BF.MADD.
const PREFETCH_AHEAD: usize = 8;

/// Is `argv` a `BF.ADD key item` or `BF.EXISTS key item` request (`bf`: `BF.*`, else `SF.*`)?
fn item_request(argv: &[Bytes], bf: bool) -> bool {
    let (add, exists): (&[u8], &[u8]) =
        if bf { (b"bf.add", b"bf.exists") } else { (b"sf.add", b"sf.exists") };
    argv.len() == 3 && (argv[0].eq_ignore_ascii_case(add) || argv[0].eq_ignore_ascii_case(exists))
}

/// Before a `BF.ADD` / `BF.EXISTS` (or `SF.ADD` / `SF.EXISTS`) of a run: requests the cache
/// lines of the item of the same family's command on the same key [`PREFETCH_AHEAD`] requests
/// later in `queue` (and, when the run starts, of every one up to there), so the random misses
/// into a large filter overlap across pipelined requests as they do across the items of one
/// BF.MADD. Only a hint: nothing is read for the reply and nothing changes.
fn prefetch_ahead(
    keys: &mut Locked<'_>,
    spec: &CommandSpec,
    argv: &[Bytes],
    queue: &VecDeque<Vec<Bytes>>,
    starting: bool,
) {
    let bf = match spec.name {
        "bf.add" | "bf.exists" => true,
        "sf.add" | "sf.exists" => false,
        _ => return,
    };
    if argv.len() != 3 {
        return;
    }
    let key = &argv[1];
    let same = |next: &&Vec<Bytes>| item_request(next, bf) && next[1] == *key;
    let from = if starting { 0 } else { PREFETCH_AHEAD - 1 };
    let mut ahead =
        queue.range(from.min(queue.len())..PREFETCH_AHEAD.min(queue.len())).filter(same).peekable();
    if ahead.peek().is_none() {
        return;
    }
    if let Some(Value::Data(d)) = keys.peek(key).map(|e| &e.value) {
        if let Some(chain) = d.downcast_ref::<BloomChain>() {
            for next in ahead {
                chain.prefetch(&next[2]);
            }
        } else if let Some(f) = d.downcast_ref::<SiftFilter>().and_then(SiftFilter::filter) {
            for next in ahead {
                f.prefetch(&next[2]);
            }
        }
    }
}

/// Runs requests from the front of `queue` in order, handing each reply to `reply` (with the
/// session as it is after the command). Stops when `queue` is empty, when a command asks the
/// connection to close ([`Session::after`]), or when `reply` returns `false` (the connection
/// wants to flush); the requests not run stay in `queue`. Empty requests get no reply.
pub fn execute_batch(
    server: &Shared,
    session: &mut Session,
    queue: &mut VecDeque<Vec<Bytes>>,
    mut reply: impl FnMut(&Session, Frame) -> bool,
) {
    // The view of the last plain command, and how many commands and arguments it served.
    let mut held: Option<(Locked<'_>, usize, usize)> = None;
    while let Some(argv) = queue.pop_front() {
        if argv.is_empty() {
            continue;
        }
        let frame = match plain(server, session, &argv) {
            Some(spec) => {
                let reuse = held.as_ref().is_some_and(|(keys, n, args)| {
                    *n < RUN_MAX && *args + argv.len() <= RUN_MAX_ARGS && holds_exactly(keys, spec, &argv)
                });
                if !reuse {
                    // Unlock before locking again: the shards may overlap.
                    drop(held.take());
                    let keys = server.db.lock_keys(spec.keys(&argv).map(|k| &k[..]));
                    held = Some((keys, 0, 0));
                }
                let (keys, n, args) = held.as_mut().expect("set above");
                if reuse {
                    keys.restart_clock();
                }
                prefetch_ahead(keys, spec, &argv, queue, !reuse);
                *n += 1;
                *args += argv.len();
                run_locked(server, session, spec, &argv, keys)
            }
            None => {
                drop(held.take());
                match execute(server, session, argv) {
                    Some(frame) => frame,
                    None => continue,
                }
            }
        };
        let more = reply(session, frame);
        if session.after != After::Continue || !more {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;
    use crate::config::Params;
    use crate::persist::Recorder;

    fn request(line: &str) -> Vec<Bytes> {
        line.split(' ').filter(|a| !a.is_empty()).map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    /// Replies (as sent) and log records of `lines` run one `execute` at a time, and run as
    /// batches of `batch` requests.
    fn run_both(lines: &[String], batch: usize) -> [(Vec<Frame>, Vec<Vec<Bytes>>); 2] {
        let one = {
            let log = Arc::new(Mutex::new(Vec::new()));
            let server = Shared::new(Params::default(), Box::new(Recorder(log.clone())));
            let mut s = Session::new(1, true);
            let mut replies = Vec::new();
            for l in lines {
                if let Some(f) = execute(&server, &mut s, request(l)) {
                    replies.push(f);
                }
            }
            let records = log.lock().clone();
            (replies, records)
        };
        let batched = {
            let log = Arc::new(Mutex::new(Vec::new()));
            let server = Shared::new(Params::default(), Box::new(Recorder(log.clone())));
            let mut s = Session::new(1, true);
            let mut replies = Vec::new();
            for chunk in lines.chunks(batch) {
                let mut queue: VecDeque<Vec<Bytes>> = chunk.iter().map(|l| request(l)).collect();
                while !queue.is_empty() {
                    execute_batch(&server, &mut s, &mut queue, |_, f| {
                        replies.push(f);
                        true
                    });
                }
            }
            let records = log.lock().clone();
            (replies, records)
        };
        [one, batched]
    }

    /// Runs of one key (longer than [`RUN_MAX`] and [`RUN_MAX_ARGS`]), keys on other shards,
    /// fallbacks (MULTI / EXEC, unknown commands, arity errors, keyless commands, empty
    /// requests) in between: the same replies and the same log, in the same order, as one
    /// `execute` per request.
    #[test]
    fn a_batch_answers_and_logs_as_one_request_at_a_time() {
        // `big` is large enough for the library to prefetch its lines (1 MiB).
        let mut lines: Vec<String> = vec![
            "BF.RESERVE bf 0.01 1000".into(),
            "BF.RESERVE big 0.01 1000000".into(),
            "SF.RESERVE sf 0.01 1000000".into(),
            "SET s 1".into(),
        ];
        for i in 0..150 {
            lines.push(format!("BF.ADD bf item{}", i % 97));
            lines.push(format!("bf.add big item{}", i % 89));
            lines.push(format!("BF.EXISTS big item{}", i % 101));
            // The SF family's prefetch too, interleaved with BF requests on its key's neighbours.
            lines.push(format!("SF.ADD sf item{}", i % 83));
            lines.push(format!("sf.exists sf item{}", i % 79));
            lines.push(format!("SF.ADD sfauto item{}", i % 7));
            if i % 10 == 0 {
                // 102 arguments: a run of these ends at RUN_MAX_ARGS, not RUN_MAX.
                let items: Vec<String> = (0..100).map(|j| format!("m{}", (i * 7 + j) % 300)).collect();
                lines.push(format!("BF.MADD big {}", items.join(" ")));
                lines.push(format!("BF.MADD big {}", items.join(" ")));
            }
            if i % 7 == 0 {
                lines.push(format!("BF.EXISTS bf item{}", i + 1));
                lines.push(format!("SET k{i} v"));
            }
            if i % 31 == 0 {
                lines.extend(
                    [
                        "MULTI",
                        "BF.ADD bf x",
                        "INCR nosuch",
                        "GET s",
                        "EXEC",
                        "NOSUCHCMD a",
                        "GET",
                        "",
                        "PING",
                    ]
                    .map(String::from),
                );
            }
            if i % 50 == 0 {
                lines.extend(
                    ["MSET a 1 b 2 c 3", "DEL a b c k0", "RENAME s s2", "RENAME s2 s"].map(String::from),
                );
            }
        }
        lines.push("BF.CARD bf".into());
        lines.push("SF.CARD sf".into());
        lines.push("DBSIZE".into());
        for batch in [1, 3, 64, 256, lines.len()] {
            let [one, batched] = run_both(&lines, batch);
            assert_eq!(one.0, batched.0, "replies, batches of {batch}");
            assert_eq!(one.1, batched.1, "log records, batches of {batch}");
            assert!(one.1.len() > 150, "{}", one.1.len());
        }
    }

    /// A command that closes the connection ends the batch; the requests after it stay queued.
    #[test]
    fn quit_stops_the_batch() {
        let server = Shared::new(Params::default(), Box::new(crate::persist::MemoryOnly::default()));
        let mut s = Session::new(1, true);
        let mut queue: VecDeque<Vec<Bytes>> = ["SET a 1", "QUIT", "SET b 2"].map(request).into();
        let mut replies = Vec::new();
        execute_batch(&server, &mut s, &mut queue, |_, f| {
            replies.push(f);
            true
        });
        assert_eq!(replies, [Frame::ok(), Frame::ok()]);
        assert_eq!(s.after, After::Close);
        assert_eq!(queue.len(), 1);
    }
}
