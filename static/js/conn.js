// One WebSocket to the server, shared by every view.
//
// Each run the page shows has a Feed: the run's events in `seq` order, kept while the page
// needs them. A view subscribes to a feed and is handed every event once, in order — the ones
// already received first, then live ones — so a view built from scratch at any moment renders
// the same as one that watched from the start. After a dropped socket the connection comes back
// by itself and asks for each open run's events after the last `seq` it holds: nothing is
// missed and nothing repeats (events at or below a feed's last `seq` are ignored).

const PING_EVERY_MS = 15000;
const PONG_TIMEOUT_MS = 10000;
const MAX_ENDED_FEEDS = 40;

export const TERMINAL = new Set(["complete", "error", "cancelled"]);

class Feed {
  constructor(conn, runId) {
    this.conn = conn;
    this.runId = runId;
    this.events = [];
    this.lastSeq = 0;
    this.ended = false;
    this.listeners = new Set();
    this.errorListeners = new Set();
    this.watching = false;
    this.touched = Date.now();
  }

  /** Calls `fn(ev)` for every event, past then future; returns an unsubscribe function. */
  subscribe(fn, onError) {
    this.touched = Date.now();
    for (const ev of this.events) fn(ev);
    this.listeners.add(fn);
    if (onError) this.errorListeners.add(onError);
    this.ensureWatching();
    return () => {
      this.listeners.delete(fn);
      if (onError) this.errorListeners.delete(onError);
      if (this.listeners.size === 0 && this.watching && !this.ended) {
        this.watching = false;
        this.conn.send({ type: "unwatch", run: this.runId });
      }
    };
  }

  ensureWatching() {
    if (this.ended || this.watching || this.listeners.size === 0) return;
    if (this.conn.send({ type: "watch", run: this.runId, since: this.lastSeq })) this.watching = true;
  }

  push(ev) {
    if (ev.seq <= this.lastSeq) {
      // Already seen. The server resumes exactly after the last seq asked for, so this stays
      // 0; it is counted so that a test can prove it.
      this.conn.duplicates += 1;
      return;
    }
    this.lastSeq = ev.seq;
    this.events.push(ev);
    if (TERMINAL.has(ev.event)) {
      this.ended = true;
      this.watching = false;
      // Token deltas are only needed while a call streams: once the run is over every
      // stage event carries the full text, so drop them to keep memory small.
      this.events = this.events.filter((e) => e.event !== "token");
    }
    for (const fn of [...this.listeners]) fn(ev);
  }

  fail(message) {
    this.watching = false;
    for (const fn of [...this.errorListeners]) fn(message);
  }
}

export class Connection {
  constructor() {
    this.ws = null;
    this.state = "connecting";
    this.nextId = 1;
    this.pending = new Map();
    this.feeds = new Map();
    this.dashboardListeners = new Set();
    this.stateListeners = new Set();
    this.backoff = 500;
    this.duplicates = 0;
    this.reconnects = 0;
    this.pingTimer = null;
    this.pongTimer = null;
  }

  connect() {
    const proto = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${proto}://${location.host}/ws`);
    this.ws = ws;
    if (this.state !== "reconnecting") this.setState("connecting");
    ws.onopen = () => {
      if (ws !== this.ws) return;
      this.backoff = 500;
      if (this.state === "reconnecting") this.reconnects += 1;
      this.setState("live");
      for (const feed of this.feeds.values()) {
        feed.watching = false;
        feed.ensureWatching();
      }
      if (this.dashboardListeners.size) this.send({ type: "dashboard" });
      this.startPings();
    };
    ws.onclose = () => {
      if (ws !== this.ws) return;
      this.stopPings();
      for (const feed of this.feeds.values()) feed.watching = false;
      for (const [, p] of this.pending) p.reject(new Error("The connection to the server was lost"));
      this.pending.clear();
      this.setState("reconnecting");
      const delay = this.backoff * (0.75 + Math.random() * 0.5);
      this.backoff = Math.min(this.backoff * 2, 8000);
      setTimeout(() => this.connect(), delay);
    };
    ws.onmessage = (m) => this.onMessage(m.data);
  }

  /** Drops the socket as a network failure would (used by tests and the "reconnect" button). */
  drop() {
    if (this.ws) this.ws.close();
  }

  startPings() {
    this.stopPings();
    this.pingTimer = setInterval(() => {
      this.request({ type: "ping" }).catch(() => {});
      clearTimeout(this.pongTimer);
      // No answer at all: the socket is dead without having said so. Start again.
      const ws = this.ws;
      this.pongTimer = setTimeout(() => { if (ws === this.ws) ws.close(); }, PONG_TIMEOUT_MS);
    }, PING_EVERY_MS);
  }

  stopPings() {
    clearInterval(this.pingTimer);
    clearTimeout(this.pongTimer);
  }

  setState(s) {
    this.state = s;
    for (const fn of this.stateListeners) fn(s);
  }

  onState(fn) {
    this.stateListeners.add(fn);
    fn(this.state);
    return () => this.stateListeners.delete(fn);
  }

  /** Sends a message if the socket is open; answers whether it went. */
  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(msg));
      return true;
    }
    return false;
  }

  /** Sends a message with an id and resolves with the server's direct reply. */
  request(msg) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      if (!this.send({ ...msg, id })) {
        reject(new Error("Not connected to the server; it will reconnect by itself in a moment"));
        return;
      }
      this.pending.set(id, { resolve, reject });
    });
  }

  onMessage(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    clearTimeout(this.pongTimer);
    if (msg.type === "event") {
      // A run this socket started streams before anyone asked: keep its events.
      this.feed(msg.run).push(msg);
      return;
    }
    if (msg.id !== undefined && msg.id !== null && this.pending.has(msg.id)) {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.type === "error") {
        const err = new Error(msg.message);
        err.field = msg.field;
        p.reject(err);
      } else {
        p.resolve(msg);
      }
      return;
    }
    if (msg.type === "dashboard" || msg.type === "dashboard_update") {
      for (const fn of this.dashboardListeners) fn(msg);
      return;
    }
    if (msg.type === "error" && msg.run && this.feeds.has(msg.run)) {
      this.feeds.get(msg.run).fail(msg.message);
    }
  }

  feed(runId) {
    let f = this.feeds.get(runId);
    if (!f) {
      f = new Feed(this, runId);
      this.feeds.set(runId, f);
      this.evict();
    }
    return f;
  }

  /** Forgets the oldest ended runs nobody is looking at. */
  evict() {
    const idle = [...this.feeds.values()].filter((f) => f.ended && f.listeners.size === 0);
    if (idle.length <= MAX_ENDED_FEEDS) return;
    idle.sort((a, b) => a.touched - b.touched);
    for (const f of idle.slice(0, idle.length - MAX_ENDED_FEEDS)) this.feeds.delete(f.runId);
  }

  /** Live run list: `fn({type: "dashboard", runs})` then `fn({type: "dashboard_update", run})`. */
  subscribeDashboard(fn) {
    this.dashboardListeners.add(fn);
    if (this.dashboardListeners.size === 1) this.send({ type: "dashboard" });
    return () => this.dashboardListeners.delete(fn);
  }
}
