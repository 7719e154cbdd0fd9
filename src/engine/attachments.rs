//! Attachments behind the engine's gate: an upload is read, checked and stored for the person
//! who sent it; a start may name only its starter's uploads; a run's files are read by whoever
//! may read the run (a share link, its own run's). Reading a file into text is
//! [`crate::attachments`]'s business, storing it the store's.

use serde_json::Value;

use super::{Engine, EngineError, Viewer};
use crate::attachments::{self, Given, MAX_PER_RUN};
use crate::ids::RunId;
use crate::modes::{FieldError, ModeKind};
use crate::store::{AttachmentContent, AttachmentInfo, NewAttachment};

/// An uploaded file as it arrived.
#[derive(Debug, Clone)]
pub struct Upload {
    pub name: String,
    /// The media type the client sent, if any (the content decides; this only helps name it).
    pub declared: Option<String>,
    pub bytes: bytes::Bytes,
}

/// The field of a start request that names its files.
const FIELD: &str = "attachments";
/// The field of a mode's configuration that holds the material it reads (Jury's answer, Red
/// Team's plan, …): a mode whose schema has it is given the files as that material.
const MATERIAL: &str = "content";

impl Engine {
    /// The configured size limits of attached files.
    pub fn attachment_limits(&self) -> attachments::Limits {
        self.settings.attachments
    }

    /// Reads and stores uploaded files for `viewer`, in order. A file too large, empty, of a
    /// type not read, encrypted or unreadable is refused with its name and the reason, and
    /// nothing of the request is stored; so are files that together pass the per-run limit.
    pub async fn upload(
        &self,
        files: Vec<Upload>,
        viewer: &Viewer,
    ) -> Result<Vec<AttachmentInfo>, EngineError> {
        let limits = self.settings.attachments;
        if files.is_empty() {
            return Err(FieldError::new("file", "no file was sent").into());
        }
        if files.len() > MAX_PER_RUN {
            return Err(FieldError::new(
                "file",
                format!("at most {MAX_PER_RUN} files may be sent at once"),
            )
            .into());
        }
        let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        if total > limits.run_bytes {
            return Err(FieldError::new(
                "file",
                format!(
                    "these files come to {}; a run may be given at most {}",
                    attachments::size_words(total),
                    attachments::limit_words(limits.run_bytes)
                ),
            )
            .into());
        }
        let owner = viewer.name.clone();
        // A PDF's text may take a while: read off the async threads.
        let read = tokio::task::spawn_blocking(move || {
            let now = crate::store::now_ms();
            files
                .into_iter()
                .map(|f| {
                    let declared = f.declared.as_deref();
                    attachments::read_upload(
                        &f.name,
                        declared,
                        f.bytes,
                        &limits,
                        owner.clone(),
                        now,
                    )
                })
                .collect::<Result<Vec<_>, String>>()
        })
        .await
        .map_err(|_| EngineError::Unavailable)?
        .map_err(|message| FieldError::new("file", message))?;
        let infos = read.iter().map(NewAttachment::info).collect();
        self.store.store_attachments(read).await?;
        Ok(infos)
    }

