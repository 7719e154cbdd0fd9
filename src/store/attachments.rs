//! Attachments: a file's content stored once by its SHA-256 (`attachment_blobs`), each upload
//! of it a person's named copy (`attachments`), and the uploads a run was given, in order
//! (`run_attachments`, written with the run in [`super::queries::create_run`]). Who may name an
//! upload or read a run's is the engine's business; this module only stores and reads them.

use std::sync::Arc;

use actix::prelude::*;
use diesel::prelude::*;
use serde::Serialize;

use super::db::{self, AnyConnection};
use super::schema::{attachment_blobs, attachments, run_attachments};
use super::types::Ms;
use super::{StoreActor, StoreError};

/// An upload as its owner and a run's viewers see it (never its bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentInfo {
    pub id: String,
    pub name: String,
    /// `text`, `pdf` or `image`.
    pub kind: String,
    pub media_type: String,
    pub size: i64,
    /// A PDF's pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<i32>,
    /// The length of the text a model reads, in characters.
    pub chars: i64,
    #[serde(skip)]
    pub owner: Option<String>,
    #[serde(skip)]
    pub sha256: String,
}

/// An upload with what a model is given: its text, and an image's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentContent {
    pub info: AttachmentInfo,
    pub text: Arc<str>,
    /// An image's bytes (None for text and PDF, whose text is what is sent).
    pub image: Option<Arc<[u8]>>,
    /// The file as uploaded (empty unless a download asked for it).
    pub original: Arc<[u8]>,
}

/// A new upload (insert form): its blob is stored unless one with its hash already is.
#[derive(Debug, Clone)]
pub struct NewAttachment {
    pub id: String,
    pub name: String,
    pub owner: Option<String>,
    pub sha256: String,
    pub kind: String,
    pub media_type: String,
    pub content: bytes::Bytes,
    pub text: String,
    pub pages: Option<i32>,
    pub created_at: i64,
}

impl NewAttachment {
    /// The upload as its owner sees it once it is stored.
    pub fn info(&self) -> AttachmentInfo {
        AttachmentInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            kind: self.kind.clone(),
            media_type: self.media_type.clone(),
            size: self.content.len() as i64,
            pages: self.pages,
            chars: self.text.chars().count() as i64,
            owner: self.owner.clone(),
            sha256: self.sha256.clone(),
        }
    }
}

#[derive(Insertable)]
#[diesel(table_name = attachment_blobs)]
struct BlobInsert<'a> {
    sha256: &'a str,
    kind: &'a str,
    size: i64,
    content: &'a [u8],
    text: &'a str,
    pages: Option<i32>,
    created_at: Ms,
}

#[derive(Insertable)]
#[diesel(table_name = attachments)]
struct UploadInsert<'a> {
    id: &'a str,
    sha256: &'a str,
    name: &'a str,
    media_type: &'a str,
    owner: Option<&'a str>,
    created_at: Ms,
}

fn insert(conn: &mut AnyConnection, a: &NewAttachment) -> Result<(), StoreError> {
    let stored: i64 = attachment_blobs::table
        .filter(attachment_blobs::sha256.eq(&a.sha256))
        .count()
        .get_result(conn)?;
    if stored == 0 {
        let blob = BlobInsert {
            sha256: &a.sha256,
            kind: &a.kind,
            size: a.content.len() as i64,
            content: &a.content,
            text: &a.text,
            pages: a.pages,
            created_at: Ms(a.created_at),
        };
        // Another instance may store the same file at the same moment: then it is stored. (In
        // a savepoint, so PostgreSQL's transaction goes on after the refused insert.)
        let inserted = conn.transaction::<_, diesel::result::Error, _>(|conn| {
            diesel::insert_into(attachment_blobs::table).values(blob).execute(conn)
        });
        match inserted {
            Ok(_) => {}
            Err(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _,
            )) => {}
            Err(e) => return Err(e.into()),
        }
    }
    diesel::insert_into(attachments::table)
        .values(UploadInsert {
            id: &a.id,
            sha256: &a.sha256,
            name: &a.name,
            media_type: &a.media_type,
            owner: a.owner.as_deref(),
            created_at: Ms(a.created_at),
        })
        .execute(conn)?;
    Ok(())
}

