//! Evals (`conclave eval`): rows of `evals` (the set, its settings, how it ended) and of
//! `eval_runs` (one graded answer of one arm to one question, and the run that holds it). What
//! an eval runs and how it grades is `crate::eval`'s business; this module only stores it.

use actix::prelude::*;
use diesel::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::db::{self, AnyConnection};
use super::schema::{eval_runs, evals};
use super::types::{JsonText, Ms};
use super::{now_ms, EvalStatus, StoreActor, StoreError};

/// An eval as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Queryable, Selectable)]
#[diesel(table_name = evals)]
#[serde(rename_all = "camelCase")]
pub struct EvalRecord {
    pub id: String,
    pub set_name: String,
    pub set_hash: String,
    /// The question set, as parsed (an array of questions).
    pub questions: Value,
    /// The arms, members and flags it was started with.
    pub settings: Value,
    #[diesel(deserialize_as = String)]
    pub status: EvalStatus,
    /// Why it stopped early (Ctrl-C, the budget).
    pub note: Option<String>,
    pub owner: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// A new eval (insert form).
#[derive(Debug, Clone)]
pub struct NewEval {
    pub id: String,
    pub set_name: String,
    pub set_hash: String,
    pub questions: Value,
    pub settings: Value,
    pub owner: Option<String>,
}

/// One graded answer of an arm to a question, and its run.
#[derive(Debug, Clone, PartialEq, Serialize, Queryable, Selectable, Insertable)]
#[diesel(table_name = eval_runs)]
#[serde(rename_all = "camelCase")]
pub struct EvalRunRecord {
    pub eval_id: String,
    pub arm: String,
    pub question_id: String,
    pub sample: i32,
    pub run_id: String,
    /// `correct`, `wrong`, `refused` or `unparsed`.
    pub grade: String,
    /// The answer read from the reply, in its canonical form.
    pub answer: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: Option<f64>,
    pub latency_ms: i64,
}

#[derive(Insertable)]
#[diesel(table_name = evals)]
struct EvalInsert<'a> {
    id: &'a str,
    set_name: &'a str,
    set_hash: &'a str,
    questions: JsonText,
    settings: JsonText,
    status: &'a str,
    owner: Option<&'a str>,
    created_at: Ms,
}

fn get(conn: &mut AnyConnection, id: &str) -> Result<Option<EvalRecord>, StoreError> {
    Ok(evals::table
        .filter(evals::id.eq(id))
        .select(EvalRecord::as_select())
        .first(conn)
        .optional()?)
}

store_message!(
    /// Store a new eval, `running`.
    CreateEval { eval: NewEval } -> EvalRecord,
    |msg, conn| {
        let e = &msg.eval;
        diesel::insert_into(evals::table)
            .values(EvalInsert {
                id: &e.id,
                set_name: &e.set_name,
                set_hash: &e.set_hash,
                questions: JsonText::new(&e.questions),
                settings: JsonText::new(&e.settings),
                status: EvalStatus::Running.as_str(),
                owner: e.owner.as_deref(),
                created_at: Ms(now_ms()),
            })
            .execute(conn)?;
        get(conn, &e.id)?.ok_or_else(|| StoreError::NotFound(format!("eval {}", e.id)))
    }
);
store_message!(
    /// One eval.
    GetEval { id: String } -> Option<EvalRecord>,
    |msg, conn| get(conn, &msg.id)
);
store_message!(
    /// Evals, newest first.
    ListEvals { limit: i64 } -> Vec<EvalRecord>,
    |msg, conn| Ok(evals::table
        .order(evals::created_at.desc())
        .limit(msg.limit)
        .select(EvalRecord::as_select())
        .load(conn)?)
);
store_message!(
    /// The newest eval of a set (by hash) with these settings, to resume.
    FindEval { set_hash: String, settings: Value } -> Option<EvalRecord>,
    |msg, conn| {
        let found: Vec<EvalRecord> = evals::table
            .filter(evals::set_hash.eq(&msg.set_hash))
            .order(evals::created_at.desc())
            .select(EvalRecord::as_select())
            .load(conn)?;
        Ok(found.into_iter().find(|e| e.settings == msg.settings))
    }
);
store_message!(
    /// An eval's graded answers, by arm, question and sample.
    GetEvalRuns { eval_id: String } -> Vec<EvalRunRecord>,
    |msg, conn| Ok(eval_runs::table
        .filter(eval_runs::eval_id.eq(&msg.eval_id))
        .order((eval_runs::arm.asc(), eval_runs::question_id.asc(), eval_runs::sample.asc()))
        .select(EvalRunRecord::as_select())
        .load(conn)?)
);
store_message!(
    /// Record graded answers (again for the same arm, question and sample replaces it).
    AddEvalRuns { rows: Vec<EvalRunRecord> } -> (),
    |msg, conn| {
        diesel::Connection::transaction(conn, |conn| {
            for r in &msg.rows {
                diesel::delete(
                    eval_runs::table
                        .filter(eval_runs::eval_id.eq(&r.eval_id))
                        .filter(eval_runs::arm.eq(&r.arm))
                        .filter(eval_runs::question_id.eq(&r.question_id))
                        .filter(eval_runs::sample.eq(r.sample)),
                )
                .execute(conn)?;
                diesel::insert_into(eval_runs::table).values(r).execute(conn)?;
            }
            Ok::<(), StoreError>(())
        })
    }
);
store_message!(
    /// Mark an eval's end: `completed` or `stopped` (with why), or back to `running` (resumed).
    FinishEval { id: String, status: EvalStatus, note: Option<String> } -> (),
    |msg, conn| {
        let finished = (msg.status != EvalStatus::Running).then(|| Ms(now_ms()));
        diesel::update(evals::table.filter(evals::id.eq(&msg.id)))
            .set((
                evals::status.eq(msg.status.as_str()),
                evals::note.eq(&msg.note),
                evals::finished_at.eq(finished),
            ))
            .execute(conn)?;
        Ok(())
    }
);

impl super::Store {
    pub async fn create_eval(&self, eval: NewEval) -> Result<EvalRecord, StoreError> {
        self.write(CreateEval { eval }).await?
    }
    pub async fn get_eval(&self, id: &str) -> Result<Option<EvalRecord>, StoreError> {
        self.read(GetEval { id: id.to_string() }).await?
    }
    pub async fn list_evals(&self, limit: i64) -> Result<Vec<EvalRecord>, StoreError> {
        self.read(ListEvals { limit }).await?
    }
    pub async fn find_eval(
        &self,
        set_hash: &str,
        settings: &Value,
    ) -> Result<Option<EvalRecord>, StoreError> {
        self.read(FindEval { set_hash: set_hash.to_string(), settings: settings.clone() }).await?
    }
    pub async fn eval_runs(&self, eval_id: &str) -> Result<Vec<EvalRunRecord>, StoreError> {
        // Through the writer: every answer recorded before this call is visible.
        self.write(GetEvalRuns { eval_id: eval_id.to_string() }).await?
    }
    pub async fn add_eval_runs(&self, rows: Vec<EvalRunRecord>) -> Result<(), StoreError> {
        self.write(AddEvalRuns { rows }).await?
    }
    pub async fn finish_eval(
        &self,
        id: &str,
        status: EvalStatus,
        note: Option<String>,
    ) -> Result<(), StoreError> {
        let id = id.to_string();
        self.write(FinishEval { id, status, note }).await?
    }
}
