//! Durability against real processes: the built `sift-server` binary is started on a data
//! directory, written to, killed with SIGKILL (or stopped cleanly), restarted on the same
//! directory, and every write whose reply was received is checked to be there.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{boundaries, child_of, encode, segments, snapshot_file, temp_dir, Proc};

/// A reply, enough of RESP2 for these tests.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    fn text(&self) -> String {
        match self {
            Reply::Simple(s) | Reply::Error(s) => s.clone(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        }
    }
}

struct Client {
    reader: BufReader<TcpStream>,
    stream: TcpStream,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { reader: BufReader::new(stream.try_clone().unwrap()), stream }
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let mut line = Vec::new();
        if self.reader.read_until(b'\n', &mut line)? == 0 || !line.ends_with(b"\r\n") {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let n = || body.parse::<i64>().map_err(|_| std::io::Error::other("bad length"));
        Ok(match line[0] {
            b'+' => Reply::Simple(body),
            b'-' => Reply::Error(body),
            b':' => Reply::Int(n()?),
            b'$' if n()? < 0 => Reply::Bulk(None),
            b'$' => {
                let mut data = vec![0; n()? as usize + 2];
                self.reader.read_exact(&mut data)?;
                data.truncate(data.len() - 2);
                Reply::Bulk(Some(data))
            }
            b'*' => Reply::Array((0..n()?.max(0)).map(|_| self.read()).collect::<Result<_, _>>()?),
            b'=' => {
                let mut data = vec![0; n()? as usize + 2];
                self.reader.read_exact(&mut data)?;
                Reply::Bulk(Some(data[4..data.len() - 2].to_vec()))
            }
            other => return Err(std::io::Error::other(format!("unexpected reply type {other}"))),
        })
    }

    /// Sends all commands at once, then reads replies until one fails to arrive.
    fn pipeline(&mut self, cmds: &[Vec<String>]) -> Vec<Reply> {
        let mut out = Vec::new();
        for c in cmds {
            out.extend_from_slice(&encode(&c.iter().map(String::as_str).collect::<Vec<_>>()));
        }
        if self.stream.write_all(&out).is_err() {
            return Vec::new();
        }
        let mut replies = Vec::new();
        for _ in cmds {
            match self.read() {
                Ok(r) => replies.push(r),
                Err(_) => break,
            }
        }
        replies
    }

    fn cmd(&mut self, args: &[&str]) -> Reply {
        self.stream.write_all(&encode(args)).unwrap();
        self.read().unwrap()
    }
}

