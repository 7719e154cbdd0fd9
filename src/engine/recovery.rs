//! Keeping runs alive across processes: this process's leases, and resuming the runs whose
//! process died (their stored steps replayed, the calls that were in flight asked again).

use super::*;
use crate::attachments::Given;

/// How long an upload no run was given is kept (a person may attach a file and start later).
pub const UNUSED_UPLOAD_KEPT: Duration = Duration::from_secs(24 * 3600);
/// How often unused uploads are looked for.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

impl Engine {
    /// Renews this process's leases and (as the server) takes over runs whose lease ran out.
    /// Also deletes, once an hour, the uploads no run was given within [`UNUSED_UPLOAD_KEPT`].
    pub(super) async fn heartbeat(&self) {
        let until = store::now_ms() + self.settings.lease.as_millis() as i64;
        let running = self.running_here().await.unwrap_or(1);
        if running > 0 {
            if let Err(e) = self.store.renew_leases(&self.instance, until).await {
                log::error!("could not renew the leases of running runs: {e}");
            }
        }
        if self.settings.recover && !self.draining.load(Ordering::SeqCst) {
            if let Err(e) = self.recover().await {
                log::error!("could not look for runs to resume: {e}");
            }
        }
        if self.settings.recover && self.prune_due() {
            let before = store::now_ms() - UNUSED_UPLOAD_KEPT.as_millis() as i64;
            match self.store.prune_uploads(before).await {
                Ok(0) => {}
                Ok(n) => log::info!("deleted {n} upload(s) no run was given within a day"),
                Err(e) => log::error!("could not delete unused uploads: {e}"),
            }
        }
        if self.bus.is_some() {
            if let Err(e) = self.verify_followed().await {
                log::error!("could not check the runs followed over the bus: {e}");
            }
        }
    }

