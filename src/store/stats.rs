//! Aggregates over the stored runs, for `GET /metrics`: counts only, never a run's id, owner
//! or question.

use actix::prelude::*;
use diesel::prelude::*;

use super::db;
use super::schema::runs;
use super::{StoreActor, StoreError};

/// How many stored runs have one mode and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCount {
    pub mode: String,
    pub status: String,
    pub count: i64,
}

store_message!(
    /// Runs by mode and status (one `GROUP BY`: the table is scanned once per scrape).
    CountRuns {} -> Vec<RunCount>,
    |_msg, conn| Ok(runs::table
        .group_by((runs::mode, runs::status))
        .select((runs::mode, runs::status, diesel::dsl::count_star()))
        .order_by((runs::mode, runs::status))
        .load::<(String, String, i64)>(conn)?
        .into_iter()
        .map(|(mode, status, count)| RunCount { mode, status, count })
        .collect())
);

impl super::Store {
    /// Runs by mode and status, ordered by both.
    pub async fn count_runs(&self) -> Result<Vec<RunCount>, StoreError> {
        self.read(CountRuns {}).await?
    }
}
