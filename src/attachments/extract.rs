//! Turning an uploaded file's bytes into what a model is given: the text of a text file or of a
//! PDF (page by page), or an image as it is, each with its media type; or a refusal in words a
//! person can act on.
//!
//! The content decides, never the name alone: the bytes are sniffed first (`%PDF-`, the PNG, JPEG
//! and WebP signatures, the signatures of archives, programs and other binaries), and the name and
//! the declared type only choose a text file's media type and the wording of a refusal.
//!
//! This module owns no I/O, no storage and nothing of actix: it takes bytes and returns a value,
//! so the caller decides where the bytes come from, where the result goes and on which thread it
//! runs (a PDF of many pages is CPU work; run it off the async executor).

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::{Deserialize, Serialize};

/// The bounds an attachment is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest file accepted, in bytes (a file of exactly this size is accepted).
    pub max_file_bytes: u64,
    /// The most pages a PDF may have.
    pub max_pdf_pages: u32,
}

/// What an accepted file is to a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Text,
    Pdf,
    Image,
}

/// An accepted file as a model is given it.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub kind: Kind,
    /// `text/plain`, `text/markdown`, `text/csv`, `application/json`, `text/x-rust`, …;
    /// `application/pdf`; `image/png`, `image/jpeg` or `image/webp` (from the bytes, not the name).
    pub media_type: String,
    /// The text a model reads: a text file's text (no BOM, LF line ends, no NUL); a PDF's pages,
    /// each after a `--- page N ---` line; empty for an image.
    pub text: String,
    /// A PDF's page count; `None` for anything else.
    pub pages: Option<u32>,
}

/// Why a file was refused. Each reads as the rest of a sentence whose subject is the file: the
/// caller puts the file's name first (`report.pdf: is an encrypted PDF; …`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error("is {}; files may be at most {}", size_rounded_up(*.size), size_rounded_down(*.limit))]
    TooLarge { size: u64, limit: u64 },
    #[error("is empty")]
    Empty,
    /// `what` says what the file is (`a ZIP archive (…)`) or `not a file type Conclave reads`.
    #[error("is {what} — attach text, Markdown, code, CSV, JSON, PDF, PNG, JPEG or WebP")]
    NotAccepted { what: String },
    #[error("is not UTF-8 text")]
    NotText,
    #[error("is an encrypted PDF; remove its password and attach it again")]
    Encrypted,
    #[error("has {pages} pages; a PDF may have at most {limit}")]
    TooManyPages { pages: u32, limit: u32 },
    /// The reason, in words (`it is damaged or incomplete`).
    #[error("could not be read as a PDF ({0})")]
    Unreadable(String),
    #[error("has no text Conclave can read (a scanned PDF?)")]
    NoText,
    /// A PDF whose compressed parts unpack past [`MAX_INFLATED_BYTES`], or whose text runs past
    /// twice the file limit: refused before it can fill the memory or every prompt.
    #[error("unpacks to more than {} of content; a PDF may unpack to at most that", size_rounded_down(*.limit))]
    TooMuchContent { limit: u64 },
}

/// What a PDF's compressed streams may unpack to, together.
pub const MAX_INFLATED_BYTES: u64 = 256 * 1024 * 1024;

