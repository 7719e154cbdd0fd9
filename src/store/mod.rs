//! Persistence: conversations, messages, runs, stage rows and run events, in SQLite (default)
//! or PostgreSQL (by URL).
//!
//! Diesel is synchronous, so it runs only on the Store actor's own threads (a `SyncArbiter`);
//! async code talks to it through the cloneable [`Store`] handle. All writes go through one
//! writer thread, which keeps a run's rows and events in the order they were sent and gives
//! SQLite the single writer it wants; reads have threads of their own. No mode logic here.

pub mod db;
mod queries;
pub mod schema;
pub mod types;
mod values;
pub use values::{EvalStatus, RunStatus, Visibility};

use actix::prelude::*;
use serde::Serialize;
use serde_json::Value;

use crate::modes::StageRow;
use db::DbPool;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database configuration: {0}")]
    Config(String),
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    #[error("database migration failed: {0}")]
    Migration(String),
    #[error("database query failed: {0}")]
    Query(#[from] diesel::result::Error),
    /// No pooled connection to be had: the cause, the URL's password redacted.
    #[error("database pool: {0}")]
    Pool(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the store is not running")]
    Mailbox,
}

impl StoreError {
    /// True for failures of the database itself rather than of the request: a lost or
    /// refused connection, a lock held too long, a full disk, a read-only file. Such a write
    /// may succeed if tried again later; a client is told to retry (503), not that it erred.
    pub fn is_unavailable(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        match self {
            StoreError::Connect(_) | StoreError::Pool(_) | StoreError::Mailbox => true,
            StoreError::Query(Error::DatabaseError(kind, info)) => {
                matches!(
                    kind,
                    DatabaseErrorKind::ClosedConnection
                        | DatabaseErrorKind::SerializationFailure
                        | DatabaseErrorKind::ReadOnlyTransaction
                ) || {
                    let m = info.message().to_ascii_lowercase();
                    [
                        "locked",
                        "busy",
                        "disk",
                        "full",
                        "readonly",
                        "read-only",
                        "connection",
                        "terminat",
                        "i/o",
                    ]
                    .iter()
                    .any(|w| m.contains(w))
                }
            }
            StoreError::Query(Error::BrokenTransactionManager) => true,
            _ => false,
        }
    }
}

/// Milliseconds since the Unix epoch: the one timestamp format of the schema.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationRecord {
    pub id: String,
    pub user_id: Option<String>,
    pub title: Option<String>,
    pub mode: String,
    pub visibility: Visibility,
    pub created_at: i64,
    pub updated_at: i64,
    /// The eval that started it (its runs are that eval's), else None: a person's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_id: Option<String>,
}

/// Which conversations a list holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationFilter {
    /// Only those whose title contains this, ignoring case.
    pub title_contains: Option<String>,
    pub evals: EvalConversations,
    /// Keyset paging: only those listed after this one, given as its `(updated_at, id)`.
    pub after: Option<(i64, String)>,
}

/// Whether a list holds the conversations an eval started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EvalConversations {
    /// A person's own only (History's default).
    #[default]
    Hidden,
    /// Everything.
    Included,
    /// Only this eval's.
    Only(String),
}

/// A conversation in a list, with how its latest run went.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationListed {
    #[serde(flatten)]
    pub conversation: ConversationRecord,
    /// Its latest run (None for a conversation whose run was never stored).
    pub last_run: Option<LastRun>,
}

/// The latest run of a conversation, as a list shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastRun {
    pub id: String,
    pub status: RunStatus,
    /// Its outcome in its mode's terms, once completed.
    pub outcome: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRecord {
    pub id: String,
    pub conversation_id: String,
    pub position: i32,
    pub role: String,
    pub content: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub id: String,
    pub conversation_id: String,
    pub user_message_id: String,
    pub message_id: String,
    pub mode: String,
    pub status: RunStatus,
    pub error: Option<String>,
    pub request: Value,
    pub owner: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: Option<f64>,
    pub last_seq: i64,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub needs_human_review: bool,
    pub review_reason: Option<String>,
    pub reviewed_at: Option<i64>,
    pub review_note: Option<String>,
    /// A completed run's outcome in its mode's terms ([`crate::modes::registry::ModeSpec::outcome`]),
    /// written with its end; None for other runs and runs stored before it was kept.
    pub outcome: Option<String>,
}

