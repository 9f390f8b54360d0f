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
