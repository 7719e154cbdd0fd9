//! SQL, and only SQL: plain functions over a connection, called from the Store actor's threads.

use std::collections::HashMap;

use diesel::prelude::*;
use serde_json::Value;

use super::db::AnyConnection;
use super::schema::{conversations, deliberation_stages, messages, run_events, run_journal, runs};
use super::types::{JsonText, Ms};
use super::{
    Commit, ConversationDetail, ConversationFilter, ConversationListed, ConversationRecord,
    EvalConversations, JournalRecord, LastRun, MessageRecord, NewRun, RecentRun, ReviewStatus,
    RunFinish, RunRecord, StageRecord, StoreError, StoredEvent, RECENT_QUESTION_CHARS,
};
use super::{RunStatus, Visibility};
use crate::modes::StageRow;

// Both backends have these with the same meaning: `substr` counts characters, not bytes.
diesel::define_sql_function! {
    fn substr(text: diesel::sql_types::Nullable<diesel::sql_types::Text>, start: diesel::sql_types::Integer, length: diesel::sql_types::Integer) -> diesel::sql_types::Nullable<diesel::sql_types::Text>;
}
diesel::define_sql_function! {
    fn lower(text: diesel::sql_types::Nullable<diesel::sql_types::Text>) -> diesel::sql_types::Nullable<diesel::sql_types::Text>;
}

/// The escape character of the LIKE patterns built by [`like_pattern`].
const LIKE_ESCAPE: char = '\\';

/// A LIKE pattern matching `text` anywhere, with `%`, `_` and the escape character itself
/// matched literally.
pub(super) fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_') || c == LIKE_ESCAPE {
            out.push(LIKE_ESCAPE);
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = conversations)]
struct ConversationRow {
    id: String,
    user_id: Option<String>,
    title: Option<String>,
    mode: String,
    visibility: String,
    created_at: i64,
    updated_at: i64,
    eval_id: Option<String>,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = messages)]
struct MessageRow {
    id: String,
    conversation_id: String,
    position: i32,
    role: String,
    content: String,
    created_at: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = runs)]
struct RunRow {
    id: String,
    conversation_id: String,
    user_message_id: String,
    message_id: String,
    mode: String,
    status: String,
    error: Option<String>,
    request: Value,
    owner: Option<String>,
    prompt_tokens: i64,
    completion_tokens: i64,
    cost: Option<f64>,
    last_seq: i64,
    created_at: i64,
    finished_at: Option<i64>,
    needs_human_review: bool,
    review_reason: Option<String>,
    reviewed_at: Option<i64>,
    review_note: Option<String>,
    outcome: Option<String>,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = deliberation_stages)]
struct StageDbRow {
    id: String,
    message_id: String,
    position: i32,
    stage_type: String,
    stage_order: i32,
    model: Option<String>,
    role: Option<String>,
    content: String,
    parsed_data: Option<Value>,
    response_time_ms: Option<i64>,
    created_at: i64,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = run_events)]
struct EventRow {
    seq: i64,
    event: String,
    data: Value,
}

#[derive(Insertable)]
#[diesel(table_name = conversations)]
struct NewConversation<'a> {
    id: &'a str,
    user_id: Option<&'a str>,
    title: Option<&'a str>,
    mode: &'a str,
    visibility: &'a str,
    created_at: Ms,
    updated_at: Ms,
    eval_id: Option<&'a str>,
}

#[derive(Insertable)]
#[diesel(table_name = messages)]
struct NewMessage<'a> {
    id: &'a str,
    conversation_id: &'a str,
    position: i32,
    role: &'a str,
    content: &'a str,
    created_at: Ms,
}

#[derive(Insertable)]
#[diesel(table_name = runs)]
struct NewRunRow<'a> {
    id: &'a str,
    conversation_id: &'a str,
    user_message_id: &'a str,
    message_id: &'a str,
    mode: &'a str,
    status: &'a str,
    request: JsonText,
    owner: Option<&'a str>,
    created_at: Ms,
    lease_owner: Option<&'a str>,
    lease_until: Option<Ms>,
}

