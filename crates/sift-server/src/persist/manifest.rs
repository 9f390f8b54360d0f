//! The manifest: which snapshot and which log segments, in replay order, make up the data
//! directory's current state. It is the single point of truth that makes every change of
//! files atomic: a new file exists for recovery only once a manifest naming it has been renamed
//! into place, and an old one is deleted only after a manifest no longer naming it is durable.
//!
//! ```text
//! sift-manifest 2
//! snapshot snapshot-000000000008.sift 52311  (its size in bytes; "snapshot -" when there is none)
//! segment log-000000000007.aof                (zero or more, in replay order)
//! crc32c 1a2b3c4d                             (CRC32C of every preceding byte, hex)
//! ```
//!
//! Lines end with `\n`. The file is replaced atomically: written to `MANIFEST.tmp`, fsynced,
//! renamed over `MANIFEST`, then the directory is fsynced. Version 1 (the same without the
//! snapshot's size) is still read.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::Path;

/// The manifest's file name in the data directory.
pub const MANIFEST: &str = "MANIFEST";
const HEAD: &str = "sift-manifest 2";
const HEAD_V1: &str = "sift-manifest 1";

/// File name of snapshot `id`.
pub fn snapshot_name(id: u64) -> String {
    format!("snapshot-{id:012}.sift")
}

/// File name of log segment `id`.
pub fn segment_name(id: u64) -> String {
    format!("log-{id:012}.aof")
}

/// Parses a snapshot or segment file name back to its id.
pub fn parse_name(name: &str) -> Option<(bool, u64)> {
    if let Some(id) = name.strip_prefix("snapshot-").and_then(|r| r.strip_suffix(".sift")) {
        return id.parse().ok().map(|id| (true, id));
    }
    let id = name.strip_prefix("log-").and_then(|r| r.strip_suffix(".aof"))?;
    id.parse().ok().map(|id| (false, id))
}

/// The contents of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The snapshot to load first, if any.
    pub snapshot: Option<u64>,
    /// The snapshot's size in bytes, when the manifest records it (version 2).
    pub snapshot_size: Option<u64>,
    /// The log segments to replay after it, in order.
    pub segments: Vec<u64>,
}

impl Manifest {
    /// The text of the file.
    pub fn encode(&self) -> String {
        let mut s = format!("{HEAD}\n");
        match (self.snapshot, self.snapshot_size) {
            (Some(id), Some(size)) => s.push_str(&format!("snapshot {} {size}\n", snapshot_name(id))),
            (Some(id), None) => s.push_str(&format!("snapshot {}\n", snapshot_name(id))),
            (None, _) => s.push_str("snapshot -\n"),
        }
        for id in &self.segments {
            s.push_str(&format!("segment {}\n", segment_name(*id)));
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s.push_str(&format!("crc32c {crc:08x}\n"));
        s
    }

    /// Parses and checks the text of the file.
    pub fn decode(data: &[u8]) -> Result<Manifest, String> {
        let text = std::str::from_utf8(data).map_err(|_| "not UTF-8".to_string())?;
        let body_end = text.trim_end_matches('\n').rfind('\n').map(|i| i + 1).ok_or("too short")?;
        let (body, last) = text.split_at(body_end);
        let crc = last
            .strip_suffix('\n')
            .and_then(|l| l.strip_prefix("crc32c "))
            .filter(|h| h.len() == 8)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or("missing checksum line (the file is damaged or cut short)")?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.lines();
        let v1 = match lines.next() {
            Some(HEAD) => false,
            Some(HEAD_V1) => true,
            _ => {
                return Err(format!(
                    "unknown manifest version (this build reads \"{HEAD_V1}\" and \"{HEAD}\")"
                ))
            }
        };
        let mut m = Manifest::default();
        match lines.next().and_then(|l| l.strip_prefix("snapshot ")) {
            Some("-") => {}
            Some(rest) => {
                let (name, size) = match rest.split_once(' ') {
                    Some((name, size)) if !v1 => {
                        (name, Some(size.parse::<u64>().map_err(|_| format!("bad snapshot size {size:?}"))?))
                    }
                    _ => (rest, None),
                };
                match parse_name(name) {
                    Some((true, id)) => (m.snapshot, m.snapshot_size) = (Some(id), size),
                    _ => return Err(format!("bad snapshot name {name:?}")),
                }
            }
            None => return Err("missing snapshot line".into()),
        }
        for l in lines {
            let name = l.strip_prefix("segment ").ok_or_else(|| format!("unexpected line {l:?}"))?;
            match parse_name(name) {
                Some((false, id)) => m.segments.push(id),
                _ => return Err(format!("bad segment name {name:?}")),
            }
        }
        Ok(m)
    }

    /// Every id it names (the next id must be above them).
    pub fn max_id(&self) -> u64 {
        self.segments.iter().copied().chain(self.snapshot).max().unwrap_or(0)
    }

    /// Replaces the manifest in `dir` atomically and durably.
    pub fn store(&self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(format!("{MANIFEST}.tmp"));
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(self.encode().as_bytes())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, dir.join(MANIFEST))?;
        sync_dir(dir)
    }
}

/// Makes the directory's entries (created, renamed, removed files) durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        for m in [
            Manifest::default(),
            Manifest { snapshot: Some(8), snapshot_size: Some(52311), segments: vec![7, 9] },
            Manifest { snapshot: Some(8), snapshot_size: None, segments: vec![7] },
            Manifest { snapshot: None, snapshot_size: None, segments: vec![1] },
        ] {
            let text = m.encode();
            assert_eq!(Manifest::decode(text.as_bytes()), Ok(m.clone()));
            for at in 0..text.len() {
                let mut bad = text.clone().into_bytes();
                bad[at] ^= 0x01;
                assert!(Manifest::decode(&bad).is_err(), "byte {at} of {text:?}");
            }
            for cut in 0..text.len() {
                assert!(Manifest::decode(&text.as_bytes()[..cut]).is_err(), "cut at {cut} of {text:?}");
            }
        }
        assert_eq!(parse_name("log-000000000012.aof"), Some((false, 12)));
        assert_eq!(parse_name("snapshot-000000000003.sift"), Some((true, 3)));
        assert_eq!(parse_name("snapshot-3.sift.tmp"), None);
    }

    /// A manifest written before snapshot sizes were recorded still loads.
    #[test]
    fn version_1_is_read() {
        let body = "sift-manifest 1\nsnapshot snapshot-000000000007.sift\nsegment log-000000000008.aof\n";
        let text = format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()));
        assert_eq!(
            Manifest::decode(text.as_bytes()),
            Ok(Manifest { snapshot: Some(7), snapshot_size: None, segments: vec![8] })
        );
        // ... but a size is not part of version 1.
        let body = "sift-manifest 1\nsnapshot snapshot-000000000007.sift 12\n";
        let text = format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()));
        assert!(Manifest::decode(text.as_bytes()).is_err());
    }
}
