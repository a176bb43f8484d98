// The join form: a position or a group from the lists, or a preset from the address
// (`/?position=ID`, `/?groups=a,b&talk=a`), a name and, where the choice has one, its PIN.
// Submitting it starts the session (lifecycle.js); the name and the choice are remembered.

import { api, optional } from '/join/api.js';
import { audioContext } from '/join/audio.js';
import { join } from '/join/lifecycle.js';
import { groupsById, session, setGroups } from '/join/session.js';
import { showJoinError, showMessage, ui } from '/join/ui.js';

const FORM_KEY = 'partyline.join';

let positionsById = new Map();
const preset = readPreset();

function readPreset() {
  const params = new URLSearchParams(location.search);
  const position = params.get('position');
  if (position) return { position };
  const list = (name) =>
    (params.get(name) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const groups = list('groups');
  if (groups.length === 0) return null;
  const talk = params.has('talk') ? list('talk').filter((id) => groups.includes(id)) : groups;
  return { listen: groups, talk };
}

export async function loadChoices() {
  ui.group.disabled = true;
  ui.join.disabled = true;
  try {
    const [groups, positions] = await Promise.all([
      api('/groups').then((body) => body.groups),
      optional('/positions').then((body) => body?.positions ?? []),
    ]);
    setGroups(groups);
    positionsById = new Map(positions.map((position) => [position.id, position]));
    const saved = JSON.parse(localStorage.getItem(FORM_KEY) ?? '{}');
    ui.username.value ||= saved.username ?? '';
    if (preset) {
      showPreset();
    } else {
      fillPicker(groups, positions, saved.choice ?? saved.groupId);
      if (groups.length === 0 && positions.length === 0) return;
    }
    ui.join.disabled = false;
    showJoinError(null);
  } catch (error) {
    ui.group.replaceChildren(new Option('Groups unavailable', ''));
    showJoinError(`Cannot load the groups: ${error.message}. Retrying…`);
    setTimeout(loadChoices, 3_000);
  }
}

function fillPicker(groups, positions, selected) {
  const options = (list, prefix) =>
    list.map(
      (item) =>
        new Option(item.pin ? `${item.name} 🔒` : item.name, prefix + item.id, false, prefix + item.id === selected),
    );
  if (positions.length > 0) {
    ui.groupLabel.textContent = 'Position or group';
    const byPosition = document.createElement('optgroup');
    byPosition.label = 'Positions';
    byPosition.append(...options(positions, 'position:'));
    const byGroup = document.createElement('optgroup');
    byGroup.label = 'One group';
    byGroup.append(...options(groups, ''));
    ui.group.replaceChildren(byPosition, byGroup);
  } else {
    ui.groupLabel.textContent = 'Group';
    ui.group.replaceChildren(...options(groups, ''));
    if (groups.length === 0) {
      ui.group.append(new Option('No groups yet: ask the admin', ''));
      return;
    }
  }
  ui.group.disabled = false;
  showPinField();
}

function showPreset() {
  ui.groupField.hidden = true;
  ui.preset.hidden = false;
  if (preset.position) {
    const position = positionsById.get(preset.position);
    ui.preset.textContent = `Position: ${position?.name ?? preset.position}`;
    ui.pinField.hidden = !position?.pin;
    return;
  }
  const name = (id) => groupsById.get(id)?.name ?? id;
  const talkOnly = preset.listen.filter((id) => !preset.talk.includes(id));
  ui.preset.textContent = `Lines: ${preset.listen.map(name).join(', ')}${talkOnly.length ? ` (listen only: ${talkOnly.map(name).join(', ')})` : ''}`;
  ui.pinField.hidden = !preset.listen.some((id) => groupsById.get(id)?.pin);
}

function showPinField() {
  const value = ui.group.value;
  const item = value.startsWith('position:') ? positionsById.get(value.slice(9)) : groupsById.get(value);
  ui.pinField.hidden = !item?.pin;
}

/** What POST /api/token is asked for (without the name), and a label for it. */
function chosenRequest() {
  if (preset?.position) {
    return {
      request: { position: preset.position },
      label: positionsById.get(preset.position)?.name ?? preset.position,
    };
  }
  if (preset) {
    const [only] = preset.listen;
    const label = preset.listen.map((id) => groupsById.get(id)?.name ?? id).join(', ');
    // One line to talk and listen on is the one-group form every control knows.
    if (preset.listen.length === 1 && preset.talk.length === 1) return { request: { groupId: only }, label };
    return { request: { listen: preset.listen, talk: preset.talk }, label };
  }
  const value = ui.group.value;
  if (!value) return null;
  if (value.startsWith('position:')) {
    const id = value.slice(9);
    return { request: { position: id }, label: positionsById.get(id)?.name ?? id };
  }
  return { request: { groupId: value }, label: groupsById.get(value)?.name ?? value };
}

function onSubmit(event) {
  event.preventDefault();
  const username = ui.username.value.trim();
  if (username.length < 1 || username.length > 64) {
    showJoinError('Type a name of 1 to 64 characters.');
    ui.username.focus();
    return;
  }
  const chosen = chosenRequest();
  if (!chosen) {
    showJoinError('Pick a group.');
    return;
  }
  showJoinError(null);
  try {
    localStorage.setItem(FORM_KEY, JSON.stringify({ username, choice: preset ? undefined : ui.group.value }));
  } catch {
    // not remembered
  }
  audioContext(); // inside the click: unlocks audio output on mobile browsers too
  session.username = username;
  session.request = chosen.request;
  session.label = chosen.label;
  session.pin = ui.pinField.hidden ? '' : ui.pin.value;
  session.attempt = 0;
  ui.callName.textContent = username;
  showMessage(null);
  join();
}

export function initForm() {
  ui.form.addEventListener('submit', onSubmit);
  ui.group.addEventListener('change', showPinField);
}