/// How much of a run's question the list of recent runs carries.
pub const RECENT_QUESTION_CHARS: i32 = 200;

/// A run as the list of recent runs shows it: the record, the start of the user's question
/// and the conversation's title.
#[derive(Debug, Clone)]
pub struct RecentRun {
    pub run: RunRecord,
    pub question: Option<String>,
    pub title: Option<String>,
}

/// Which flagged runs to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewStatus {
    Pending,
    Reviewed,
    All,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageRecord {
    pub id: String,
    pub message_id: String,
    pub position: i32,
    pub created_at: i64,
    #[serde(flatten)]
    pub row: StageRow,
}

/// A conversation with its messages and runs, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationDetail {
    pub conversation: ConversationRecord,
    pub messages: Vec<MessageRecord>,
    pub runs: Vec<RunRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub seq: i64,
    pub event: String,
    pub data: Value,
}

/// Everything a new run inserts (insert form).
#[derive(Debug, Clone)]
pub struct NewRun {
    pub run_id: String,
    pub conversation_id: String,
    pub new_conversation: bool,
    pub user_message_id: String,
    pub message_id: String,
    pub mode: String,
    pub question: String,
    pub request: Value,
    /// The owner's user name.
    pub owner: Option<String>,
    /// A new conversation's visibility: `team` or `private` (a follow-up keeps its
    /// conversation's).
    pub visibility: Visibility,
    pub created_at: i64,
    /// The process that executes the run and until when (ms since the epoch) its lease holds.
    pub lease: Option<(String, i64)>,
    /// The eval a new conversation is started by (its runs are the eval's), else None.
    pub eval_id: Option<String>,
    /// The uploads the run is given, in order (their ids).
    pub attachments: Vec<String>,
}

/// One input a run's mode received, as journaled for crash recovery.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalRecord {
    /// 1, 2, 3... in the order the mode received them.
    pub step: i64,
    /// `start`, `reply` or `timer`.
    pub kind: String,
    pub call_key: Option<String>,
    pub data: Value,
}

/// What one step of a run writes, in one transaction (see [`Store::commit`]).
#[derive(Debug, Clone, Default)]
pub struct Commit {
    pub run_id: String,
    pub message_id: String,
    pub conversation_id: String,
    pub journal: Vec<JournalRecord>,
    /// Stage rows with their positions under the run's assistant message.
    pub stages: Vec<(i32, StageRow)>,
    pub events: Vec<StoredEvent>,
    pub title: Option<String>,
    /// A reason to flag the run for review.
    pub flag: Option<String>,
    /// The run's end, when this step ends it.
    pub finish: Option<RunFinish>,
}

impl Commit {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.journal.is_empty()
            && self.stages.is_empty()
            && self.events.is_empty()
            && self.title.is_none()
            && self.flag.is_none()
            && self.finish.is_none()
    }

    /// Appends `later` (a step that came after this one) to this commit.
    pub fn absorb(&mut self, later: Commit) {
        self.journal.extend(later.journal);
        self.stages.extend(later.stages);
        self.events.extend(later.events);
        if later.title.is_some() {
            self.title = later.title;
        }
        if later.flag.is_some() {
            self.flag = later.flag;
        }
        if later.finish.is_some() {
            self.finish = later.finish;
        }
    }
}

/// How a run ended (update form).
#[derive(Debug, Clone)]
pub struct RunFinish {
    pub run_id: String,
    pub message_id: String,
    /// `completed`, `failed` or `cancelled`.
    pub status: RunStatus,
    pub error: Option<String>,
    /// The assistant message's content, when the run produced one.
    pub answer: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: Option<f64>,
    pub finished_at: i64,
    /// A completed run's one-line outcome, for lists.
    pub outcome: Option<String>,
}

/// The actor that owns database connections. Runs on a `SyncArbiter`.
pub struct StoreActor {
    pool: DbPool,
}

impl Actor for StoreActor {
    type Context = SyncContext<Self>;
}

impl StoreActor {
    fn conn(&self) -> Result<db::PooledConnection, StoreError> {
        self.pool.get()
    }