/// What `name`'s `bytes` give a model: sniffed from the bytes, then read as a PDF, taken as an
/// image, or decoded as text (UTF-8, or UTF-16 with a BOM). `declared` is the type the uploader
/// claimed (a `Content-Type`), trusted only to name a text file's media type and to tell that a
/// file was meant as a PDF. Never panics; linear in the size of a text file, which is copied once.
pub fn extract(
    name: &str,
    declared: Option<&str>,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Extracted, Refused> {
    let size = bytes.len() as u64;
    if size > limits.max_file_bytes {
        return Err(Refused::TooLarge { size, limit: limits.max_file_bytes });
    }
    if bytes.is_empty() {
        return Err(Refused::Empty);
    }
    let extension = extension(name);
    let declared = declared.map(bare_media_type);
    match sniff(bytes, &extension) {
        Sniffed::Pdf => return pdf(bytes, limits),
        Sniffed::Image(media_type) => {
            return Ok(Extracted {
                kind: Kind::Image,
                media_type: media_type.into(),
                text: String::new(),
                pages: None,
            })
        }
        Sniffed::Binary(what) => return Err(Refused::NotAccepted { what }),
        Sniffed::Other => {}
    }
    if extension == "pdf" || declared.as_deref() == Some("application/pdf") {
        // A PDF may carry a few bytes before its header; lopdf finds the header itself.
        let head = &bytes[..bytes.len().min(1024)];
        if head.windows(5).any(|w| w == b"%PDF-") {
            return pdf(bytes, limits);
        }
        return Err(Refused::Unreadable("it is not a PDF".into()));
    }
    let text_type = text_media_type(&extension, declared.as_deref());
    match decode_text(bytes) {
        Some(text) => {
            Ok(Extracted { kind: Kind::Text, media_type: text_type.into(), text, pages: None })
        }
        // NUL bytes and no claim to be text: some binary format we do not know.
        None if bytes.contains(&0) && !claims_text(&extension, declared.as_deref()) => {
            Err(Refused::NotAccepted { what: "not a file type Conclave reads".into() })
        }
        None => Err(Refused::NotText),
    }
}

/// `1023 bytes`, `12.3 KB`, `10.1 MB` (1 KB = 1024 bytes), rounded up to a tenth: a size just
/// past a limit never reads as the limit.
pub fn size_rounded_up(bytes: u64) -> String {
    size_words(bytes, true)
}

/// As [`size_rounded_up`], rounded down: a limit is never overstated.
pub fn size_rounded_down(bytes: u64) -> String {
    size_words(bytes, false)
}

fn size_words(bytes: u64, up: bool) -> String {
    const KB: u128 = 1024;
    let (unit, word) = match u128::from(bytes) {
        b if b >= KB * KB => (KB * KB, "MB"),
        b if b >= KB => (KB, "KB"),
        1 => return "1 byte".into(),
        b => return format!("{b} bytes"),
    };
    let scaled = u128::from(bytes) * 10;
    let tenths = if up { scaled.div_ceil(unit) } else { scaled / unit };
    match tenths % 10 {
        0 => format!("{} {word}", tenths / 10),
        t => format!("{}.{t} {word}", tenths / 10),
    }
}

/// `name`'s extension in lower case (`rs` for `main.RS`), empty when it has none.
fn extension(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// `text/plain` from `Text/Plain; charset=utf-8`.
fn bare_media_type(declared: &str) -> String {
    declared.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

enum Sniffed {
    Pdf,
    Image(&'static str),
    /// A binary format Conclave does not read, in words (`a ZIP archive (…)`).
    Binary(String),
    Other,
}

/// What the first bytes say the file is.
fn sniff(bytes: &[u8], extension: &str) -> Sniffed {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    // A signature of printable letters (`GIF89a`, `ID3`) counts only when the rest is not text,
    // so that a note which happens to start with one stays a note.
    let binary = || bytes.contains(&0) || std::str::from_utf8(bytes).is_err();
    if at(0, b"%PDF-") {
        return Sniffed::Pdf;
    }
    if at(0, b"\x89PNG\r\n\x1a\n") {
        return Sniffed::Image("image/png");
    }
    if at(0, b"\xff\xd8\xff") {
        return Sniffed::Image("image/jpeg");
    }
    if at(0, b"RIFF") && at(8, b"WEBP") {
        return Sniffed::Image("image/webp");
    }
    let what = if at(0, b"PK\x03\x04") || at(0, b"PK\x05\x06") || at(0, b"PK\x07\x08") {
        zip_words(extension)
    } else if (at(0, b"GIF87a") || at(0, b"GIF89a")) && binary() {
        "a GIF image"
    } else if at(0, b"II*\0") || at(0, b"MM\0*") {
        "a TIFF image"
    } else if at(0, b"BM") && bmp_size_matches(bytes) && binary() {
        "a BMP image"
    } else if at(0, b"\0\0\x01\0") && bytes.len() > 6 {
        "an icon (ICO) image"
    } else if at(4, b"ftyp") && binary() {
        match bytes.get(8..12) {
            Some(b"heic" | b"heix" | b"hevc" | b"mif1" | b"msf1") => "a HEIC image",
            Some(b"avif" | b"avis") => "an AVIF image",
            _ => "a video or audio file (MP4/QuickTime)",
        }
    } else if at(0, b"\x1f\x8b") {
        "a gzip archive"
    } else if at(0, b"7z\xbc\xaf\x27\x1c") {
        "a 7-Zip archive"
    } else if at(0, b"Rar!\x1a\x07") {
        "a RAR archive"
    } else if at(0, b"\xfd7zXZ\0") {
        "an XZ archive"
    } else if at(0, b"BZh") && at(4, b"1AY&SY") && binary() {
        "a bzip2 archive"
    } else if at(0, b"\x28\xb5\x2f\xfd") {
        "a Zstandard archive"
    } else if at(257, b"ustar") && binary() {
        "a tar archive"
    } else if at(0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1") {
        "an old-style Office document (Word, Excel or PowerPoint 97–2003)"
    } else if at(0, b"\x7fELF") {
        "a program (ELF)"
    } else if at(0, b"MZ") && pe_header(bytes) && binary() {
        "a Windows program"
    } else if [b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe"]
        .iter()
        .any(|m| at(0, *m))
    {
        "a program (Mach-O)"
    } else if at(0, b"\0asm") {
        "a WebAssembly module"
    } else if at(0, b"SQLite format 3\0") {
        "an SQLite database"
    } else if (at(0, b"OggS")
        || at(0, b"fLaC")
        || at(0, b"ID3")
        || (at(0, b"RIFF") && at(8, b"WAVE")))
        && binary()
    {
        "an audio file"
    } else if at(0, b"RIFF") && at(8, b"AVI ") && binary() {
        "a video file (AVI)"
    } else if at(0, b"\x1a\x45\xdf\xa3") {
        "a video file (Matroska/WebM)"
    } else {
        return Sniffed::Other;
    };
    Sniffed::Binary(what.into())
}

fn zip_words(extension: &str) -> &'static str {
    match extension {
        "docx" | "docm" | "dotx" => "a Word document (a ZIP archive; save it as PDF)",
        "xlsx" | "xlsm" | "xltx" => "an Excel workbook (a ZIP archive; save the sheet as CSV)",
        "pptx" | "pptm" => "a PowerPoint presentation (a ZIP archive; save it as PDF)",
        "odt" | "ods" | "odp" => "an OpenDocument file (a ZIP archive; save it as PDF)",
        "epub" => "an EPUB book (a ZIP archive)",
        _ => "a ZIP archive (Word, Excel and PowerPoint files are ZIP archives too)",
    }
}

/// A BMP's header gives the file's size.
fn bmp_size_matches(bytes: &[u8]) -> bool {
    bytes.get(2..6).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(u32::from_le_bytes)
        == u32::try_from(bytes.len()).ok()
}

/// A Windows program: `MZ`, and at the offset its DOS header names, `PE\0\0`.
fn pe_header(bytes: &[u8]) -> bool {
    let Some(offset) = bytes.get(0x3c..0x40).and_then(|b| <[u8; 4]>::try_from(b).ok()) else {
        return false;
    };
    let offset = u32::from_le_bytes(offset) as usize;
    offset.checked_add(4).and_then(|end| bytes.get(offset..end)) == Some(b"PE\0\0")
}

/// Text media types by extension; an extension not here is `text/plain`.
const TEXT_TYPES: &[(&[&str], &str)] = &[
    (&["txt", "text", "log"], "text/plain"),
    (&["md", "markdown", "mdown", "mkd"], "text/markdown"),
    (&["csv"], "text/csv"),
    (&["tsv", "tab"], "text/tab-separated-values"),
    (&["json", "geojson"], "application/json"),
    (&["jsonl", "ndjson"], "application/x-ndjson"),
    (&["xml", "xsd", "xsl", "svg"], "application/xml"),
    (&["yaml", "yml"], "application/yaml"),
    (&["toml"], "application/toml"),
    (&["html", "htm", "xhtml"], "text/html"),
    (&["css", "scss", "sass", "less"], "text/css"),
    (&["js", "mjs", "cjs", "jsx"], "text/javascript"),
    (&["ts", "tsx", "mts", "cts"], "text/x-typescript"),
    (&["rs"], "text/x-rust"),
    (&["py", "pyi"], "text/x-python"),
    (&["go"], "text/x-go"),
    (&["java"], "text/x-java"),
    (&["kt", "kts"], "text/x-kotlin"),
    (&["scala", "sc"], "text/x-scala"),
    (&["c", "h"], "text/x-c"),
    (&["cpp", "cc", "cxx", "hpp", "hh", "hxx", "ipp"], "text/x-c++"),
    (&["cs"], "text/x-csharp"),
    (&["m", "mm"], "text/x-objective-c"),
    (&["swift"], "text/x-swift"),
    (&["rb"], "text/x-ruby"),
    (&["php"], "text/x-php"),
    (&["pl", "pm"], "text/x-perl"),
    (&["lua"], "text/x-lua"),
    (&["r"], "text/x-r"),
    (&["jl"], "text/x-julia"),
    (&["hs"], "text/x-haskell"),
    (&["ml", "mli"], "text/x-ocaml"),
    (&["ex", "exs"], "text/x-elixir"),
    (&["erl", "hrl"], "text/x-erlang"),
    (&["clj", "cljs", "edn"], "text/x-clojure"),
    (&["dart"], "text/x-dart"),
    (&["zig"], "text/x-zig"),
    (&["sh", "bash", "zsh", "fish"], "text/x-shellscript"),
    (&["ps1", "psm1"], "text/x-powershell"),
    (&["sql"], "text/x-sql"),
    (&["tex", "sty", "bib"], "text/x-tex"),
    (&["diff", "patch"], "text/x-diff"),
    (&["ini", "cfg", "conf", "env", "properties"], "text/plain"),
];

/// Declared types trusted for text when the extension says nothing.
const DECLARED_TEXT_TYPES: &[&str] = &[
    "text/plain",
    "text/markdown",
    "text/x-markdown",
    "text/csv",
    "text/tab-separated-values",
    "application/json",
    "application/x-ndjson",
    "application/xml",
    "text/xml",
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "application/toml",
    "text/html",
    "text/css",
    "text/javascript",
    "application/javascript",
];

fn text_type_of_extension(extension: &str) -> Option<&'static str> {
    TEXT_TYPES.iter().find(|(exts, _)| exts.contains(&extension)).map(|(_, media_type)| *media_type)
}

/// A text file's media type: by its extension, else by a declared text type, else `text/plain`.
fn text_media_type(extension: &str, declared: Option<&str>) -> &'static str {
    if let Some(media_type) = text_type_of_extension(extension) {
        return media_type;
    }
    let declared = declared.and_then(|d| DECLARED_TEXT_TYPES.iter().find(|t| **t == d));
    match declared.copied() {
        Some("text/x-markdown") => "text/markdown",
        Some("text/xml") => "application/xml",
        Some("application/x-yaml" | "text/yaml") => "application/yaml",
        Some("application/javascript") => "text/javascript",
        Some(t) => t,
        None => "text/plain",
    }
}

/// The name or the declared type says the file is text.
fn claims_text(extension: &str, declared: Option<&str>) -> bool {
    text_type_of_extension(extension).is_some()
        || declared.is_some_and(|d| d.starts_with("text/") || DECLARED_TEXT_TYPES.contains(&d))
}

/// The text of UTF-8 (a BOM dropped) or of UTF-16 with a BOM, line ends made LF; `None` when
/// it is not valid, or holds a NUL.
fn decode_text(bytes: &[u8]) -> Option<String> {
    if let Some(rest) = bytes.strip_prefix(b"\xff\xfe") {
        return decode_utf16(rest, u16::from_le_bytes);
    }
    if let Some(rest) = bytes.strip_prefix(b"\xfe\xff") {
        return decode_utf16(rest, u16::from_be_bytes);
    }
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    if bytes.contains(&0) {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    Some(lf_line_ends(text))
}

/// `text` copied once, each CRLF and each lone CR made LF.
fn lf_line_ends(text: &str) -> String {
    let mut pieces = text.split('\r');
    let first = pieces.next().unwrap_or_default();
    if first.len() == text.len() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(first);
    for piece in pieces {
        out.push('\n');
        out.push_str(piece.strip_prefix('\n').unwrap_or(piece));
    }
    out
}

fn decode_utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> Option<String> {
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let units = bytes.chunks_exact(2).map(|pair| unit([pair[0], pair[1]]));
    let mut out = String::with_capacity(bytes.len());
    let mut after_cr = false;
    for c in char::decode_utf16(units) {
        match c.ok()? {
            '\0' => return None,
            '\r' => {
                out.push('\n');
                after_cr = true;
                continue;
            }
            '\n' if after_cr => {}
            c => out.push(c),
        }
        after_cr = false;
    }
    Some(out)
}

/// After this many pages have failed with none read, the rest are not tried.
const MAX_FAILED_PAGES_FIRST: u32 = 5;

/// A PDF's text, page by page.
fn pdf(bytes: &[u8], limits: &Limits) -> Result<Extracted, Refused> {
    // lopdf and pdf-extract unpack streams without a bound: a small file of zeros compressed
    // a thousandfold would take the memory first.
    if inflates_past(bytes, MAX_INFLATED_BYTES) {
        return Err(Refused::TooMuchContent { limit: MAX_INFLATED_BYTES });
    }
    let read = pdf_text(bytes, limits)?;
    if read.text.len() as u64 > limits.max_file_bytes.saturating_mul(2) {
        return Err(Refused::TooMuchContent { limit: limits.max_file_bytes.saturating_mul(2) });
    }
    Ok(read)
}

/// Whether the Flate-compressed streams of a PDF unpack to more than `cap` bytes together
/// (each stream's data between `stream` and `endstream`; what is not Flate data stops at once).
fn inflates_past(bytes: &[u8], cap: u64) -> bool {
    use std::io::Read;
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut total: u64 = 0;
    let mut at = 0;
    while let Some(i) = find(&bytes[at..], b"stream") {
        let keyword = at + i;
        at = keyword + b"stream".len();
        if keyword >= 3 && &bytes[keyword - 3..keyword] == b"end" {
            continue;
        }
        let mut start = at;
        if bytes.get(start) == Some(&b'\r') {
            start += 1;
        }
        if bytes.get(start) == Some(&b'\n') {
            start += 1;
        }
        let end = find(&bytes[start..], b"endstream").map_or(bytes.len(), |e| start + e);
        let mut inflater = flate2::read::ZlibDecoder::new(&bytes[start..end]).take(cap - total + 1);
        let mut sink = [0u8; 64 * 1024];
        loop {
            match inflater.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n as u64,
            }
        }
        if total > cap {
            return true;
        }
        at = end;
    }
    false
}

fn pdf_text(bytes: &[u8], limits: &Limits) -> Result<Extracted, Refused> {
    let loaded = catch_unwind(|| lopdf::Document::load_mem(bytes));
    let mut doc = match loaded {
        Ok(Ok(doc)) => doc,
        Ok(Err(e)) => return Err(load_refusal(&e)),
        Err(_) => return Err(Refused::Unreadable("it is damaged".into())),
    };
    if doc.trailer.get(b"Encrypt").is_ok() {
        // lopdf opens a PDF whose password only guards its permissions (an empty user password)
        // and decrypts it as it loads; anything else needs a password we do not have.
        if !doc.was_encrypted() {
            return Err(Refused::Encrypted);
        }
        doc.trailer.remove(b"Encrypt");
    }
    let page_ids = catch_unwind(AssertUnwindSafe(|| doc.get_pages()))
        .map_err(|_| Refused::Unreadable("its page tree is damaged".into()))?;
    let pages = u32::try_from(page_ids.len()).unwrap_or(u32::MAX);
    if pages > limits.max_pdf_pages {
        return Err(Refused::TooManyPages { pages, limit: limits.max_pdf_pages });
    }
    if pages == 0 {
        return Err(Refused::Unreadable("it has no pages".into()));
    }
    let mut text = String::new();
    let (mut with_text, mut failed, mut first_failure) = (0u32, 0u32, None);
    for (page, id) in page_ids {
        if page > 1 {
            text.push('\n');
        }
        text.push_str(&format!("--- page {page} ---\n"));
        match page_text(&doc, page, id) {
            Ok(page_text) if page_text.is_empty() => text.push_str("(no text on this page)\n"),
            Ok(page_text) => {
                with_text += 1;
                text.push_str(&page_text);
                text.push('\n');
            }
            Err(reason) => {
                failed += 1;
                first_failure.get_or_insert(reason);
                text.push_str("(this page could not be read)\n");
            }
        }
        // Pages that all fail fail alike (a font or form they share): stop early.
        if with_text == 0 && failed >= MAX_FAILED_PAGES_FIRST {
            break;
        }
    }
    if with_text == 0 {
        return Err(match first_failure {
            Some(reason) => Refused::Unreadable(reason),
            None => Refused::NoText,
        });
    }
    Ok(Extracted {
        kind: Kind::Pdf,
        media_type: "application/pdf".into(),
        text,
        pages: Some(pages),
    })
}

/// A lopdf load error as a refusal: a password is [`Refused::Encrypted`], the rest unreadable.
fn load_refusal(e: &lopdf::Error) -> Refused {
    use lopdf::Error as E;
    match e {
        E::Decryption(_) | E::InvalidPassword => Refused::Encrypted,
        E::Unimplemented(what) if what.contains("encrypt") => Refused::Encrypted,
        E::Parse(_)
        | E::Xref(_)
        | E::InvalidOffset(_)
        | E::MissingXrefEntry
        | E::ObjectNotFound(_)
        | E::ObjectIdMismatch
        | E::IndirectObject { .. } => Refused::Unreadable("it is damaged or incomplete".into()),
        other => Refused::Unreadable(other.to_string()),
    }
}

/// Page `page`'s text (lines kept, runs of blanks shortened, trimmed), or why it could not be
/// read, in words.
fn page_text(doc: &lopdf::Document, page: u32, id: lopdf::ObjectId) -> Result<String, String> {
    let mut sink = PageText::default();
    let run = catch_unwind(AssertUnwindSafe(|| match page_hazard(doc, id) {
        Some(hazard) => Err(hazard),
        None => Ok(pdf_extract::output_doc_page(doc, &mut sink, page)),
    }));
    match run {
        Ok(Ok(Ok(()))) => Ok(tidy(&sink.out)),
        Ok(Err(hazard)) => Err(hazard.into()),
        Ok(Ok(Err(_))) => Err("it is damaged".into()),
        // pdf-extract panics on what it does not expect (a font kind, a damaged object).
        Err(_) => Err("its text is stored in a way Conclave cannot read".into()),
    }
}

/// How far a page's `/Parent` chain is followed before it is taken for a loop.
const MAX_PARENT_DEPTH: usize = 64;
/// How deep forms (XObjects drawn with `Do`) may nest within a page.
const MAX_FORM_DEPTH: usize = 24;
/// How many forms a page may draw, counting each drawing of each nested form.
const MAX_FORM_DRAWS: u32 = 2_000;

/// What in page `id` would send pdf-extract into endless recursion (a stack overflow, which
/// aborts the process and no `catch_unwind` catches) or exponential work: a `/Parent` chain that
/// loops, a form that draws itself, forms nested or multiplied past a bound. pdf-extract follows
/// each by recursion with no bound of its own, so the page is walked here first, the same way.
fn page_hazard(doc: &lopdf::Document, id: lopdf::ObjectId) -> Option<&'static str> {
    let (mut seen, mut node, mut resources) = (Vec::new(), id, None);
    loop {
        if seen.contains(&node) || seen.len() > MAX_PARENT_DEPTH {
            return Some("its page tree loops");
        }
        seen.push(node);
        let Ok(dict) = doc.get_dictionary(node) else { break };
        if resources.is_none() {
            resources = dict.get(b"Resources").ok().and_then(|r| as_dict(doc, r));
        }
        match dict.get(b"Parent").and_then(lopdf::Object::as_reference) {
            Ok(parent) => node = parent,
            Err(_) => break,
        }
    }
    let content = doc.get_page_content(id).ok()?;
    forms_hazard(doc, &content, resources, &mut Vec::new(), &mut 0)
}

/// As pdf-extract does: a reference followed to its object.
fn deref<'a>(doc: &'a lopdf::Document, object: &'a lopdf::Object) -> Option<&'a lopdf::Object> {
    match object {
        lopdf::Object::Reference(id) => doc.get_object(*id).ok(),
        direct => Some(direct),
    }
}

fn as_dict<'a>(
    doc: &'a lopdf::Document,
    object: &'a lopdf::Object,
) -> Option<&'a lopdf::Dictionary> {
    deref(doc, object).and_then(|o| o.as_dict().ok())
}

