//! What a caller may read of the stored runs and conversations, and the one review action: the
//! engine is the one gate for who may see or control what, so the web layer never checks
//! access against the store itself. Something the caller may not see is "not found".

use super::{Engine, EngineError, Viewer};
use crate::ids::{ConversationId, RunId};
use crate::store::{
    ConversationDetail, ConversationFilter, ConversationListed, RecentRun, ReviewStatus, RunRecord,
};

impl Engine {
    /// The most recent runs the caller may see, newest first.
    pub async fn recent_runs(
        &self,
        limit: i64,
        viewer: &Viewer,
    ) -> Result<Vec<RecentRun>, EngineError> {
        Ok(self.store.list_recent(limit, viewer.visible_to()).await?)
    }

    /// The conversations the caller may see that `filter` holds, most recently updated first.
    pub async fn conversations(
        &self,
        limit: i64,
        filter: ConversationFilter,
        viewer: &Viewer,
    ) -> Result<Vec<ConversationListed>, EngineError> {
        Ok(self.store.list_conversations(limit, filter, viewer.visible_to()).await?)
    }

    /// One conversation with its messages and runs, when the caller may see it.
    pub async fn conversation(
        &self,
        id: &ConversationId,
        viewer: &Viewer,
    ) -> Result<ConversationDetail, EngineError> {
        self.store
            .get_conversation(id.as_str())
            .await?
            .filter(|d| {
                viewer.can_see(d.conversation.user_id.as_deref(), d.conversation.visibility)
            })
            .ok_or_else(|| EngineError::NotFound(id.describe()))
    }

    /// Runs flagged for review that the caller may see.
    pub async fn reviews(
        &self,
        status: ReviewStatus,
        limit: i64,
        viewer: &Viewer,
    ) -> Result<Vec<RecentRun>, EngineError> {
        Ok(self.store.list_reviews(status, limit, viewer.visible_to()).await?)
    }

    /// Marks a flagged run reviewed: its owner or an admin only.
    pub async fn mark_reviewed(
        &self,
        id: &RunId,
        note: &str,
        viewer: &Viewer,
    ) -> Result<RunRecord, EngineError> {
        let run_id = id.as_str();
        let not_flagged = || EngineError::NotFound(format!("{} flagged for review", id.describe()));
        let access = self
            .store
            .run_access(run_id)
            .await?
            .filter(|a| viewer.can_see_access(a))
            .ok_or_else(not_flagged)?;
        if !viewer.can_control(access.owner.as_deref()) {
            return Err(EngineError::Forbidden(
                "only the run's owner or an admin may review it".into(),
            ));
        }
        self.store.mark_reviewed(run_id, note).await?.ok_or_else(not_flagged)
    }

    /// Whether the caller may read the run's events (else it is not found).
    pub async fn may_read(&self, id: &RunId, viewer: &Viewer) -> Result<(), EngineError> {
        let access = self.store.run_access(id.as_str()).await?;
        if access.is_some_and(|a| viewer.can_see_access(&a)) {
            Ok(())
        } else {
            Err(EngineError::NotFound(id.describe()))
        }
    }
}
