//! The data directory's lock: one process at a time. Two servers appending to the same log
//! segments and replacing each other's manifest lose acknowledged writes, so the first holds an
//! exclusive `flock` on `DIR/LOCK` for its lifetime and every other one refuses to start.
//!
//! The kernel releases the lock when the holder's descriptor closes, however the process ends
//! (`kill -9` included): a lock is never stale. The file keeps the holder's pid, written after
//! the lock is taken, so a refusal can name the process; it is not removed at exit (removing it
//! would race with the next server's lock), and its content means nothing without the lock.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

/// The lock file's name in the data directory.
pub const LOCK: &str = "LOCK";

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error(
        "data directory {} is in use by another process{} (it holds the lock on {}); \
         two servers on one directory would lose acknowledged writes",
        dir.display(),
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        path.display()
    )]
    Held {
        /// The data directory.
        dir: PathBuf,
        /// The lock file.
        path: PathBuf,
        /// The holder's pid, as it wrote it in the file.
        pid: Option<u32>,
    },
    /// The lock file could not be opened or locked.
    #[error("locking {}: {err}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        err: std::io::Error,
    },
}

impl DirLock {
    /// Takes the lock of `dir` (which must exist) without waiting, and writes this process's
    /// pid into the lock file.
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK);
        let io = |err| LockError::Io { path: path.clone(), err };
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        let mut file = lock(dir, file)?;
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(DirLock { _file: file })
    }

    /// Who holds the lock of `dir`, if anyone does (its pid, when known), without taking it
    /// for longer than the call (and without writing to the file).
    pub fn holder(dir: &Path) -> Result<Option<Option<u32>>, LockError> {
        let path = dir.join(LOCK);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(LockError::Io { path, err }),
        };
        match lock(dir, file) {
            Ok(_) => Ok(None),
            Err(LockError::Held { pid, .. }) => Ok(Some(pid)),
            Err(e) => Err(e),
        }
    }
}

/// Locks `file`, the lock file of `dir`, without waiting; when another holds it, reads the pid
/// the holder wrote.
fn lock(dir: &Path, mut file: File) -> Result<File, LockError> {
    let path = dir.join(LOCK);
    // SAFETY: flock only reads the descriptor number, which `file` keeps open for the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(file);
    }
    let err = std::io::Error::last_os_error();
    if err.kind() != std::io::ErrorKind::WouldBlock {
        return Err(LockError::Io { path, err });
    }
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    Err(LockError::Held { dir: dir.to_path_buf(), path, pid: text.trim().parse().ok() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("sift-unit-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(DirLock::holder(&dir).unwrap().is_none());
        let first = DirLock::acquire(&dir).unwrap();
        // flock locks belong to the open file: a second open in the same process conflicts too.
        match DirLock::acquire(&dir) {
            Err(e @ LockError::Held { pid: Some(pid), .. }) => {
                assert_eq!(pid, std::process::id());
                let text = e.to_string();
                assert!(
                    text.contains(&dir.display().to_string()) && text.contains(&format!("pid {pid}")),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(DirLock::holder(&dir).unwrap(), Some(Some(std::process::id())));
        drop(first);
        assert!(DirLock::holder(&dir).unwrap().is_none());
        let _again = DirLock::acquire(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