type InfoRow = (String, String, Option<String>, String, String, String, i64, Option<i32>, i32);

fn info(
    (id, name, owner, sha256, kind, media_type, size, pages, chars): InfoRow,
) -> AttachmentInfo {
    AttachmentInfo { id, name, kind, media_type, size, pages, chars: chars.into(), owner, sha256 }
}

diesel::define_sql_function! {
    /// Characters, not bytes, on both backends.
    fn length(text: diesel::sql_types::Text) -> diesel::sql_types::Integer;
}

/// How much of an upload a read brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// What a list shows: no text, no bytes.
    List,
    /// The text alone (an export's).
    TextAlone,
    /// What a model is given: the text, and an image's bytes.
    Text,
    /// The text and the file as uploaded (a download).
    Whole,
}

type TextRow = (InfoRow, String);

/// Uploads by id, in the order of `ids` (unknown ones left out), read as far as `read` asks.
fn load(
    conn: &mut AnyConnection,
    ids: &[String],
    read: Read,
) -> Result<Vec<AttachmentContent>, StoreError> {
    let query =
        attachments::table.inner_join(attachment_blobs::table).filter(attachments::id.eq_any(ids));
    let infos = (
        attachments::id,
        attachments::name,
        attachments::owner,
        attachments::sha256,
        attachment_blobs::kind,
        attachments::media_type,
        attachment_blobs::size,
        attachment_blobs::pages,
        length(attachment_blobs::text),
    );
    let empty = || Arc::<[u8]>::from(Vec::new());
    let mut found: Vec<AttachmentContent> = match read {
        Read::List => {
            let rows: Vec<InfoRow> = query.select(infos).load(conn)?;
            rows.into_iter()
                .map(|row| AttachmentContent {
                    info: info(row),
                    text: Arc::from(""),
                    image: None,
                    original: empty(),
                })
                .collect()
        }
        Read::TextAlone | Read::Text | Read::Whole => {
            let rows: Vec<TextRow> = query.select((infos, attachment_blobs::text)).load(conn)?;
            let mut out = Vec::with_capacity(rows.len());
            for (row, text) in rows {
                let info = info(row);
                // The bytes only where they are sent (an image) or asked for.
                let bytes = if read == Read::Whole || (read == Read::Text && info.kind == "image") {
                    let b: Vec<u8> = attachment_blobs::table
                        .find(&info.sha256)
                        .select(attachment_blobs::content)
                        .first(conn)?;
                    Some(Arc::<[u8]>::from(b))
                } else {
                    None
                };
                let image = bytes.clone().filter(|_| info.kind == "image");
                let original = bytes.filter(|_| read == Read::Whole).unwrap_or_else(empty);
                out.push(AttachmentContent { info, text: Arc::from(text), image, original });
            }
            out
        }
    };
    found.sort_by_key(|a| ids.iter().position(|id| *id == a.info.id));
    Ok(found)
}

fn run_ids(conn: &mut AnyConnection, run_id: &str) -> Result<Vec<String>, StoreError> {
    Ok(run_attachments::table
        .filter(run_attachments::run_id.eq(run_id))
        .order(run_attachments::position.asc())
        .select(run_attachments::attachment_id)
        .load(conn)?)
}

/// Links a new run to its uploads, in order (inside the run's own transaction).
pub(super) fn link_run(
    conn: &mut AnyConnection,
    run_id: &str,
    ids: &[String],
) -> Result<(), StoreError> {
    for (position, id) in ids.iter().enumerate() {
        diesel::insert_into(run_attachments::table)
            .values((
                run_attachments::run_id.eq(run_id),
                run_attachments::position.eq(position as i32),
                run_attachments::attachment_id.eq(id),
            ))
            .execute(conn)?;
    }
    Ok(())
}

