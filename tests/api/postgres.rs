//! The same council against PostgreSQL, in a fresh database per test. Skipped (with a printed
//! reason) when no server answers at CONCLAVE_TEST_PG (default postgres://postgres@127.0.0.1:5432/test);
//! `.ci/run` sets CONCLAVE_REQUIRE_PG=1 so CI fails instead of skipping.

use diesel::{Connection, RunQueryDsl};

use crate::helpers::*;

fn admin_url() -> String {
    std::env::var("CONCLAVE_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Creates a fresh database and returns its URL, or None when PostgreSQL is not reachable.
pub(crate) fn fresh_database() -> Option<String> {
    let admin = admin_url();
    let mut conn = match diesel::pg::PgConnection::establish(&admin) {
        Ok(c) => c,
        Err(e) => {
            if std::env::var("CONCLAVE_REQUIRE_PG").is_ok() {
                panic!("PostgreSQL is required (CONCLAVE_REQUIRE_PG) but {admin} answered: {e}");
            }
            eprintln!("skipping PostgreSQL test: cannot connect to {admin}: {e}");
            return None;
        }
    };
    let name = format!("conclave_test_{}", uuid::Uuid::new_v4().simple());
    diesel::sql_query(format!("CREATE DATABASE {name}")).execute(&mut conn).ok()?;
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string())?;
    Some(format!("{base}/{name}"))
}

/// Removes a test database (FORCE closes the pool's connections).
pub(crate) fn drop_database(url: &str) {
    let Some((_, name)) = url.rsplit_once('/') else { return };
    if let Ok(mut conn) = diesel::pg::PgConnection::establish(&admin_url()) {
        let _ = diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn);
    }
}

#[actix_web::test]
async fn council_runs_and_reloads_on_postgresql() {
    let Some(url) = fresh_database() else { return };
    let app = spawn_with(Options { database_url: Some(url), ..Options::default() }).await;
    assert!(app.database_url.starts_with("postgres://"));
    let started = app.start(council_request("Does PostgreSQL work too?")).await;
    let run = app.wait_done(started["runId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["result"]["stage1"].as_array().unwrap().len(), 3);
    assert_eq!(run["result"]["stage2Metadata"]["labelToModel"].as_object().unwrap().len(), 3);
    assert!(run["result"]["title"].is_string());
    let conv = started["conversationId"].as_str().unwrap();
    let follow =
        app.start(serde_json::json!({ "question": "Follow-up?", "conversationId": conv })).await;
    let run2 = app.wait_done(follow["runId"].as_str().unwrap()).await;
    assert_eq!(run2["status"], "completed", "{run2}");
    let url =
        format!("{}/api/deliberations/{}/events", app.base, started["runId"].as_str().unwrap());
    let text = app.http.get(url).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("event: complete"));
    let url = app.database_url.clone();
    app.stop().await;
    drop_database(&url);
}

#[actix_web::test]
async fn recent_runs_and_title_search_on_postgresql() {
    let Some(url) = fresh_database() else { return };
    let app = spawn_with(Options { database_url: Some(url), ..Options::default() }).await;
    crate::lists::check_recent_runs_list(&app).await;
    crate::lists::check_conversation_search(&app).await;
    let url = app.database_url.clone();
    app.stop().await;
    drop_database(&url);
}