fn cmd(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// What the keyspace must hold: key → value and whether a deadline was set.
type Model = BTreeMap<String, (String, bool)>;

/// Keys whose last write got no reply: their state is unknown, so they are not checked or
/// touched again. Everything acknowledged is in `present` / `absent`.
#[derive(Default)]
struct Expect {
    present: Model,
    absent: Vec<String>,
    uncertain: std::collections::BTreeSet<String>,
}

impl Expect {
    fn merge(&mut self, other: Expect) {
        self.present.extend(other.present);
        self.absent.extend(other.absent);
        self.uncertain.extend(other.uncertain);
    }

    /// Checks every acknowledged write against the server.
    fn verify(&self, c: &mut Client, context: &str) {
        let keys: Vec<&String> = self.present.keys().collect();
        for chunk in keys.chunks(500) {
            let cmds: Vec<Vec<String>> = chunk.iter().map(|k| cmd(&["GET", k])).collect();
            let replies = c.pipeline(&cmds);
            assert_eq!(replies.len(), chunk.len());
            for (k, r) in chunk.iter().zip(replies) {
                assert_eq!(r.text(), self.present[*k].0, "{context}: key {k}");
            }
            let cmds: Vec<Vec<String>> = chunk.iter().map(|k| cmd(&["PTTL", k])).collect();
            for (k, r) in chunk.iter().zip(c.pipeline(&cmds)) {
                let Reply::Int(ttl) = r else { panic!("{context}: PTTL {k}: {r:?}") };
                assert_eq!(ttl > 0, self.present[*k].1, "{context}: PTTL of {k} is {ttl}");
            }
        }
        for chunk in self.absent.chunks(500) {
            let cmds: Vec<Vec<String>> = chunk.iter().map(|k| cmd(&["EXISTS", k])).collect();
            for (k, r) in chunk.iter().zip(c.pipeline(&cmds)) {
                assert_eq!(r, Reply::Int(0), "{context}: deleted key {k} is back");
            }
        }
    }
}

/// Writes pipelined batches until the connection breaks (the server was killed) or `stop`:
/// new keys (SET), and on keys acknowledged earlier DEL, RENAME and PEXPIRE. `base` holds the
/// keys this writer may touch; returns what it knows for sure.
fn writer(addr: SocketAddr, tag: String, value_len: usize, base: Model, stop: Arc<AtomicBool>) -> Expect {
    // The kill may come before this thread connects (a round kills after 30 ms on a loaded
    // machine): then it wrote nothing, and expects exactly what it was given.
    let Ok(stream) = TcpStream::connect(addr) else {
        return Expect { present: base, ..Expect::default() };
    };
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut c = Client { reader: BufReader::new(stream.try_clone().unwrap()), stream };
    let mut exp = Expect { present: base, ..Expect::default() };
    let pad = "x".repeat(value_len);
    // Unique across rounds: a name is never reused.
    let mut n = std::time::UNIX_EPOCH.elapsed().unwrap().as_micros() as u64 * 1000;
    while !stop.load(Ordering::Relaxed) {
        let mut cmds = Vec::new();
        // (keys it makes unknown if unanswered, what it does when answered)
        #[allow(clippy::type_complexity)]
        let mut effects: Vec<(Vec<String>, Box<dyn Fn(&mut Expect, &Reply)>)> = Vec::new();
        let old: Vec<String> =
            exp.present.keys().filter(|k| k.starts_with(&tag)).step_by(7).take(6).cloned().collect();
        for (j, k) in old.into_iter().enumerate() {
            n += 1;
            match j % 3 {
                0 => {
                    cmds.push(cmd(&["DEL", &k]));
                    let k2 = k.clone();
                    effects.push((
                        vec![k],
                        Box::new(move |e, r| {
                            assert_eq!(r, &Reply::Int(1));
                            e.present.remove(&k2);
                            e.absent.push(k2.clone());
                        }),
                    ));
                }
                1 => {
                    let dst = format!("{tag}:r{n}");
                    cmds.push(cmd(&["RENAME", &k, &dst]));
                    let (k2, d2) = (k.clone(), dst.clone());
                    effects.push((
                        vec![k, dst],
                        Box::new(move |e, r| {
                            assert_eq!(r, &Reply::Simple("OK".into()));
                            let v = e.present.remove(&k2).unwrap();
                            e.present.insert(d2.clone(), v);
                            e.absent.push(k2.clone());
                        }),
                    ));
                }
                _ => {
                    cmds.push(cmd(&["PEXPIRE", &k, "100000000"]));
                    let k2 = k.clone();
                    effects.push((
                        vec![k],
                        Box::new(move |e, r| {
                            assert_eq!(r, &Reply::Int(1));
                            e.present.get_mut(&k2).unwrap().1 = true;
                        }),
                    ));
                }
            }
        }
        for _ in 0..40 {
            n += 1;
            let (k, v) = (format!("{tag}:k{n}"), format!("{n}:{pad}"));
            cmds.push(cmd(&["SET", &k, &v]));
            let k2 = k.clone();
            effects.push((
                vec![k],
                Box::new(move |e, r| {
                    assert_eq!(r, &Reply::Simple("OK".into()));
                    e.present.insert(k2.clone(), (v.clone(), false));
                }),
            ));
        }
        let replies = c.pipeline(&cmds);
        let answered = replies.len();
        for (r, (_, f)) in replies.iter().zip(&effects) {
            f(&mut exp, r);
        }
        if answered < cmds.len() {
            for (keys, _) in &effects[answered..] {
                for k in keys {
                    exp.present.remove(k);
                    exp.uncertain.insert(k.clone());
                }
            }
            break;
        }
    }
    exp.absent.retain(|k| !exp.uncertain.contains(k));
    exp
}

/// Runs `writers` writer threads against `p`; calls `kill_when` to decide when to SIGKILL.
fn write_then_kill(
    p: Proc,
    exp: &mut Expect,
    writers: usize,
    value_len: usize,
    kill_when: impl FnOnce(&Proc),
) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let tag = format!("w{w}");
            let base: Model = exp
                .present
                .iter()
                .filter(|(k, _)| k.starts_with(&tag))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let (addr, stop) = (p.addr, stop.clone());
            std::thread::spawn(move || writer(addr, tag, value_len, base, stop))
        })
        .collect();
    kill_when(&p);
    p.kill9();
    stop.store(true, Ordering::Relaxed);
    let mut next = Expect {
        absent: std::mem::take(&mut exp.absent),
        uncertain: std::mem::take(&mut exp.uncertain),
        ..Expect::default()
    };
    for h in handles {
        next.merge(h.join().expect("writer thread"));
    }
    next.absent.retain(|k| !next.present.contains_key(k) && !next.uncertain.contains(k));
    *exp = next;
}

