// Small DOM helpers: build elements, update them in place (no flicker: a value is written only
// when it changed), keep keyed rows in step with a list, and keep forms the admin is using
// away from the refresh.

/** `h('td', { class: 'x', dataset: { key: 'a' }, onclick }, 'text', child)` */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'dataset') Object.assign(element.dataset, value);
    else if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else if (name === 'class') element.className = value;
    else if (name in element && typeof value !== 'string') element[name] = value;
    else element.setAttribute(name, value === true ? '' : value);
  }
  element.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element with attributes. */
export function svg(tag, attrs = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

/** Sets `textContent` if it differs (a text node rewritten with the same text still repaints). */
export function setText(element, text) {
  const value = String(text ?? '');
  if (element.textContent !== value) element.textContent = value;
}

/** Sets or removes an attribute if it differs. */
export function setAttr(element, name, value) {
  if (value === null || value === undefined || value === false) {
    if (element.hasAttribute(name)) element.removeAttribute(name);
  } else if (element.getAttribute(name) !== String(value)) {
    element.setAttribute(name, value === true ? '' : value);
  }
}

/**
 * Keeps the children of `container` in step with `items`, one element per item, keyed by
 * `key(item)` (stored in `data-key`): existing elements are updated in place by
 * `update(element, item)`, new ones made by `create(item)` (then updated), gone ones removed,
 * and the order follows `items`. An element for which `keep(element)` is true (a row being
 * edited) is neither updated nor removed. Elements already in place are not moved, so focus
 * and text selection inside them survive.
 */
export function syncKeyed(container, items, { key, create, update, keep = () => false }) {
  const existing = new Map([...container.children].map((child) => [child.dataset.key, child]));
  const order = [];
  const wanted = new Set();
  for (const item of items) {
    const k = String(key(item));
    if (wanted.has(k)) continue;
    wanted.add(k);
    let element = existing.get(k);
    if (!element) {
      element = create(item);
      element.dataset.key = k;
      update(element, item);
    } else if (!keep(element)) {
      update(element, item);
    }
    order.push(element);
  }
  for (const [k, element] of existing) {
    if (wanted.has(k)) continue;
    if (keep(element)) order.push(element);
    else element.remove();
  }
  let cursor = container.firstElementChild;
  for (const element of order) {
    if (element === cursor) cursor = cursor.nextElementSibling;
    else container.insertBefore(element, cursor);
  }
}

// ---------------------------------------------------------------------------------------------
// Forms: a form the admin is busy with is never overwritten by the refresh.

/** Marks `form` dirty on any input; `clean(form)` after a save or a reset. */
export function trackDirty(form) {
  const mark = () => {
    form.dataset.dirty = '';
  };
  form.addEventListener('input', mark);
  form.addEventListener('change', mark);
}

export function clean(form) {
  delete form.dataset.dirty;
}

/** May the refresh write into `form`? Not while it has unsaved input or the focus. */
export function canSync(form) {
  return form.dataset.dirty === undefined && !form.contains(document.activeElement);
}

/** Sets a control's value if it differs (keeps the caret and selection otherwise). */
export function setValue(control, value) {
  const text = String(value ?? '');
  if (control.value !== text) control.value = text;
}

/**
 * Replaces the options of `select` with `options` (`[{ value, label }]`) when they differ,
 * keeping the selected value if it still exists.
 */
export function setOptions(select, options) {
  const same =
    select.options.length === options.length &&
    options.every((o, i) => select.options[i].value === String(o.value) && select.options[i].textContent === o.label);
  if (same) return;
  const selected = select.value;
  select.replaceChildren(...options.map((o) => h('option', { value: String(o.value) }, o.label)));
  if (options.some((o) => String(o.value) === selected)) select.value = selected;
}

/** Shows an error message in `element` (a `.message.error`), or hides it with `null`. */
export function showError(element, message) {
  setText(element, message ?? '');
  element.hidden = !message;
}

/**
 * Copies `text` to the clipboard and says so in `status` for 3 s. Where the page has no
 * clipboard (an insecure origin, or refused), selects `shown` (the element showing the text)
 * for Ctrl+C instead.
 */
export async function copyText(text, shown, status) {
  try {
    await navigator.clipboard.writeText(text);
    setText(status, 'Copied');
  } catch {
    const range = document.createRange();
    range.selectNodeContents(shown);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    setText(status, 'Selected: press Ctrl+C');
  }
  clearTimeout(status.clearTimer);
  status.clearTimer = setTimeout(() => setText(status, ''), 3_000);
}

/**
 * Runs `action` for a form's submit button: disables the button meanwhile, shows the error of
 * a failure in `errorElement` (the API's own message) and resolves true on success.
 */
export async function submitting(button, errorElement, action) {
  showError(errorElement, null);
  button.disabled = true;
  try {
    await action();
    return true;
  } catch (error) {
    showError(errorElement, error.message);
    return false;
  } finally {
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Formatting.

/** "just now", "42 s ago", "5 min ago", "2 h 10 min ago", "3 d 4 h ago". */
export function relative(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '—';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) return 'just now';
  return `${duration(s)} ago`;
}

/** A duration in seconds, two units at most: "42 s", "5 min 3 s", "2 h 10 min", "3 d 4 h". */
export function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return m % 60 ? `${hours} h ${m % 60} min` : `${hours} h`;
  const d = Math.floor(hours / 24);
  return hours % 24 ? `${d} d ${hours % 24} h` : `${d} d`;
}

/** Bytes in MiB (or KiB), one decimal. */
export function bytes(n) {
  if (!Number.isFinite(n)) return '—';
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** A local date and time for a tooltip. */
export function dateTime(iso) {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? '' : t.toLocaleString();
}

/**
 * Asks for a confirmation in the page's `<dialog id="confirm">`, with optional `choices`
 * (`[{value, label}]`, checkboxes, none checked); resolves false on Cancel or Escape and, when
 * the admin confirms, the Set of the values checked (truthy even when empty). Focus goes back
 * where it was.
 */
export function confirmDialog({ title, text, ok = 'Confirm', choices = [] }) {
  const dialog = document.getElementById('confirm');
  const back = document.activeElement;
  setText(dialog.querySelector('#confirm-title'), title);
  setText(dialog.querySelector('#confirm-text'), text);
  setText(dialog.querySelector('#confirm-ok'), ok);
  const box = dialog.querySelector('#confirm-choices');
  box.replaceChildren(
    ...choices.map(({ value, label }) =>
      h('label', { class: 'choice' }, h('input', { type: 'checkbox', value }), ' ', label),
    ),
  );
  box.hidden = choices.length === 0;
  dialog.returnValue = '';
  dialog.showModal();
  dialog.querySelector('#confirm-cancel').focus();
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        if (back?.isConnected) back.focus();
        if (dialog.returnValue !== 'ok') resolve(false);
        else resolve(new Set([...box.querySelectorAll('input:checked')].map((input) => input.value)));
      },
      { once: true },
    );
  });
}
