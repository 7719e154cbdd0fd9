//! Files the command line reads (the configuration, a `--content-file`, a question set), each
//! read with a bound: a file past it is refused by name as soon as the bound is passed, never
//! read whole first (`/dev/zero` is refused at once, not after filling the memory).

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// The largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Why a file was not read. Each names the file and what it was for (`--content-file`, `the
/// configuration file`).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {what} {path}: {source}")]
    Read { what: String, path: PathBuf, source: std::io::Error },
    #[error("{what} {path} is too large: {limit}")]
    TooLarge { what: String, path: PathBuf, limit: String },
    #[error("{what} {path}, line {line}: {message}")]
    Line { what: String, path: PathBuf, line: usize, message: String },
}

/// `bytes` in words: `512 KiB`, `1 MiB`, `800000 bytes`.
pub fn size_words(bytes: u64) -> String {
    match bytes {
        b if b >= 1024 * 1024 && b % (1024 * 1024) == 0 => format!("{} MiB", b / (1024 * 1024)),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b / 1024),
        b => format!("{b} bytes"),
    }
}

fn open(what: &str, path: &Path) -> Result<std::fs::File, FileError> {
    std::fs::File::open(path).map_err(|source| read_error(what, path, source))
}

fn read_error(what: &str, path: &Path, source: std::io::Error) -> FileError {
    FileError::Read { what: what.into(), path: path.to_path_buf(), source }
}

/// The text of `path` (`what` it is, for messages), refused once it passes `max_bytes`.
pub fn read_text(what: &str, path: &Path, max_bytes: u64) -> Result<String, FileError> {
    let mut bytes = Vec::new();
    open(what, path)?
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| read_error(what, path, source))?;
    if bytes.len() as u64 > max_bytes {
        let limit = format!("at most {}", size_words(max_bytes));
        return Err(FileError::TooLarge { what: what.into(), path: path.to_path_buf(), limit });
    }
    String::from_utf8(bytes).map_err(|_| {
        let source = std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text");
        read_error(what, path, source)
    })
}

/// The bytes of `path` (`-`: standard input), refused once they pass `max_bytes`.
pub fn read_bytes(what: &str, path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().lock().take(max_bytes + 1).read_to_end(&mut bytes)
    } else {
        open(what, path)?.take(max_bytes + 1).read_to_end(&mut bytes)
    };
    read.map_err(|source| read_error(what, path, source))?;
    if bytes.len() as u64 > max_bytes {
        let limit = format!("at most {}", crate::attachments::limit_words(max_bytes));
        return Err(FileError::TooLarge { what: what.into(), path: path.to_path_buf(), limit });
    }
    Ok(bytes)
}

/// Reads `path` line by line, each line bounded by `max_line` bytes and the whole by
/// `max_bytes`, giving `each` the line's number (from 1) and text (without its line break);
/// `each` answers false to stop reading there. Only one line is held at a time.
pub fn read_lines(
    what: &str,
    path: &Path,
    max_line: u64,
    max_bytes: u64,
    mut each: impl FnMut(usize, &str) -> Result<bool, String>,
) -> Result<(), FileError> {
    let mut reader = std::io::BufReader::new(open(what, path)?);
    let mut buf = Vec::new();
    let mut total: u64 = 0;
    let line_error = |line: usize, message: String| FileError::Line {
        what: what.into(),
        path: path.to_path_buf(),
        line,
        message,
    };
    for line in 1.. {
        buf.clear();
        let n = (&mut reader)
            .take(max_line + 2)
            .read_until(b'\n', &mut buf)
            .map_err(|source| read_error(what, path, source))?;
        if n == 0 {
            return Ok(());
        }
        total += n as u64;
        if total > max_bytes {
            let limit = format!("at most {}", size_words(max_bytes));
            return Err(FileError::TooLarge { what: what.into(), path: path.to_path_buf(), limit });
        }
        let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.len() as u64 > max_line {
            return Err(line_error(line, format!("longer than {}", size_words(max_line))));
        }
        let text = std::str::from_utf8(text)
            .map_err(|_| line_error(line, "not UTF-8 text".to_string()))?;
        if !each(line, text).map_err(|m| line_error(line, m))? {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_its_bound() {
        let e = read_text("--content-file", Path::new("/dev/zero"), 1000).unwrap_err();
        assert_eq!(e.to_string(), "--content-file /dev/zero is too large: at most 1000 bytes");
        let e =
            read_lines("the question set", Path::new("/dev/zero"), 4096, 1 << 20, |_, _| Ok(true));
        assert_eq!(
            e.unwrap_err().to_string(),
            "the question set /dev/zero, line 1: longer than 4 KiB"
        );
    }

    #[test]
    fn lines_come_one_by_one_with_their_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("set.jsonl");
        std::fs::write(&path, "a\r\nbb\n\nccc").unwrap();
        let mut seen = Vec::new();
        read_lines("the set", &path, 3, 100, |n, l| {
            seen.push((n, l.to_string()));
            Ok(true)
        })
        .unwrap();
        let expected = [(1, "a"), (2, "bb"), (3, ""), (4, "ccc")].map(|(n, l)| (n, l.to_string()));
        assert_eq!(seen, expected);
        // Stopped, refused by the caller, too long in all.
        let mut count = 0;
        read_lines("the set", &path, 3, 100, |_, _| {
            count += 1;
            Ok(count < 2)
        })
        .unwrap();
        assert_eq!(count, 2);
        let e = read_lines("the set", &path, 3, 100, |n, _| match n {
            2 => Err("no".into()),
            _ => Ok(true),
        });
        assert!(e.unwrap_err().to_string().ends_with("set.jsonl, line 2: no"));
        let e = read_lines("the set", &path, 3, 5, |_, _| Ok(true)).unwrap_err();
        assert!(e.to_string().ends_with("is too large: at most 5 bytes"), "{e}");
        let e = read_text("the set", &dir.path().join("none"), 10).unwrap_err();
        assert!(e.to_string().starts_with("cannot read the set "), "{e}");
    }
}
