//! One request of an operation: the commands for a batch of items, grouped by key, and how each
//! item's answer is read back from the replies. Pure: no I/O here (see `filter.rs`).

use redis::{Cmd, Value};
use sift::Digest;

use crate::error::Error;
use crate::exec::{Group, Replies};
use crate::layout::{Generation, Names, Record, Split, Spot, BLOCK_BYTES};
use crate::script::{self, Script};
use crate::spec::Mode;

/// Where in the replies one piece of an item's answer is.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// The old values of the item's bits in a `BITFIELD … SET` reply: new if one is 0.
    OldBits { group: usize, cmd: usize, start: usize, count: usize },
    /// The item's block at byte `offset` of a `GETRANGE` reply: found if all its bits are set.
    Block { group: usize, cmd: usize, offset: usize, masks: [u64; 8] },
    /// A block read not yet given its `GETRANGE` (index in [`Builder::block_reads`]); every one
    /// becomes a [`Part::Block`] in [`Builder::finish`].
    Unplaced { read: usize, masks: [u64; 8] },
    /// Element `index` of a script's reply: 1 or 0.
    Flag { group: usize, cmd: usize, index: usize },
}

/// An item's answer: the part from the generation written (adds), and the parts from the
/// generations read.
#[derive(Debug, Clone, Default)]
struct ItemPlan {
    write: Option<Part>,
    reads: Vec<Part>,
}

/// A script command under construction.
#[derive(Debug)]
struct LuaCmd {
    group: usize,
    cmd: usize,
    script: &'static Script,
    /// Arguments before the packed items.
    argv: Vec<Vec<u8>>,
    packed: Vec<u8>,
    items: usize,
}

/// The commands of one request and how to read the answers.
#[derive(Debug)]
pub struct Batch {
    /// The groups to run (taken out to be sent: the answers need only `keys` and `counts`).
    pub groups: Vec<Group>,
    /// The key of each group.
    pub keys: Vec<Vec<u8>>,
    /// The number of commands of each group.
    pub counts: Vec<usize>,
    /// The `EVAL` twin of each `EVALSHA` command: `(group, cmd, a group holding the EVAL)`.
    pub fallbacks: Vec<(usize, usize, Group)>,
    items: Vec<ItemPlan>,
    /// The group holding the metadata check (`GET pointer`, `EXISTS next record`).
    check: usize,
}

/// What the metadata check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The metadata used is current.
    Current,
    /// A newer record exists: reload and redo.
    Stale,
    /// The pointer is gone or points to another instance.
    Gone,
    /// The check itself failed (the answers stand).
    Unknown,
}

/// What a [`Builder`] has open in one group.
#[derive(Debug, Default, Clone, Copy)]
struct GroupState {
    /// The open `BITFIELD` write: (cmd index, items in it, replies so far).
    write: Option<(usize, usize, usize)>,
    /// The open script command of each script (0 = add, 1 = contains): an index in `lua`.
    lua: [Option<usize>; 2],
    /// The `PEXPIREAT` time of the group's key.
    expire: Option<u64>,
}

