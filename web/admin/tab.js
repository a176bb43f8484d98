// What every tab of the admin UI does the same way, written once: find its elements by id, wire
// its forms (kept from the refresh while in use, dom.js), fetch what it shows with the failure
// said next to it, show a list's table only when it has rows and its "none yet" text only when
// not, and the actions cell that ends a row.

import { h, showError, trackDirty } from '/admin/dom.js';

/** The element of id `id`, or null. */
export const $ = (id) => document.getElementById(id);

/** A tab's elements by id: `elements({ rows: 'groups-rows' })` gives `{ rows: <the element> }`. */
export function elements(ids) {
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, $(id)]));
}

/** A form of a tab: marked dirty on input (the refresh leaves it alone), `onSubmit` on submit. */
export function wireForm(form, onSubmit) {
  trackDirty(form);
  form.addEventListener('submit', onSubmit);
}

/**
 * Runs `fetch` (which keeps what it fetched) and resolves true; when it fails, shows "Could not
 * load the {what}: …" in `error` and resolves false. A success hides an earlier failure, unless
 * `clear` is false: where `error` also shows the failures of the tab's own actions.
 */
export async function load(error, what, fetch, { clear = true } = {}) {
  try {
    await fetch();
    if (clear) showError(error, null);
  } catch (failure) {
    showError(error, `Could not load the ${what}: ${failure.message}`);
    return false;
  }
  return true;
}

/**
 * After a list's `count` rows are written into `rows` (a table's body): its table is shown only
 * when there are some, its `empty` text (when it has one) only when there are none.
 */
export function showRows(rows, empty, count) {
  if (empty) empty.hidden = count > 0;
  rows.closest('.table-box').hidden = count === 0;
}

/** The last cell of a row: its buttons. */
export function actionsCell(...buttons) {
  return h('td', { class: 'cell-actions' }, h('div', { class: 'row-actions' }, ...buttons));
}
