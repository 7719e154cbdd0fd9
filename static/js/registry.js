// The modes the server runs, as `GET /api/modes` describes them: their ids, labels, one-line
// descriptions, roles, whether they take follow-ups, and the JSON Schema of their settings.
// The page builds its mode tabs, forms and labels from this; nothing in the page lists modes.
import { fetchJson } from "./api.js";
import { MODE_LABELS } from "./ui.js";

let modes = null; // [{id, label, description, multiTurn, question, roles, configSchema, view}]
let loading = null; // the one request for them

/** Loads the modes once (the page asks before it draws anything that names one). */
export function loadModes() {
  if (!loading) {
    loading = fetchJson("/api/modes").then((body) => body.modes, (err) => {
      console.warn("modes", err);
      loading = null; // asked again on the next navigation
      return [];
    }).then((list) => {
      modes = list;
      for (const m of list) MODE_LABELS[m.id] = m.label;
      return list;
    });
  }
  return loading;
}

/** Takes the modes from elsewhere (a shared run's page, which may not ask the API for them). */
export function registerModes(list) {
  modes = list;
  loading = Promise.resolve(list);
  for (const m of list) MODE_LABELS[m.id] = m.label;
}

/** The mode with this id, or undefined (call `loadModes` first). */
export function modeInfo(id) {
  return (modes || []).find((m) => m.id === id);
}

/** Every mode, in the server's order. */
export function allModes() {
  return modes || [];
}