/// Builds a [`Batch`].
pub struct Builder<'a> {
    names: &'a Names,
    record: &'a Record,
    mode: Mode,
    items_per_command: usize,
    /// Send `EVAL` rather than `EVALSHA` (connections that cannot tell which commands of a
    /// failed pipeline ran, so a `NOSCRIPT` could not be repaired).
    eval_only: bool,
    groups: Vec<Group>,
    /// The group of each sub-bitmap used so far: per generation id, by sub-bitmap index
    /// (`usize::MAX`: none yet). A batch reads a few generations, each of a few hundred keys at
    /// most: vectors, not hash maps, on this path taken once per item and generation.
    by_key: Vec<(u64, Vec<usize>)>,
    /// Per group: what is being built in it.
    state: Vec<GroupState>,
    /// The generation written, its split, and the `PEXPIREAT` of its keys (windowed filters).
    write_target: (u64, &'a Generation, Split, Option<u64>),
    /// The generations read, newest first, each with its split.
    read_targets: Vec<(u64, &'a Generation, Split)>,
    lua: Vec<LuaCmd>,
    /// The blocks queried so far ([`Mode::Plain`]): `(group, block in its sub-bitmap)`, read
    /// by as few `GETRANGE`s as [`Builder::finish`] can make of them.
    block_reads: Vec<(usize, u64)>,
    items: Vec<ItemPlan>,
}

/// Blocks between two blocks queried in one sub-bitmap up to which one `GETRANGE` reads both
/// and the blocks between: 16 blocks are 1 KiB, about what a command of its own costs Redis
/// and the client (a `GETRANGE` of a block costs about 0.5 µs of server CPU, a kilobyte more
/// of reply well under that). Small generations (a few kilobytes, like one user's day in the
/// feed example) are then read whole by one command, however many items a batch tests there.
const MERGE_GAP_BLOCKS: u64 = 16;

/// The most blocks one `GETRANGE` reads (64 KiB): bounds a reply and the client's copy of it.
const MAX_RANGE_BLOCKS: u64 = 1024;

/// The ranges of blocks, `(first, count)`, one `GETRANGE` each, that read `blocks` (sorted,
/// deduplicated): consecutive blocks at most [`MERGE_GAP_BLOCKS`] apart share a range of at
/// most [`MAX_RANGE_BLOCKS`].
fn block_ranges(blocks: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &b in blocks {
        match out.last_mut() {
            Some((first, count))
                if b - (*first + *count - 1) <= MERGE_GAP_BLOCKS && b - *first < MAX_RANGE_BLOCKS =>
            {
                *count = b - *first + 1;
            }
            _ => out.push((b, 1)),
        }
    }
    out
}

impl<'a> Builder<'a> {
    /// A builder for `record` of filter `names`, at time `now_ms` (which generations are
    /// written and read); `grace_ms` is added to the expiry of windowed generations.
    pub fn new(
        names: &'a Names,
        record: &'a Record,
        mode: Mode,
        items_per_command: usize,
        eval_only: bool,
        now_ms: u64,
        grace_ms: u64,
    ) -> Self {
        let split = |g: &Generation| Split::new(g.blocks, record.key_bytes);
        let (wid, wgen) = record.write_target(now_ms);
        let expire = record.window.map(|w| w.end_of_reads(wid).saturating_add(grace_ms));
        let read_targets = record.read_targets(now_ms).into_iter().map(|(id, g)| (id, g, split(g))).collect();
        Builder {
            names,
            record,
            mode,
            items_per_command: items_per_command.max(1),
            eval_only,
            groups: Vec::new(),
            by_key: Vec::new(),
            state: Vec::new(),
            write_target: (wid, wgen, split(wgen), expire),
            read_targets,
            lua: Vec::new(),
            block_reads: Vec::new(),
            items: Vec::new(),
        }
    }

    /// The group of sub-bitmap `index` (of `keys`) of generation `id`.
    fn group(&mut self, id: u64, index: u64, keys: u64) -> usize {
        let t = match self.by_key.iter().position(|(g, _)| *g == id) {
            Some(t) => t,
            None => {
                self.by_key.push((id, vec![usize::MAX; keys as usize]));
                self.by_key.len() - 1
            }
        };
        let slot = &mut self.by_key[t].1[index as usize];
        if *slot != usize::MAX {
            return *slot;
        }
        let g = self.groups.len();
        *slot = g;
        self.groups.push(Group::new(self.names.data(&self.record.instance, id, index)));
        self.state.push(GroupState::default());
        g
    }

    fn lua_part(&mut self, group: usize, which: u8, argv: Vec<Vec<u8>>, spot: &Spot) -> Part {
        let open =
            self.state[group].lua[which as usize].filter(|&l| self.lua[l].items < self.items_per_command);
        let l = match open {
            Some(l) => l,
            None => {
                let cmd = self.groups[group].cmds.len();
                // A placeholder, replaced in `finish` once the packed items are complete.
                self.groups[group].cmds.push(Cmd::new());
                let script = if which == 0 { script::add() } else { script::contains() };
                self.lua.push(LuaCmd { group, cmd, script, argv, packed: Vec::new(), items: 0 });
                self.state[group].lua[which as usize] = Some(self.lua.len() - 1);
                self.lua.len() - 1
            }
        };
        let lc = &mut self.lua[l];
        script::pack(&mut lc.packed, spot);
        lc.items += 1;
        Part::Flag { group: lc.group, cmd: lc.cmd, index: lc.items - 1 }
    }

    /// The part setting the item's bits in the generation written.
    fn write(&mut self, d: Digest) -> Part {
        let (id, gen, split, expire_at) = self.write_target;
        let spot = Spot::of(d, gen, split);
        let last_bit = split.key_len(spot.key) * 8 - 1;
        let g = self.group(id, spot.key, split.keys());
        if let Some(at) = expire_at {
            self.state[g].expire = Some(at);
        }
        match self.mode {
            Mode::Lua => {
                let at = expire_at.unwrap_or(0);
                self.lua_part(
                    g,
                    0,
                    vec![last_bit.to_string().into_bytes(), at.to_string().into_bytes()],
                    &spot,
                )
            }
            Mode::Plain => {
                let open = self.state[g].write.filter(|&(_, n, _)| n < self.items_per_command);
                let (cmd, n, replies) = match open {
                    Some(o) => o,
                    None => {
                        // INCRBY u1 <last> 0 changes no bit; it makes Redis create a missing key at
                        // its full length in one allocation (a key grown bit by bit gets up to 1 MB
                        // of slack from Redis's greedy string growth).
                        let mut c = redis::cmd("BITFIELD");
                        c.arg(&self.groups[g].key).arg("INCRBY").arg("u1").arg(last_bit).arg(0);
                        self.groups[g].cmds.push(c);
                        (self.groups[g].cmds.len() - 1, 0, 1)
                    }
                };
                let c = &mut self.groups[g].cmds[cmd];
                let mut count = 0;
                for off in spot.redis_offsets() {
                    c.arg("SET").arg("u1").arg(off).arg(1);
                    count += 1;
                }
                self.state[g].write = Some((cmd, n + 1, replies + count));
                Part::OldBits { group: g, cmd, start: replies, count }
            }
        }
    }

    /// The part testing the item in read target `t`.
    fn read(&mut self, d: Digest, t: usize) -> Part {
        let (id, gen, split) = self.read_targets[t];
        let spot = Spot::of(d, gen, split);
        let g = self.group(id, spot.key, split.keys());
        match self.mode {
            Mode::Lua => self.lua_part(g, 1, vec![], &spot),
            Mode::Plain => {
                self.block_reads.push((g, spot.block));
                Part::Unplaced { read: self.block_reads.len() - 1, masks: spot.masks }
            }
        }
    }

    /// Adds an item: set its bits in the generation written, and test it in the other
    /// generations read (it is new only if it was in none of them).
    pub fn add(&mut self, d: Digest) {
        let write = self.write(d);
        let mut reads = Vec::new();
        for t in 0..self.read_targets.len() {
            if self.read_targets[t].0 != self.write_target.0 {
                reads.push(self.read(d, t));
            }
        }
        self.items.push(ItemPlan { write: Some(write), reads });
    }

    /// Tests an item in every generation read.
    pub fn contains(&mut self, d: Digest) {
        let reads = (0..self.read_targets.len()).map(|t| self.read(d, t)).collect();
        self.items.push(ItemPlan { write: None, reads });
    }

    /// Sends the blocks queried, per sub-bitmap, by the fewest `GETRANGE`s [`block_ranges`]
    /// makes (a block several items share is read once), and points every item's read at its
    /// block inside a reply.
    fn place_block_reads(&mut self) {
        if self.block_reads.is_empty() {
            return;
        }
        let mut by_group: Vec<Vec<u64>> = vec![Vec::new(); self.groups.len()];
        for &(g, block) in &self.block_reads {
            by_group[g].push(block);
        }
        // Per group: its ranges, each with the command reading it, sorted by first block.
        let mut placed: Vec<Vec<(u64, usize)>> = vec![Vec::new(); self.groups.len()];
        for (g, mut blocks) in by_group.into_iter().enumerate() {
            blocks.sort_unstable();
            blocks.dedup();
            for (first, count) in block_ranges(&blocks) {
                let from = first * BLOCK_BYTES;
                let mut c = redis::cmd("GETRANGE");
                c.arg(&self.groups[g].key).arg(from).arg(from + count * BLOCK_BYTES - 1);
                self.groups[g].cmds.push(c);
                placed[g].push((first, self.groups[g].cmds.len() - 1));
            }
        }
        let place = |read: usize, masks: [u64; 8]| {
            let (group, block) = self.block_reads[read];
            let ranges = &placed[group];
            // The last range starting at or before the block holds it.
            let r = ranges.partition_point(|&(first, _)| first <= block) - 1;
            let (first, cmd) = ranges[r];
            Part::Block { group, cmd, offset: ((block - first) * BLOCK_BYTES) as usize, masks }
        };
        for it in &mut self.items {
            for part in it.reads.iter_mut() {
                if let Part::Unplaced { read, masks } = *part {
                    *part = place(read, masks);
                }
            }
        }
    }

    /// The request, with the metadata check of `pointer` (the value the pointer must still
    /// hold) in its own group.
    pub fn finish(mut self, pointer: &[u8]) -> Batch {
        self.place_block_reads();
        for lc in std::mem::take(&mut self.lua) {
            let key = self.groups[lc.group].key.clone();
            let mut c = redis::cmd(if self.eval_only { "EVAL" } else { "EVALSHA" });
            c.arg(if self.eval_only { lc.script.body } else { lc.script.sha.as_str() }).arg(1).arg(&key);
            for a in &lc.argv {
                c.arg(a.as_slice());
            }
            c.arg(lc.packed.as_slice());
            self.groups[lc.group].cmds[lc.cmd] = c;
        }
        let mut fallbacks = Vec::new();
        if !self.eval_only {
            for (gi, g) in self.groups.iter().enumerate() {
                for (ci, c) in g.cmds.iter().enumerate() {
                    let mut args = c.args_iter().map(|a| match a {
                        redis::Arg::Simple(b) => b,
                        redis::Arg::Cursor => &b""[..],
                    });
                    if args.next() != Some(&b"EVALSHA"[..]) {
                        continue;
                    }
                    let sha = args.next().unwrap_or_default();
                    let body = if sha == script::add().sha.as_bytes() {
                        script::add().body
                    } else {
                        script::contains().body
                    };
                    let mut e = redis::cmd("EVAL");
                    e.arg(body);
                    for a in args {
                        e.arg(a);
                    }
                    fallbacks.push((gi, ci, Group { key: g.key.clone(), cmds: vec![e] }));
                }
            }
        }
        for (g, at) in self.state.iter().enumerate().filter_map(|(g, st)| Some((g, st.expire?))) {
            if self.mode == Mode::Plain {
                let mut c = redis::cmd("PEXPIREAT");
                c.arg(&self.groups[g].key).arg(at);
                self.groups[g].cmds.push(c);
            }
        }
        let check = self.groups.len();
        let mut g = Group::new(pointer.to_vec());
        let mut get = redis::cmd("GET");
        get.arg(self.names.pointer());
        let mut next = redis::cmd("EXISTS");
        next.arg(self.names.record(&self.record.instance, self.record.rev + 1));
        g.cmds.push(get);
        g.cmds.push(next);
        self.groups.push(g);
        let keys = self.groups.iter().map(|g| g.key.clone()).collect();
        let counts = self.groups.iter().map(|g| g.cmds.len()).collect();
        Batch { groups: self.groups, keys, counts, fallbacks, items: self.items, check }
    }
}

/// The reply of command `cmd` of `group`, or the error in its place.
fn reply<'r>(
    keys: &'r [Vec<u8>],
    replies: &'r [Replies],
    group: usize,
    cmd: usize,
) -> Result<&'r Value, Error> {
    match &replies[group] {
        Err(e) => Err(e.dup()),
        Ok(vals) => match vals.get(cmd) {
            None => {
                Err(Error::Protocol { command: "pipeline".into(), reply: format!("{} replies", vals.len()) })
            }
            Some(v) => match Error::from_reply(Some(&keys[group]), v) {
                Some(e) => Err(e),
                None => Ok(v),
            },
        },
    }
}

