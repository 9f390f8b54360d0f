//! Where `-o PATH` (and `dedup --state`) output goes, and writing it without damaging anything
//! the user did not ask to replace.
//!
//! Every subcommand that writes a file goes through [`OutFile`]: [`OutFile::check`] before any
//! work (a bad path fails in a second, not after an hour-long build), [`OutFile::write`] at the
//! end. The rules:
//!
//! - `-` is standard output.
//! - A symbolic link is followed: the file it points to is written, the link stays (as a shell's
//!   `>` does). A chain of links is followed to its end, which may not exist yet.
//! - A character device (`/dev/null`) or a FIFO is opened and written in place: never replaced.
//! - A directory, block device or socket is refused.
//! - A file that is also an input of the command (the same device and inode: another name, a hard
//!   link, a symlink or standard input all count) is refused before anything is read.
//! - A regular file, or a new one, is written to a temporary file in the same directory, synced,
//!   renamed over the target, and the directory is synced: a reader sees the old file or the new
//!   one, never a part, and a power loss after the command returned keeps the new one. A
//!   replaced file keeps its permission bits. On any failure the temporary file is removed and
//!   the old file is left as it was.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

/// Where the output goes, as decided by [`OutFile::check`].
#[derive(Debug)]
enum Target {
    /// Standard output.
    Stdout,
    /// A character device or FIFO, written where it is.
    InPlace(PathBuf),
    /// A regular file (or none yet): replaced through a temporary file. `mode` is the permission
    /// bits of the file it replaces.
    Replace { path: PathBuf, mode: Option<u32> },
}

/// An output path that passed the checks; see the module docs.
#[derive(Debug)]
pub struct OutFile {
    /// The path as the user gave it, for messages.
    given: PathBuf,
    target: Target,
}

/// `-`: standard input as an input of a command, standard output as its output.
pub fn is_dash(p: &Path) -> bool {
    p.as_os_str() == "-"
}

impl OutFile {
    /// Checks that `path` may be written by a command reading `inputs` (`-` is standard input),
    /// and that a regular file can be created next to it (a temporary file is created and
    /// removed). Call it before doing the work.
    pub fn check(path: &Path, inputs: &[&Path]) -> Result<OutFile> {
        let given = path.to_path_buf();
        let shown = path.display();
        if is_dash(path) {
            return Ok(OutFile { given, target: Target::Stdout });
        }
        if path.as_os_str().is_empty() {
            bail!("the output path is empty");
        }
        let resolved = follow_links(path).with_context(|| format!("cannot write {shown}"))?;
        let via =
            if resolved == path { String::new() } else { format!(" (a link to {})", resolved.display()) };
        let meta = match fs::metadata(&resolved) {
            Ok(m) => Some(m),
            // The directory check below says which part of the path is missing or a file.
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => None,
            Err(e) => return Err(e).with_context(|| format!("cannot write {shown}{via}")),
        };
        if let Some(m) = &meta {
            if let Some(input) = inputs.iter().find(|i| same_file(i, m)) {
                let what = if is_dash(input) {
                    "is standard input of this command".to_string()
                } else if *input == path {
                    "is also an input of this command".to_string()
                } else {
                    format!("is the same file as the input {}", input.display())
                };
                bail!("{shown}{via} {what}: writing it would destroy what is being read; choose another output path");
            }
            let t = m.file_type();
            if t.is_dir() {
                bail!(
                    "{shown}{via} is a directory: give a file name, e.g. {}",
                    path.join("filter.sift").display()
                );
            }
            if is_device_or_fifo(&t) {
                return Ok(OutFile { given, target: Target::InPlace(resolved) });
            }
            if !t.is_file() {
                bail!(
                    "{shown}{via} is a {}: sift writes to regular files, character devices (/dev/null), FIFOs and `-` (standard output)",
                    kind_name(&t)
                );
            }
        }
        let dir = parent_dir(&resolved);
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("cannot write {shown}{via}: {} is not a directory", dir.display()),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot write {shown}{via}: no directory {}", dir.display()))
            }
        }
        // The directory must take a new file: find out now, not after the work.
        let probe = TempFile::create(&resolved, None).with_context(|| {
            format!("cannot write {shown}{via}: cannot create a file in {}", dir.display())
        })?;
        drop(probe);
        Ok(OutFile { given, target: Target::Replace { path: resolved, mode: meta.as_ref().map(mode_of) } })
    }

    /// The path as given, for messages.
    pub fn display(&self) -> std::path::Display<'_> {
        self.given.display()
    }

    /// Writes what `write` writes (through a 64 KiB buffer) to the checked target. On failure a
    /// replaced file is left as it was and no temporary file remains.
    pub fn write(&self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        let shown = self.given.display();
        match &self.target {
            Target::Stdout => {
                let mut out = crate::output::stdout();
                write(&mut out)?;
                out.flush()?;
                Ok(())
            }
            Target::InPlace(p) => {
                // No create, no truncate: a device or FIFO is used as it is. A FIFO blocks here
                // until a reader opens it, as with a shell's `>`.
                let f =
                    OpenOptions::new().write(true).open(p).with_context(|| format!("cannot open {shown}"))?;
                let t = f.metadata().with_context(|| format!("cannot open {shown}"))?.file_type();
                if !is_device_or_fifo(&t) {
                    bail!("{shown} changed while the command ran: it is no longer a device or FIFO; nothing written");
                }
                let mut w = io::BufWriter::with_capacity(1 << 16, f);
                write(&mut w).with_context(|| format!("cannot write {shown}"))?;
                w.flush().with_context(|| format!("cannot write {shown}"))?;
                Ok(())
            }
            Target::Replace { path, mode } => {
                let mut tmp =
                    TempFile::create(path, *mode).with_context(|| format!("cannot write {shown}"))?;
                let file = tmp.file.take().expect("a new temporary file is open");
                let mut w = io::BufWriter::with_capacity(1 << 16, file);
                write(&mut w).with_context(|| format!("cannot write {shown}"))?;
                let f = w
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .with_context(|| format!("cannot write {shown}"))?;
                f.sync_all().with_context(|| format!("cannot write {shown}: syncing it to disk failed"))?;
                drop(f);
                fs::rename(&tmp.path, path).with_context(|| {
                    format!("cannot write {shown}: renaming {} over it failed", tmp.path.display())
                })?;
                tmp.renamed = true;
                sync_dir(parent_dir(path)).with_context(|| {
                    format!(
                        "{shown} was written, but syncing its directory failed: after a power loss it may be the old file"
                    )
                })
            }
        }
    }
}

