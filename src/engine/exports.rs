//! Exports and share links, behind the engine's gate: an export follows read access (what the
//! caller may not see is not found), a share link is made, listed and revoked by the run's
//! owner or an admin, and a share token reads exactly one run, read-only.

use super::{Engine, EngineError, Viewer};
use crate::export::{anonymise, ConversationExport, RunExport};
use crate::ids::{ConversationId, RunId};
use crate::store::{NewShare, ShareRecord};

/// The most share links one run may have that are not revoked: enough for any real use, and
/// a bound on what one user can make the table hold.
pub const MAX_ACTIVE_SHARES: usize = 20;

/// A run as a share link shows it.
#[derive(Debug, Clone)]
pub struct SharedRun {
    pub export: RunExport,
    pub hide_models: bool,
}

impl Engine {
    /// Everything stored of a run the caller may see.
    pub async fn export_run(&self, id: &RunId, viewer: &Viewer) -> Result<RunExport, EngineError> {
        let detail = self.result(id, viewer).await?;
        let stages = self.store.get_stages(&detail.run.message_id).await?;
        let events = self.store.events_for_export(id.as_str()).await?;
        let mut view = super::views::run_view(&detail);
        if !detail.attachments.is_empty() {
            // The export carries what the models read of each file.
            let files = self.store.run_attachment_texts(id.as_str()).await?;
            if let Some(list) = view.get_mut("attachments").and_then(|l| l.as_array_mut()) {
                for (item, file) in list.iter_mut().zip(&files) {
                    item["text"] = serde_json::Value::String(file.text.to_string());
                }
            }
        }
        Ok(RunExport::new(view, stages, events))
    }

    /// A conversation the caller may see, with every run of it in order.
    pub async fn export_conversation(
        &self,
        id: &ConversationId,
        viewer: &Viewer,
    ) -> Result<ConversationExport, EngineError> {
        let detail = self.conversation(id, viewer).await?;
        let mut runs = Vec::with_capacity(detail.runs.len());
        for r in &detail.runs {
            runs.push(self.export_run(&RunId::from_stored(r.id.clone()), viewer).await?);
        }
        Ok(ConversationExport { conversation: detail.conversation, runs })
    }

    /// The owner (or an admin) of a run the caller may see, else not found / forbidden.
    async fn may_share(&self, id: &RunId, viewer: &Viewer) -> Result<(), EngineError> {
        let access = self.access(id, viewer).await?;
        if viewer.can_control(access.owner.as_deref()) {
            Ok(())
        } else {
            Err(EngineError::Forbidden(
                "only the run's owner or an admin may share it or see its share links".into(),
            ))
        }
    }

    /// Stores a new share link of the run under `token_hash` (the token itself is never
    /// stored).
    pub async fn create_share(
        &self,
        id: &RunId,
        token_hash: String,
        hide_models: bool,
        viewer: &Viewer,
    ) -> Result<ShareRecord, EngineError> {
        self.may_share(id, viewer).await?;
        let active = self.store.list_shares(id.as_str()).await?;
        if active.iter().filter(|s| s.revoked_at.is_none()).count() >= MAX_ACTIVE_SHARES {
            return Err(EngineError::Conflict(format!(
                "a run may have at most {MAX_ACTIVE_SHARES} share links that work; revoke one first"
            )));
        }
        let share = NewShare {
            id: uuid::Uuid::now_v7().to_string(),
            run_id: id.as_str().to_string(),
            token_hash,
            hide_models,
            created_by: viewer.name.clone(),
            created_at: crate::store::now_ms(),
        };
        Ok(self.store.create_share(share).await?)
    }

    /// The run's share links, revoked ones included (never their tokens).
    pub async fn shares(
        &self,
        id: &RunId,
        viewer: &Viewer,
    ) -> Result<Vec<ShareRecord>, EngineError> {
        self.may_share(id, viewer).await?;
        Ok(self.store.list_shares(id.as_str()).await?)
    }

    /// Revokes one of the run's share links; not found when the run has no such link.
    pub async fn revoke_share(
        &self,
        id: &RunId,
        share_id: &str,
        viewer: &Viewer,
    ) -> Result<ShareRecord, EngineError> {
        self.may_share(id, viewer).await?;
        self.store
            .revoke_share(id.as_str(), share_id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("share link {share_id}")))
    }

    /// Whether a share token reads a run (its link is neither unknown nor revoked, and the run
    /// is there), without building the run's export: what the public page's address checks.
    pub async fn share_link_works(&self, token_hash: &str) -> Result<bool, EngineError> {
        let Some(share) = self.store.share_by_token(token_hash).await? else { return Ok(false) };
        Ok(self.store.run_access(&share.run_id).await?.is_some())
    }

    /// The link a share token names, or not found (an unknown or a revoked token alike): what
    /// a share link's run and its files are read through.
    pub(super) async fn working_share(&self, token_hash: &str) -> Result<ShareRecord, EngineError> {
        self.store.share_by_token(token_hash).await?.ok_or_else(share_not_found)
    }

    /// The one run a share token reads, read-only: no owner, no control, model names hidden
    /// when the link says so. Not found for a revoked or unknown token.
    pub async fn shared_run(&self, token_hash: &str) -> Result<SharedRun, EngineError> {
        let share = self.working_share(token_hash).await?;
        let id = RunId::from_stored(share.run_id.clone());
        // The link is the grant: it reads its run whoever owns it, and nothing else.
        let mut export = match self.export_run(&id, &Viewer::local()).await {
            Ok(e) => e,
            Err(EngineError::NotFound(_)) => return Err(share_not_found()),
            Err(e) => return Err(e),
        };
        if let Some(o) = export.view.as_object_mut() {
            o.insert("canControl".into(), false.into());
            o.remove("owner");
            o.remove("visibility");
            if let Some(review) = o.get_mut("review").and_then(|r| r.as_object_mut()) {
                review.remove("note");
            }
            // A file's upload id is its owner's handle on it, not the reader's.
            for file in
                o.get_mut("attachments").and_then(|l| l.as_array_mut()).into_iter().flatten()
            {
                if let Some(f) = file.as_object_mut() {
                    f.remove("id");
                }
            }
        }
        // Who stopped a cancelled run is a user's name: a share link says only that it stopped.
        let unnamed = |v: &mut serde_json::Value, key: &str| {
            if v[key].as_str().is_some_and(|m| m.starts_with("cancelled by ")) {
                v[key] = "cancelled".into();
            }
        };
        unnamed(&mut export.view, "error");
        for e in &mut export.events {
            unnamed(&mut e.data, "message");
        }
        if share.hide_models {
            anonymise(&mut export);
        }
        Ok(SharedRun { export, hide_models: share.hide_models })
    }
}

/// What a share token that reads no run is: not found, whatever the reason.
fn share_not_found() -> EngineError {
    EngineError::NotFound("share link".into())
}
