//! Attachment routes: `POST /api/attachments` (a multipart upload: each file read with its
//! limits as it streams in, refused whole if one file is refused), and a run's files read
//! back (`GET /api/deliberations/{id}/attachments/{n}` for the file, `…/text` for the text its
//! models read), for a signed-in reader and for a share link's reader.

use actix_multipart::Multipart;
use actix_web::{web, HttpResponse};
use futures_util::StreamExt;
use serde_json::json;

use super::auth::Caller;
use super::error::{run_id, ApiError};
use super::share::share_hash;
use super::AppState;
use crate::attachments::limit_words;
use crate::engine::Upload;
use crate::store::AttachmentContent;

/// `POST /api/attachments` (multipart/form-data, one or more file parts): 201 with
/// `{attachments: [{id, name, kind, mediaType, size, pages?, chars}]}`. A file over the size
/// limit is refused with 413 as soon as its bytes pass it; any other refusal is 400 naming the
/// file. Nothing of a refused request is stored.
pub async fn upload(
    state: web::Data<AppState>,
    caller: Caller,
    mut form: Multipart,
) -> Result<HttpResponse, ApiError> {
    let limits = state.engine.attachment_limits();
    let mut files: Vec<Upload> = Vec::new();
    let mut total: u64 = 0;
    while let Some(field) = form.next().await {
        let mut field = field.map_err(unreadable)?;
        let Some(name) =
            field.content_disposition().and_then(|d| d.get_filename()).map(str::to_string)
        else {
            // A plain form field (not a file): read past it, within the request's bound.
            while let Some(chunk) = field.next().await {
                total += chunk.map_err(unreadable)?.len() as u64;
                if total > limits.run_bytes {
                    return Err(ApiError::PayloadTooLarge(format!(
                        "the upload passes {}, the most a run may be given",
                        limit_words(limits.run_bytes)
                    )));
                }
            }
            continue;
        };
        if files.len() == crate::attachments::MAX_PER_RUN {
            return Err(ApiError::BadRequest {
                field: Some("file".into()),
                message: format!(
                    "file: at most {} files may be sent at once",
                    crate::attachments::MAX_PER_RUN
                ),
            });
        }
        let name = crate::attachments::clean_name(&name);
        let declared = field.content_type().map(|m| m.essence_str().to_string());
        let mut bytes = bytes::BytesMut::new();
        while let Some(chunk) = field.next().await {
            let chunk = chunk.map_err(unreadable)?;
            total += chunk.len() as u64;
            if bytes.len() as u64 + chunk.len() as u64 > limits.file_bytes {
                return Err(ApiError::PayloadTooLarge(format!(
                    "{name}: is larger than {}, the most a file may be",
                    limit_words(limits.file_bytes)
                )));
            }
            if total > limits.run_bytes {
                return Err(ApiError::PayloadTooLarge(format!(
                    "{name}: the files sent together pass {}, the most a run may be given",
                    limit_words(limits.run_bytes)
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        files.push(Upload { name, declared, bytes: bytes.freeze() });
    }
    let stored = state.engine.upload(files, &caller.viewer()).await?;
    Ok(HttpResponse::Created().json(json!({ "attachments": stored })))
}

/// A body that is not a multipart upload is 415 (send the files as form data); one that
/// breaks off or is malformed is 400.
fn unreadable(e: actix_multipart::MultipartError) -> ApiError {
    use actix_multipart::MultipartError as E;
    match e {
        E::ContentTypeMissing
        | E::ContentTypeParse
        | E::ContentTypeIncompatible
        | E::BoundaryMissing => ApiError::UnsupportedMediaType(
            "files are uploaded as multipart/form-data, each in a part with a filename \
                 (curl -F file=@notes.md)"
                .into(),
        ),
        other => ApiError::BadRequest {
            field: Some("file".into()),
            message: format!("file: the upload could not be read ({other})"),
        },
    }
}

/// What names a file of a run the caller may read: the caller, and `{id}` and `{n}`.
type FromRun = (web::Data<AppState>, Caller, web::Path<(String, usize)>);
/// What names a file of the run a share link reads: `{token}` and `{n}`.
type FromShare = (web::Data<AppState>, web::Path<(String, usize)>);

/// `GET /api/deliberations/{id}/attachments/{n}`: file `n` (from 0) of a run the caller may
/// see, as it was uploaded.
pub async fn file(req: FromRun) -> Result<HttpResponse, ApiError> {
    Ok(original(run_file(req).await?))
}

/// `GET /api/deliberations/{id}/attachments/{n}/text`: the text its models read of it.
pub async fn text(req: FromRun) -> Result<HttpResponse, ApiError> {
    Ok(as_text(run_file(req).await?))
}

/// `GET /s/{token}/attachments/{n}`: a shared run's file.
pub async fn shared_file(req: FromShare) -> Result<HttpResponse, ApiError> {
    Ok(original(shared(req).await?))
}

/// `GET /s/{token}/attachments/{n}/text`: a shared run's file's text.
pub async fn shared_text(req: FromShare) -> Result<HttpResponse, ApiError> {
    Ok(as_text(shared(req).await?))
}

/// File `n` of a run the caller may see.
async fn run_file((state, caller, path): FromRun) -> Result<AttachmentContent, ApiError> {
    let (id, n) = path.into_inner();
    Ok(state.engine.run_file(&run_id(&id)?, n, &caller.viewer()).await?)
}

/// File `n` of the run a share link reads (404 for a token of the wrong shape, unasked).
async fn shared((state, path): FromShare) -> Result<AttachmentContent, ApiError> {
    let (token, n) = path.into_inner();
    Ok(state.engine.shared_file(&share_hash(&token)?, n).await?)
}

/// The file as uploaded. An image is shown inline; anything else is a download, so a file
/// never runs as a page of this site (`nosniff`, and a sandbox for good measure).
fn original(f: AttachmentContent) -> HttpResponse {
    use actix_web::http::header::{
        Charset, ContentDisposition, DispositionParam, DispositionType, ExtendedValue,
    };
    // The name as is (RFC 5987, for `отчёт.pdf`), and in plain ASCII for older clients: a
    // header holds no other bytes.
    let plain: String = f
        .info
        .name
        .chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '_' })
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    let disposition = ContentDisposition {
        disposition: if f.image.is_some() {
            DispositionType::Inline
        } else {
            DispositionType::Attachment
        },
        parameters: vec![
            DispositionParam::Filename(plain),
            DispositionParam::FilenameExt(ExtendedValue {
                charset: Charset::Ext("UTF-8".into()),
                language_tag: None,
                value: f.info.name.as_bytes().to_vec(),
            }),
        ],
    };
    let media_type = match f.info.kind.as_str() {
        "text" => format!("{}; charset=utf-8", f.info.media_type),
        _ => f.info.media_type.clone(),
    };
    HttpResponse::Ok()
        .content_type(media_type)
        .insert_header(disposition)
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Content-Security-Policy", "sandbox"))
        .insert_header(("Cache-Control", "private, no-store"))
        .body(f.original.to_vec())
}

/// The text a model read of the file (empty for an image).
fn as_text(f: AttachmentContent) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Cache-Control", "private, no-store"))
        .body(f.text.to_string())
}
