//! Attachments over the API: an upload read and stored, named by a start, read by the run's
//! models (the `sim/reader` model says what reached it), shown with the run, in its exports and
//! through a share link; and every refusal: too large (a file, a request, a run), empty, of a
//! type not read, unknown or someone else's id, an image for a model that sees none.

use serde_json::{json, Value};

use crate::helpers::{client_with, spawn_with, Options, TestApp};

/// A multipart/form-data body of `files` (name, media type, bytes): its content type and bytes.
pub fn multipart(files: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "conclave-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, media_type, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: {media_type}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Uploads `files` as `client`: the status and the body.
pub async fn upload_as(
    app: &TestApp,
    client: &reqwest::Client,
    files: &[(&str, &str, &[u8])],
) -> (u16, Value) {
    let (content_type, body) = multipart(files);
    let r = client
        .post(format!("{}/api/attachments", app.base))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn upload(app: &TestApp, files: &[(&str, &str, &[u8])]) -> (u16, Value) {
    upload_as(app, &app.http, files).await
}

/// How many uploads and distinct stored files the app's database holds.
fn stored(app: &TestApp) -> (i64, i64) {
    use diesel::prelude::*;
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let pool = conclave::store::db::connect(&app.database_url, 1).unwrap();
    let mut conn = pool.get().unwrap();
    let mut count = |table: &str| {
        let q = format!("SELECT COUNT(*) AS n FROM {table}");
        diesel::sql_query(q).get_result::<Count>(&mut *conn).unwrap().n
    };
    (count("attachments"), count("attachment_blobs"))
}

/// Uploads one file; answers its id.
async fn upload_one(app: &TestApp, name: &str, media_type: &str, bytes: &[u8]) -> String {
    let (status, v) = upload(app, &[(name, media_type, bytes)]).await;
    assert_eq!(status, 201, "{v}");
    v["attachments"][0]["id"].as_str().unwrap().to_string()
}

/// The names of a run's files, in order.
fn names_of(run: &Value) -> Vec<&str> {
    run["attachments"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect()
}

/// Starts `body` over REST and answers its run id.
async fn started(app: &TestApp, body: Value) -> String {
    app.start(body).await["runId"].as_str().unwrap().to_string()
}

async fn text_of(client: &reqwest::Client, url: &str) -> (u16, String) {
    let r = client.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

const NOTES: &str =
    "# Budget\n\nThe budget for 2027 is 40,000 EUR.\nTravel is capped at 5,000 EUR.\n";
/// A PNG's signature and the start of its header: what the content is known by.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89";

#[actix_web::test]
async fn a_file_reaches_every_model_marked_as_material_and_stays_with_the_run() {
    let app = spawn_with(Options::default()).await;
    let (status, up) = upload(&app, &[("notes.md", "text/markdown", NOTES.as_bytes())]).await;
    assert_eq!(status, 201, "{up}");
    let file = &up["attachments"][0];
    assert_eq!(file["name"], "notes.md");
    assert_eq!(file["kind"], "text");
    assert_eq!(file["size"], NOTES.len());
    assert_eq!(file["chars"], NOTES.chars().count());
    let id = file["id"].as_str().unwrap().to_string();

    // A single model that says what it was given.
    let body = json!({ "mode": "solo", "question": "What is the travel cap?", "visibility": "private",
                       "modeConfig": { "model": "sim/reader" }, "attachments": [id] });
    let run = started(&app, body).await;
    let done = app.wait_done(&run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let answer = done["answer"].as_str().unwrap();
    assert!(
        answer.contains(&format!(
            "name=\"notes.md\" type=\"text/markdown\" ({} characters)",
            NOTES.trim_end().chars().count() + 1
        )),
        "the model read the file whole: {answer}"
    );
    assert!(answer.contains("Images shown: 0"), "{answer}");
    // The run lists its files (no text in the run's own view) and serves each one.
    assert_eq!(done["attachments"].as_array().unwrap().len(), 1);
    assert_eq!(done["attachments"][0]["name"], "notes.md");
    assert!(done["attachments"][0].get("text").is_none());
    let base = format!("{}/api/deliberations/{run}/attachments", app.base);
    assert_eq!(text_of(&app.http, &format!("{base}/0/text")).await, (200, NOTES.to_string()));
    let r = app.http.get(format!("{base}/0")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("attachment; filename=\"notes.md\""));
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.bytes().await.unwrap(), NOTES.as_bytes());
    assert_eq!(app.http.get(format!("{base}/1")).send().await.unwrap().status(), 404);
    // A name in another script comes back whole, and in ASCII for older clients.
    let up = upload(&app, &[("отчёт Q3.md", "text/markdown", b"# Q3")]).await.1;
    let named = up["attachments"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(up["attachments"][0]["name"], "отчёт Q3.md");
    let q3 =
        started(&app, json!({ "mode": "solo", "question": "q", "attachments": [named] })).await;
    app.wait_done(&q3).await;
    let r = app
        .http
        .get(format!("{}/api/deliberations/{q3}/attachments/0", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let disposition = r.headers()["content-disposition"].to_str().unwrap().to_string();
    assert!(disposition.contains("filename=\"_____ Q3.md\""), "{disposition}");
    assert!(
        disposition.contains("filename*=UTF-8''%D0%BE%D1%82%D1%87%D1%91%D1%82%20Q3.md"),
        "{disposition}"
    );

    // The exports: the JSON carries the text, the Markdown the names.
    let exported = app.get(&format!("/api/deliberations/{run}/export?format=json")).await.1;
    assert_eq!(exported["run"]["attachments"][0]["text"], NOTES);
    let (_, md) =
        text_of(&app.http, &format!("{}/api/deliberations/{run}/export?format=md", app.base)).await;
    assert!(md.contains("**Attached files:** `notes.md`"), "{md}");

    // Another person sees neither the private run's files nor the upload.
    let bob = client_with(&app.user("bob", false).await);
    assert_eq!(text_of(&bob, &format!("{base}/0/text")).await.0, 404);
    let theirs = json!({ "mode": "solo", "question": "x", "attachments": [id] });
    let r = bob.post(format!("{}/api/deliberations", app.base)).json(&theirs).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let refused: Value = r.json().await.unwrap();
    assert_eq!(refused["field"], "attachments[0]", "{refused}");

    // A share link shows the files' names and text, and never another run's.
    let other_up = upload(&app, &[("other.txt", "text/plain", b"another run's secret")]).await.1;
    let other_id = other_up["attachments"][0]["id"].as_str().unwrap().to_string();
    let other = started(&app, json!({ "mode": "solo", "question": "y", "modeConfig": { "model": "sim/reader" }, "attachments": [other_id] })).await;
    app.wait_done(&other).await;
    let share = app.post(&format!("/api/deliberations/{run}/shares"), &json!({})).await.1;
    let token = share["token"].as_str().unwrap();
    let anonymous = reqwest::Client::new();
    let (_, page) = text_of(&anonymous, &format!("{}/s/{token}/json", app.base)).await;
    let page: Value = serde_json::from_str(&page).unwrap();
    let shared = &page["run"]["attachments"];
    assert_eq!(shared[0]["name"], "notes.md");
    assert_eq!(shared[0]["text"], NOTES);
    assert!(shared[0].get("id").is_none(), "the upload's id is its owner's: {shared}");
    assert!(!page.to_string().contains("another run's secret"));
    assert_eq!(
        text_of(&anonymous, &format!("{}/s/{token}/attachments/0/text", app.base)).await,
        (200, NOTES.to_string())
    );
    assert_eq!(
        text_of(&anonymous, &format!("{}/s/{token}/attachments/1/text", app.base)).await.0,
        404
    );
    app.stop().await;
}

#[actix_web::test]
async fn a_mode_that_reads_material_takes_the_file_as_its_material() {
    let app = spawn_with(Options::default()).await;
    let up =
        upload(&app, &[("answer.txt", "text/plain", b"Paris is the capital of France.")]).await.1;
    let id = up["attachments"][0]["id"].as_str().unwrap().to_string();
    // No content typed: the jury evaluates the file.
    let run = started(
        &app,
        json!({ "mode": "jury", "question": "Evaluate this answer", "attachments": [id] }),
    )
    .await;
    let done = app.wait_done(&run).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["request"]["config"]["content"],
        "The attached file answer.txt (given above, marked as the user's material)."
    );
    // Content typed as well: it stays, and the file goes with it.
    let run = started(&app, json!({ "mode": "jury", "question": "Evaluate", "modeConfig": { "content": "typed" }, "attachments": [id] })).await;
    let done = app.wait_done(&run).await;
    assert_eq!(done["request"]["config"]["content"], "typed");
    assert_eq!(done["attachments"][0]["name"], "answer.txt");
    app.stop().await;
}

#[actix_web::test]
async fn every_refusal_names_the_file_and_stores_nothing() {
    let limits =
        conclave::attachments::Limits { file_bytes: 2_048, run_bytes: 3_072, pdf_pages: 5 };
    let app = spawn_with(Options { attachments: limits, ..Default::default() }).await;
    let big = vec![b'a'; 2_049];
    let (status, v) = upload(&app, &[("big.txt", "text/plain", &big)]).await;
    assert_eq!(status, 413, "{v}");
    assert!(v["error"].as_str().unwrap().starts_with("big.txt: "), "{v}");
    let just = vec![b'a'; 2_048];
    assert_eq!(
        upload(&app, &[("just.txt", "text/plain", &just)]).await.0,
        201,
        "the limit itself is allowed"
    );
    let (status, v) =
        upload(&app, &[("a.txt", "text/plain", &just), ("b.txt", "text/plain", &just)]).await;
    assert_eq!(status, 413, "two files over the run's limit: {v}");
    assert!(v["error"].as_str().unwrap().starts_with("b.txt: "), "{v}");
    for (name, media_type, bytes, says) in [
        ("empty.txt", "text/plain", &b""[..], "empty"),
        ("report.docx", "application/octet-stream", &b"PK\x03\x04\x14\x00\x06\x00rest"[..], "ZIP"),
        (
            "data.bin",
            "application/octet-stream",
            &b"\x00\x01\x02\xff\xfe"[..],
            "not a file type Conclave reads",
        ),
        ("menu.txt", "text/plain", &b"caf\xe9 au lait"[..], "not UTF-8 text"),
    ] {
        let (status, v) = upload(&app, &[(name, media_type, bytes)]).await;
        assert_eq!(status, 400, "{name}: {v}");
        let message = v["error"].as_str().unwrap();
        assert!(message.starts_with(&format!("file: {name}: ")), "{message}");
        assert!(message.contains(says), "{message}");
    }
    // One refused file refuses the request: the good one beside it is not stored either.
    let (status, v) =
        upload(&app, &[("good.txt", "text/plain", b"fine"), ("empty.txt", "text/plain", b"")])
            .await;
    assert_eq!(status, 400);
    assert!(v.get("attachments").is_none());
    // Of everything refused above, nothing is in the database: only the one accepted file.
    assert_eq!(stored(&app), (1, 1), "uploads and stored files");

    // Not a multipart upload: said so, with how to send one.
    let r = app
        .http
        .post(format!("{}/api/attachments", app.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("multipart/form-data"), "{v}");
    let (status, v) = upload(&app, &[]).await;
    assert_eq!((status, v["error"].as_str()), (400, Some("file: no file was sent")));

    // A start: an unknown id, a malformed list, and files over the run's limit together.
    let small = |n: &str| (n.to_string(), vec![b'x'; 1_600]);
    let mut ids = Vec::new();
    for (name, bytes) in [small("one.txt"), small("two.txt")] {
        let v = upload(&app, &[(&name, "text/plain", &bytes)]).await.1;
        ids.push(v["attachments"][0]["id"].as_str().unwrap().to_string());
    }
    let before =
        app.get("/api/deliberations?limit=500").await.1["recent"].as_array().unwrap().len();
    for (attachments, field, says) in [
        (json!(["no-such-id"]), "attachments[0]", "no attachment of yours"),
        (json!("one"), "attachments", "list"),
        (json!([ids[0], ids[0]]), "attachments[1]", "twice"),
        (json!(ids), "attachments", "at most 3 KB"),
    ] {
        let (status, v) = app
            .post(
                "/api/deliberations",
                &json!({ "mode": "solo", "question": "q", "attachments": attachments }),
            )
            .await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["field"], field, "{v}");
        assert!(v["error"].as_str().unwrap().contains(says), "{v}");
    }

    // An image, for a model whose route takes none: refused before any call, naming both.
    let image = upload(&app, &[("chart.png", "image/png", PNG)]).await.1;
    assert_eq!(image["attachments"][0]["kind"], "image", "{image}");
    assert_eq!(image["attachments"][0]["mediaType"], "image/png");
    let image_id = image["attachments"][0]["id"].as_str().unwrap().to_string();
    let (status, v) = app
        .post("/api/deliberations", &json!({ "mode": "solo", "question": "q", "modeConfig": { "model": "local/tiny" }, "attachments": [image_id] }))
        .await;
    // No route serves local/ here: the route is named first, as for any model.
    assert_eq!(status, 400, "{v}");
    let after = app.get("/api/deliberations?limit=500").await.1["recent"].as_array().unwrap().len();
    assert_eq!(before, after, "nothing refused was started");
    app.stop().await;
}

#[actix_web::test]
async fn an_image_goes_only_to_a_model_that_sees_images() {
    // A route over the sim-server that does not declare `vision`.
    let blind = conclave::config::RouteConfig {
        prefix: "blind/".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: None,
        api_key_env: None,
        strip_prefix: true,
        max_concurrent_calls: None,
        max_tokens: None,
        max_tokens_field: None,
        openrouter: None,
        structured_output: Default::default(),
        context_tokens: None,
        vision: false,
    };
    let app =
        spawn_with(Options { routes: vec![blind], sim_over_http: true, ..Default::default() })
            .await;
    let up = upload(
        &app,
        &[("chart.png", "image/png", PNG), ("notes.md", "text/markdown", NOTES.as_bytes())],
    )
    .await
    .1;
    let ids: Vec<String> = up["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();
    let (status, v) = app
        .post("/api/deliberations", &json!({ "mode": "solo", "question": "q", "modeConfig": { "model": "blind/m" }, "attachments": ids }))
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["field"], "modeConfig.model");
    let message = v["error"].as_str().unwrap();
    assert!(message.contains("chart.png is an image") && message.contains("blind/m"), "{message}");

    // The sim models see images: over HTTP the image travels as an image part.
    let run = started(&app, json!({ "mode": "solo", "question": "What does the chart show?", "modeConfig": { "model": "sim/reader" }, "attachments": ids })).await;
    let done = app.wait_done(&run).await;
    let answer = done["answer"].as_str().unwrap();
    assert!(answer.contains("Images shown: 1"), "{answer}");
    assert!(
        answer.contains("name=\"chart.png\" type=\"image/png\"")
            && answer.contains("name=\"notes.md\""),
        "{answer}"
    );
    // A follow-up keeps the image: a model that sees none may not be asked in it.
    let first = started(&app, json!({ "question": "What does the chart show?", "attachments": ids,
                                       "councilModels": ["sim/a", "sim/b"], "chairmanModel": "sim/a" })).await;
    let done = app.wait_done(&first).await;
    let conversation = done["conversationId"].as_str().unwrap();
    let (status, v) = app
        .post("/api/deliberations", &json!({ "question": "And now?", "conversationId": conversation,
                                             "councilModels": ["sim/a", "blind/m"], "chairmanModel": "sim/a" }))
        .await;
    assert_eq!((status, v["field"].as_str()), (400, Some("attachments")), "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("this conversation's files go to every turn: chart.png is an image"),
        "{v}"
    );

    let r = app
        .http
        .get(format!("{}/api/deliberations/{run}/attachments/0", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "image/png");
    assert!(r.headers()["content-disposition"].to_str().unwrap().starts_with("inline"));
    assert_eq!(r.bytes().await.unwrap(), PNG);
    app.stop().await;
}

#[actix_web::test]
async fn a_file_longer_than_the_models_context_is_cut_and_said_to_be() {
    let app = spawn_with(Options { sim_context_tokens: Some(1200), ..Default::default() }).await;
    let long = "The ledger records every transfer between accounts. ".repeat(400);
    let up = upload(&app, &[("ledger.txt", "text/plain", long.as_bytes())]).await.1;
    let id = up["attachments"][0]["id"].as_str().unwrap().to_string();
    let body = json!({ "mode": "solo", "question": "Summarise the ledger file.",
                       "modeConfig": { "model": "sim/reader" }, "attachments": [id] });
    let (run, events) = crate::helpers::watch(&app, body).await;
    let done = app.wait_done(&run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let fitted: Vec<&Value> = events.iter().filter(|e| e["event"] == "prompt_fitted").collect();
    assert_eq!(fitted.len(), 1, "{events:?}");
    let cut = &fitted[0]["data"]["cuts"][0];
    assert_eq!(cut["what"], "the attached file ledger.txt", "{cut}");
    assert_eq!(cut["fromChars"], long.chars().count());
    let kept = cut["toChars"].as_u64().unwrap() as usize;
    assert!(kept < long.len() / 4, "{cut}");
    // The model read the cut text, with the cut said where it was made.
    let answer = done["answer"].as_str().unwrap();
    assert!(answer.contains("name=\"ledger.txt\""), "{answer}");
    assert!(!answer.contains(&format!("({} characters)", long.chars().count())), "{answer}");
    app.stop().await;
}

#[actix_web::test]
async fn a_pdf_goes_in_as_its_text_by_page_and_a_locked_or_long_one_is_refused() {
    use conclave::attachments::sample;
    let limits = conclave::attachments::Limits { pdf_pages: 3, ..Default::default() };
    let app = spawn_with(Options { attachments: limits, ..Default::default() }).await;
    let (status, up) =
        upload(&app, &[("report.pdf", "application/pdf", &sample::report_pdf())]).await;
    assert_eq!(status, 201, "{up}");
    let file = &up["attachments"][0];
    assert_eq!((file["kind"].as_str(), file["pages"].as_i64()), (Some("pdf"), Some(2)));
    let id = file["id"].as_str().unwrap().to_string();
    let run = started(&app, json!({ "mode": "solo", "question": "What does toner cost?", "modeConfig": { "model": "sim/reader" }, "attachments": [id] })).await;
    app.wait_done(&run).await;
    let (_, text) =
        text_of(&app.http, &format!("{}/api/deliberations/{run}/attachments/0/text", app.base))
            .await;
    let page2 = text.find("--- page 2 ---").expect("page markers kept");
    assert!(text.starts_with("--- page 1 ---"), "{text}");
    assert!(text[..page2].contains("Toner") && text[page2..].contains(sample::NON_LATIN), "{text}");
    // The original comes back as uploaded.
    let r = app
        .http
        .get(format!("{}/api/deliberations/{run}/attachments/0", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/pdf");
    assert_eq!(r.bytes().await.unwrap(), sample::report_pdf());

    for (name, bytes, says) in [
        ("locked.pdf", sample::encrypted("open sesame"), "encrypted"),
        ("long.pdf", sample::pages_with_text(4), "has 4 pages; a PDF may have at most 3"),
        ("broken.pdf", b"%PDF-1.7\n1 0 obj garbage".to_vec(), "could not be read as a PDF"),
    ] {
        let (status, v) = upload(&app, &[(name, "application/pdf", &bytes)]).await;
        assert_eq!(status, 400, "{name}: {v}");
        let message = v["error"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("file: {name}: ")) && message.contains(says),
            "{message}"
        );
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_follow_up_keeps_the_conversations_files_and_adds_its_own() {
    let app = spawn_with(Options::default()).await;
    let plan = upload_one(&app, "plan.md", "text/markdown", b"# Plan\n\nShip on Friday.\n").await;
    let risks = upload_one(&app, "risks.csv", "text/csv", b"risk,owner\nlate,ana\n").await;
    let panel = json!(["sim/reader-a", "sim/reader-b", "sim/reader-c"]);
    let first = started(
        &app,
        json!({ "question": "When do we ship?", "councilModels": panel,
                                       "chairmanModel": "sim/reader-d", "attachments": [plan] }),
    )
    .await;
    let done = app.wait_done(&first).await;
    assert_eq!(done["status"], "completed", "{done}");
    let conversation = done["conversationId"].as_str().unwrap();
    let next = started(
        &app,
        json!({ "question": "And who owns the risks?", "conversationId": conversation,
                                      "councilModels": panel, "chairmanModel": "sim/reader-d",
                                      "attachments": [risks] }),
    )
    .await;
    let done = app.wait_done(&next).await;
    assert_eq!(done["status"], "completed", "{done}");
    let names = names_of(&done);
    assert_eq!(names, ["plan.md", "risks.csv"], "the earlier file first, each once");
    // A turn that got no answer passes nothing on: its file is not the conversation's.
    let stray = upload_one(&app, "stray.txt", "text/plain", b"never answered").await;
    let failed = started(&app, json!({ "question": "Fail?", "conversationId": conversation,
                                        "councilModels": ["sim/fail-a", "sim/fail-b"], "chairmanModel": "sim/fail-c",
                                        "attachments": [stray] })).await;
    assert_ne!(app.wait_done(&failed).await["status"], "completed");
    let last = started(
        &app,
        json!({ "question": "Sum up.", "conversationId": conversation,
                                      "councilModels": panel, "chairmanModel": "sim/reader-d" }),
    )
    .await;
    let done = app.wait_done(&last).await;
    let names = names_of(&done);
    assert_eq!(names, ["plan.md", "risks.csv"]);
    let answer = done["answer"].as_str().unwrap();
    assert!(
        answer.contains("name=\"plan.md\"") && answer.contains("name=\"risks.csv\""),
        "{answer}"
    );
    app.stop().await;
}

#[actix_web::test]
async fn uploads_no_run_was_given_are_deleted_after_a_day_and_the_rest_kept() {
    let app = spawn_with(Options::default()).await;
    let used = upload_one(&app, "used.txt", "text/plain", b"the same words").await;
    upload(&app, &[("unused.txt", "text/plain", b"other words")]).await;
    // The same file uploaded again and never given to a run: its upload goes, its file stays.
    upload(&app, &[("twin.txt", "text/plain", b"the same words")]).await;
    let body = json!({ "mode": "solo", "question": "q", "attachments": [used] });
    let run = started(&app, body).await;
    app.wait_done(&run).await;
    assert_eq!(stored(&app), (3, 2));
    let store = app.engine.store();
    let day_ago =
        conclave::store::now_ms() - conclave::engine::UNUSED_UPLOAD_KEPT.as_millis() as i64;
    assert_eq!(store.prune_uploads(day_ago).await.unwrap(), 0, "none is a day old yet");
    assert_eq!(store.prune_uploads(conclave::store::now_ms() + 1).await.unwrap(), 2);
    assert_eq!(stored(&app), (1, 1));
    let url = format!("{}/api/deliberations/{run}/attachments/0/text", app.base);
    assert_eq!(text_of(&app.http, &url).await, (200, "the same words".to_string()));
    app.stop().await;
}

#[actix_web::test]
async fn the_same_bytes_under_two_names_keep_each_its_own_type() {
    let app = spawn_with(Options::default()).await;
    let md = upload(&app, &[("notes.md", "text/markdown", b"# Same words")]).await.1;
    let txt = upload(&app, &[("notes.txt", "text/plain", b"# Same words")]).await.1;
    assert_eq!(stored(&app), (2, 1), "two uploads, one stored file");
    let ids: Vec<Value> = [md, txt].iter().map(|v| v["attachments"][0]["id"].clone()).collect();
    let run = started(&app, json!({ "mode": "solo", "question": "q", "attachments": ids })).await;
    let done = app.wait_done(&run).await;
    let types: Vec<&str> = done["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["mediaType"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["text/markdown", "text/plain"]);
    app.stop().await;
}
