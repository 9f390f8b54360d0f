//! Output: aligned text tables, JSON, and a buffered stdout whose errors (a closed pipe, a full
//! disk) are returned, never panicked on (`println!` would panic), and name standard output.

use std::io::{self, BufWriter, Write};

use anyhow::Result;

/// Buffered, locked standard output whose errors say they are about standard output (`sift
/// dedup` into `/dev/full` must not report a bare "No space left on device"). The error keeps
/// its kind, so a closed pipe is still recognised as one.
pub struct Stdout(BufWriter<io::StdoutLock<'static>>);

/// Buffered, locked stdout.
pub fn stdout() -> Stdout {
    Stdout(BufWriter::with_capacity(1 << 16, io::stdout().lock()))
}

fn on_stdout(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(on_stdout)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(on_stdout)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(on_stdout)
    }
}

/// A text table: the first column left-aligned, the others right-aligned.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table { headers: headers.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes the table.
    pub fn write(&self, out: &mut impl Write) -> Result<()> {
        let cols = self.headers.len();
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        // Text columns (every cell starts with a letter, or is empty) are left-aligned, numbers right.
        let left: Vec<bool> = (0..cols)
            .map(|i| {
                i == 0
                    || self
                        .rows
                        .iter()
                        .all(|r| r.get(i).is_none_or(|c| c.chars().next().is_none_or(char::is_alphabetic)))
            })
            .collect();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(&width).enumerate() {
                if i == 0 {
                    line.push_str(&format!("{c:<w$}"));
                } else if left[i] {
                    line.push_str(&format!("  {c:<w$}"));
                } else {
                    line.push_str(&format!("  {c:>w$}"));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Writes a JSON value, pretty-printed, and a newline.
pub fn json(out: &mut impl Write, v: &serde_json::Value) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    writeln!(out)?;
    Ok(())
}

/// A probability for tables: `1.00%`, `0.0123%`, `1.2e-9`.
pub fn pct(p: f64) -> String {
    if p == 0.0 {
        "0".to_string()
    } else if p >= 1e-4 {
        let digits = if p >= 0.01 { 2 } else { 4 };
        format!("{:.*}%", digits, p * 100.0)
    } else {
        format!("{p:.2e}")
    }
}