/// The forms `content` draws, followed as pdf-extract follows them (every `Do`, whatever the
/// XObject's subtype, with its own resources or else the caller's).
fn forms_hazard(
    doc: &lopdf::Document,
    content: &[u8],
    resources: Option<&lopdf::Dictionary>,
    stack: &mut Vec<Option<lopdf::ObjectId>>,
    draws: &mut u32,
) -> Option<&'static str> {
    let Ok(content) = lopdf::content::Content::decode(content) else { return None };
    let xobjects = resources.and_then(|r| r.get(b"XObject").ok()).and_then(|x| as_dict(doc, x));
    for op in content.operations.iter().filter(|op| op.operator == "Do") {
        let Some(name) = op.operands.first().and_then(|n| n.as_name().ok()) else { continue };
        let Some(target) = xobjects.and_then(|x| x.get(name).ok()) else { continue };
        let Some(stream) = deref(doc, target).and_then(|o| o.as_stream().ok()) else { continue };
        let id = target.as_reference().ok();
        *draws += 1;
        if *draws > MAX_FORM_DRAWS {
            return Some("its pages draw the same forms too many times");
        }
        if id.is_some() && stack.contains(&id) {
            return Some("a form in it draws itself");
        }
        if stack.len() >= MAX_FORM_DEPTH {
            return Some("its forms nest too deeply");
        }
        let inner = stream.dict.get(b"Resources").ok().and_then(|r| as_dict(doc, r)).or(resources);
        let data = match stream.filters() {
            Ok(_) => stream.decompressed_content().unwrap_or_else(|_| stream.content.clone()),
            Err(_) => stream.content.clone(),
        };
        stack.push(id);
        let hazard = forms_hazard(doc, &data, inner, stack, draws);
        stack.pop();
        if hazard.is_some() {
            return hazard;
        }
    }
    None
}