fn info_field(c: &mut Client, field: &str) -> String {
    let info = c.cmd(&["INFO", "persistence"]).text();
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

#[test]
fn kill_9_during_pipelined_writes_loses_nothing_acknowledged() {
    let dir = temp_dir("kill9");
    let mut exp = Expect::default();
    let mut acked = 0;
    for round in 0..20u64 {
        let p = Proc::start(&dir, &[]).unwrap();
        exp.verify(&mut Client::connect(p.addr), &format!("before round {round}"));
        write_then_kill(p, &mut exp, 2, 16, |_| std::thread::sleep(Duration::from_millis(30 + 17 * round)));
        acked = exp.present.len() + exp.absent.len();
    }
    let p = Proc::start(&dir, &[]).unwrap();
    exp.verify(&mut Client::connect(p.addr), "after the last round");
    assert!(exp.present.len() > 1000, "too few writes to mean anything: {}", exp.present.len());
    eprintln!(
        "{} keys present, {} deleted, {} uncertain; {acked} checked",
        exp.present.len(),
        exp.absent.len(),
        exp.uncertain.len()
    );
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// Where the records of a segment end (the log is preallocated with zeros ahead of them).
fn records_end(seg: &Path) -> u64 {
    *boundaries(&fs::read(seg).unwrap()).last().unwrap() as u64
}

#[test]
fn torn_tail_is_truncated_and_reported() {
    // The tail a crash left: written where the records end (into the preallocated zeros, as
    // a torn append is), or past the preallocated space.
    for (case, tail, past_prealloc) in [
        ("partial header", &b"\x1b\x00\x00\x00\xe4\xff"[..], false),
        (
            "header, partial payload",
            &b"\x40\x00\x00\x00\xbf\xff\xff\xff\x01\x02\x03\x04\x03\x00\x00\x00\x03"[..],
            false,
        ),
        ("partial header past the zeros", &b"\x1b\x00\x00\x00\xe4\xff"[..], true),
        ("zeros only: the end of the log, not torn", &[][..], false),
    ] {
        let dir = temp_dir("torn");
        let p = Proc::start(&dir, &[]).unwrap();
        let mut c = Client::connect(p.addr);
        // Two batches: the second is synced after the space the first one's sync preallocated.
        for half in [0..100, 100..200] {
            let cmds: Vec<Vec<String>> =
                half.map(|i| cmd(&["SET", &format!("k{i}"), &format!("v{i}")])).collect();
            assert_eq!(c.pipeline(&cmds).len(), 100);
        }
        p.kill9();
        let seg = segments(&dir).pop().unwrap();
        let len = records_end(&seg);
        let size = fs::metadata(&seg).unwrap().len();
        assert!(size > len, "{case}: preallocated ({size} bytes for {len} of records)");
        let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(tail, if past_prealloc { size } else { len }).unwrap();
        drop(f);
        let p = Proc::start(&dir, &[]).unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut c = Client::connect(p.addr);
        for i in 0..200 {
            assert_eq!(c.cmd(&["GET", &format!("k{i}")]).text(), format!("v{i}"), "{case}");
        }
        assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(200));
        let log = p.log();
        let name = seg.file_name().unwrap().to_str().unwrap();
        let data = fs::read(&seg).unwrap();
        if tail.is_empty() {
            assert_eq!(data.len() as u64, size, "{case}: nothing cut");
            assert!(!log.contains("torn last record"), "{case}: {log}");
        } else {
            // Cut by overwriting the tail with zeros: the file keeps the size its header claims.
            let grown = if past_prealloc { size + tail.len() as u64 } else { size };
            assert_eq!(data.len() as u64, grown, "{case}: the size is kept");
            assert!(data[len as usize..].iter().all(|&b| b == 0), "{case}: the tail is cut");
            assert!(
                log.contains("torn last record")
                    && log.contains(name)
                    && log.contains(&format!("cutting the log at offset {len}")),
                "{case}: {log}"
            );
        }
        // Writes after the repair land on a clean log, where the records end.
        assert_eq!(c.cmd(&["SET", "after", "1"]), Reply::Simple("OK".into()));
        p.kill9();
        let p = Proc::start(&dir, &[]).unwrap();
        assert_eq!(Client::connect(p.addr).cmd(&["DBSIZE"]), Reply::Int(201));
        assert!(!p.log().contains("torn last record"), "{case}: {}", p.log());
        drop(p);
        let _ = fs::remove_dir_all(&dir);
    }
}

#[test]
fn corruption_stops_the_start_and_names_the_file() {
    // A flipped byte in the middle of the log.
    let dir = temp_dir("corrupt-log");
    let p = Proc::start(&dir, &[]).unwrap();
    let cmds: Vec<Vec<String>> = (0..100).map(|i| cmd(&["SET", &format!("k{i}"), "value"])).collect();
    assert_eq!(Client::connect(p.addr).pipeline(&cmds).len(), 100);
    p.kill9();
    let seg = segments(&dir).pop().unwrap();
    let mut data = fs::read(&seg).unwrap();
    let mid = records_end(&seg) as usize / 2;
    data[mid] ^= 0x40;
    fs::write(&seg, &data).unwrap();
    let err = Proc::start(&dir, &[]).err().expect("must refuse to start");
    let name = seg.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name) && err.contains("corrupted"), "{err}");
    // Still refused on the next try: nothing was truncated or "repaired".
    assert!(Proc::start(&dir, &[]).is_err());
    let _ = fs::remove_dir_all(&dir);

    // A flipped byte in a snapshot.
    let dir = temp_dir("corrupt-snap");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Client::connect(p.addr);
    assert_eq!(c.pipeline(&cmds).len(), 100);
    assert_eq!(c.cmd(&["SAVE"]), Reply::Simple("OK".into()));
    p.kill9();
    let snap = snapshot_file(&dir).expect("a snapshot");
    let mut data = fs::read(&snap).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x01;
    fs::write(&snap, &data).unwrap();
    let err = Proc::start(&dir, &[]).err().expect("must refuse to start");
    let name = snap.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name) && err.contains("checksum"), "{err}");
    let _ = fs::remove_dir_all(&dir);
}

