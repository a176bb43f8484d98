// What every tab of the admin UI does the same way, written once: find its elements by id, wire
// its forms (kept from the refresh while in use, dom.js), fetch what it shows with the failure
// said next to it, show a list's table only when it has rows and its "none yet" text only when
// not, the actions cell that ends a row, and the confirmation of a destructive button in place.

import { h, setAttr, showError, trackDirty } from '/admin/dom.js';

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

/** How long a destructive button waits for its second click. */
export const CONFIRM_MS = 4_000;

/**
 * Wires a destructive button to confirm in place: the first click (or Enter) turns it into
 * "Confirm?" for CONFIRM_MS, a second one runs `action()`; the time running out, Escape or the
 * focus leaving puts it back. No dialog: the admin's eyes stay on the row, and a slip of the
 * mouse costs nothing. While it waits it has `data-confirming`, and its accessible name says
 * so (set the name with `labelButton`, which keeps that).
 */
export function confirmInPlace(button, action) {
  const disarm = () => {
    if (button.dataset.confirming === undefined) return;
    clearTimeout(button.confirmTimer);
    delete button.dataset.confirming;
    button.textContent = button.dataset.text;
    setAttr(button, 'aria-label', button.dataset.label ?? null);
    delete button.dataset.label;
  };
  button.addEventListener('click', () => {
    if (button.dataset.confirming !== undefined) {
      disarm();
      action();
      return;
    }
    button.dataset.text = button.textContent;
    const label = button.getAttribute('aria-label');
    if (label !== null) button.dataset.label = label;
    button.dataset.confirming = '';
    button.textContent = 'Confirm?';
    button.setAttribute('aria-label', `Confirm: ${label ?? button.dataset.text}`);
    button.confirmTimer = setTimeout(disarm, CONFIRM_MS);
  });
  button.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') disarm();
  });
  button.addEventListener('blur', disarm);
}

/**
 * Sets the accessible name of a button wired by `confirmInPlace` (a refresh renames rows):
 * while it waits for the second click, "Confirm: {label}".
 */
export function labelButton(button, label) {
  if (button.dataset.confirming === undefined) {
    setAttr(button, 'aria-label', label);
    return;
  }
  button.dataset.label = label;
  setAttr(button, 'aria-label', `Confirm: ${label}`);
}
