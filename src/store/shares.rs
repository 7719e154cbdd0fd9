//! Share links: rows of `share_links`, each a token (stored as its SHA-256 only) that reads one
//! run. Who may make or revoke one is the engine's business; this module only stores them.

use actix::prelude::*;
use diesel::prelude::*;
use serde::Serialize;

use super::db::{self, AnyConnection};
use super::schema::share_links;
use super::types::Ms;
use super::{now_ms, StoreActor, StoreError};

/// A share link as its owner sees it (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Queryable, Selectable)]
#[diesel(table_name = share_links)]
#[serde(rename_all = "camelCase")]
pub struct ShareRecord {
    pub id: String,
    pub run_id: String,
    #[serde(skip)]
    pub token_hash: String,
    pub hide_models: bool,
    pub created_by: Option<String>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// A new share link (insert form).
#[derive(Debug, Clone)]
pub struct NewShare {
    pub id: String,
    pub run_id: String,
    pub token_hash: String,
    pub hide_models: bool,
    pub created_by: Option<String>,
    pub created_at: i64,
}

#[derive(Insertable)]
#[diesel(table_name = share_links)]
struct ShareInsert<'a> {
    id: &'a str,
    run_id: &'a str,
    token_hash: &'a str,
    hide_models: bool,
    created_by: Option<&'a str>,
    created_at: Ms,
}

fn insert(conn: &mut AnyConnection, s: &NewShare) -> Result<ShareRecord, StoreError> {
    diesel::insert_into(share_links::table)
        .values(ShareInsert {
            id: &s.id,
            run_id: &s.run_id,
            token_hash: &s.token_hash,
            hide_models: s.hide_models,
            created_by: s.created_by.as_deref(),
            created_at: Ms(s.created_at),
        })
        .execute(conn)?;
    Ok(ShareRecord {
        id: s.id.clone(),
        run_id: s.run_id.clone(),
        token_hash: s.token_hash.clone(),
        hide_models: s.hide_models,
        created_by: s.created_by.clone(),
        created_at: s.created_at,
        revoked_at: None,
    })
}

store_message!(
    /// Store a new share link.
    CreateShare { share: NewShare } -> ShareRecord,
    |msg, conn| insert(conn, &msg.share)
);
store_message!(
    /// A run's share links, oldest first.
    ListShares { run_id: String } -> Vec<ShareRecord>,
    |msg, conn| Ok(share_links::table
        .filter(share_links::run_id.eq(&msg.run_id))
        .order(share_links::created_at.asc())
        .select(ShareRecord::as_select())
        .load(conn)?)
);
store_message!(
    /// Revoke one of a run's share links (again is a no-op); None when the run has no such link.
    RevokeShare { run_id: String, share_id: String } -> Option<ShareRecord>,
    |msg, conn| {
        diesel::update(
            share_links::table
                .filter(share_links::id.eq(&msg.share_id))
                .filter(share_links::run_id.eq(&msg.run_id))
                .filter(share_links::revoked_at.is_null()),
        )
        .set(share_links::revoked_at.eq(Some(Ms(now_ms()))))
        .execute(conn)?;
        Ok(share_links::table
            .filter(share_links::id.eq(&msg.share_id))
            .filter(share_links::run_id.eq(&msg.run_id))
            .select(ShareRecord::as_select())
            .first(conn)
            .optional()?)
    }
);
store_message!(
    /// The link a token (hashed) belongs to, when it is not revoked.
    ShareByToken { token_hash: String } -> Option<ShareRecord>,
    |msg, conn| Ok(share_links::table
        .filter(share_links::token_hash.eq(&msg.token_hash))
        .filter(share_links::revoked_at.is_null())
        .select(ShareRecord::as_select())
        .first(conn)
        .optional()?)
);

impl super::Store {
    pub async fn create_share(&self, share: NewShare) -> Result<ShareRecord, StoreError> {
        self.write(CreateShare { share }).await?
    }
    pub async fn list_shares(&self, run_id: &str) -> Result<Vec<ShareRecord>, StoreError> {
        self.read(ListShares { run_id: run_id.to_string() }).await?
    }
    pub async fn revoke_share(
        &self,
        run_id: &str,
        share_id: &str,
    ) -> Result<Option<ShareRecord>, StoreError> {
        let (run_id, share_id) = (run_id.to_string(), share_id.to_string());
        self.write(RevokeShare { run_id, share_id }).await?
    }
    /// On a reader: anyone may ask, so the writer (which stores runs' steps) is left alone. A
    /// revoke has committed before its answer, so a read after it sees the link revoked.
    pub async fn share_by_token(
        &self,
        token_hash: &str,
    ) -> Result<Option<ShareRecord>, StoreError> {
        self.read(ShareByToken { token_hash: token_hash.to_string() }).await?
    }
    /// A run's stored events read on a reader, for exports (the public page's among them),
    /// which must not queue behind the writer; [`super::Store::events_since`] is the read that
    /// also sees writes still queued.
    pub async fn events_for_export(
        &self,
        run_id: &str,
    ) -> Result<Vec<super::StoredEvent>, StoreError> {
        self.read(super::GetEventsSince { run_id: run_id.to_string(), since: 0 }).await?
    }
}
