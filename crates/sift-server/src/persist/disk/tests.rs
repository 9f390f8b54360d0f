//! The disk store's unit tests on real directories.

use super::*;
use crate::db::Db;

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sift-unit-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn argv(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

/// A failed write or fsync fails the commit of its batch and every later one, and makes
/// `write_error` refuse writes: nothing after it can be acknowledged.
#[test]
fn a_failed_log_write_is_sticky() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let d = dir("full");
    let disk = Disk::new(DiskOptions {
        dir: d.clone(),
        appendonly: true,
        fsync: Fsync::Always,
        load_truncated: false,
    });
    let db = Db::new();
    assert_eq!(disk.load(&mut db.lock_all()).unwrap(), 0);
    disk.record(&argv(&["SET", "a", "1"]));
    disk.commit().unwrap();
    assert!(disk.write_error().is_none());
    // The disk "fills up": writes to the current segment now fail with ENOSPC.
    let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
    disk.inner.pending.lock().segs[0].seg = SegFile::new(99, full, 0, 0, true, 0, (1, 0));
    disk.record(&argv(&["SET", "b", "2"]));
    let e = disk.commit().unwrap_err();
    assert!(e.to_string().contains("log-000000000099.aof"), "{e}");
    assert!(disk.write_error().is_some());
    assert!(disk.commit().is_err(), "the failure is sticky");
    disk.shutdown().unwrap();
    let _ = fs::remove_dir_all(&d);
}

/// Records reach the file at commit, in order; a commit with nothing new does no I/O.
#[test]
fn group_commit_writes_every_record() {
    let d = dir("group");
    let disk = Disk::new(DiskOptions {
        dir: d.clone(),
        appendonly: true,
        fsync: Fsync::Always,
        load_truncated: false,
    });
    let db = Db::new();
    disk.load(&mut db.lock_all()).unwrap();
    for i in 0..10 {
        disk.record(&argv(&["SET", &format!("k{i}"), "v"]));
    }
    let lsn = disk.inner.pending.lock().last_lsn;
    disk.commit().unwrap();
    assert_eq!(disk.inner.durable_lsn.load(Ordering::Acquire), lsn);
    disk.commit().unwrap();
    let data = Bytes::from(fs::read(d.join(manifest::segment_name(1))).unwrap());
    let mut n = 0;
    let read = aof::read_segment(&data, 1, |a| {
        assert_eq!(a[1], format!("k{n}").as_bytes());
        n += 1;
    })
    .unwrap();
    assert_eq!((read.torn, read.kept_records, n), (None, 10, 10));
    // One write: ten records and the group-end record, in preallocated space.
    assert_eq!(read.size, PREALLOC_CHUNK);
    disk.shutdown().unwrap();
    let _ = fs::remove_dir_all(&d);
}

/// A preallocation armed to stop before its fdatasync: (the store's address, told when it
/// stops, waited on to go on).
type Park = (usize, std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>);
static PARK: Mutex<Option<Park>> = parking_lot::const_mutex(None);

/// Called by [`Inner::preallocate`] between its zeros and their fdatasync: a preallocation of
/// the store a test armed stops there until the test lets it go on.
pub(super) fn before_prealloc_sync(inner: &Inner) {
    let mut park = PARK.lock();
    if park.as_ref().is_some_and(|p| p.0 == inner as *const Inner as usize) {
        let (_, stopped, go) = park.take().expect("checked");
        drop(park);
        stopped.send(()).unwrap();
        go.recv().unwrap();
    }
}

/// Preallocation holds the I/O lock, which every write's commit takes, only while it copies
/// zeros, never across their fdatasync (which took over 100 ms while a snapshot wrote a
/// gigabyte to the same disk): with the sync stopped half-way, a write commits, lands before
/// the zeros, and the claim that follows covers the new size.
#[test]
fn a_commit_does_not_wait_for_the_preallocation_sync() {
    let d = dir("prealloc-sync");
    let disk =
        Disk::new(DiskOptions { dir: d.clone(), appendonly: true, fsync: Fsync::No, load_truncated: false });
    let db = Db::new();
    disk.load(&mut db.lock_all()).unwrap();
    // More than half of the first megabyte of records: the next preallocation is due.
    let big = "v".repeat(600 << 10);
    disk.record(&argv(&["SET", "big", &big]));
    disk.commit().unwrap();
    let (stopped_tx, stopped) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    *PARK.lock() = Some((&*disk.inner as *const Inner as usize, stopped_tx, go_rx));
    // The background worker may get there first; either stops at the hook.
    let inner = disk.inner.clone();
    let t = std::thread::spawn(move || inner.preallocate());
    stopped.recv_timeout(Duration::from_secs(30)).expect("a preallocation reached its fdatasync");
    let free = disk.inner.io.try_lock().is_some();
    if free {
        disk.record(&argv(&["SET", "during", "1"]));
        disk.commit().unwrap();
    }
    go.send(()).unwrap();
    t.join().unwrap();
    assert!(free, "the I/O lock is held across the preallocation's fdatasync");
    disk.shutdown().unwrap();
    let data = fs::read(d.join(manifest::segment_name(1))).unwrap();
    let mut keys = Vec::new();
    let read = aof::read_segment(&Bytes::from(data), 1, |a| keys.push(a[1].clone())).unwrap();
    assert_eq!(keys, ["big", "during"], "both records, whole, in order");
    assert_eq!(read.torn, None);
    assert_eq!(read.header.claim.map(|c| c.1), Some(2 * PREALLOC_CHUNK), "the claim covers the zeros");
    assert_eq!(read.size, 2 * PREALLOC_CHUNK);
    let _ = fs::remove_dir_all(&d);
}