/// pdf-extract's plain-text layout, one page at a time: a new line where the text moves down to
/// a new line, a space at a gap between words and two at a gap as wide as a column's, so that a
/// table's row reads as one line with its cells apart.
#[derive(Default)]
struct PageText {
    out: String,
    /// Where the last glyph ended (x) and its baseline (y), in the page's units.
    last_end: f64,
    last_y: f64,
    /// The next glyph starts a word (a shown string), so may need a space or a line break first.
    word_start: bool,
}

impl pdf_extract::OutputDev for PageText {
    fn begin_page(
        &mut self,
        _page: u32,
        _media_box: &pdf_extract::MediaBox,
        _art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &pdf_extract::Transform,
        width: f64,
        _spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), pdf_extract::OutputError> {
        let scale = (trm.m11 * trm.m22 - trm.m12 * trm.m21).abs().sqrt();
        let size = match scale * font_size.abs() {
            s if s.is_finite() && s > 0.0 => s,
            _ => 1.0,
        };
        let (x, y) = (trm.m31, trm.m32);
        if self.word_start && !self.out.is_empty() {
            let dy = (y - self.last_y).abs();
            if dy > size * 1.5 || (x < self.last_end && dy > size * 0.5) {
                self.out.push('\n');
            } else if x > self.last_end + size {
                self.out.push_str("  ");
            } else if x > self.last_end + size * 0.1 {
                self.out.push(' ');
            }
        }
        for c in char.chars() {
            match c {
                '\t' | '\u{a0}' => self.out.push(' '),
                c if c.is_control() => {}
                c => self.out.push(c),
            }
        }
        self.word_start = false;
        self.last_y = y;
        self.last_end = x + width * size;
        Ok(())
    }

    fn begin_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.word_start = true;
        Ok(())
    }

    fn end_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), pdf_extract::OutputError> {
        Ok(())
    }
}

/// A page's text tidied: each line's end trimmed, a run of three or more blanks made two (a
/// column's gap stays wider than a word's), blank lines never two in a row nor at the ends.
fn tidy(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut blank_before = true;
    for line in raw.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            if !blank_before {
                out.push('\n');
            }
            blank_before = true;
            continue;
        }
        blank_before = false;
        let mut blanks = 0;
        for c in line.chars() {
            blanks = if c == ' ' { blanks + 1 } else { 0 };
            if blanks <= 2 {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;
