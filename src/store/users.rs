//! Accounts and tokens, and who may see a run or a conversation.
//!
//! Tokens are never stored: only their SHA-256 (hex) is, so a copy of the database does not
//! let anyone sign in. The hash is computed by the caller (`web::auth`); this module only
//! matches it. A user is named once and for ever: a revoked user keeps its row (its name still
//! identifies the runs it owned) and all its tokens stop working.

use diesel::prelude::*;
use serde::Serialize;

use super::db::{self, AnyConnection};
use super::schema::{api_tokens, conversations, runs, users};
use super::types::Ms;
use super::{now_ms, StoreActor, StoreError};
use actix::prelude::*;

/// What a token may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Printed once by `conclave user add`; for scripts and the sign-in form.
    Api,
    /// The browser's session cookie.
    Session,
    /// The one-time sign-in link printed at first start; exchanged for a session.
    Login,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Api => "api",
            TokenKind::Session => "session",
            TokenKind::Login => "login",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRecord {
    pub id: String,
    pub name: String,
    pub is_admin: bool,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = users)]
struct UserRow {
    id: String,
    name: String,
    is_admin: bool,
    created_at: i64,
    revoked_at: Option<i64>,
}

#[derive(Insertable)]
#[diesel(table_name = users)]
struct NewUser<'a> {
    id: &'a str,
    name: &'a str,
    is_admin: bool,
    created_at: Ms,
}

impl From<UserRow> for UserRecord {
    fn from(r: UserRow) -> Self {
        UserRecord {
            id: r.id,
            name: r.name,
            is_admin: r.is_admin,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

#[derive(Insertable)]
#[diesel(table_name = api_tokens)]
struct NewToken<'a> {
    id: &'a str,
    user_id: &'a str,
    token_hash: &'a str,
    kind: &'a str,
    created_at: Ms,
    expires_at: Option<Ms>,
}

/// Who owns a run or a conversation, and who else may see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The owner's user name (none for runs made before accounts, or by the local CLI).
    pub owner: Option<String>,
    /// `team` (every signed-in user) or `private` (the owner and admins).
    pub visibility: super::Visibility,
}

/// A new user named `name`; its first token (hashed) of `kind`, expiring at `expires_at`.
pub(super) fn create_user(
    conn: &mut AnyConnection,
    name: &str,
    is_admin: bool,
    token_hash: &str,
    kind: TokenKind,
    expires_at: Option<i64>,
) -> Result<UserRecord, StoreError> {
    // Writes only, no read first: SQLite refuses at once (no busy wait) to upgrade a
    // transaction that has read to a writer while another connection writes, which a second
    // process (`conclave user add` beside a running server) would hit. A taken name is
    // reported by the UNIQUE constraint instead.
    conn.transaction(|conn| {
        let row = UserRow {
            id: uuid::Uuid::now_v7().to_string(),
            name: name.to_string(),
            is_admin,
            created_at: now_ms(),
            revoked_at: None,
        };
        let new =
            NewUser { id: &row.id, name: &row.name, is_admin, created_at: Ms(row.created_at) };
        match diesel::insert_into(users::table).values(new).execute(conn) {
            Err(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _,
            )) => {
                return Err(StoreError::Conflict(format!("a user named {name:?} already exists")))
            }
            other => other?,
        };
        insert_token(conn, &row.id, token_hash, kind, expires_at)?;
        Ok(row.into())
    })
}

fn insert_token(
    conn: &mut AnyConnection,
    user_id: &str,
    token_hash: &str,
    kind: TokenKind,
    expires_at: Option<i64>,
) -> Result<(), StoreError> {
    diesel::insert_into(api_tokens::table)
        .values(NewToken {
            id: &uuid::Uuid::now_v7().to_string(),
            user_id,
            token_hash,
            kind: kind.as_str(),
            created_at: Ms(now_ms()),
            expires_at: expires_at.map(Ms),
        })
        .execute(conn)?;
    Ok(())
}

/// The active user a token of one of `kinds` belongs to. A `login` token is used up by this.
pub(super) fn user_by_token(
    conn: &mut AnyConnection,
    token_hash: &str,
    kinds: &[TokenKind],
) -> Result<Option<(UserRecord, TokenKind)>, StoreError> {
    let now = now_ms();
    let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    let found: Option<(UserRow, String, String)> = api_tokens::table
        .inner_join(users::table)
        .filter(api_tokens::token_hash.eq(token_hash))
        .filter(api_tokens::kind.eq_any(kinds))
        .filter(api_tokens::revoked_at.is_null())
        .filter(api_tokens::expires_at.is_null().or(api_tokens::expires_at.gt(Ms(now))))
        .filter(users::revoked_at.is_null())
        .select((UserRow::as_select(), api_tokens::id, api_tokens::kind))
        .first(conn)
        .optional()?;
    let Some((user, token_id, kind)) = found else { return Ok(None) };
    let kind = match kind.as_str() {
        "api" => TokenKind::Api,
        "session" => TokenKind::Session,
        _ => TokenKind::Login,
    };
    if kind == TokenKind::Login {
        // One use only: a second request with the same link finds nothing.
        let used = diesel::update(api_tokens::table.find(&token_id))
            .filter(api_tokens::revoked_at.is_null())
            .set(api_tokens::revoked_at.eq(Some(Ms(now))))
            .execute(conn)?;
        if used == 0 {
            return Ok(None);
        }
    }
    Ok(Some((user.into(), kind)))
}

