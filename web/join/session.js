// The state the panel's modules share: the session (what the user asked for, kept over
// reconnects, and the lines in panel order) and the groups control lists. It lives here, in a
// module that imports nothing, so that the others can all read it without importing each other.

export const session = {
  username: '',
  request: null, // the body of POST /api/token, without username and pin
  label: '', // what is being joined, for the status line
  pin: '',
  token: null, // the last answer of POST /api/token
  connection: null,
  attempt: 0,
  retryTimer: null,
  microphone: null, // MediaStreamTrack, kept over reconnects
  lines: [], // Line (lines.js), in panel order
  ended: new Set(), // group ids of the lines the admin took away: not asked for again on a rejoin
  netDown: new Set(), // group ids whose ICE path is away
  callAvailable: false,
  events: null, // AbortController of the session's event stream
};

/** The groups of GET /api/groups by id, as the join form last loaded them (for line names). */
export const groupsById = new Map();

export function setGroups(groups) {
  groupsById.clear();
  for (const group of groups) groupsById.set(group.id, group);
}

export const lineById = (groupId) => session.lines.find((line) => line.groupId === groupId);