/// A temporary file next to the target, removed when dropped unless it was renamed into place
/// (also when the writer panics).
struct TempFile {
    path: PathBuf,
    file: Option<File>,
    renamed: bool,
}

impl TempFile {
    /// Creates `.NAME.tmp.PID.N` next to `target` (never an existing file), with `mode`'s
    /// permission bits when given.
    fn create(target: &Path, mode: Option<u32>) -> io::Result<TempFile> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = target.file_name().map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
        let dir = parent_dir(target);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{name}.tmp.{}.{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    let tmp = TempFile { path, file: Some(file), renamed: false };
                    if let Some(mode) = mode {
                        set_mode(&tmp.path, mode)?;
                    }
                    return Ok(tmp);
                }
                // A leftover of an earlier process with the same id: take the next name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.file = None;
        if !self.renamed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The directory a path's file is in (`.` for a bare name).
fn parent_dir(p: &Path) -> &Path {
    p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Follows symbolic links from `path` to the first name that is not one (which may not exist).
fn follow_links(path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    // Linux's own limit on a chain of links (ELOOP past it).
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to =
                    fs::read_link(&p).with_context(|| format!("cannot read the link {}", p.display()))?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    bail!("too many levels of symbolic links")
}

/// Syncs a directory, so that a rename in it survives a power loss. File systems that cannot
/// sync a directory (EINVAL) order the rename themselves.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir)?.sync_all() {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
        r => r,
    }
}

#[cfg(unix)]
fn same_file(input: &Path, out: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = if is_dash(input) {
        use std::os::fd::AsFd;
        io::stdin().as_fd().try_clone_to_owned().map(File::from).and_then(|f| f.metadata())
    } else {
        fs::metadata(input)
    };
    meta.is_ok_and(|m| m.dev() == out.dev() && m.ino() == out.ino())
}

#[cfg(not(unix))]
fn same_file(input: &Path, _out: &fs::Metadata) -> bool {
    let _ = input;
    false
}

#[cfg(unix)]
fn is_device_or_fifo(t: &fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_char_device() || t.is_fifo()
}

#[cfg(not(unix))]
fn is_device_or_fifo(_t: &fs::FileType) -> bool {
    false
}

#[cfg(unix)]
fn kind_name(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(not(unix))]
fn kind_name(_t: &fs::FileType) -> &'static str {
    "special file"
}

#[cfg(unix)]
fn mode_of(m: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_m: &fs::Metadata) -> u32 {
    0
}

#[cfg(unix)]
fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_p: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A writer that fails (or panics) after writing part of the file leaves the old file as it
    /// was and no temporary file behind.
    #[test]
    fn a_failed_or_panicking_writer_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.sift");
        fs::write(&p, b"old contents").unwrap();
        let out = OutFile::check(&p, &[]).unwrap();
        let err = out
            .write(|w| {
                w.write_all(&[7u8; 200_000])?;
                Err(io::Error::other("the disk went away"))
            })
            .unwrap_err();
        assert!(format!("{err:#}").contains("out.sift") && format!("{err:#}").contains("the disk went away"));
        assert_eq!(fs::read(&p).unwrap(), b"old contents");
        assert_eq!(names(dir.path()), ["out.sift"]);

        let panicked = std::panic::catch_unwind(|| {
            let _ = out.write(|w| {
                w.write_all(&[7u8; 200_000])?;
                panic!("a bug in the writer")
            });
        });
        assert!(panicked.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old contents");
        assert_eq!(names(dir.path()), ["out.sift"]);

        out.write(|w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["out.sift"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.sift");
        fs::write(&p, b"old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        OutFile::check(&p, &[]).unwrap().write(|w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o7777, 0o640);
    }

    #[cfg(unix)]
    #[test]
    fn links_are_followed_to_the_end_of_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("sub").join("real.sift");
        fs::create_dir(dir.path().join("sub")).unwrap();
        // a -> b -> sub/real.sift (relative links, the last one dangling).
        std::os::unix::fs::symlink("b", dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink("sub/real.sift", dir.path().join("b")).unwrap();
        OutFile::check(&dir.path().join("a"), &[]).unwrap().write(|w| w.write_all(b"x")).unwrap();
        assert_eq!(fs::read(&real).unwrap(), b"x");
        assert!(fs::symlink_metadata(dir.path().join("a")).unwrap().file_type().is_symlink());
        assert!(fs::symlink_metadata(dir.path().join("b")).unwrap().file_type().is_symlink());
        // A loop is an error, not a hang.
        std::os::unix::fs::symlink("loop2", dir.path().join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", dir.path().join("loop2")).unwrap();
        let e = OutFile::check(&dir.path().join("loop1"), &[]).unwrap_err();
        assert!(format!("{e:#}").contains("too many levels"), "{e:#}");
    }
}