fn user_id_by_name(conn: &mut AnyConnection, name: &str) -> Result<Option<String>, StoreError> {
    Ok(users::table
        .filter(users::name.eq(name))
        .filter(users::revoked_at.is_null())
        .select(users::id)
        .first(conn)
        .optional()?)
}

store_message!(
    /// Add a user with its first token (already hashed).
    CreateUser { name: String, is_admin: bool, token_hash: String, kind: TokenKind, expires_at: Option<i64> } -> UserRecord,
    |msg, conn| create_user(conn, &msg.name, msg.is_admin, &msg.token_hash, msg.kind, msg.expires_at)
);
store_message!(
    /// Give an active user another token (a session after sign-in, a new login link).
    AddToken { user_name: String, token_hash: String, kind: TokenKind, expires_at: Option<i64> } -> bool,
    |msg, conn| match user_id_by_name(conn, &msg.user_name)? {
        Some(id) => insert_token(conn, &id, &msg.token_hash, msg.kind, msg.expires_at).map(|_| true),
        None => Ok(false),
    }
);
store_message!(
    /// The active user a token belongs to (a login token is used up by asking).
    Authenticate { token_hash: String, kinds: Vec<TokenKind> } -> Option<(UserRecord, TokenKind)>,
    |msg, conn| user_by_token(conn, &msg.token_hash, &msg.kinds)
);
store_message!(
    /// Revoke one token (sign out).
    RevokeToken { token_hash: String } -> (),
    |msg, conn| {
        diesel::update(api_tokens::table.filter(api_tokens::token_hash.eq(&msg.token_hash)))
            .set(api_tokens::revoked_at.eq(Some(Ms(now_ms()))))
            .execute(conn)?;
        Ok(())
    }
);
store_message!(
    /// Revoke a user and every token of theirs; false when there is no such active user.
    RevokeUser { name: String } -> bool,
    |msg, conn| conn.transaction(|conn| {
        // Write first (see `create_user`): revoke the user, then all its tokens.
        let now = now_ms();
        let n = diesel::update(users::table.filter(users::name.eq(&msg.name)))
            .filter(users::revoked_at.is_null())
            .set(users::revoked_at.eq(Some(Ms(now))))
            .execute(conn)?;
        if n == 0 {
            return Ok(false);
        }
        let ids = users::table.filter(users::name.eq(&msg.name)).select(users::id);
        diesel::update(api_tokens::table.filter(api_tokens::user_id.eq_any(ids)))
            .filter(api_tokens::revoked_at.is_null())
            .set(api_tokens::revoked_at.eq(Some(Ms(now))))
            .execute(conn)?;
        Ok(true)
    })
);
store_message!(
    ListUsers {} -> Vec<UserRecord>,
    |_msg, conn| Ok(users::table
        .order(users::created_at.asc())
        .select(UserRow::as_select())
        .load(conn)?
        .into_iter()
        .map(UserRecord::from)
        .collect())
);
store_message!(
    /// Who owns a run, and the visibility of its conversation.
    GetRunAccess { run_id: String } -> Option<Access>,
    |msg, conn| Ok(runs::table
        .inner_join(conversations::table)
        .filter(runs::id.eq(&msg.run_id))
        .select((runs::owner, conversations::visibility))
        .first::<(Option<String>, String)>(conn)
        .optional()?
        .map(|(owner, visibility): (Option<String>, String)| Access {
            owner,
            visibility: super::Visibility::stored(&visibility),
        }))
);
store_message!(
    /// Who owns a conversation, and its visibility.
    GetConversationAccess { conversation_id: String } -> Option<Access>,
    |msg, conn| Ok(conversations::table
        .find(&msg.conversation_id)
        .select((conversations::user_id, conversations::visibility))
        .first::<(Option<String>, String)>(conn)
        .optional()?
        .map(|(owner, visibility): (Option<String>, String)| Access {
            owner,
            visibility: super::Visibility::stored(&visibility),
        }))
);

impl super::Store {
    pub async fn create_user(
        &self,
        name: &str,
        is_admin: bool,
        token_hash: String,
        kind: TokenKind,
        expires_at: Option<i64>,
    ) -> Result<UserRecord, StoreError> {
        self.write(CreateUser { name: name.to_string(), is_admin, token_hash, kind, expires_at })
            .await?
    }
    pub async fn add_token(
        &self,
        user_name: &str,
        token_hash: String,
        kind: TokenKind,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.write(AddToken { user_name: user_name.to_string(), token_hash, kind, expires_at })
            .await?
    }
    /// Through the writer: a login token is used up, and a token made a moment ago is seen.
    pub async fn authenticate(
        &self,
        token_hash: String,
        kinds: Vec<TokenKind>,
    ) -> Result<Option<(UserRecord, TokenKind)>, StoreError> {
        self.write(Authenticate { token_hash, kinds }).await?
    }
    pub async fn revoke_token(&self, token_hash: String) -> Result<(), StoreError> {
        self.write(RevokeToken { token_hash }).await?
    }
    pub async fn revoke_user(&self, name: &str) -> Result<bool, StoreError> {
        self.write(RevokeUser { name: name.to_string() }).await?
    }
    pub async fn list_users(&self) -> Result<Vec<UserRecord>, StoreError> {
        self.read(ListUsers {}).await?
    }
    pub async fn run_access(&self, run_id: &str) -> Result<Option<Access>, StoreError> {
        self.read(GetRunAccess { run_id: run_id.to_string() }).await?
    }
    pub async fn conversation_access(&self, id: &str) -> Result<Option<Access>, StoreError> {
        self.read(GetConversationAccess { conversation_id: id.to_string() }).await?
    }
}
