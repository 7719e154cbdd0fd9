use super::*;
use crate::engine::events::{Frame, ProgressMark};
use crate::metrics::{self, Feed};
use tokio::sync::mpsc;

struct Nobody;
impl Actor for Nobody {
    type Context = Context<Self>;
}
impl Handler<CancelRun> for Nobody {
    type Result = ();
    fn handle(&mut self, _: CancelRun, _: &mut Context<Self>) {}
}

fn frame(seq: i64, event: &str) -> Arc<EventFrame> {
    Arc::new(EventFrame::new("r", seq, event, serde_json::json!({})))
}

fn summary() -> RunSummary {
    RunSummary::sample("r")
}

/// The next frame the Hub has sent `rx`, or will send it from what it was told so far;
/// None when there is none. Nothing waits for quiet: a round trip through the Hub's mailbox
/// means it handled every earlier message (queueing their frames), and on the test's
/// single-threaded System the lag markers those handlings spawned, and any that waited for
/// the room just read, run before the Hub answers.
async fn next_frame(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> Option<Frame> {
    if let Ok(f) = rx.try_recv() {
        return Some(f);
    }
    hub.send(CountRunning).await.unwrap();
    rx.try_recv().ok()
}

/// Reads what is waiting: event seqs, then the lag marker if there is one.
async fn drain(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> (Vec<i64>, Option<i64>) {
    let mut seqs = Vec::new();
    while let Some(f) = next_frame(hub, rx).await {
        match f {
            Frame::Events(batch) => seqs.extend(batch.iter().map(|e| e.seq)),
            Frame::Lagged { since, .. } => return (seqs, Some(since)),
            _ => {}
        }
    }
    (seqs, None)
}

/// Ended runs' events are kept within their byte budget: past it the run that ended first
/// is no longer held (its watchers read the store), the later ones are, and running runs
/// always are, whatever their size.
#[actix_web::test]
async fn ended_runs_are_held_within_a_byte_budget_oldest_first() {
    let text = "x".repeat(1000);
    let big = |run: &str, seq| {
        Arc::new(EventFrame::new(run, seq, "stage1_complete", serde_json::json!({ "t": text })))
    };
    // Room for about two runs of three such events.
    let hub = Hub::new(Duration::from_secs(600)).retain_bytes(8_000).start();
    for id in ["a", "b", "c", "d"] {
        let cancel = Nobody.start().recipient();
        let summary = RunSummary { id: id.into(), ..summary() };
        hub.send(RegisterRun { summary, log: Vec::new(), cancel, place: None }).await.unwrap();
        let frames = (1..=3).map(|seq| big(id, seq)).collect();
        hub.send(Publish { run_id: id.into(), frames }).await.unwrap();
    }
    let held = |id: &'static str| {
        let hub = hub.clone();
        async move {
            let (sink, _rx) = mpsc::channel(16);
            let watch = Watch { run_id: id.into(), since: 0, watcher: 9, sink };
            matches!(hub.send(watch).await.unwrap(), WatchOutcome::Live { .. })
        }
    };
    for id in ["a", "b", "c"] {
        let end = RunEnded {
            run_id: id.into(),
            status: RunStatus::Completed,
            finished_at: 1,
            outcome: None,
        };
        hub.send(end).await.unwrap();
    }
    assert!(!held("a").await, "the first to end went when the third ended");
    assert!(held("b").await && held("c").await, "the two last ended are kept");
    assert!(held("d").await, "a running run is held whatever the budget");
}

/// The messages waiting in `rx`, each as the numbers of its events.
async fn messages(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> Vec<Vec<i64>> {
    let mut got = Vec::new();
    while let Some(f) = next_frame(hub, rx).await {
        if let Frame::Events(batch) = f {
            got.push(batch.iter().map(|e| e.seq).collect());
        }
    }
    got
}

/// A step's events reach each watcher in one message (one wake-up and one write per
/// socket); a watcher that already read some of them from the store gets only the rest.
#[actix_web::test]
async fn a_steps_events_reach_each_watcher_in_one_message_without_what_it_read() {
    let hub = Hub::new(Duration::from_secs(60)).start();
    let cancel = Nobody.start().recipient();
    let log = vec![frame(1, "stage1_start")];
    hub.send(RegisterRun { summary: summary(), log, cancel, place: None }).await.unwrap();
    let (a_tx, mut a_rx) = mpsc::channel(100);
    let (b_tx, mut b_rx) = mpsc::channel(100);
    hub.send(Watch { run_id: "r".into(), since: 0, watcher: 1, sink: a_tx }).await.unwrap();
    // Events are stored before they are published: B read 2 and 3 from the store before
    // the Hub had them.
    hub.send(Watch { run_id: "r".into(), since: 3, watcher: 2, sink: b_tx }).await.unwrap();
    let step = vec![frame(2, "call_complete"), frame(3, "stage1_complete"), frame(4, "token")];
    hub.send(Publish { run_id: "r".into(), frames: step }).await.unwrap();
    hub.send(Publish { run_id: "r".into(), frames: vec![frame(5, "stage2_start")] }).await.unwrap();
    assert_eq!(messages(&hub, &mut a_rx).await, vec![vec![1], vec![2, 3, 4], vec![5]]);
    assert_eq!(messages(&hub, &mut b_rx).await, vec![vec![4], vec![5]]);
}

/// A replay that overflows the watcher's buffer stops at a piece's end; the watcher is told
/// to resume from there and, watching again each time, gets the whole log once, then what
/// comes live.
#[actix_web::test]
async fn a_replay_larger_than_the_buffer_resumes_piece_by_piece_without_a_gap() {
    let hub = Hub::new(Duration::from_secs(60)).start();
    let cancel = Nobody.start().recipient();
    let n = 2 * REPLAY_BATCH as i64 + 1;
    let log = (1..=n).map(|s| frame(s, "call_complete")).collect();
    hub.send(RegisterRun { summary: summary(), log, cancel, place: None }).await.unwrap();
    let (tx, mut rx) = mpsc::channel(1);
    let (mut seen, mut lags, mut since) = (Vec::new(), Vec::new(), 0);
    loop {
        let watch = Watch { run_id: "r".into(), since, watcher: 1, sink: tx.clone() };
        hub.send(watch).await.unwrap();
        let (got, lag) = drain(&hub, &mut rx).await;
        seen.extend(got);
        match lag {
            Some(s) => {
                lags.push(s);
                since = s;
            }
            None => break,
        }
    }
    let batch = REPLAY_BATCH as i64;
    assert_eq!(lags, vec![batch, 2 * batch], "each overflow stops at a piece's end");
    hub.send(Publish { run_id: "r".into(), frames: vec![frame(n + 1, "stage1_complete")] })
        .await
        .unwrap();
    seen.extend(drain(&hub, &mut rx).await.0);
    assert_eq!(seen, (1..=n + 1).collect::<Vec<_>>(), "no gap, no repeat, then live");
}

#[actix_web::test]
async fn a_slow_watcher_never_holds_up_the_others_and_resumes_without_a_gap() {
    let (dropped, lagged) =
        (metrics::global().events_dropped(), metrics::global().watchers_lagged(Feed::Run));
    let hub = Hub::new(Duration::from_secs(60)).start();
    let cancel = Nobody.start().recipient();
    hub.send(RegisterRun { summary: summary(), log: Vec::new(), cancel, place: None })
        .await
        .unwrap();
    let (fast_tx, mut fast_rx) = mpsc::channel(100);
    let (slow_tx, mut slow_rx) = mpsc::channel(4);
    for (w, sink) in [(1, fast_tx), (2, slow_tx.clone())] {
        hub.send(Watch { run_id: "r".into(), since: 0, watcher: w, sink }).await.unwrap();
    }
    // Each publish is one step's events, one message to each watcher: a start, seven
    // token flushes, then a stage's end with the next stage's start.
    let mut steps = vec![vec![frame(1, "stage1_start")]];
    steps.extend((2..=8).map(|s| vec![frame(s, "token")]));
    steps.push(vec![frame(9, "stage1_complete"), frame(10, "stage2_start")]);
    for frames in steps {
        hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();
    }

    let (fast, lag) = drain(&hub, &mut fast_rx).await;
    assert_eq!(
        (fast, lag),
        ((1..=10).collect::<Vec<_>>(), None),
        "the fast watcher gets everything"
    );
    // The slow one got its buffer's worth, then (token frames dropped meanwhile) the
    // durable event at seq 9 unsubscribed it with a marker to resume from 4.
    let (slow, lag) = drain(&hub, &mut slow_rx).await;
    assert_eq!((slow, lag), (vec![1, 2, 3, 4], Some(4)));
    // Counted (other tests of this binary may add to the same counters meanwhile).
    assert!(metrics::global().events_dropped() >= dropped + 4, "tokens 5 to 8 were dropped");
    assert!(metrics::global().watchers_lagged(Feed::Run) > lagged, "the slow one lagged");
    // Resuming replays from the log until it is live again.
    let mut seen = Vec::new();
    let mut since = 4;
    loop {
        hub.send(Watch { run_id: "r".into(), since, watcher: 2, sink: slow_tx.clone() })
            .await
            .unwrap();
        let (got, lag) = drain(&hub, &mut slow_rx).await;
        seen.extend(got);
        match lag {
            Some(s) => since = s,
            None => break,
        }
    }
    assert_eq!(seen, (5..=10).collect::<Vec<_>>(), "no gap, no repeat");
    hub.send(Publish { run_id: "r".into(), frames: vec![frame(11, "stage2_complete")] })
        .await
        .unwrap();
    assert_eq!(drain(&hub, &mut slow_rx).await, (vec![11], None), "subscribed again");
}

fn marked(seq: i64, event: &str, data: serde_json::Value) -> Arc<EventFrame> {
    let mark = ProgressMark::of(event, &data);
    Arc::new(EventFrame::new("r", seq, event, data).with_mark(mark))
}

fn call_data(key: &str, stage: &str) -> serde_json::Value {
    serde_json::json!({ "key": key, "model": "sim/a", "stage": stage, "role": "council" })
}

fn done_data(key: &str, ok: bool, ms: u64) -> serde_json::Value {
    let mut d = call_data(key, "stage1");
    d["ok"] = serde_json::json!(ok);
    d["responseTimeMs"] = serde_json::json!(ms);
    d
}

/// The `run` of every dashboard message waiting in `rx`.
async fn dashboard_runs(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    while let Some(f) = next_frame(hub, rx).await {
        if let Frame::Dashboard(text) = f {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            if v["type"] == "dashboard_update" {
                out.push(v["run"].clone());
            }
        }
    }
    out
}

fn states(run: &serde_json::Value) -> Vec<(String, String)> {
    run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["key"].as_str().unwrap().into(), c["state"].as_str().unwrap().into()))
        .collect()
}

