// Reading the server's JSON API: one helper every page module shares.

/** GET (or `opts`) `url` as JSON; a refusal throws an Error with the server's message, its
 *  status and (for a 400) the field it names. */
export async function fetchJson(url, opts) {
  const res = await fetch(url, opts);
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  // The session ended (signed out elsewhere, revoked): back to the sign-in screen.
  if (res.status === 401 && window.conclave && window.conclave.signedOut) window.conclave.signedOut();
  if (!res.ok) {
    const err = new Error((body && body.error) || `${res.status} ${res.statusText}`);
    err.status = res.status;
    err.field = body && body.field;
    throw err;
  }
  return body;
}