    /// The files a start request names (`attachments`: ids of the starter's uploads), read for
    /// its models; none when it names none.
    pub(super) async fn given(&self, body: &Value, viewer: &Viewer) -> Result<Given, EngineError> {
        let ids = match body.get(FIELD) {
            None | Some(Value::Null) => return Ok(Given::default()),
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(FieldError::new(FIELD, "must be a list of attachment ids").into())
            }
        };
        if ids.len() > MAX_PER_RUN {
            return Err(FieldError::new(
                FIELD,
                format!("a run may be given at most {MAX_PER_RUN} files"),
            )
            .into());
        }
        let mut wanted: Vec<String> = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let field = format!("{FIELD}[{i}]");
            let Some(id) = id.as_str().filter(|s| !s.trim().is_empty()) else {
                return Err(FieldError::new(&field, "must be an attachment id").into());
            };
            if wanted.iter().any(|w| w == id) {
                return Err(FieldError::new(&field, "names the same file twice").into());
            }
            wanted.push(id.to_string());
        }
        if wanted.is_empty() {
            return Ok(Given::default());
        }
        let found = self.store.attachments(&wanted).await?;
        for (i, id) in wanted.iter().enumerate() {
            // Someone else's upload is not found either: nothing says it exists.
            if !found.iter().any(|f| f.info.id == *id && f.info.owner == viewer.name) {
                return Err(FieldError::new(
                    &format!("{FIELD}[{i}]"),
                    "no attachment of yours has this id (upload the file first)",
                )
                .into());
            }
        }
        let limit = self.settings.attachments.run_bytes;
        let total: i64 = found.iter().map(|f| f.info.size).sum();
        if total as u64 > limit {
            return Err(FieldError::new(
                FIELD,
                format!(
                    "these files come to {}; a run may be given at most {}",
                    attachments::size_words(total as u64),
                    attachments::limit_words(limit)
                ),
            )
            .into());
        }
        Ok(Given::new(found))
    }

    /// The first of `models` whose route does not take images, when `given` holds one, with
    /// what to say of it.
    pub(super) fn blind_to(&self, given: &Given, models: &[String]) -> Option<(String, String)> {
        let image = given.files().iter().find(|f| f.image.is_some())?;
        let model = models.iter().find(|m| !self.providers.vision(m))?;
        let name = &image.info.name;
        Some((
            model.clone(),
            format!(
                "{name} is an image, and {model}'s route does not take images (a route needs \
                 `vision = true`); leave the image out or choose a model that sees images"
            ),
        ))
    }

    /// Refuses a set of files past the run's limits (a follow-up's, with the files its
    /// conversation was given before).
    pub(super) fn within_file_limits(&self, given: &Given) -> Result<(), EngineError> {
        let limit = self.settings.attachments.run_bytes;
        let files = given.files();
        let total: i64 = files.iter().map(|f| f.info.size).sum();
        if files.len() > MAX_PER_RUN || total as u64 > limit {
            return Err(FieldError::new(
                FIELD,
                format!(
                    "with the files this conversation was given before, this run would be \
                     given {} files, {}; a run may be given at most {MAX_PER_RUN} files, {}: \
                     start a new conversation for other files",
                    files.len(),
                    attachments::size_words(total as u64),
                    attachments::limit_words(limit)
                ),
            )
            .into());
        }
        Ok(())
    }

    /// The files of a run the caller may see, as a list shows them.
    pub async fn run_files(
        &self,
        id: &RunId,
        viewer: &Viewer,
    ) -> Result<Vec<AttachmentInfo>, EngineError> {
        self.access(id, viewer).await?;
        Ok(self.store.run_attachment_infos(id.as_str()).await?)
    }

    /// File `n` (from 0) of a run the caller may see, with its text and an image's bytes.
    pub async fn run_file(
        &self,
        id: &RunId,
        n: usize,
        viewer: &Viewer,
    ) -> Result<AttachmentContent, EngineError> {
        self.access(id, viewer).await?;
        self.nth_file(id.as_str(), n).await
    }

    /// File `n` of the run a share token reads.
    pub async fn shared_file(
        &self,
        token_hash: &str,
        n: usize,
    ) -> Result<AttachmentContent, EngineError> {
        let share = self.working_share(token_hash).await?;
        self.nth_file(&share.run_id, n).await
    }

    async fn nth_file(&self, run_id: &str, n: usize) -> Result<AttachmentContent, EngineError> {
        self.store
            .run_file(run_id, n)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("file {n} of run {run_id}")))
    }
}

/// The start request as the mode reads it, when the files change it: `attachments` taken
/// out (the engine reads it), and, for a mode that reads material whose request left it
/// empty, the material field saying the files are the material. None: `body` as it is.
pub(super) fn with_material(body: &Value, given: &Given) -> Option<Value> {
    let obj = body.as_object()?;
    if !obj.contains_key(FIELD) {
        return None;
    }
    let mut body = body.clone();
    let map = body.as_object_mut()?;
    map.remove(FIELD);
    if given.is_empty() {
        return Some(body);
    }
    let mode = match map.get("mode") {
        None | Some(Value::Null) => Some(ModeKind::default_mode()),
        Some(Value::String(m)) => ModeKind::parse(m),
        Some(_) => None,
    };
    let takes_material = mode.is_some_and(|m| {
        crate::modes::registry::config_schema(m)
            .pointer(&format!("/properties/{MATERIAL}"))
            .is_some()
    });
    if !takes_material {
        return Some(body);
    }
    let stated =
        |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| !s.trim().is_empty());
    let config = map.entry("modeConfig").or_insert_with(|| Value::Object(Default::default()));
    if let Some(config) = config.as_object_mut().filter(|c| !stated(c.get(MATERIAL))) {
        config.insert(MATERIAL.into(), Value::String(given.as_material()));
    }
    Some(body)
}