#[actix_web::test]
async fn the_summary_follows_each_call_the_title_and_the_end_of_the_run() {
    let hub = Hub::new(Duration::from_secs(60)).start();
    let cancel = Nobody.start().recipient();
    hub.send(RegisterRun { summary: summary(), log: Vec::new(), cancel, place: None })
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::channel(100);
    hub.send(SubscribeDashboard { watcher: 9, sink: tx, viewer: Viewer::local() }).await.unwrap();
    let frames = vec![
        marked(1, "call_start", call_data("stage1:0", "stage1")),
        marked(2, "call_start", call_data("stage1:1", "stage1")),
        marked(3, "call_start", call_data("stage1:2", "stage1")),
        marked(4, "call_start", call_data("title", "title")),
        marked(5, "token", serde_json::json!({ "key": "stage1:0", "delta": "x" })),
    ];
    hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();
    let frames = vec![
        marked(6, "call_retry", call_data("stage1:1", "stage1")),
        marked(7, "call_complete", done_data("stage1:0", true, 120)),
        marked(8, "call_complete", done_data("stage1:2", false, 90)),
        marked(9, "title_complete", serde_json::json!({ "data": { "title": "Sky Colour" } })),
    ];
    hub.send(Publish { run_id: "r".into(), frames }).await.unwrap();
    hub.send(RunEnded {
        run_id: "r".into(),
        status: RunStatus::Cancelled,
        finished_at: 4242,
        outcome: None,
    })
    .await
    .unwrap();

    let updates = dashboard_runs(&hub, &mut rx).await;
    assert_eq!(updates.len(), 3, "one update per batch of durable events, one at the end");
    let pair = |k: &str, s: &str| (k.to_string(), s.to_string());
    assert_eq!(
        states(&updates[0]),
        vec![pair("stage1:0", "running"), pair("stage1:1", "running"), pair("stage1:2", "running")],
        "the title call is not progress"
    );
    assert_eq!(
        states(&updates[1]),
        vec![pair("stage1:0", "ok"), pair("stage1:1", "retrying"), pair("stage1:2", "failed")]
    );
    assert_eq!(updates[1]["title"], "Sky Colour");
    assert_eq!(updates[1]["finishedAt"], serde_json::Value::Null);
    let last = &updates[2];
    assert_eq!(
        states(last),
        vec![pair("stage1:0", "ok"), pair("stage1:1", "stopped"), pair("stage1:2", "failed")]
    );
    assert_eq!(
        (&last["status"], &last["finishedAt"]),
        (&serde_json::json!("cancelled"), &serde_json::json!(4242))
    );
    assert_eq!(
        last["calls"][0],
        serde_json::json!({ "key": "stage1:0", "model": "sim/a", "stage": "stage1",
                            "role": "council", "state": "ok", "responseTimeMs": 120 })
    );
    assert!(last["calls"][1].get("responseTimeMs").is_none(), "absent until the call ends");
    assert!(last.get("owner").is_some_and(serde_json::Value::is_null));
    // The REST list sees the same summary.
    let live = hub.send(ListLive { viewer: Viewer::local() }).await.unwrap();
    assert_eq!(serde_json::to_value(&live[0]).unwrap(), *last);
}

