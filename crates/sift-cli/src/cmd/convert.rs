//! `sift convert`: move a filter between sift files and RedisBloom, Guava and Parquet bytes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use sift::compat::guava::GuavaBloom;
use sift::filters::split_block::PARQUET_HASHER;
use sift::prelude::*;
use sift::SplitBlockBloom;

use super::inspect::{detect, Format};
use crate::any::{AnyFilter, AnyFilterExt};
use crate::input;
use crate::outfile::OutFile;
use crate::rdbfile;
use crate::redisdump::{self, RedisFilter};

/// Convert a filter between formats, bit for bit (sift ↔ RedisBloom chunks, Guava, Parquet).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift convert dump.scandump.jsonl -o bf.sift                 # RedisBloom BF/CF chunks → sift
  sift convert bf.sift --to redisbloom -o dump.scandump.jsonl # and back (identical chunks)
  sift convert --from guava filter.bin -o g.sift              # Guava writeTo bytes → sift
  sift convert g.sift --to guava -o filter.bin
  sift convert --from parquet column.sbbf -o s.sift           # Parquet SBBF bitset → sift
  sift convert s.sift --to parquet -o column.sbbf
  sift convert dump.rdb --key bf -o bf.sift                   # one RedisBloom key of a Redis RDB file
  sift convert dump.rdb --key cf --to redisbloom -o cf.jsonl  # … or its SCANDUMP chunks
  sift convert bf.sift --to rdb --key bf -o dump.rdb          # an RDB file for Redis 7+ with RedisBloom

The RedisBloom container is JSON Lines, one SCANDUMP reply per line: [iterator, \"base64\"], ending
with [0, \"\"] (BF) or [0, null] (CF); restore with LOADCHUNK key <iterator> <data> per line.
Filters keep their exact bits: a RedisBloom, Guava or Parquet filter becomes a sift file of kind
redisbloom-bf/-cf, guava-bloom or split-block-bloom, queryable with `sift query`. A native sift filter
cannot become a foreign one (its bits sit elsewhere): rebuild it from the keys with
`sift build --family redisbloom-bf|redisbloom-cf|guava-bloom|split-block-bloom`.")]
pub struct Args {
    /// The input file (`-`: stdin).
    input: PathBuf,
    /// The output file: a regular file is replaced atomically; a symlink is followed; /dev/null,
    /// a FIFO or `-` (stdout) is written in place. The input file is never overwritten.
    #[arg(short, long)]
    output: PathBuf,
    /// Input format (default: detected; Guava and Parquet bytes must be named).
    #[arg(long, value_enum)]
    from: Option<Format>,
    /// Output format (default: sift, or the foreign format a sift file's kind belongs to).
    #[arg(long, value_enum)]
    to: Option<Format>,
    /// RDB files: the key to take out (needed when the file holds several filter keys), or the
    /// key name to write with `--to rdb`.
    #[arg(long)]
    key: Option<String>,
    /// RDB input: the database of `--key` (default: any).
    #[arg(long)]
    db: Option<u64>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let output = OutFile::check(&a.output, &[&a.input])?;
    let bytes = input::read_file(&a.input)?;
    let name = a.input.display().to_string();
    let from = detect(&bytes, a.from, "--from").with_context(|| format!("{name}: cannot convert"))?;
    let filter: AnyFilter = match from {
        Format::Sift => {
            AnyFilter::decode(&bytes).with_context(|| format!("{name}: not a valid sift file"))?
        }
        Format::Redisbloom => match redisdump::read(&bytes)
            .with_context(|| format!("{name}: not a valid RedisBloom chunk file"))?
        {
            RedisFilter::Bloom(b) => AnyFilter::RedisBf(b),
            RedisFilter::Cuckoo(c) => AnyFilter::RedisCf(c),
        },
        Format::Rdb => match rdbfile::load(&bytes, &name, a.key.as_deref(), a.db)? {
            RedisFilter::Bloom(b) => AnyFilter::RedisBf(b),
            RedisFilter::Cuckoo(c) => AnyFilter::RedisCf(c),
        },
        Format::Guava => AnyFilter::Guava(
            GuavaBloom::read_from(&bytes)
                .with_context(|| format!("{name}: not a valid Guava Bloom filter"))?,
        ),
        Format::Parquet => {
            AnyFilter::SplitBlock(SplitBlockBloom::from_parquet_bytes(&bytes).with_context(|| {
                format!("{name}: not a Parquet SBBF bitset (length must be a positive multiple of 32)")
            })?)
        }
    };
    let to = a.to.unwrap_or(match (from, &filter) {
        (Format::Sift, AnyFilter::RedisBf(_) | AnyFilter::RedisCf(_)) => Format::Redisbloom,
        (Format::Sift, AnyFilter::Guava(_)) => Format::Guava,
        (Format::Sift, AnyFilter::SplitBlock(_)) => Format::Parquet,
        _ => Format::Sift,
    });
    let out: Vec<u8> = match (to, filter) {
        (Format::Sift, f) => f.to_bytes(),
        (Format::Redisbloom, AnyFilter::RedisBf(b)) => redisdump::write(&RedisFilter::Bloom(b)),
        (Format::Redisbloom, AnyFilter::RedisCf(c)) => redisdump::write(&RedisFilter::Cuckoo(c)),
        (Format::Rdb, AnyFilter::RedisBf(b)) => rdbfile::write(RedisFilter::Bloom(b), rdb_key(&a)?),
        (Format::Rdb, AnyFilter::RedisCf(c)) => rdbfile::write(RedisFilter::Cuckoo(c), rdb_key(&a)?),
        (Format::Guava, AnyFilter::Guava(g)) => g.write_to(),
        (Format::Parquet, AnyFilter::SplitBlock(s)) => {
            if s.hasher() != PARQUET_HASHER {
                bail!(
                    "{name}: this split-block filter hashes with {} seed {}, Parquet readers use xxh64 seed 0; rebuild it with `sift build --family split-block-bloom`",
                    s.hasher().kind().name(),
                    s.hasher().seed()
                );
            }
            if !s.is_parquet_size() {
                eprintln!("sift: warning: {} bytes is not a size Parquet writers use (a power of two from 32 B to 128 MiB)", s.num_bytes());
            }
            s.to_parquet_bytes()
        }
        (_, f @ (AnyFilter::Aging(_) | AnyFilter::TimeLimited(_))) => bail!(
            "{name}: a {} filter (a sliding window) has no RedisBloom, Guava or Parquet form; keep it a sift file (sift-server loads it with SF.LOADCHUNK)",
            f.kind()
        ),
        (to, f) => bail!(
            "{name}: a {} filter cannot be written as {}: its bits are laid out for sift's own hashing; rebuild it from the keys with `sift build --family {}`",
            f.kind(),
            clap::ValueEnum::to_possible_value(&to).map_or_else(|| format!("{to:?}"), |v| v.get_name().to_string()),
            match to {
                Format::Redisbloom | Format::Rdb => "redisbloom-bf",
                Format::Guava => "guava-bloom",
                _ => "split-block-bloom",
            }
        ),
    };
    output.write(|w| w.write_all(&out))?;
    Ok(ExitCode::SUCCESS)
}

/// The key name of `--to rdb`.
fn rdb_key(a: &Args) -> Result<&str> {
    a.key.as_deref().context("--to rdb needs --key: the name the filter gets in the RDB file")
}
