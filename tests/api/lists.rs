//! The lists: recent runs with their question and title, and conversations searched by title.
//! The checks are shared with the PostgreSQL tests, since the SQL differs per backend.

use diesel::{Connection, RunQueryDsl};
use serde_json::{json, Value};

use crate::helpers::*;

/// Sets a conversation's title straight in the database (titles with `%`, `_` or a backslash
/// never come out of the sim).
fn set_title(database_url: &str, conversation: &str, title: &str) {
    let sql = format!("UPDATE conversations SET title = '{title}' WHERE id = '{conversation}'");
    if database_url.starts_with("postgres") {
        let mut conn = diesel::pg::PgConnection::establish(database_url).expect("pg");
        diesel::sql_query(sql).execute(&mut conn).expect("update title");
    } else {
        let path = database_url.trim_start_matches("sqlite://");
        let mut conn = diesel::sqlite::SqliteConnection::establish(path).expect("sqlite");
        // The server writes too (leases, runs): wait for its lock like the server does.
        diesel::sql_query("PRAGMA busy_timeout = 5000").execute(&mut conn).expect("pragma");
        diesel::sql_query(sql).execute(&mut conn).expect("update title");
    }
}

/// `GET /api/conversations` with `q` (and `limit`) URL-encoded.
async fn search(app: &TestApp, q: &str, limit: Option<u32>) -> (u16, Value) {
    let mut query = vec![("q", q.to_string())];
    if let Some(n) = limit {
        query.push(("limit", n.to_string()));
    }
    let url = reqwest::Url::parse_with_params(&format!("{}/api/conversations", app.base), &query)
        .expect("url");
    let resp = app.http.get(url).send().await.expect("get");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The titles a search finds, sorted.
async fn titles_found(app: &TestApp, q: &str) -> Vec<String> {
    let (status, v) = search(app, q, None).await;
    assert_eq!(status, 200, "q={q:?}: {v}");
    let mut t: Vec<String> = v["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap_or("").to_string())
        .collect();
    t.sort();
    t
}

pub async fn check_recent_runs_list(app: &TestApp) {
    let long: String = "Ésope asks: why do tortoises win races? ".repeat(10);
    assert!(long.chars().count() > 200);
    let first = app.start(council_request(&long)).await;
    app.wait_done(first["runId"].as_str().unwrap()).await;
    let conv = first["conversationId"].as_str().unwrap();
    let follow = app.start(json!({ "question": "And hares?", "conversationId": conv })).await;
    app.wait_done(follow["runId"].as_str().unwrap()).await;
    let (_, detail) = app.get(&format!("/api/conversations/{conv}")).await;
    let title = detail["conversation"]["title"].as_str().expect("a title").to_string();

    let (status, list) = app.get("/api/deliberations?limit=2").await;
    assert_eq!(status, 200, "{list}");
    let recent = list["recent"].as_array().unwrap();
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0]["id"], follow["runId"], "newest first");
    assert_eq!(recent[0]["question"], "And hares?");
    assert_eq!(recent[1]["id"], first["runId"]);
    let expected: String = long.chars().take(200).collect();
    assert_eq!(recent[1]["question"], expected.as_str(), "the first 200 characters");
    for r in recent {
        assert_eq!(r["title"], title.as_str(), "the conversation's title: {r}");
        assert_eq!(r["status"], "completed");
        assert!(r.get("result").is_none() && r.get("answer").is_none(), "{r}");
    }
    let (_, one) = app.get("/api/deliberations?limit=1").await;
    assert_eq!(one["recent"].as_array().unwrap().len(), 1);
}

pub async fn check_conversation_search(app: &TestApp) {
    const TITLES: [&str; 6] = [
        "100% Done",
        "1000 Done Deals",
        "snake_case Names",
        "snakeXcase Names",
        r"Back\slash Path",
        "Mixed CASE Title",
    ];
    let mut started = Vec::new();
    for (i, _) in TITLES.iter().enumerate() {
        started.push(app.start(council_request(&format!("Question number {i}?"))).await);
    }
    for (s, title) in started.iter().zip(TITLES) {
        app.wait_done(s["runId"].as_str().unwrap()).await;
        set_title(&app.database_url, s["conversationId"].as_str().unwrap(), title);
    }
    let all = titles_found(app, "").await;
    assert!(TITLES.iter().all(|t| all.iter().any(|a| a == t)), "an empty q is no filter: {all:?}");
    assert_eq!(titles_found(app, "100%").await, ["100% Done"], "% matches only itself");
    assert_eq!(titles_found(app, "%").await, ["100% Done"]);
    assert_eq!(titles_found(app, "done").await, ["100% Done", "1000 Done Deals"]);
    assert_eq!(titles_found(app, "e_c").await, ["snake_case Names"], "_ matches only itself");
    assert_eq!(titles_found(app, "_").await, ["snake_case Names"]);
    assert_eq!(titles_found(app, r"k\s").await, [r"Back\slash Path"]);
    assert_eq!(titles_found(app, "MIXED case").await, ["Mixed CASE Title"]);
    assert_eq!(titles_found(app, "names").await, ["snakeXcase Names", "snake_case Names"]);
    assert!(titles_found(app, "nowhere").await.is_empty());
    let (status, v) = search(app, "done", Some(1)).await;
    assert_eq!(status, 200);
    assert_eq!(v["conversations"].as_array().unwrap().len(), 1, "limit applies to q");
    let (status, v) = search(app, &"x".repeat(201), None).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["field"], "q");
    let (status, _) = search(app, &"é".repeat(200), None).await;
    assert_eq!(status, 200, "200 characters, not bytes");
}

#[actix_web::test]
async fn recent_runs_carry_their_question_and_title_but_not_the_answer() {
    let app = spawn_app().await;
    check_recent_runs_list(&app).await;
    app.stop().await;
}

#[actix_web::test]
async fn conversations_are_searched_by_title_with_wildcards_taken_literally() {
    let app = spawn_app().await;
    check_conversation_search(&app).await;
    app.stop().await;
}