/// Every frame waiting in `rx`: event seqs, and the lag marker's `since` if one came.
async fn drain_all(hub: &Addr<Hub>, rx: &mut mpsc::Receiver<Frame>) -> (Vec<i64>, Option<i64>) {
    let mut seqs = Vec::new();
    let mut lag = None;
    while let Some(f) = next_frame(hub, rx).await {
        match f {
            Frame::Events(batch) => seqs.extend(batch.iter().map(|e| e.seq)),
            Frame::Lagged { since, .. } => lag = Some(since),
            _ => {}
        }
    }
    (seqs, lag)
}

async fn remote(hub: &Addr<Hub>, frames: Vec<Arc<EventFrame>>) {
    hub.send(Inbound::Frames { run_id: "r".into(), frames }).await.unwrap();
}

#[actix_web::test]
async fn a_run_executed_elsewhere_is_followed_without_repeats_and_a_gap_sends_watchers_back_to_the_store(
) {
    let hub = Hub::new(Duration::from_secs(60)).start();
    let epoch = hub.send(Follow { run_id: "r".into() }).await.unwrap();
    // Frames that arrive while the watcher reads the store wait in the log.
    remote(&hub, vec![frame(3, "call_start"), frame(4, "token")]).await;
    let (tx, mut rx) = mpsc::channel(100);
    let park = |since, epoch, sink| Park {
        run_id: "r".into(),
        since,
        watcher: 1,
        sink,
        epoch: Some(epoch),
    };
    hub.send(park(3, epoch, tx.clone())).await.unwrap();
    remote(&hub, vec![frame(4, "token"), frame(5, "stage1_start")]).await;
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![4, 5], None), "after what it read, once each");
    // 6 and 7 never came: the watcher is told to catch up from the store after 5.
    remote(&hub, vec![frame(8, "token")]).await;
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![], Some(5)));
    // A watch that read the store before that gap cannot trust what was received: it is
    // sent back too; one that follows afresh is served.
    let stale = hub.send(Follow { run_id: "r".into() }).await.unwrap();
    assert_eq!(stale, epoch + 1, "the gap started a new epoch");
    let (tx2, mut rx2) = mpsc::channel(100);
    hub.send(park(2, epoch, tx2.clone())).await.unwrap();
    assert_eq!(drain_all(&hub, &mut rx2).await, (vec![], Some(2)));
    hub.send(park(7, stale, tx2)).await.unwrap();
    remote(&hub, vec![frame(9, "complete")]).await;
    assert_eq!(drain_all(&hub, &mut rx2).await, (vec![8, 9], None));
    // The terminal event ends the follow: the Hub let go of the watcher's channel.
    drop(tx);
    assert!(rx2.recv().await.is_none(), "nothing holds the channel open");
    assert!(hub.send(ListFollowed {}).await.unwrap().is_empty());
}

