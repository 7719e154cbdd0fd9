//! PDFs made with lopdf for the tests (no fixture file, no system font): a two-page report
//! with a table and a non-Latin line, pages of plain text, an encrypted copy. Built only for
//! the tests and the test build's demonstration features.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lopdf::{
    dictionary, Document, EncryptionState, EncryptionVersion, Object, Permissions, Stream,
};

/// The non-Latin line of page 2: Greek, Cyrillic and Japanese.
pub const NON_LATIN: &str = "Ελληνικά Привет 日本語";

/// A simple font with no glyphs whose one-byte codes map, through its /ToUnicode CMap, to the
/// characters of `chars` (code 0x20 is a space, the rest from 0x21 on, in order). Returns the
/// font dictionary and the codes of each character.
pub fn unicode_font(doc: &mut Document, chars: &[char]) -> (Object, Vec<(char, u8)>) {
    let codes: Vec<(char, u8)> = std::iter::once((' ', 0x20))
        .chain(chars.iter().zip(0x21u8..).map(|(c, code)| (*c, code)))
        .collect();
    let mut cmap = String::from(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n\
         /CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n\
         /CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n\
         1 begincodespacerange\n<00> <FF>\nendcodespacerange\n",
    );
    cmap.push_str(&format!("{} beginbfchar\n", codes.len()));
    for (c, code) in &codes {
        let mut units = [0u16; 2];
        let hex: String = c.encode_utf16(&mut units).iter().map(|u| format!("{u:04X}")).collect();
        cmap.push_str(&format!("<{code:02X}> <{hex}>\n"));
    }
    cmap.push_str("endbfchar\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n");
    let to_unicode = doc.add_object(Stream::new(dictionary! {}, cmap.into_bytes()));
    let last = codes.last().unwrap().1;
    let widths: Vec<Object> = (0x20..=last).map(|_| Object::Integer(1000)).collect();
    let font = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "ConclaveUnicodeTest",
        "FirstChar" => 0x20,
        "LastChar" => i64::from(last),
        "Widths" => widths,
        "ToUnicode" => to_unicode,
    });
    (font.into(), codes)
}

/// A PDF whose pages have these content streams; fonts /F1 (Helvetica) and /F2 (the Unicode
/// font for `chars`) on every page.
pub fn pdf_with(pages: &[Vec<u8>], chars: &[char]) -> Document {
    let mut doc = Document::with_version("1.7");
    let pages_id = doc.new_object_id();
    let helvetica = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let (unicode, _) = unicode_font(&mut doc, chars);
    let resources = doc.add_object(dictionary! {
        "Font" => dictionary! { "F1" => helvetica, "F2" => unicode },
    });
    let kids: Vec<Object> = pages
        .iter()
        .map(|content| {
            let content = doc.add_object(Stream::new(dictionary! {}, content.clone()));
            doc.add_object(dictionary! {
                "Type" => "Page",
                "Parent" => pages_id,
                "Contents" => content,
            })
            .into()
        })
        .collect();
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Count" => kids.len() as i64,
            "Kids" => kids,
            "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    doc.trailer.set(
        "ID",
        Object::Array(vec![Object::string_literal("conclave-test"), Object::string_literal("1")]),
    );
    doc
}

pub fn save(doc: &mut Document) -> Vec<u8> {
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    bytes
}

/// `text` in the Unicode font's codes, as a PDF hex string.
pub fn hex_in(codes: &[(char, u8)], text: &str) -> String {
    let hex: String = text
        .chars()
        .map(|c| format!("{:02X}", codes.iter().find(|(k, _)| *k == c).unwrap().1))
        .collect();
    format!("<{hex}>")
}

pub fn non_latin_chars() -> Vec<char> {
    let mut chars: Vec<char> = NON_LATIN.chars().filter(|c| *c != ' ').collect();
    chars.sort_unstable();
    chars.dedup();
    chars
}

/// Two pages: a heading, a sentence and a three-column table whose cells are placed one by one
/// (each its own `Td`), then the non-Latin line.
pub fn report_document() -> Document {
    let mut page1 = String::from("BT /F1 18 Tf 72 780 Td (Quarterly supplies) Tj ET\n");
    page1.push_str("BT /F1 12 Tf 72 750 Td (Prices are in euros.) Tj ET\n");
    let rows = [["Item", "Qty", "Price"], ["Paper", "10", "4.50"], ["Toner", "2", "89.00"]];
    for (r, row) in rows.iter().enumerate() {
        let y = 720 - 20 * r;
        for (cell, x) in row.iter().zip([72, 200, 280]) {
            page1.push_str(&format!("BT /F1 12 Tf {x} {y} Td ({cell}) Tj ET\n"));
        }
    }
    let chars = non_latin_chars();
    let mut probe = Document::with_version("1.7");
    let (_, codes) = unicode_font(&mut probe, &chars);
    let page2 = format!("BT /F2 14 Tf 72 780 Td {} Tj ET\n", hex_in(&codes, NON_LATIN));
    pdf_with(&[page1.into_bytes(), page2.into_bytes()], &chars)
}

pub fn report_pdf() -> Vec<u8> {
    save(&mut report_document())
}

pub fn pages_with_text(n: usize) -> Vec<u8> {
    let pages: Vec<Vec<u8>> = (1..=n)
        .map(|i| format!("BT /F1 12 Tf 72 700 Td (Page number {i}) Tj ET").into_bytes())
        .collect();
    save(&mut pdf_with(&pages, &['x']))
}

pub fn encrypted(user_password: &str) -> Vec<u8> {
    let mut doc = report_document();
    let version = EncryptionVersion::V2 {
        document: &doc,
        owner_password: "owner secret",
        user_password,
        key_length: 128,
        permissions: Permissions::PRINTABLE,
    };
    let state = EncryptionState::try_from(version).unwrap();
    doc.encrypt(&state).unwrap();
    save(&mut doc)
}