    /// Runs `f` in one transaction on a pooled connection.
    fn in_transaction(
        &self,
        f: impl FnOnce(&mut db::AnyConnection) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut guard = self.conn()?;
        diesel::Connection::transaction(&mut *guard, f)
    }
}

/// Declares a store message: a struct with named fields, its result type, and the handler
/// body run with a pooled connection.
macro_rules! store_message {
    ($(#[$doc:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? } -> $ret:ty, |$this:ident, $conn:ident| $body:expr) => {
        $(#[$doc])*
        pub struct $name { $(pub $field: $ty),* }

        impl actix::Message for $name {
            type Result = Result<$ret, StoreError>;
        }

        impl Handler<$name> for StoreActor {
            type Result = Result<$ret, StoreError>;
            fn handle(&mut self, $this: $name, _: &mut SyncContext<Self>) -> Self::Result {
                let mut guard = self.conn()?;
                let $conn: &mut db::AnyConnection = &mut guard;
                $body
            }
        }
    };
}

/// A write that may share a transaction with others: a new run, or a step of one.
enum Queued {
    Create(Box<NewRun>),
    Commit(std::sync::Arc<Commit>),
}

impl Queued {
    fn write(&self, conn: &mut db::AnyConnection, now: i64) -> Result<(), StoreError> {
        match self {
            Queued::Create(run) => queries::create_run(conn, run),
            Queued::Commit(c) => queries::commit(conn, c, now),
        }
    }
}

/// Writes waiting for the writer, each with whoever waits for its outcome.
type PendingWrite = (Queued, tokio::sync::oneshot::Sender<Result<(), StoreError>>);

/// New runs and steps of runs sent by anyone since the writer last took them. They are written
/// together, so that many runs' writes share one transaction (one commit of SQLite's WAL or
/// PostgreSQL's) instead of one each.
#[derive(Clone, Default)]
struct WriteQueue(std::sync::Arc<std::sync::Mutex<Vec<PendingWrite>>>);

impl WriteQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PendingWrite>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Write everything queued: in one transaction when there are several writes, and if that one
/// is refused, each in a transaction of its own, so that each write gets its own outcome (a
/// write is always either wholly stored or not at all).
struct WriteQueued(WriteQueue);

impl actix::Message for WriteQueued {
    type Result = ();
}

impl Handler<WriteQueued> for StoreActor {
    type Result = ();
    fn handle(&mut self, msg: WriteQueued, _: &mut SyncContext<Self>) {
        let pending = std::mem::take(&mut *msg.0.lock());
        let now = now_ms();
        if pending.len() > 1 {
            let together = self
                .in_transaction(|conn| pending.iter().try_for_each(|(w, _)| w.write(conn, now)));
            if together.is_ok() {
                for (_, done) in pending {
                    let _ = done.send(Ok(()));
                }
                return;
            }
        }
        for (w, done) in pending {
            let _ = done.send(self.in_transaction(|conn| w.write(conn, now)));
        }
    }
}
store_message!(
    /// A run's journal, in step order.
    GetJournal { run_id: String } -> Vec<JournalRecord>,
    |msg, conn| queries::journal(conn, &msg.run_id)
);
store_message!(
    /// When a run's last event was stored.
    LastEventAt { run_id: String } -> Option<i64>,
    |msg, conn| queries::last_event_at(conn, &msg.run_id)
);
store_message!(
    CountStages { message_id: String } -> i64,
    |msg, conn| queries::count_stages(conn, &msg.message_id)
);
store_message!(
    /// Runs still `running` whose lease ran out before `now`.
    ExpiredRuns { now: i64 } -> Vec<String>, |msg, conn| queries::expired_runs(conn, msg.now)
);
store_message!(
    /// Take over a run whose lease ran out; answers whether this caller got it.
    ClaimRun { run_id: String, owner: String, now: i64, until: i64 } -> bool,
    |msg, conn| queries::claim_run(conn, &msg.run_id, &msg.owner, msg.now, msg.until)
);
store_message!(
    /// Extend the leases of the running runs `owner` executes.
    RenewLeases { owner: String, until: i64 } -> usize,
    |msg, conn| queries::renew_leases(conn, &msg.owner, msg.until)
);
store_message!(
    /// End a run that cannot be resumed as `interrupted`.
    InterruptRun { run_id: String, error: String } -> StoredEvent,
    |msg, conn| queries::interrupt_run(conn, &msg.run_id, &msg.error, now_ms())
);
store_message!(
    GetRun { id: String } -> Option<RunRecord>, |msg, conn| queries::get_run(conn, &msg.id)
);
store_message!(
    ListReviews { status: ReviewStatus, limit: i64, visible_to: Option<String> } -> Vec<RecentRun>,
    |msg, conn| queries::list_reviews(conn, msg.status, msg.limit, msg.visible_to.as_deref())
);
store_message!(
    /// Mark a flagged run reviewed, with a note.
    MarkReviewed { run_id: String, note: String } -> Option<RunRecord>,
    |msg, conn| queries::mark_reviewed(conn, &msg.run_id, &msg.note, now_ms())
);
store_message!(
    ListRuns { limit: i64 } -> Vec<RunRecord>, |msg, conn| queries::list_runs(conn, msg.limit)
);
store_message!(
    ListRecentRuns { limit: i64, visible_to: Option<String> } -> Vec<RecentRun>,
    |msg, conn| queries::list_recent(conn, msg.limit, msg.visible_to.as_deref())
);
store_message!(
    GetStages { message_id: String } -> Vec<StageRecord>,
    |msg, conn| queries::get_stages(conn, &msg.message_id)
);
store_message!(
    GetEventsSince { run_id: String, since: i64 } -> Vec<StoredEvent>,
    |msg, conn| queries::events_since(conn, &msg.run_id, msg.since)
);
store_message!(
    GetConversation { id: String } -> Option<ConversationDetail>,
    |msg, conn| queries::get_conversation(conn, &msg.id)
);
store_message!(
    /// Conversations, newest first; with `title_contains`, those whose title contains it
    /// (ignoring case).
    ListConversations { limit: i64, filter: ConversationFilter, visible_to: Option<String> } -> Vec<ConversationListed>,
    |msg, conn| queries::list_conversations(conn, msg.limit, &msg.filter, msg.visible_to.as_deref())
);

mod attachments;
mod evals;
mod shares;
mod stats;
mod users;
pub use attachments::{AttachmentContent, AttachmentInfo, NewAttachment};
pub use evals::{EvalRecord, EvalRunRecord, NewEval};
pub use shares::{NewShare, ShareRecord};
pub use stats::RunCount;
pub use users::{Access, TokenKind, UserRecord};

/// Cloneable handle to the store: one writer thread, several reader threads.
#[derive(Clone)]
pub struct Store {
    writer: Addr<StoreActor>,
    reader: Addr<StoreActor>,
    queued: WriteQueue,
}

impl Store {
    /// Connects, migrates and starts the store's threads. Must run inside an actix System.
    pub fn start(database_url: &str) -> Result<Store, StoreError> {
        let readers = 3;
        let pool = db::connect(database_url, readers + 2)?;
        let wpool = pool.clone();
        let writer = SyncArbiter::start(1, move || StoreActor { pool: wpool.clone() });
        let reader =
            SyncArbiter::start(readers as usize, move || StoreActor { pool: pool.clone() });
        Ok(Store { writer, reader, queued: WriteQueue::default() })
    }

    async fn write<M>(&self, msg: M) -> Result<M::Result, StoreError>
    where
        M: actix::Message + Send + 'static,
        M::Result: Send,
        StoreActor: Handler<M>,
    {
        self.writer.send(msg).await.map_err(|_| StoreError::Mailbox)
    }

    async fn read<M>(&self, msg: M) -> Result<M::Result, StoreError>
    where
        M: actix::Message + Send + 'static,
        M::Result: Send,
        StoreActor: Handler<M>,
    {
        self.reader.send(msg).await.map_err(|_| StoreError::Mailbox)
    }

    /// Returns once every write queued before this call has reached the database (the writer
    /// handles messages in order).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.write(GetEventsSince { run_id: String::new(), since: i64::MAX }).await?.map(|_| ())
    }

    /// Inserts a new run with its conversation and messages. Like a step, it may share a
    /// transaction with other runs' writes (see [`Store::commit`]).
    pub async fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.queue(Queued::Create(Box::new(run))).await
    }
    /// Writes one step of a run in one transaction. Whatever the outcome, the step is either
    /// wholly stored or not at all, so it may be sent again after an error.
    ///
    /// Steps sent while the writer is busy wait for it together and are written in one
    /// transaction; a step sent to an idle writer is written at once.
    pub async fn commit(&self, commit: std::sync::Arc<Commit>) -> Result<(), StoreError> {
        self.queue(Queued::Commit(commit)).await
    }

    async fn queue(&self, write: Queued) -> Result<(), StoreError> {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let first = {
            let mut queue = self.queued.lock();
            queue.push((write, done));
            queue.len() == 1
        };
        // The first write queued asks the writer to take the queue; later ones ride along. The
        // request sits in the writer's mailbox after every write sent before it, so a queued
        // write is made after the writes sent before it, as any write is.
        if first && self.writer.try_send(WriteQueued(self.queued.clone())).is_err() {
            for (_, done) in std::mem::take(&mut *self.queued.lock()) {
                let _ = done.send(Err(StoreError::Mailbox));
            }
        }
        outcome.await.map_err(|_| StoreError::Mailbox)?
    }
    pub async fn journal(&self, run_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        self.read(GetJournal { run_id: run_id.to_string() }).await?
    }
    pub async fn last_event_at(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.read(LastEventAt { run_id: run_id.to_string() }).await?
    }
    pub async fn count_stages(&self, message_id: &str) -> Result<i64, StoreError> {
        self.read(CountStages { message_id: message_id.to_string() }).await?
    }
    pub async fn expired_runs(&self, now: i64) -> Result<Vec<String>, StoreError> {
        self.read(ExpiredRuns { now }).await?
    }
    pub async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        now: i64,
        until: i64,
    ) -> Result<bool, StoreError> {
        let (run_id, owner) = (run_id.to_string(), owner.to_string());
        self.write(ClaimRun { run_id, owner, now, until }).await?
    }
    pub async fn renew_leases(&self, owner: &str, until: i64) -> Result<usize, StoreError> {
        self.write(RenewLeases { owner: owner.to_string(), until }).await?
    }
    pub async fn interrupt_run(
        &self,
        run_id: &str,
        error: &str,
    ) -> Result<StoredEvent, StoreError> {
        let (run_id, error) = (run_id.to_string(), error.to_string());
        self.write(InterruptRun { run_id, error }).await?
    }
    pub async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.read(GetRun { id: id.to_string() }).await?
    }
    pub async fn list_runs(&self, limit: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.read(ListRuns { limit }).await?
    }
    /// Newest runs first; with `visible_to`, only those that user may see.
    pub async fn list_recent(
        &self,
        limit: i64,
        visible_to: Option<&str>,
    ) -> Result<Vec<RecentRun>, StoreError> {
        self.read(ListRecentRuns { limit, visible_to: visible_to.map(str::to_string) }).await?
    }
    pub async fn list_reviews(
        &self,
        status: ReviewStatus,
        limit: i64,
        visible_to: Option<&str>,
    ) -> Result<Vec<RecentRun>, StoreError> {
        self.read(ListReviews { status, limit, visible_to: visible_to.map(str::to_string) }).await?
    }
    pub async fn mark_reviewed(
        &self,
        run_id: &str,
        note: &str,
    ) -> Result<Option<RunRecord>, StoreError> {
        self.write(MarkReviewed { run_id: run_id.to_string(), note: note.to_string() }).await?
    }
    pub async fn get_stages(&self, message_id: &str) -> Result<Vec<StageRecord>, StoreError> {
        self.read(GetStages { message_id: message_id.to_string() }).await?
    }
    /// Events with `seq > since`. Reads through the writer so that every event queued before
    /// this call is already visible.
    pub async fn events_since(
        &self,
        run_id: &str,
        since: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.write(GetEventsSince { run_id: run_id.to_string(), since }).await?
    }
    pub async fn get_conversation(
        &self,
        id: &str,
    ) -> Result<Option<ConversationDetail>, StoreError> {
        self.read(GetConversation { id: id.to_string() }).await?
    }
    pub async fn list_conversations(
        &self,
        limit: i64,
        filter: ConversationFilter,
        visible_to: Option<&str>,
    ) -> Result<Vec<ConversationListed>, StoreError> {
        let visible_to = visible_to.map(str::to_string);
        self.read(ListConversations { limit, filter, visible_to }).await?
    }
}