#[actix_web::test]
async fn watchers_following_a_run_switch_to_it_when_it_is_resumed_here() {
    let hub = Hub::new(Duration::from_secs(60)).start();
    let epoch = hub.send(Follow { run_id: "r".into() }).await.unwrap();
    let (tx, mut rx) = mpsc::channel(100);
    hub.send(Park { run_id: "r".into(), since: 2, watcher: 1, sink: tx, epoch: Some(epoch) })
        .await
        .unwrap();
    remote(&hub, vec![frame(3, "token")]).await;
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![3], None));
    // Taken over here: the log holds the stored events; numbering goes on after the token.
    let cancel = Nobody.start().recipient();
    let log = vec![frame(1, "stage1_start"), frame(2, "call_start")];
    hub.send(RegisterRun { summary: summary(), log, cancel, place: None }).await.unwrap();
    hub.send(Publish { run_id: "r".into(), frames: vec![frame(4, "resumed")] }).await.unwrap();
    // Frames still in flight from the old executor are ignored.
    remote(&hub, vec![frame(4, "token"), frame(5, "token")]).await;
    hub.send(Publish { run_id: "r".into(), frames: vec![frame(5, "call_start")] }).await.unwrap();
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![4, 5], None));
    assert!(hub.send(ListFollowed {}).await.unwrap().is_empty(), "no longer followed");
}

#[actix_web::test]
async fn a_quiet_run_is_left_alone_but_a_store_that_stays_ahead_of_the_bus_sends_watchers_back() {
    let hub = Hub::new(Duration::from_secs(60)).start();
    let epoch = hub.send(Follow { run_id: "r".into() }).await.unwrap();
    let (tx, mut rx) = mpsc::channel(100);
    hub.send(Park { run_id: "r".into(), since: 5, watcher: 1, sink: tx, epoch: Some(epoch) })
        .await
        .unwrap();
    assert_eq!(hub.send(ListFollowed {}).await.unwrap(), vec![("r".to_string(), 5)]);
    let verify = |stored_seq| Verify { run_id: "r".into(), stored_seq };
    // A long model call: nothing new anywhere, however often it is checked.
    for _ in 0..3 {
        hub.send(verify(5)).await.unwrap();
    }
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![], None));
    // Stored but not yet published: fine once; still missing a check later, it was lost.
    hub.send(verify(7)).await.unwrap();
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![], None));
    hub.send(verify(7)).await.unwrap();
    assert_eq!(drain_all(&hub, &mut rx).await, (vec![], Some(5)));
}