fn fill(c: &mut Client, from: usize, to: usize) {
    let cmds: Vec<Vec<String>> =
        (from..to).map(|i| cmd(&["SET", &format!("k{i}"), &format!("v{i}")])).collect();
    assert!(c.pipeline(&cmds).iter().all(|r| *r == Reply::Simple("OK".into())));
}

fn check(c: &mut Client, to: usize, context: &str) {
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(to as i64 + 1), "{context}");
    for i in (0..to).step_by(7) {
        assert_eq!(c.cmd(&["GET", &format!("k{i}")]).text(), format!("v{i}"), "{context}");
    }
    let Reply::Int(ttl) = c.cmd(&["PTTL", "ttl"]) else { panic!() };
    assert!(ttl > 1_000_000, "{context}: PTTL {ttl}");
}

#[test]
fn save_bgsave_reload_shutdown_keep_everything() {
    let dir = temp_dir("save");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Client::connect(p.addr);
    fill(&mut c, 0, 1000);
    assert_eq!(c.cmd(&["SET", "ttl", "x", "EX", "5000"]), Reply::Simple("OK".into()));
    // SAVE, more writes in the log, SIGKILL.
    let before = c.cmd(&["LASTSAVE"]);
    assert_eq!(c.cmd(&["SAVE"]), Reply::Simple("OK".into()));
    assert!(matches!((before, c.cmd(&["LASTSAVE"])), (Reply::Int(a), Reply::Int(b)) if b >= a));
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    fill(&mut c, 1000, 2000);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1000");
    p.kill9();
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Client::connect(p.addr);
    check(&mut c, 2000, "SAVE + log + kill -9");

    // BGSAVE: the snapshot completes in the background.
    assert_eq!(c.cmd(&["BGSAVE"]), Reply::Simple("Background saving started".into()));
    let t = Instant::now();
    while info_field(&mut c, "rdb_bgsave_in_progress") != "0" {
        assert!(t.elapsed() < Duration::from_secs(20), "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(segments(&dir).len(), 1, "the log restarted after the snapshot");
    fill(&mut c, 2000, 3000);
    p.kill9();
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Client::connect(p.addr);
    check(&mut c, 3000, "BGSAVE + log + kill -9");

    // DEBUG RELOAD.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    check(&mut c, 3000, "DEBUG RELOAD");

    // SHUTDOWN: exit 0, nothing lost.
    fill(&mut c, 3000, 4000);
    c.stream.write_all(&encode(&["SHUTDOWN"])).unwrap();
    let mut p = p;
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{status}");
    drop(p);
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Client::connect(p.addr);
    check(&mut c, 4000, "SHUTDOWN");

    // SIGTERM: same.
    fill(&mut c, 4000, 5000);
    let mut p = p;
    let pid = p.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{status}");
    drop(p);
    let p = Proc::start(&dir, &["--appendfsync", "everysec"]).unwrap();
    check(&mut Client::connect(p.addr), 5000, "SIGTERM");
    drop(p);

    // Snapshots only (--appendonly no): SAVE and SHUTDOWN keep everything.
    let p = Proc::start(&dir, &["--appendonly", "no"]).unwrap();
    let mut c = Client::connect(p.addr);
    check(&mut c, 5000, "appendonly no, loading the old log");
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    fill(&mut c, 5000, 6000);
    c.stream.write_all(&encode(&["SHUTDOWN"])).unwrap();
    let mut p = p;
    assert!(p.child.wait().unwrap().success());
    drop(p);
    let p = Proc::start(&dir, &[]).unwrap();
    check(&mut Client::connect(p.addr), 6000, "appendonly no + SHUTDOWN");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// The manifest's snapshot id and segment ids.
fn manifest_ids(dir: &Path) -> (Option<u64>, Vec<u64>) {
    let id = |p: &Path| {
        let name = p.file_name().unwrap().to_str().unwrap();
        name.trim_start_matches(|c: char| !c.is_ascii_digit())
            .split('.')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    (snapshot_file(dir).map(|p| id(&p)), segments(dir).iter().map(|p| id(p)).collect())
}

/// Kills under load while a log rewrite runs, until three kills have provably landed in the
/// middle of one: the condition is read from the directory after the kill, not guessed from
/// timing. A rewrite first stores a manifest that appends its new segment (whose id is then
/// above the snapshot's), and last one that names its new snapshot (whose id is above that
/// segment's); a kill in between leaves the first. Each round also waits, before it kills, for
/// a rewrite to be seen running after one completed in the same process.
#[test]
fn auto_rewrite_under_load_and_kill_during_it() {
    let dir = temp_dir("rewrite");
    let args = [
        "--auto-aof-rewrite-min-size",
        "256kb",
        "--auto-aof-rewrite-percentage",
        "50",
        "--appendfsync",
        "always",
    ];
    let mut exp = Expect::default();
    let (mut killed_during, mut rounds) = (0, 0);
    while killed_during < 3 {
        assert!(rounds < 40, "only {killed_during} of {rounds} kills landed during a rewrite");
        rounds += 1;
        let p = Proc::start(&dir, &args).unwrap();
        exp.verify(&mut Client::connect(p.addr), &format!("before round {rounds}"));
        let mut seen_running = false;
        write_then_kill(p, &mut exp, 2, 1000, |p| {
            let mut c = Client::connect(p.addr);
            // A safety net, not the condition: a round whose writers never start a rewrite ends.
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(60) {
                if info_field(&mut c, "aof_rewrites") != "0"
                    && info_field(&mut c, "aof_rewrite_in_progress") == "1"
                {
                    seen_running = true;
                    return;
                }
            }
        });
        let (snapshot, segs) = manifest_ids(&dir);
        if seen_running && segs.len() > 1 && snapshot.is_some_and(|s| s < *segs.last().unwrap()) {
            killed_during += 1;
        }
    }
    let p = Proc::start(&dir, &args).unwrap();
    let mut c = Client::connect(p.addr);
    exp.verify(&mut c, "after the last round");
    assert!(snapshot_file(&dir).is_some(), "no rewrite ever completed");
    assert!(
        info_field(&mut c, "aof_current_size").parse::<u64>().unwrap() < 64 << 20,
        "the log keeps restarting"
    );
    eprintln!("{} keys, {killed_during} of {rounds} kills during a rewrite", exp.present.len());
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// Kills a process by pid when dropped (the server under strace, which killing strace leaves
/// running).
struct KillOnDrop(Option<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// With `appendfsync always`, a reply computed from another connection's write waits until that
/// write is durable, as the writer's own reply does: connection A's BF.ADD is applied and waits
/// for its fdatasync (slowed by strace's fault injection), connection C asks BF.EXISTS for the
/// same item, and C's answer must come after the fdatasync that covers A's record (before, a
/// power loss could take back what C was told exists).
#[test]
fn a_read_waits_until_the_write_it_sees_is_durable() {
    if !common::has_strace() {
        return;
    }
    let dir = temp_dir("dirty-read");
    let p = Proc::start_under(&common::SLOW_FDATASYNC, &dir, &[]).unwrap();
    let _server = KillOnDrop(child_of(p.child.id()));
    let mut setup = Client::connect(p.addr);
    assert_eq!(setup.cmd(&["BF.ADD", "k", "warmup"]), Reply::Int(1));
    let fsyncs = |c: &mut Client| info_field(c, "aof_fsyncs").parse::<u64>().unwrap();
    let changes = |c: &mut Client| info_field(c, "rdb_changes_since_last_save").parse::<u64>().unwrap();
    let mut tested = 0;
    for attempt in 0..5 {
        let item = format!("X{attempt}");
        let (fsyncs_before, changes_before) = (fsyncs(&mut setup), changes(&mut setup));
        let mut a = Client::connect(p.addr);
        a.stream.write_all(&encode(&["BF.ADD", "k", &item])).unwrap();
        // A's add is applied (it now waits for its fdatasync, 500 ms late).
        let t = Instant::now();
        while changes(&mut setup) == changes_before {
            assert!(t.elapsed() < Duration::from_secs(30), "A's add never ran");
        }
        if fsyncs(&mut setup) != fsyncs_before {
            // Too slow to catch the window: A's record is already synced; try again.
            assert_eq!(a.read().unwrap(), Reply::Int(1));
            continue;
        }
        let mut c = Client::connect(p.addr);
        assert_eq!(c.cmd(&["BF.EXISTS", "k", &item]), Reply::Int(1));
        assert!(
            fsyncs(&mut setup) > fsyncs_before,
            "C was told {item} exists before the fdatasync of its record completed"
        );
        assert_eq!(a.read().unwrap(), Reply::Int(1));
        tested += 1;
    }
    assert!(tested >= 3, "only {tested} of 5 attempts caught A waiting for its fdatasync");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// `BGREWRITEAOF` through a real client library (the `redis` crate): Redis 7's replies, the
/// rewrite in progress from the request until it is done, the log shrunk to what was written
/// since, everything back after a SIGKILL; the command's `COMMAND INFO` row as Redis 7.0's.
#[test]
fn bgrewriteaof_compacts_the_log_and_keeps_everything() {
    let dir = temp_dir("bgrewriteaof");
    let p = Proc::started(&dir);
    let client = redis::Client::open(format!("redis://{}", p.addr)).unwrap();
    let mut r = client.get_connection().unwrap();
    let persistence = |r: &mut redis::Connection, field: &str| -> u64 {
        let info: String = redis::cmd("INFO").arg("persistence").query(r).unwrap();
        let prefix = format!("{field}:");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {field} in {info}"))
            .parse()
            .unwrap()
    };
    // 100 keys, each overwritten 200 times: the log holds 20,000 records for 100 values.
    let (keys, rounds) = (100, 200);
    for round in 0..rounds {
        let mut pipe = redis::pipe();
        for k in 0..keys {
            pipe.cmd("SET").arg(format!("key:{k}")).arg(format!("value {k} of round {round}")).ignore();
        }
        pipe.query::<()>(&mut r).unwrap();
    }
    let before = persistence(&mut r, "aof_current_size");
    let rewrites = persistence(&mut r, "aof_rewrites");
    assert_eq!(persistence(&mut r, "aof_rewrite_in_progress"), 0);

    // In one batch, so the request and the reads come before the worker's next tick: the
    // rewrite is in progress from the request on, and a second request is refused.
    let mut batch = redis::cmd("BGREWRITEAOF").get_packed_command();
    batch.extend(redis::cmd("BGREWRITEAOF").get_packed_command());
    batch.extend(redis::cmd("INFO").arg("persistence").get_packed_command());
    r.send_packed_command(&batch).unwrap();
    let started = r.recv_response().unwrap();
    let again = match r.recv_response() {
        Ok(redis::Value::ServerError(e)) => format!("{} {}", e.code(), e.details().unwrap_or("")),
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        Ok(other) => panic!("{other:?}"),
    };
    let info: String = redis::from_redis_value(&r.recv_response().unwrap()).unwrap();
    assert_eq!(started, redis::Value::SimpleString("Background append only file rewriting started".into()));
    assert_eq!(again, "ERR Background append only file rewriting already in progress");
    assert!(info.contains("aof_rewrite_in_progress:1\r\n"), "{info}");
    assert!(info.contains("aof_rewrite_scheduled:0\r\n"), "{info}");
    common::wait_until("the rewrite to end", || persistence(&mut r, "aof_rewrite_in_progress") == 0);
    assert_eq!(persistence(&mut r, "aof_rewrites"), rewrites + 1);
    let after = persistence(&mut r, "aof_current_size");
    assert!(after * 20 < before, "the log did not shrink: {before} bytes before, {after} after");
    assert_eq!(segments(&dir).len(), 1, "the log restarted at the rewrite");

    // Writes after the rewrite go to the new log; a SIGKILL loses none of them.
    redis::cmd("SET").arg("key:0").arg("after the rewrite").query::<()>(&mut r).unwrap();
    drop(r);
    p.kill9();
    let p = Proc::started(&dir);
    let mut r = redis::Client::open(format!("redis://{}", p.addr)).unwrap().get_connection().unwrap();
    let got: String = redis::cmd("GET").arg("key:0").query(&mut r).unwrap();
    assert_eq!(got, "after the rewrite");
    for k in 1..keys {
        let got: String = redis::cmd("GET").arg(format!("key:{k}")).query(&mut r).unwrap();
        assert_eq!(got, format!("value {k} of round {}", rounds - 1));
    }
    let n: u64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(n, keys as u64);

    // Redis 7.0's row: arity 1, admin noscript no_async_loading, no keys, @admin @slow @dangerous.
    let info: redis::Value = redis::cmd("COMMAND").arg("INFO").arg("bgrewriteaof").query(&mut r).unwrap();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    let redis::Value::Array(rows) = info else { panic!("{info:?}") };
    let redis::Value::Array(row) = &rows[0] else { panic!("{rows:?}") };
    let list = |v: &redis::Value| match v {
        redis::Value::Array(items) | redis::Value::Set(items) => items.iter().map(text).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text(&row[0]), "bgrewriteaof");
    assert_eq!(row[1], redis::Value::Int(1));
    assert_eq!(list(&row[2]), ["admin", "noscript", "no_async_loading"]);
    assert_eq!(row[3..6], [redis::Value::Int(0), redis::Value::Int(0), redis::Value::Int(0)]);
    assert_eq!(list(&row[6]), ["@admin", "@slow", "@dangerous"]);
    drop(r);
    drop(p);

    // Without the log, Redis 7 rewrites all the same (its base file); here: the snapshot.
    let dir = temp_dir("bgrewriteaof-nolog");
    let p = Proc::start(&dir, &["--appendonly", "no"]).unwrap();
    let mut r = redis::Client::open(format!("redis://{}", p.addr)).unwrap().get_connection().unwrap();
    redis::cmd("SET").arg("k").arg("v").query::<()>(&mut r).unwrap();
    let reply: String = redis::cmd("BGREWRITEAOF").query(&mut r).unwrap();
    assert_eq!(reply, "Background append only file rewriting started");
    common::wait_until("the rewrite to end", || persistence(&mut r, "aof_rewrite_in_progress") == 0);
    assert!(snapshot_file(&dir).is_some(), "no snapshot written");
    drop(r);
    p.kill9();
    let p = Proc::started(&dir);
    let mut r = redis::Client::open(format!("redis://{}", p.addr)).unwrap().get_connection().unwrap();
    let got: String = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(got, "v");
}