    /// Whether unused uploads are due to be deleted (at the first beat, then hourly).
    fn prune_due(&self) -> bool {
        let now = store::now_ms();
        let last = self.last_prune.load(Ordering::SeqCst);
        now - last >= PRUNE_EVERY.as_millis() as i64
            && self
                .last_prune
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    /// Compares what the bus brought of each run followed from here with what the store
    /// holds, so watchers catch up from the store if the bus lost events (see [`hub::Verify`]).
    pub(super) async fn verify_followed(&self) -> Result<(), EngineError> {
        let followed =
            self.hub.send(hub::ListFollowed {}).await.map_err(|_| EngineError::Unavailable)?;
        for (run_id, _) in followed {
            let Some(run) = self.store.get_run(&run_id).await? else { continue };
            self.hub.do_send(hub::Verify { run_id, stored_seq: run.last_seq });
        }
        Ok(())
    }

    /// Resumes every run left `running` whose lease has run out (its process died): each is
    /// claimed (so two processes never both take one), rebuilt from its journal and continued
    /// from its last stored step; a run that cannot be resumed is ended `interrupted` with what
    /// it stored. Answers how many runs were resumed.
    pub async fn recover(&self) -> Result<usize, EngineError> {
        let now = store::now_ms();
        let until = now + self.settings.lease.as_millis() as i64;
        let mut resumed = 0;
        let expired = self.store.expired_runs(now).await?;
        if expired.is_empty() {
            return Ok(0);
        }
        // A run still executing here is not orphaned: its lease ran out while the database
        // refused the renewals (a full disk), and its actor is still storing its steps or
        // its failure. Taking it over would run it twice.
        let here =
            self.hub.send(hub::RunningHere {}).await.map_err(|_| EngineError::Unavailable)?;
        for run_id in expired.into_iter().filter(|id| !here.contains(id)) {
            if !self.store.claim_run(&run_id, &self.instance, now, until).await? {
                continue;
            }
            match self.resume_run(&run_id).await {
                Ok(()) => {
                    crate::metrics::global().run_resumed();
                    resumed += 1
                }
                Err(reason) => {
                    log::warn!("run {run_id} cannot be resumed: {reason}");
                    let error = format!("interrupted: the run could not be resumed ({reason})");
                    let end = self.store.interrupt_run(&run_id, &error).await?;
                    let terminal =
                        Arc::new(EventFrame::new(&run_id, end.seq, &end.event, end.data));
                    self.hub.do_send(hub::Abandon { run_id, terminal });
                }
            }
        }
        Ok(resumed)
    }

    /// Rebuilds a claimed run from the store and starts it again.
    pub(super) async fn resume_run(&self, run_id: &str) -> Result<(), String> {
        let err = |e: StoreError| e.to_string();
        let run = self.store.get_run(run_id).await.map_err(err)?.ok_or("the run is gone")?;
        // The validated request holds the question exactly as the mode first saw it.
        let mut req = rerun::stored_request(&run)?;
        req.conversation_id = Some(run.conversation_id.clone());
        let question = req.question.clone();
        let detail = self
            .store
            .get_conversation(&run.conversation_id)
            .await
            .map_err(err)?
            .ok_or("its conversation is gone")?;
        let position = |id: &str| detail.messages.iter().find(|m| m.id == id).map(|m| m.position);
        let asked = position(&run.user_message_id).ok_or("its question is gone")?;
        let earlier: Vec<MessageRecord> =
            detail.messages.iter().filter(|m| m.position < asked).cloned().collect();
        let journal = self.store.journal(run_id).await.map_err(err)?;
        // A run asks for JSON as it did when it started (its start's record says which models
        // did); one whose start was never written starts afresh with the routes as they are.
        let structured = match journal.first().filter(|j| j.kind == resume::START) {
            Some(start) => match start.data.get("structured") {
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|e| format!("its journal's start is not readable: {e}"))?,
                None => modes::Structured::default(),
            },
            None => self.providers.structured(&req.models),
        };
        // Its files, as it was given them (they are linked to the run, never copied into it).
        let given = Given::new(self.store.run_attachments(run_id).await.map_err(err)?);
        let ctx = RunContext {
            run_id: run.id.clone(),
            conversation_id: run.conversation_id.clone(),
            message_id: run.message_id.clone(),
            question: question.clone(),
            history: history_of(&earlier),
            new_conversation: detail.runs.first().is_some_and(|r| r.id == run.id),
            seed: modes::common::seed_from_run_id(&run.id),
            structured: structured.clone(),
            material: given.text(),
        };
        let mut mode = modes::instantiate(&req, ctx)?;
        if journal.first().is_some_and(|j| j.kind == resume::START && j.data["guarded"] == true) {
            // Its calls were kept within a budget that lived in the process that started it
            // (`conclave eval`); going on without it could pass that budget.
            return Err("it ran under a budget held by the process that started it, which is \
                        gone; it is not finished without it"
                .into());
        }
        let stored = self.store.count_stages(&run.message_id).await.map_err(err)?;
        let resume = if journal.is_empty() {
            // The start itself was never written, so nothing of the run was: start afresh.
            if stored > 0 || run.last_seq > 0 {
                return Err("it has stored data but no journal".into());
            }
            None
        } else {
            let replayed = resume::replay(mode.as_mut(), &journal)?;
            if replayed.rows.len() as i64 != stored {
                return Err(format!(
                    "its journal accounts for {} stage rows but {stored} are stored",
                    replayed.rows.len()
                ));
            }
            let seq = self.resume_seq(&run, replayed.calls()).await;
            Some(Resumed { replayed, seq })
        };
        let log: Vec<Arc<EventFrame>> = self
            .store
            .events_since(run_id, 0)
            .await
            .map_err(err)?
            .into_iter()
            .map(|e| {
                let mark = events::ProgressMark::of(&e.event, &e.data);
                Arc::new(EventFrame::new(run_id, e.seq, &e.event, e.data).with_mark(mark))
            })
            .collect();
        let summary = RunSummary {
            id: run.id.clone(),
            mode: run.mode.clone(),
            conversation_id: run.conversation_id.clone(),
            message_id: run.message_id.clone(),
            question: question.chars().take(200).collect(),
            status: RunStatus::Running,
            owner: run.owner.clone(),
            visibility: detail.conversation.visibility,
            created_at: run.created_at,
            finished_at: None,
            title: detail.conversation.title.clone(),
            last_event: None,
            last_seq: 0,
            calls: Vec::new(),
            outcome: None,
            eval_id: detail.conversation.eval_id.clone(),
        };
        let how = HowRun { resume, place: None, guard: None, structured, given };
        self.run_actor(summary, log, mode, how);
        Ok(())
    }

    /// Where a resumed run's numbering continues: after every number its dead process may have
    /// published. Token events are numbered but not stored, and watchers drop numbers they
    /// have seen, so reusing one would hide the resumed run's events from them. The bus knows
    /// the highest number published; without it, the numbering skips past the most token
    /// events the dead process could have sent since its last stored step: one per call in
    /// flight per token flush (plus one when a call retried or ended), for the time since.
    pub(super) async fn resume_seq(&self, run: &RunRecord, calls_in_flight: usize) -> i64 {
        if let Some(bus) = &self.bus {
            match bus.high_water(&run.id).await {
                Some(published) => return run.last_seq.max(published),
                None => log::warn!(
                    "run {}: Redis cannot say which event numbers were published; skipping past \
                     the most that could have been",
                    run.id
                ),
            }
        }
        let since = match self.store.last_event_at(&run.id).await {
            Ok(Some(at)) => at,
            _ => run.created_at,
        };
        let flush_ms = (self.settings.token_flush.as_millis() as i64).max(1);
        let flushes = (store::now_ms() - since).max(0) / flush_ms + 2;
        run.last_seq + flushes * 2 * calls_in_flight.max(1) as i64
    }
}
