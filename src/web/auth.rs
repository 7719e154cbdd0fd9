//! Signing in: API tokens (`Authorization: Bearer …`), the page's session cookie, the one-time
//! sign-in link printed at first start, and the [`Caller`] every protected handler takes.
//!
//! Tokens are random (244 bits from two v4 UUIDs), shown to their owner once, and stored only
//! as SHA-256 hashes. A sign-in link or an API token pasted into the page is exchanged for a
//! session cookie (HttpOnly, SameSite=Strict), so no token stays in the address bar or in
//! scripts' reach.

use std::future::Future;
use std::pin::Pin;

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::AppState;
use crate::engine::Viewer;
use crate::store::{now_ms, Store, StoreError, TokenKind, UserRecord};

pub const SESSION_COOKIE: &str = "conclave_session";
const SESSION_DAYS: i64 = 30;
/// How long the first-start sign-in link works (once).
const LOGIN_LINK_HOURS: i64 = 24;

/// A new secret token: `cnv_` and 64 hex digits.
pub fn new_token() -> String {
    format!("cnv_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The signed-in user making a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: UserRecord,
    /// The session cookie's token when the caller came in with one (for signing out).
    session: Option<String>,
}

impl Caller {
    pub fn viewer(&self) -> Viewer {
        Viewer::user(&self.user.name, self.user.is_admin)
    }
}

/// The token a request carries: the `Authorization: Bearer` header first, then the cookie.
pub fn token_of(req: &HttpRequest) -> Option<(String, TokenKind)> {
    if let Some(h) = req.headers().get(actix_web::http::header::AUTHORIZATION) {
        let value = h.to_str().ok()?.trim();
        let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?;
        return Some((token.trim().to_string(), TokenKind::Api));
    }
    req.cookie(SESSION_COOKIE).map(|c| (c.value().to_string(), TokenKind::Session))
}

/// The user a token belongs to (an API token also works as a session: scripts may use either).
pub async fn authenticate(store: &Store, token: &str) -> Result<Option<UserRecord>, StoreError> {
    let kinds = vec![TokenKind::Api, TokenKind::Session];
    Ok(store.authenticate(hash_token(token), kinds).await?.map(|(user, _)| user))
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Caller, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let token = token_of(req);
        Box::pin(async move {
            let state = state.ok_or_else(|| ApiError::Internal("no app state".into()))?;
            let unauthorized = || {
                ApiError::Unauthorized(
                    "sign in: send `Authorization: Bearer <token>` (from `conclave user add`) or \
                     open the sign-in link the server printed"
                        .into(),
                )
            };
            let (token, kind) = token.ok_or_else(unauthorized)?;
            let user =
                authenticate(state.engine.store(), &token).await?.ok_or_else(unauthorized)?;
            let session = (kind == TokenKind::Session).then_some(token);
            Ok(Caller { user, session })
        })
    }
}

/// Starts a session for `user`: a new session token in an HttpOnly cookie.
async fn session_cookie(
    store: &Store,
    user: &UserRecord,
    secure: bool,
) -> Result<Cookie<'static>, ApiError> {
    let token = new_token();
    let expires = now_ms() + SESSION_DAYS * 24 * 3600 * 1000;
    store.add_token(&user.name, hash_token(&token), TokenKind::Session, Some(expires)).await?;
    Ok(Cookie::build(SESSION_COOKIE, token)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .max_age(CookieDuration::days(SESSION_DAYS))
        .finish())
}

fn is_https(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

#[derive(Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// `GET /login?token=…`: the one-time link printed at first start. Exchanges it for a session
/// cookie and redirects to the page, so the token leaves the address bar. A link used before
/// or expired answers a page (401) saying so and how to get in instead.
pub async fn login_link(
    state: web::Data<AppState>,
    req: HttpRequest,
    q: web::Query<LoginQuery>,
) -> Result<HttpResponse, ApiError> {
    let store = state.engine.store();
    let found = match &q.token {
        Some(t) => store.authenticate(hash_token(t), vec![TokenKind::Login]).await?,
        None => None,
    };
    let Some((user, _)) = found else {
        return Ok(super::pages::sign_in_link_used());
    };
    let cookie = session_cookie(store, &user, is_https(&req)).await?;
    Ok(HttpResponse::SeeOther().insert_header(("Location", "/")).cookie(cookie).finish())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionBody {
    token: String,
}

/// `POST /api/session` with `{token}` (an API token): signs the page in with a cookie.
pub async fn sign_in(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Json<SessionBody>,
) -> Result<HttpResponse, ApiError> {
    let store = state.engine.store();
    let user = store
        .authenticate(hash_token(body.token.trim()), vec![TokenKind::Api, TokenKind::Login])
        .await?
        .map(|(u, _)| u)
        .ok_or_else(|| ApiError::Unauthorized("that token is not valid".into()))?;
    let cookie = session_cookie(store, &user, is_https(&req)).await?;
    Ok(HttpResponse::Ok().cookie(cookie).json(me_view(&user)))
}

/// `DELETE /api/session`: signs out (the session token stops working).
pub async fn sign_out(
    state: web::Data<AppState>,
    caller: Caller,
) -> Result<HttpResponse, ApiError> {
    if let Some(token) = &caller.session {
        state.engine.store().revoke_token(hash_token(token)).await?;
    }
    let mut gone = Cookie::build(SESSION_COOKIE, "").path("/").finish();
    gone.make_removal();
    Ok(HttpResponse::NoContent().cookie(gone).finish())
}

fn me_view(user: &UserRecord) -> serde_json::Value {
    json!({ "name": user.name, "isAdmin": user.is_admin })
}

/// `GET /api/me`: who is signed in.
pub async fn me(caller: Caller) -> HttpResponse {
    HttpResponse::Ok().json(me_view(&caller.user))
}

/// At first start (no users yet): creates the `admin` account and answers a one-time sign-in
/// path (`/login?token=…`) for it. `None` when accounts already exist.
pub async fn bootstrap_admin(store: &Store) -> Result<Option<String>, StoreError> {
    if !store.list_users().await?.is_empty() {
        return Ok(None);
    }
    let token = new_token();
    let expires = now_ms() + LOGIN_LINK_HOURS * 3600 * 1000;
    match store
        .create_user("admin", true, hash_token(&token), TokenKind::Login, Some(expires))
        .await
    {
        Ok(_) => Ok(Some(format!("/login?token={token}"))),
        // Another instance made it first.
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hashed() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        assert!(a.starts_with("cnv_"));
        let h = hash_token(&a);
        assert_eq!(h.len(), 64);
        assert_eq!(h, hash_token(&a));
        assert!(!h.contains(&a[4..]));
    }
}
