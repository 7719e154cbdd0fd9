use super::*;
use lopdf::{dictionary, Document, Object, Stream};
use proptest::prelude::*;

use crate::attachments::sample::*;

const MB: u64 = 1024 * 1024;
const LIMITS: Limits = Limits { max_file_bytes: 10 * MB, max_pdf_pages: 200 };

fn refused(name: &str, bytes: &[u8]) -> Refused {
    extract(name, None, bytes, &LIMITS).unwrap_err()
}

fn text_of(name: &str, bytes: &[u8]) -> Extracted {
    let got = extract(name, None, bytes, &LIMITS).unwrap();
    assert_eq!((got.kind, got.pages), (Kind::Text, None), "{name}");
    got
}

#[test]
fn a_pdf_reads_page_by_page_with_its_table_rows_and_non_latin_text() {
    let got = extract("report.pdf", Some("application/pdf"), &report_pdf(), &LIMITS).unwrap();
    assert_eq!(got.kind, Kind::Pdf);
    assert_eq!(got.media_type, "application/pdf");
    assert_eq!(got.pages, Some(2));
    let text = &got.text;
    let page1 = text.find("--- page 1 ---\n").expect(text);
    let page2 = text.find("--- page 2 ---\n").expect(text);
    let heading = text.find("Quarterly supplies").expect(text);
    let table = text.find("Item").expect(text);
    let greek = text.find(NON_LATIN).expect(text);
    assert!(page1 < heading && heading < table && table < page2 && page2 < greek, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    // Each row is one line, its cells in order and set apart wider than words are.
    for row in ["Item  Qty  Price", "Paper  10  4.50", "Toner  2  89.00"] {
        assert!(lines.contains(&row), "no line {row:?} in:\n{text}");
    }
    assert!(lines.contains(&"Prices are in euros."), "{text}");
    assert!(lines.contains(&NON_LATIN), "{text}");
    assert!(text.starts_with("--- page 1 ---\nQuarterly supplies\n"), "{text}");
    assert!(text.ends_with(&format!("\n\n--- page 2 ---\n{NON_LATIN}\n")), "{text}");
}

#[test]
fn a_broken_pdf_is_unreadable_not_a_panic() {
    let good = report_pdf();
    for cut in [good.len() / 2, good.len() - 40, 200, 9] {
        let got = extract("report.pdf", None, &good[..cut], &LIMITS);
        assert!(matches!(got, Err(Refused::Unreadable(_))), "cut at {cut}: {got:?}");
    }
    let got = refused("report.pdf", b"%PDF-1.7 garbage");
    assert!(matches!(got, Refused::Unreadable(_)), "{got:?}");
    assert!(got.to_string().starts_with("could not be read as a PDF ("), "{got}");
}

#[test]
fn a_file_named_pdf_that_is_not_one_is_unreadable() {
    let got = refused("report.pdf", b"just some notes\n");
    assert_eq!(got, Refused::Unreadable("it is not a PDF".into()));
    assert_eq!(got.to_string(), "could not be read as a PDF (it is not a PDF)");
    let declared = extract("report", Some("application/pdf"), b"notes", &LIMITS).unwrap_err();
    assert_eq!(declared, got);
    // A few bytes before the header, as some mailers leave, are read past.
    let mut prefixed = b"\r\n\r\n".to_vec();
    prefixed.extend(report_pdf());
    let got = extract("report.pdf", None, &prefixed, &LIMITS).unwrap();
    assert_eq!((got.kind, got.pages), (Kind::Pdf, Some(2)));
}

#[test]
fn a_pdf_that_needs_a_password_is_refused_as_encrypted() {
    let got = refused("locked.pdf", &encrypted("open sesame"));
    assert_eq!(got, Refused::Encrypted);
    assert_eq!(got.to_string(), "is an encrypted PDF; remove its password and attach it again");
}

#[test]
fn a_pdf_encrypted_with_only_an_owner_password_opens_like_any_other() {
    // The common "protected" PDF: no password to open it, only permissions; every reader opens it.
    let got = extract("statement.pdf", None, &encrypted(""), &LIMITS).unwrap();
    let plain = extract("statement.pdf", None, &report_pdf(), &LIMITS).unwrap();
    assert_eq!(got, plain);
}

#[test]
fn a_trailer_encrypt_dictionary_that_cannot_be_opened_is_encrypted() {
    let mut doc = report_document();
    let encrypt = doc.add_object(dictionary! {
        "Filter" => "Standard",
        "V" => 2,
        "R" => 3,
        "Length" => 128,
        "P" => -4,
        "O" => Object::string_literal(vec![7u8; 32]),
        "U" => Object::string_literal(vec![9u8; 32]),
    });
    doc.trailer.set("Encrypt", encrypt);
    assert_eq!(refused("locked.pdf", &save(&mut doc)), Refused::Encrypted);
}

#[test]
fn a_pdf_past_the_page_limit_is_refused_with_both_counts() {
    let limits = Limits { max_pdf_pages: 2, ..LIMITS };
    let got = extract("long.pdf", None, &pages_with_text(3), &limits).unwrap_err();
    assert_eq!(got, Refused::TooManyPages { pages: 3, limit: 2 });
    assert_eq!(got.to_string(), "has 3 pages; a PDF may have at most 2");
    let two = extract("short.pdf", None, &pages_with_text(2), &limits).unwrap();
    assert_eq!(two.pages, Some(2));
    assert_eq!(
        two.text, "--- page 1 ---\nPage number 1\n\n--- page 2 ---\nPage number 2\n",
        "each page's text after its line, pages apart by a blank line"
    );
}

#[test]
fn a_pdf_without_text_is_refused_and_a_blank_page_among_others_is_marked() {
    let drawing = b"0 0 m 100 100 l S".to_vec();
    let scanned = save(&mut pdf_with(&[drawing.clone(), drawing.clone()], &['x']));
    let got = refused("scan.pdf", &scanned);
    assert_eq!(got, Refused::NoText);
    assert_eq!(got.to_string(), "has no text Conclave can read (a scanned PDF?)");

    let text = b"BT /F1 12 Tf 72 700 Td (Signed) Tj ET".to_vec();
    let mixed = save(&mut pdf_with(&[drawing, text], &['x']));
    let got = extract("mixed.pdf", None, &mixed, &LIMITS).unwrap();
    assert_eq!(got.text, "--- page 1 ---\n(no text on this page)\n\n--- page 2 ---\nSigned\n");
}

// --- text ---

#[test]
fn markdown_with_a_bom_and_crlf_comes_out_without_the_bom_and_with_lf() {
    let got = text_of("notes.md", b"\xef\xbb\xbf# Title\r\n\r\nBody line\r\nlast\r\n");
    assert_eq!(got.media_type, "text/markdown");
    assert_eq!(got.text, "# Title\n\nBody line\nlast\n");
}

#[test]
fn csv_json_and_code_keep_their_text_and_get_their_media_types() {
    let csv = text_of("data.CSV", b"item,qty\r\npaper,10\r\n");
    assert_eq!((csv.media_type.as_str(), csv.text.as_str()), ("text/csv", "item,qty\npaper,10\n"));
    let json = text_of("config.json", r#"{"a": [1, 2], "b": "é"}"#.as_bytes());
    assert_eq!(json.media_type, "application/json");
    assert_eq!(json.text, r#"{"a": [1, 2], "b": "é"}"#);
    let code = "fn main() {\n\tlet greeting = \"héllo\";\n}\n";
    let rs = text_of("src/main.rs", code.as_bytes());
    assert_eq!((rs.media_type.as_str(), rs.text.as_str()), ("text/x-rust", code));
    assert_eq!(text_of("run.py", b"print(1)").media_type, "text/x-python");
    assert_eq!(text_of("notes.txt", b"plain").media_type, "text/plain");
    assert_eq!(text_of("Makefile", b"all:\n").media_type, "text/plain");
    assert_eq!(text_of("weird.xyz", b"hello").media_type, "text/plain");
}

#[test]
fn a_declared_text_type_names_a_file_without_a_known_extension() {
    let got = extract("README", Some("Text/Markdown; charset=utf-8"), b"# Hi", &LIMITS).unwrap();
    assert_eq!(got.media_type, "text/markdown");
    // The extension wins over the declaration; a declared type that is not text is ignored.
    let got = extract("a.csv", Some("application/json"), b"a,b", &LIMITS).unwrap();
    assert_eq!(got.media_type, "text/csv");
    let got = extract("notes", Some("application/octet-stream"), b"hi", &LIMITS).unwrap();
    assert_eq!(got.media_type, "text/plain");
}

#[test]
fn lone_carriage_returns_become_line_feeds_too() {
    assert_eq!(text_of("old.txt", b"a\rb\r\r\nc\r").text, "a\nb\n\nc\n");
}

#[test]
fn utf16_with_a_bom_is_decoded() {
    let source = "héllo\r\nwörld 日本 😀\n";
    let mut le = vec![0xff, 0xfe];
    le.extend(source.encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(text_of("notes.txt", &le).text, "héllo\nwörld 日本 😀\n");
    let mut be = vec![0xfe, 0xff];
    be.extend(source.encode_utf16().flat_map(u16::to_be_bytes));
    assert_eq!(text_of("notes.txt", &be).text, "héllo\nwörld 日本 😀\n");
    // Half a code unit, or a lone surrogate, is not text.
    assert_eq!(refused("odd.txt", &le[..le.len() - 1]), Refused::NotText);
    assert_eq!(refused("odd.txt", b"\xff\xfe\x00\xd8a\x00"), Refused::NotText);
}

#[test]
fn invalid_utf8_and_nul_bytes_are_not_text() {
    let got = refused("latin1.txt", b"caf\xe9 cr\xe8me");
    assert_eq!(got, Refused::NotText);
    assert_eq!(got.to_string(), "is not UTF-8 text");
    assert_eq!(refused("notes.txt", b"abc\0def"), Refused::NotText);
    assert_eq!(refused("notes.md", b"\xef\xbb\xbfab\0"), Refused::NotText);
    assert_eq!(refused("notes", b"caf\xe9"), Refused::NotText);
}

#[test]
fn binary_of_no_known_kind_that_claims_nothing_is_not_a_file_type_conclave_reads() {
    let got = refused("blob.bin", b"\x01\x02\0\0\x7f\xfe");
    assert_eq!(
        got.to_string(),
        "is not a file type Conclave reads — attach text, Markdown, code, CSV, JSON, PDF, PNG, \
         JPEG or WebP"
    );
}

#[test]
fn text_that_starts_like_a_binary_signature_stays_text() {
    assert_eq!(text_of("notes.txt", b"MZ is a chemistry term\n").text, "MZ is a chemistry term\n");
    assert_eq!(text_of("notes.txt", b"BMW sales\n").text, "BMW sales\n");
    assert_eq!(text_of("notes.txt", b"BZh91AY&SY nope").text, "BZh91AY&SY nope");
    for note in ["GIF89a is the animated one", "ID3 tags name the song", "OggS", "fLaC"] {
        assert_eq!(text_of("notes.md", note.as_bytes()).text, note);
    }
    let mut tar_like = "x".repeat(257);
    tar_like.push_str("ustard and more");
    assert_eq!(text_of("notes.txt", tar_like.as_bytes()).text, tar_like);
}

// --- images and other kinds ---

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x02\0\0\0";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0";
const WEBP: &[u8] =
    b"RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0\x2f\0\0\0\x10\x07\x10\x11\x11\x88\x88\xfe\x07\0";

#[test]
fn images_are_known_by_their_bytes_not_their_names() {
    for (name, bytes, media_type) in [
        ("photo.png", PNG, "image/png"),
        ("photo.txt", PNG, "image/png"),
        ("photo.png", JPEG, "image/jpeg"),
        ("scan.jpg", JPEG, "image/jpeg"),
        ("pic.webp", WEBP, "image/webp"),
        ("notes.md", WEBP, "image/webp"),
        ("report.pdf", PNG, "image/png"),
    ] {
        let got = extract(name, Some("text/plain"), bytes, &LIMITS).unwrap();
        let want = Extracted {
            kind: Kind::Image,
            media_type: media_type.into(),
            text: String::new(),
            pages: None,
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_gif_and_archives_are_refused_saying_what_they_are() {
    let gif = refused("anim.gif", b"GIF89a\x01\0\x01\0\x80\0\0");
    assert!(matches!(&gif, Refused::NotAccepted { what } if what.contains("GIF")), "{gif:?}");
    assert_eq!(
        gif.to_string(),
        "is a GIF image — attach text, Markdown, code, CSV, JSON, PDF, PNG, JPEG or WebP"
    );
    let docx = refused("report.docx", b"PK\x03\x04\x14\0\x06\0\x08\0\0\0!\0");
    let message = docx.to_string();
    assert!(message.contains("Word") && message.contains("ZIP"), "{message}");
    let zip = refused("archive.zip", b"PK\x03\x04\x14\0\0\0").to_string();
    assert!(zip.starts_with("is a ZIP archive (Word, Excel"), "{zip}");
    // A ZIP named as text is still a ZIP.
    assert!(refused("notes.txt", b"PK\x03\x04\x14\0\0\0").to_string().contains("ZIP"));
    for (bytes, what) in [
        (&b"\x1f\x8b\x08\0\0\0"[..], "gzip"),
        (b"\x7fELF\x02\x01\x01\0", "program"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\0\0", "Office"),
        (b"SQLite format 3\0\x10\0", "SQLite"),
    ] {
        let got = refused("file.txt", bytes).to_string();
        assert!(got.contains(what), "{got}");
    }
    let mut pe = vec![0u8; 0x48];
    pe[..2].copy_from_slice(b"MZ");
    pe[0x3c] = 0x40;
    pe[0x40..0x44].copy_from_slice(b"PE\0\0");
    assert!(refused("setup.exe", &pe).to_string().contains("Windows program"));
}

// --- size ---

#[test]
fn a_file_past_the_limit_is_refused_with_both_sizes_and_one_at_the_limit_is_accepted() {
    let limits = Limits { max_file_bytes: 1000, ..LIMITS };
    let got = extract("big.txt", None, &[b'a'; 1001], &limits).unwrap_err();
    assert_eq!(got, Refused::TooLarge { size: 1001, limit: 1000 });
    assert_eq!(got.to_string(), "is 1001 bytes; files may be at most 1000 bytes");
    assert_eq!(extract("big.txt", None, &[b'a'; 1000], &limits).unwrap().text.len(), 1000);

    // Sizes in KB/MB round so that a file just past the limit never reads as the limit.
    let just_past = vec![b'a'; (10 * MB + 1) as usize];
    let got = refused("big.txt", &just_past);
    assert_eq!(got.to_string(), "is 10.1 MB; files may be at most 10 MB");
    let words = |size, limit| Refused::TooLarge { size, limit }.to_string();
    assert_eq!(words(12_897_484, 10 * MB), "is 12.3 MB; files may be at most 10 MB");
    assert_eq!(words(1537, 1024), "is 1.6 KB; files may be at most 1 KB");
    assert_eq!(words(2, 1), "is 2 bytes; files may be at most 1 byte");
    // Too large is told before anything else, even of a file that would be refused anyway.
    let limits = Limits { max_file_bytes: 4, ..LIMITS };
    assert!(matches!(
        extract("a.zip", None, b"PK\x03\x04\0", &limits),
        Err(Refused::TooLarge { .. })
    ));
}

#[test]
fn an_empty_file_is_refused() {
    assert_eq!(refused("empty.txt", b""), Refused::Empty);
    assert_eq!(Refused::Empty.to_string(), "is empty");
}

#[test]
fn ten_megabytes_of_text_come_out_whole() {
    // The bench's case: a file at the limit, read once, copied once (not timed here).
    let mut bytes = b"0123456789 abcdefghij\n".repeat((10 * MB / 22) as usize);
    bytes.resize((10 * MB) as usize, b'x');
    let got = text_of("big.log", &bytes);
    assert_eq!(got.text.len(), bytes.len());
    assert_eq!(got.text.as_bytes(), &bytes[..]);
}

#[test]
fn kind_serializes_in_lower_case() {
    assert_eq!(serde_json::to_string(&Kind::Pdf).unwrap(), r#""pdf""#);
    assert_eq!(serde_json::from_str::<Kind>(r#""image""#).unwrap(), Kind::Image);
}

// --- never a panic ---

fn names() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["a.txt", "a.pdf", "a.md", "a.png", "a.docx", "noext", ""])
}

fn check_accepted(got: &Result<Extracted, Refused>) -> Result<(), TestCaseError> {
    if let Ok(e) = got {
        if e.kind == Kind::Text {
            prop_assert!(!e.text.contains('\0') && !e.text.contains('\r'), "{:?}", e.text);
        }
        if e.kind == Kind::Pdf {
            prop_assert!(e.text.starts_with("--- page 1 ---\n"));
            prop_assert!(!e.text.contains('\0') && !e.text.contains('\r'));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        pdf in any::<bool>(),
        name in names(),
    ) {
        let bytes = if pdf { [b"%PDF-1.7\n".as_slice(), &bytes].concat() } else { bytes };
        check_accepted(&extract(name, None, &bytes, &LIMITS))?;
    }

    #[test]
    fn arbitrary_text_keeps_no_nul_or_carriage_return(text in "(\\PC|\r|\n|\r\n|\0){0,200}") {
        check_accepted(&extract("notes.txt", None, text.as_bytes(), &LIMITS))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// A real PDF with bytes changed: whatever lopdf and pdf-extract make of it, an answer.
    #[test]
    fn a_damaged_pdf_never_panics(
        changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = report_pdf();
        for (at, byte) in changes {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        check_accepted(&extract("report.pdf", None, &bytes, &LIMITS))?;
    }
}

// --- hostile structure: what would overflow pdf-extract's stack or never end ---

/// One page with content `content` whose resources' XObjects are those `forms` adds to the
/// document and returns.
fn pdf_with_forms(
    content: &str,
    forms: impl FnOnce(&mut Document) -> lopdf::Dictionary,
) -> Vec<u8> {
    let mut doc = pdf_with(&[content.as_bytes().to_vec()], &['x']);
    let xobjects = forms(&mut doc);
    let pages_id = doc.catalog().unwrap().get(b"Pages").unwrap().as_reference().unwrap();
    let pages = doc.get_dictionary_mut(pages_id).unwrap();
    let resources_id = pages.get(b"Resources").unwrap().as_reference().unwrap();
    let resources = doc.get_dictionary_mut(resources_id).unwrap();
    resources.set("XObject", xobjects);
    save(&mut doc)
}

fn form(doc: &mut Document, content: &str) -> lopdf::ObjectId {
    doc.add_object(Stream::new(
        dictionary! { "Type" => "XObject", "Subtype" => "Form", "BBox" => vec![0.into(), 0.into(), 100.into(), 100.into()] },
        content.as_bytes().to_vec(),
    ))
}

#[test]
fn a_form_that_draws_itself_is_refused_not_a_stack_overflow() {
    let page = "BT /F1 12 Tf 72 700 Td (Before the loop) Tj ET /Fx Do";
    let bytes = pdf_with_forms(page, |doc| {
        let id = doc.new_object_id();
        doc.objects.insert(
            id,
            Object::Stream(Stream::new(
                dictionary! { "Type" => "XObject", "Subtype" => "Form" },
                b"/Fx Do".to_vec(),
            )),
        );
        dictionary! { "Fx" => id }
    });
    let got = refused("loop.pdf", &bytes);
    assert_eq!(got, Refused::Unreadable("a form in it draws itself".into()));
}

#[test]
fn forms_that_multiply_past_a_bound_are_refused_and_a_few_forms_are_read() {
    // A chain of forms, each drawing the next `times` times.
    let chain = |levels: usize, times: usize| {
        pdf_with_forms("/F0 Do", |doc| {
            let mut names = lopdf::Dictionary::new();
            let mut next = form(doc, "BT /F1 12 Tf 10 10 Td (leaf) Tj ET");
            for i in (0..levels).rev() {
                let name = format!("F{}", i + 1);
                names.set(name.clone(), next);
                next = form(doc, &format!("/{name} Do ").repeat(times));
            }
            names.set("F0", next);
            names
        })
    };
    // 2^15 drawings of the leaf, well within the depth bound.
    let got = refused("bomb.pdf", &chain(15, 2));
    assert_eq!(got, Refused::Unreadable("its pages draw the same forms too many times".into()));
    let got = refused("deep.pdf", &chain(40, 1));
    assert_eq!(got, Refused::Unreadable("its forms nest too deeply".into()));
    let got = extract("nested.pdf", None, &chain(8, 2), &LIMITS).unwrap();
    assert_eq!(got.text.matches("leaf").count(), 256, "{}", got.text);

    let page = "BT /F1 12 Tf 72 700 Td (Page text) Tj ET /Logo Do";
    let bytes = pdf_with_forms(page, |doc| {
        let logo = form(doc, "BT /F1 12 Tf 72 600 Td (In a form) Tj ET");
        dictionary! { "Logo" => logo }
    });
    let got = extract("forms.pdf", None, &bytes, &LIMITS).unwrap();
    assert_eq!(got.text, "--- page 1 ---\nPage text\nIn a form\n", "{}", got.text);
}

#[test]
fn a_page_that_is_its_own_parent_is_refused_not_a_stack_overflow() {
    let mut doc = Document::with_version("1.7");
    let pages_id = doc.new_object_id();
    let page_id = doc.new_object_id();
    let content = doc.add_object(Stream::new(dictionary! {}, b"0 0 m".to_vec()));
    doc.objects.insert(
        page_id,
        Object::Dictionary(
            dictionary! { "Type" => "Page", "Parent" => page_id, "Contents" => content },
        ),
    );
    doc.objects.insert(
        pages_id,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Count" => 1, "Kids" => vec![page_id.into()] },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let got = refused("cycle.pdf", &save(&mut doc));
    assert_eq!(got, Refused::Unreadable("its page tree loops".into()));
}

#[test]
fn a_page_with_an_image_keeps_its_text() {
    let page = "BT /F1 12 Tf 72 700 Td (Above the logo) Tj ET q 50 0 0 50 72 600 cm /Im1 Do Q \
                BT /F1 12 Tf 72 560 Td (Below the logo) Tj ET";
    let bytes = pdf_with_forms(page, |doc| {
        let pixels: Vec<u8> = (0..=255u8).cycle().take(16 * 16 * 3).collect();
        let image = doc.add_object(Stream::new(
            dictionary! {
                "Type" => "XObject",
                "Subtype" => "Image",
                "Width" => 16,
                "Height" => 16,
                "ColorSpace" => "DeviceRGB",
                "BitsPerComponent" => 8,
            },
            pixels,
        ));
        dictionary! { "Im1" => image }
    });
    let got = extract("logo.pdf", None, &bytes, &LIMITS).unwrap();
    assert_eq!(got.text, "--- page 1 ---\nAbove the logo\nBelow the logo\n");
}

#[test]
fn a_pdf_that_unpacks_past_the_bound_is_refused_before_it_is_read() {
    use std::io::Write;
    // 300 MB of zeros compressed to a few hundred KB, as one stream of an otherwise small PDF.
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..300 {
        z.write_all(&zeros).unwrap();
    }
    let packed = z.finish().unwrap();
    let mut bomb = b"%PDF-1.7\n1 0 obj << /Length 0 /Filter /FlateDecode >>\nstream\n".to_vec();
    bomb.extend_from_slice(&packed);
    bomb.extend_from_slice(b"\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n");
    assert!(bomb.len() < 2 * 1024 * 1024, "{}", bomb.len());
    let got = refused("bomb.pdf", &bomb);
    assert_eq!(got, Refused::TooMuchContent { limit: MAX_INFLATED_BYTES });
    assert_eq!(
        got.to_string(),
        "unpacks to more than 256 MB of content; a PDF may unpack to at most that"
    );
    // An ordinary PDF's streams are far below it.
    assert!(!inflates_past(&report_pdf(), 1024 * 1024));
}