fn protocol(what: &str, v: &Value) -> Error {
    Error::Protocol { command: what.into(), reply: format!("{v:?}") }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

impl Part {
    /// Reads this part: `true` = new (a write part) or found (a read part).
    fn read(&self, keys: &[Vec<u8>], replies: &[Replies]) -> Result<bool, Error> {
        match *self {
            Part::OldBits { group, cmd, start, count } => {
                let v = reply(keys, replies, group, cmd)?;
                let Value::Array(bits) = v else { return Err(protocol("BITFIELD", v)) };
                let olds = bits.get(start..start + count).ok_or_else(|| protocol("BITFIELD", v))?;
                let mut new = false;
                for b in olds {
                    match int(b) {
                        Some(0) => new = true,
                        Some(1) => {}
                        _ => return Err(protocol("BITFIELD", v)),
                    }
                }
                Ok(new)
            }
            Part::Block { group, cmd, offset, masks } => match reply(keys, replies, group, cmd)? {
                // A reply cut short (a missing or short key) reads as followed by zeros.
                Value::BulkString(b) => {
                    let block = &b[offset.min(b.len())..(offset + BLOCK_BYTES as usize).min(b.len())];
                    Ok(Spot { key: 0, block: 0, masks }.all_set_in(block))
                }
                Value::Nil => Ok(masks.iter().all(|&m| m == 0)),
                v => Err(protocol("GETRANGE", v)),
            },
            Part::Unplaced { .. } => {
                Err(Error::Protocol { command: "GETRANGE".into(), reply: "a read never sent".into() })
            }
            Part::Flag { group, cmd, index } => {
                let v = reply(keys, replies, group, cmd)?;
                let Value::Array(flags) = v else { return Err(protocol("EVALSHA", v)) };
                match flags.get(index).and_then(int) {
                    Some(1) => Ok(true),
                    Some(0) => Ok(false),
                    _ => Err(protocol("EVALSHA", v)),
                }
            }
        }
    }
}

impl Batch {
    /// What the metadata check found; `pointer` is the value the pointer must hold.
    pub fn freshness(&self, replies: &[Replies], pointer: &[u8]) -> Freshness {
        let Ok(vals) = &replies[self.check] else { return Freshness::Unknown };
        match vals.first() {
            Some(Value::Nil) => Freshness::Gone,
            Some(Value::BulkString(p)) if p != pointer => Freshness::Gone,
            Some(Value::BulkString(_)) => match vals.get(1) {
                Some(Value::Int(n)) if *n > 0 => Freshness::Stale,
                Some(Value::Int(_)) => Freshness::Current,
                _ => Freshness::Unknown,
            },
            _ => Freshness::Unknown,
        }
    }

    /// The answers (`true` = new for adds, found for queries), each or the error that kept it
    /// from being known.
    pub fn answers(&self, replies: &[Replies]) -> Vec<Result<bool, Error>> {
        self.items
            .iter()
            .map(|it| {
                let mut found = false;
                for r in &it.reads {
                    found |= r.read(&self.keys, replies)?;
                }
                match &it.write {
                    Some(w) => Ok(w.read(&self.keys, replies)? && !found),
                    None => Ok(found),
                }
            })
            .collect()
    }

    /// Bytes the commands of this batch take on the wire.
    pub fn wire_bytes(&self) -> usize {
        self.groups.iter().map(Group::wire_bytes).sum()
    }
}

/// The `EVAL` twins to run for the `EVALSHA` commands the server did not know the script of:
/// those answered `NOSCRIPT`, and all those of a group that failed as a whole with `NOSCRIPT`
/// (cluster clients report a pipeline's first error for all of it) when every command of the
/// group is such a script call (then none of them ran).
pub fn noscript_fallbacks(batch: &Batch, replies: &[Replies]) -> Vec<(usize, usize, Group)> {
    // `counts`, not `groups`: the groups have been taken out to be sent.
    let all_scripts = |g: usize| batch.fallbacks.iter().filter(|f| f.0 == g).count() == batch.counts[g];
    batch
        .fallbacks
        .iter()
        .filter(|(g, c, _)| match &replies[*g] {
            Ok(v) => matches!(v.get(*c), Some(Value::ServerError(e)) if e.code() == "NOSCRIPT"),
            Err(Error::Server { message, .. }) => message.starts_with("NOSCRIPT") && all_scripts(*g),
            Err(_) => false,
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_close_blocks_only() {
        assert!(block_ranges(&[]).is_empty());
        assert_eq!(block_ranges(&[5]), vec![(5, 1)]);
        // Up to MERGE_GAP_BLOCKS apart: one range; one more: two.
        assert_eq!(block_ranges(&[0, MERGE_GAP_BLOCKS]), vec![(0, MERGE_GAP_BLOCKS + 1)]);
        assert_eq!(block_ranges(&[0, MERGE_GAP_BLOCKS + 1]), vec![(0, 1), (MERGE_GAP_BLOCKS + 1, 1)]);
        assert_eq!(block_ranges(&[3, 4, 9, 100, 101]), vec![(3, 7), (100, 2)]);
        // Dense blocks: ranges of at most MAX_RANGE_BLOCKS, covering every block once.
        let dense: Vec<u64> = (0..3 * MAX_RANGE_BLOCKS).step_by(2).collect();
        let r = block_ranges(&dense);
        assert!(r.iter().all(|&(_, n)| n <= MAX_RANGE_BLOCKS), "{r:?}");
        assert_eq!(r.len(), 3);
        for b in &dense {
            assert_eq!(r.iter().filter(|&&(f, n)| (f..f + n).contains(b)).count(), 1, "block {b}");
        }
    }
}