store_message!(
    /// Store uploads (each blob once).
    StoreAttachments { items: Vec<NewAttachment> } -> (),
    |msg, conn| conn.transaction(|conn| {
        for a in &msg.items {
            insert(conn, a)?;
        }
        Ok(())
    })
);
store_message!(
    /// Uploads by id, with their text and an image's bytes, in the order asked (unknown ids
    /// are left out).
    GetAttachments { ids: Vec<String> } -> Vec<AttachmentContent>,
    |msg, conn| load(conn, &msg.ids, Read::Text)
);
store_message!(
    /// A run's uploads, in order, read as far as `read` asks.
    GetRunAttachments { run_id: String, read: Read } -> Vec<AttachmentContent>,
    |msg, conn| {
        let ids = run_ids(conn, &msg.run_id)?;
        load(conn, &ids, msg.read)
    }
);

store_message!(
    /// File `n` of a run, whole.
    GetRunFile { run_id: String, n: usize } -> Option<AttachmentContent>,
    |msg, conn| {
        let Some(id) = run_ids(conn, &msg.run_id)?.into_iter().nth(msg.n) else { return Ok(None) };
        Ok(load(conn, &[id], Read::Whole)?.pop())
    }
);
store_message!(
    /// Deletes the uploads made before `before` that no run was given, then the stored files
    /// no upload holds any more; answers how many uploads went.
    PruneUploads { before: i64 } -> usize,
    |msg, conn| conn.transaction(|conn| {
        let given = run_attachments::table.select(run_attachments::attachment_id);
        let gone = diesel::delete(
            attachments::table
                .filter(attachments::created_at.lt(Ms(msg.before)))
                .filter(attachments::id.ne_all(given)),
        )
        .execute(conn)?;
        if gone > 0 {
            let held = attachments::table.select(attachments::sha256);
            diesel::delete(attachment_blobs::table.filter(attachment_blobs::sha256.ne_all(held)))
                .execute(conn)?;
        }
        Ok(gone)
    })
);

impl super::Store {
    /// Deletes the uploads made before `before` (ms) that no run was given, and their files
    /// when no other upload holds them.
    pub async fn prune_uploads(&self, before: i64) -> Result<usize, StoreError> {
        self.write(PruneUploads { before }).await?
    }
    pub async fn store_attachments(&self, items: Vec<NewAttachment>) -> Result<(), StoreError> {
        self.write(StoreAttachments { items }).await?
    }
    /// On a reader: an upload is written before its id is given out.
    pub async fn attachments(&self, ids: &[String]) -> Result<Vec<AttachmentContent>, StoreError> {
        self.read(GetAttachments { ids: ids.to_vec() }).await?
    }
    /// A run's uploads with their text and an image's bytes, in order. On a reader: a run's
    /// uploads are linked in the transaction that stores the run.
    pub async fn run_attachments(
        &self,
        run_id: &str,
    ) -> Result<Vec<AttachmentContent>, StoreError> {
        self.read(GetRunAttachments { run_id: run_id.to_string(), read: Read::Text }).await?
    }
    /// A run's uploads with their text alone, in order (an export's).
    pub async fn run_attachment_texts(
        &self,
        run_id: &str,
    ) -> Result<Vec<AttachmentContent>, StoreError> {
        self.read(GetRunAttachments { run_id: run_id.to_string(), read: Read::TextAlone }).await?
    }
    /// File `n` (from 0) of a run, with the file as uploaded (a download).
    pub async fn run_file(
        &self,
        run_id: &str,
        n: usize,
    ) -> Result<Option<AttachmentContent>, StoreError> {
        self.read(GetRunFile { run_id: run_id.to_string(), n }).await?
    }
    /// A run's uploads as a list shows them (no text, no bytes), in order.
    pub async fn run_attachment_infos(
        &self,
        run_id: &str,
    ) -> Result<Vec<AttachmentInfo>, StoreError> {
        let all = self.read(GetRunAttachments { run_id: run_id.to_string(), read: Read::List });
        Ok(all.await??.into_iter().map(|a| a.info).collect())
    }
}