#[derive(Insertable)]
#[diesel(table_name = run_journal)]
struct NewJournal<'a> {
    run_id: &'a str,
    step: i64,
    kind: &'a str,
    call_key: Option<&'a str>,
    data: JsonText,
    created_at: Ms,
}

#[derive(Insertable)]
#[diesel(table_name = deliberation_stages)]
struct NewStage<'a> {
    id: String,
    message_id: &'a str,
    position: i32,
    stage_type: &'a str,
    stage_order: i32,
    model: Option<&'a str>,
    role: Option<&'a str>,
    content: &'a str,
    parsed_data: Option<JsonText>,
    response_time_ms: Option<i64>,
    created_at: Ms,
}

#[derive(Insertable)]
#[diesel(table_name = run_events)]
struct NewEvent<'a> {
    run_id: &'a str,
    seq: i64,
    event: &'a str,
    data: JsonText,
    created_at: Ms,
}

/// Text as both backends can store it: PostgreSQL refuses NUL characters in `text`, so they
/// become U+FFFD (the replacement character) everywhere, keeping the backends identical. JSON
/// columns get the same treatment from [`JsonText`] (`jsonb` refuses the escape `\u0000`).
fn without_nul(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

fn opt_without_nul(text: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
    text.map(without_nul)
}

impl From<ConversationRow> for ConversationRecord {
    fn from(r: ConversationRow) -> Self {
        ConversationRecord {
            id: r.id,
            user_id: r.user_id,
            title: r.title,
            mode: r.mode,
            visibility: Visibility::stored(&r.visibility),
            created_at: r.created_at,
            updated_at: r.updated_at,
            eval_id: r.eval_id,
        }
    }
}

impl From<MessageRow> for MessageRecord {
    fn from(r: MessageRow) -> Self {
        MessageRecord {
            id: r.id,
            conversation_id: r.conversation_id,
            position: r.position,
            role: r.role,
            content: r.content,
            created_at: r.created_at,
        }
    }
}

impl From<RunRow> for RunRecord {
    fn from(r: RunRow) -> Self {
        RunRecord {
            id: r.id,
            conversation_id: r.conversation_id,
            user_message_id: r.user_message_id,
            message_id: r.message_id,
            mode: r.mode,
            status: RunStatus::stored(&r.status),
            error: r.error,
            request: r.request,
            owner: r.owner,
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            cost: r.cost,
            last_seq: r.last_seq,
            created_at: r.created_at,
            finished_at: r.finished_at,
            needs_human_review: r.needs_human_review,
            review_reason: r.review_reason,
            reviewed_at: r.reviewed_at,
            review_note: r.review_note,
            outcome: r.outcome,
        }
    }
}

impl From<StageDbRow> for StageRecord {
    fn from(r: StageDbRow) -> Self {
        StageRecord {
            id: r.id,
            message_id: r.message_id,
            position: r.position,
            created_at: r.created_at,
            row: StageRow {
                stage_type: r.stage_type,
                stage_order: r.stage_order,
                model: r.model,
                role: r.role,
                content: r.content,
                parsed_data: r.parsed_data,
                response_time_ms: r.response_time_ms,
            },
        }
    }
}

/// Inserts what a new run needs: the conversation (when new), the user message, an empty
/// assistant message the stages hang off, and the run itself. Inside a transaction the caller
/// holds, so that they are stored together or not at all.
pub fn create_run(conn: &mut AnyConnection, run: &NewRun) -> Result<(), StoreError> {
    let next_position: i32 = if run.new_conversation {
        diesel::insert_into(conversations::table)
            .values(NewConversation {
                id: &run.conversation_id,
                user_id: run.owner.as_deref(),
                title: None,
                mode: &run.mode,
                visibility: run.visibility.as_str(),
                created_at: Ms(run.created_at),
                updated_at: Ms(run.created_at),
                eval_id: run.eval_id.as_deref(),
            })
            .execute(conn)?;
        0
    } else {
        let updated = diesel::update(conversations::table.find(&run.conversation_id))
            .set(conversations::updated_at.eq(Ms(run.created_at)))
            .execute(conn)?;
        if updated == 0 {
            return Err(StoreError::NotFound(format!("conversation {}", run.conversation_id)));
        }
        let max: Option<i32> = messages::table
            .filter(messages::conversation_id.eq(&run.conversation_id))
            .select(diesel::dsl::max(messages::position))
            .first(conn)?;
        max.map_or(0, |m| m + 1)
    };
    // One statement per row: Diesel's MultiConnection has no batch insert for SQLite.
    for message in [
        NewMessage {
            id: &run.user_message_id,
            conversation_id: &run.conversation_id,
            position: next_position,
            role: "user",
            content: &without_nul(&run.question),
            created_at: Ms(run.created_at),
        },
        NewMessage {
            id: &run.message_id,
            conversation_id: &run.conversation_id,
            position: next_position + 1,
            role: "assistant",
            content: "",
            created_at: Ms(run.created_at),
        },
    ] {
        diesel::insert_into(messages::table).values(message).execute(conn)?;
    }
    diesel::insert_into(runs::table)
        .values(NewRunRow {
            id: &run.run_id,
            conversation_id: &run.conversation_id,
            user_message_id: &run.user_message_id,
            message_id: &run.message_id,
            mode: &run.mode,
            status: RunStatus::Running.as_str(),
            request: JsonText::new(&run.request),
            owner: run.owner.as_deref(),
            created_at: Ms(run.created_at),
            lease_owner: run.lease.as_ref().map(|(owner, _)| owner.as_str()),
            lease_until: run.lease.as_ref().map(|(_, until)| Ms(*until)),
        })
        .execute(conn)?;
    super::attachments::link_run(conn, &run.run_id, &run.attachments)?;
    Ok(())
}

pub fn insert_stage(
    conn: &mut AnyConnection,
    message_id: &str,
    position: i32,
    row: &StageRow,
    now: i64,
) -> Result<(), StoreError> {
    diesel::insert_into(deliberation_stages::table)
        .values(NewStage {
            id: uuid::Uuid::now_v7().to_string(),
            message_id,
            position,
            stage_type: &row.stage_type,
            stage_order: row.stage_order,
            model: row.model.as_deref(),
            role: row.role.as_deref(),
            content: &without_nul(&row.content),
            parsed_data: row.parsed_data.as_ref().map(JsonText::new),
            response_time_ms: row.response_time_ms,
            created_at: Ms(now),
        })
        .execute(conn)?;
    Ok(())
}

/// Appends a step's events and moves the run's last number on; inside the caller's transaction
/// (a savepoint of its own would cost two statements a step). One insert per event: diesel's
/// `MultiConnection` has no multi-row insert.
pub fn append_events(
    conn: &mut AnyConnection,
    run_id: &str,
    events: &[StoredEvent],
    now: i64,
) -> Result<(), StoreError> {
    let Some(last) = events.iter().map(|e| e.seq).max() else {
        return Ok(());
    };
    let rows: Vec<NewEvent> = events
        .iter()
        .map(|e| NewEvent {
            run_id,
            seq: e.seq,
            event: &e.event,
            data: JsonText::new(&e.data),
            created_at: Ms(now),
        })
        .collect();
    for row in rows {
        diesel::insert_into(run_events::table).values(row).execute(conn)?;
    }
    diesel::update(runs::table.find(run_id))
        .filter(runs::last_seq.lt(last))
        .set(runs::last_seq.eq(last))
        .execute(conn)?;
    Ok(())
}

pub fn set_title(
    conn: &mut AnyConnection,
    conversation_id: &str,
    title: &str,
) -> Result<(), StoreError> {
    diesel::update(conversations::table.find(conversation_id))
        .set(conversations::title.eq(without_nul(title)))
        .execute(conn)?;
    Ok(())
}

/// Records how a run ended; inside the caller's transaction.
pub fn finish_run(conn: &mut AnyConnection, f: &RunFinish) -> Result<(), StoreError> {
    diesel::update(runs::table.find(&f.run_id))
        .set((
            runs::status.eq(f.status.as_str()),
            runs::error.eq(opt_without_nul(f.error.as_deref())),
            runs::prompt_tokens.eq(f.prompt_tokens),
            runs::completion_tokens.eq(f.completion_tokens),
            runs::cost.eq(f.cost),
            runs::finished_at.eq(Some(Ms(f.finished_at))),
            runs::lease_until.eq(None::<Ms>),
            runs::outcome.eq(opt_without_nul(f.outcome.as_deref())),
        ))
        .execute(conn)?;
    if let Some(answer) = &f.answer {
        diesel::update(messages::table.find(&f.message_id))
            .set(messages::content.eq(without_nul(answer)))
            .execute(conn)?;
    }
    Ok(())
}

pub fn get_run(conn: &mut AnyConnection, id: &str) -> Result<Option<RunRecord>, StoreError> {
    Ok(runs::table
        .find(id)
        .select(RunRow::as_select())
        .first(conn)
        .optional()?
        .map(RunRecord::from))
}

pub fn list_runs(conn: &mut AnyConnection, limit: i64) -> Result<Vec<RunRecord>, StoreError> {
    Ok(runs::table
        .order(runs::created_at.desc())
        .limit(limit)
        .select(RunRow::as_select())
        .load(conn)?
        .into_iter()
        .map(RunRecord::from)
        .collect())
}

/// The most recent runs with their question (cut to [`RECENT_QUESTION_CHARS`] by the database)
/// and their conversation's title, in one query.
pub fn list_recent(
    conn: &mut AnyConnection,
    limit: i64,
    visible_to: Option<&str>,
) -> Result<Vec<RecentRun>, StoreError> {
    recent_runs(conn, limit, visible_to, None)
}

/// The runs [`list_recent`] lists, or with `review` only the runs flagged for review in that
/// state, newest first.
fn recent_runs(
    conn: &mut AnyConnection,
    limit: i64,
    visible_to: Option<&str>,
    review: Option<ReviewStatus>,
) -> Result<Vec<RecentRun>, StoreError> {
    let mut q = runs::table
        .inner_join(conversations::table)
        .left_join(messages::table.on(messages::id.eq(runs::user_message_id)))
        .into_boxed();
    if let Some(name) = visible_to {
        q = q.filter(
            conversations::visibility
                .eq(Visibility::Team.as_str())
                .or(conversations::user_id.eq(name.to_string())),
        );
    }
    // The dashboard's recent runs are a person's own: an eval's runs are listed under it.
    if review.is_none() {
        q = q.filter(conversations::eval_id.is_null());
    }
    if let Some(status) = review {
        q = q.filter(runs::needs_human_review.eq(true));
        q = match status {
            ReviewStatus::Pending => q.filter(runs::reviewed_at.is_null()),
            ReviewStatus::Reviewed => q.filter(runs::reviewed_at.is_not_null()),
            ReviewStatus::All => q,
        };
    }
    let rows: Vec<(RunRow, Option<String>, Option<String>)> = q
        .order(runs::created_at.desc())
        .limit(limit)
        .select((
            RunRow::as_select(),
            substr(messages::content.nullable(), 1, RECENT_QUESTION_CHARS),
            conversations::title,
        ))
        .load(conn)?;
    Ok(rows
        .into_iter()
        .map(|(run, question, title)| RecentRun { run: run.into(), question, title })
        .collect())
}

pub fn get_stages(
    conn: &mut AnyConnection,
    message_id: &str,
) -> Result<Vec<StageRecord>, StoreError> {
    Ok(deliberation_stages::table
        .filter(deliberation_stages::message_id.eq(message_id))
        .order((deliberation_stages::stage_order.asc(), deliberation_stages::position.asc()))
        .select(StageDbRow::as_select())
        .load(conn)?
        .into_iter()
        .map(StageRecord::from)
        .collect())
}

pub fn events_since(
    conn: &mut AnyConnection,
    run_id: &str,
    since: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    Ok(run_events::table
        .filter(run_events::run_id.eq(run_id))
        .filter(run_events::seq.gt(since))
        .order(run_events::seq.asc())
        .select(EventRow::as_select())
        .load(conn)?
        .into_iter()
        .map(|r| StoredEvent { seq: r.seq, event: r.event, data: r.data })
        .collect())
}

/// When a run's last event was stored (ms since the epoch), if it has any.
pub fn last_event_at(conn: &mut AnyConnection, run_id: &str) -> Result<Option<i64>, StoreError> {
    Ok(run_events::table
        .filter(run_events::run_id.eq(run_id))
        .order(run_events::seq.desc())
        .select(run_events::created_at)
        .first::<i64>(conn)
        .optional()?)
}

pub fn get_conversation(
    conn: &mut AnyConnection,
    id: &str,
) -> Result<Option<ConversationDetail>, StoreError> {
    let Some(conv) = conversations::table
        .find(id)
        .select(ConversationRow::as_select())
        .first(conn)
        .optional()?
    else {
        return Ok(None);
    };
    let msgs = messages::table
        .filter(messages::conversation_id.eq(id))
        .order(messages::position.asc())
        .select(MessageRow::as_select())
        .load(conn)?
        .into_iter()
        .map(MessageRecord::from)
        .collect();
    let conv_runs = runs::table
        .filter(runs::conversation_id.eq(id))
        .order(runs::created_at.asc())
        .select(RunRow::as_select())
        .load(conn)?
        .into_iter()
        .map(RunRecord::from)
        .collect();
    Ok(Some(ConversationDetail { conversation: conv.into(), messages: msgs, runs: conv_runs }))
}

/// Conversations, most recently updated first; with `title_contains`, only those whose title
/// contains it, ignoring case (lower-cased on both sides by the database, so each backend
/// folds case its own way: SQLite's `lower` only folds ASCII letters).
pub fn list_conversations(
    conn: &mut AnyConnection,
    limit: i64,
    filter: &ConversationFilter,
    visible_to: Option<&str>,
) -> Result<Vec<ConversationListed>, StoreError> {
    let mut q = conversations::table.into_boxed();
    q = match &filter.evals {
        EvalConversations::Hidden => q.filter(conversations::eval_id.is_null()),
        EvalConversations::Included => q,
        EvalConversations::Only(id) => q.filter(conversations::eval_id.eq(id.clone())),
    };
    // Keyset paging: the next page starts after the last one listed, in the list's order
    // (most recently updated first, the id breaking ties).
    if let Some((updated, id)) = &filter.after {
        q =
            q.filter(conversations::updated_at.lt(Ms(*updated)).or(
                conversations::updated_at.eq(Ms(*updated)).and(conversations::id.lt(id.clone())),
            ));
    }
    let title_contains = filter.title_contains.as_deref();
    if let Some(name) = visible_to {
        q = q.filter(
            conversations::visibility
                .eq(Visibility::Team.as_str())
                .or(conversations::user_id.eq(name.to_string())),
        );
    }
    if let Some(text) = title_contains {
        q = q.filter(
            lower(conversations::title).like(lower(Some(like_pattern(text)))).escape(LIKE_ESCAPE),
        );
    }
    let convs: Vec<ConversationRecord> = q
        .order((conversations::updated_at.desc(), conversations::id.desc()))
        .limit(limit)
        .select(ConversationRow::as_select())
        .load(conn)?
        .into_iter()
        .map(ConversationRecord::from)
        .collect();
    // Each conversation's latest run, in one query for the whole page (a few runs each).
    let ids: Vec<&str> = convs.iter().map(|c| c.id.as_str()).collect();
    let mut last: HashMap<String, LastRun> = HashMap::new();
    let runs: Vec<(String, String, String, Option<String>)> = runs::table
        .filter(runs::conversation_id.eq_any(&ids))
        .order(runs::created_at.asc())
        .select((runs::conversation_id, runs::id, runs::status, runs::outcome))
        .load(conn)?;
    for (conversation, id, status, outcome) in runs {
        last.insert(conversation, LastRun { id, status: RunStatus::stored(&status), outcome });
    }
    Ok(convs
        .into_iter()
        .map(|c| ConversationListed { last_run: last.remove(&c.id), conversation: c })
        .collect())
}

pub fn flag_run(conn: &mut AnyConnection, run_id: &str, reason: &str) -> Result<(), StoreError> {
    diesel::update(runs::table.find(run_id))
        .set((runs::needs_human_review.eq(true), runs::review_reason.eq(Some(without_nul(reason)))))
        .execute(conn)?;
    Ok(())
}

/// Flagged runs, newest first: `pending` (not yet reviewed), `reviewed`, or all.
pub fn list_reviews(
    conn: &mut AnyConnection,
    status: ReviewStatus,
    limit: i64,
    visible_to: Option<&str>,
) -> Result<Vec<RecentRun>, StoreError> {
    recent_runs(conn, limit, visible_to, Some(status))
}

/// Marks a flagged run reviewed; None when the run is unknown or was never flagged.
pub fn mark_reviewed(
    conn: &mut AnyConnection,
    run_id: &str,
    note: &str,
    now: i64,
) -> Result<Option<RunRecord>, StoreError> {
    let n = diesel::update(runs::table.find(run_id).filter(runs::needs_human_review.eq(true)))
        .set((runs::reviewed_at.eq(Some(Ms(now))), runs::review_note.eq(Some(without_nul(note)))))
        .execute(conn)?;
    if n == 0 {
        return Ok(None);
    }
    get_run(conn, run_id)
}

/// Writes one step of a run: its journal entries, stage rows, events, title, review flag and
/// (when the run ends) its outcome, inside a transaction the caller holds, so that the step is
/// stored whole or not at all. A run's journal is deleted with its end: it exists only to resume
/// a run that did not end.
pub fn commit(conn: &mut AnyConnection, c: &Commit, now: i64) -> Result<(), StoreError> {
    for j in &c.journal {
        diesel::insert_into(run_journal::table)
            .values(NewJournal {
                run_id: &c.run_id,
                step: j.step,
                kind: &j.kind,
                call_key: j.call_key.as_deref(),
                data: JsonText::new(&j.data),
                created_at: Ms(now),
            })
            .execute(conn)?;
    }
    for (position, row) in &c.stages {
        insert_stage(conn, &c.message_id, *position, row, now)?;
    }
    append_events(conn, &c.run_id, &c.events, now)?;
    if let Some(title) = &c.title {
        set_title(conn, &c.conversation_id, title)?;
    }
    if let Some(reason) = &c.flag {
        flag_run(conn, &c.run_id, reason)?;
    }
    if let Some(finish) = &c.finish {
        finish_run(conn, finish)?;
        diesel::delete(run_journal::table.filter(run_journal::run_id.eq(&c.run_id)))
            .execute(conn)?;
    }
    Ok(())
}

/// A run's journal, in step order.
pub fn journal(conn: &mut AnyConnection, run_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
    let rows: Vec<(i64, String, Option<String>, Value)> = run_journal::table
        .filter(run_journal::run_id.eq(run_id))
        .order(run_journal::step.asc())
        .select((run_journal::step, run_journal::kind, run_journal::call_key, run_journal::data))
        .load(conn)?;
    Ok(rows
        .into_iter()
        .map(|(step, kind, call_key, data)| JournalRecord { step, kind, call_key, data })
        .collect())
}

/// How many stage rows a message has.
pub fn count_stages(conn: &mut AnyConnection, message_id: &str) -> Result<i64, StoreError> {
    Ok(deliberation_stages::table
        .filter(deliberation_stages::message_id.eq(message_id))
        .count()
        .get_result(conn)?)
}

/// Runs still `running` whose lease has run out (or that never had one): their process died.
pub fn expired_runs(conn: &mut AnyConnection, now: i64) -> Result<Vec<String>, StoreError> {
    Ok(runs::table
        .filter(runs::status.eq(RunStatus::Running.as_str()))
        .filter(runs::lease_until.is_null().or(runs::lease_until.lt(Ms(now))))
        .order(runs::created_at.asc())
        .select(runs::id)
        .load(conn)?)
}

/// Takes a run over for `owner` if it is still running and its lease has run out; answers
/// whether this caller got it (one statement, so two processes never both do).
pub fn claim_run(
    conn: &mut AnyConnection,
    run_id: &str,
    owner: &str,
    now: i64,
    until: i64,
) -> Result<bool, StoreError> {
    let n = diesel::update(
        runs::table
            .find(run_id)
            .filter(runs::status.eq(RunStatus::Running.as_str()))
            .filter(runs::lease_until.is_null().or(runs::lease_until.lt(Ms(now)))),
    )
    .set((runs::lease_owner.eq(Some(owner)), runs::lease_until.eq(Some(Ms(until)))))
    .execute(conn)?;
    Ok(n == 1)
}

/// Extends the lease of every running run `owner` executes; answers how many.
pub fn renew_leases(
    conn: &mut AnyConnection,
    owner: &str,
    until: i64,
) -> Result<usize, StoreError> {
    Ok(diesel::update(
        runs::table
            .filter(runs::status.eq(RunStatus::Running.as_str()))
            .filter(runs::lease_owner.eq(owner)),
    )
    .set(runs::lease_until.eq(Some(Ms(until))))
    .execute(conn)?)
}

/// Ends a run that cannot be resumed as `interrupted`, keeping what it stored, with a terminal
/// `error` event after its last one (which it answers).
pub fn interrupt_run(
    conn: &mut AnyConnection,
    run_id: &str,
    error: &str,
    now: i64,
) -> Result<StoredEvent, StoreError> {
    conn.transaction(|conn| {
        let last: Option<i64> = run_events::table
            .filter(run_events::run_id.eq(run_id))
            .select(diesel::dsl::max(run_events::seq))
            .first(conn)?;
        let end = StoredEvent {
            seq: last.unwrap_or(0) + 1,
            event: "error".into(),
            data: serde_json::json!({ "message": error }),
        };
        append_events(conn, run_id, std::slice::from_ref(&end), now)?;
        diesel::update(
            runs::table.find(run_id).filter(runs::status.eq(RunStatus::Running.as_str())),
        )
        .set((
            runs::status.eq(RunStatus::Interrupted.as_str()),
            runs::error.eq(Some(without_nul(error))),
            runs::finished_at.eq(Some(Ms(now))),
            runs::lease_until.eq(None::<Ms>),
        ))
        .execute(conn)?;
        diesel::delete(run_journal::table.filter(run_journal::run_id.eq(run_id))).execute(conn)?;
        Ok(end)
    })
}

#[cfg(test)]
mod tests {
    use super::like_pattern;

    #[test]
    fn like_patterns_match_wildcards_literally() {
        assert_eq!(like_pattern("abc"), "%abc%");
        assert_eq!(like_pattern("100%"), "%100\\%%");
        assert_eq!(like_pattern("a_b"), "%a\\_b%");
        assert_eq!(like_pattern("c:\\x"), "%c:\\\\x%");
        assert_eq!(like_pattern(""), "%%");
    }
}
