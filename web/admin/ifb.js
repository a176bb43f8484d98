// The IFB fields of the server-audio-user forms. An IFB output feeds a presenter's earpiece: it
// plays a program (a card input, or a group's sound) that dips while the interrupt group talks,
// with that talk over it (`ifb` of `/server-users`: {program, interrupt, dimDb}).

import { h, setOptions } from '/admin/dom.js';
import * as groups from '/admin/groups.js';

const DIPS = [-6, -10, -14, -20, -30, -40, -60];
const DEFAULT_DIP = -20;

/** How a program reads in a select's value: `in:N` for a card input, `group:ID` for a group. */
const programValue = (program) => (typeof program === 'number' ? `in:${program}` : `group:${program}`);

/** The dip as the row shows it. */
const dipLabel = (dimDb) => (dimDb === 'cut' ? 'cut' : `${String(dimDb).replace('-', '−')} dB`);

/**
 * The fields for a form whose controls' ids start with `id`, showing `ifb` (null: none).
 * `inputLabel(i)` names card input i. `sync()` refreshes the choices (groups and channel
 * names change), `read()` gives the API's `ifb` (null when the box is off).
 */
export function ifbFields(id, ifb, inputLabel) {
  const on = h('input', {
    id: `${id}-ifb`,
    type: 'checkbox',
    checked: Boolean(ifb),
    'aria-describedby': `${id}-ifb-hint`,
  });
  const program = h('select', { id: `${id}-ifb-program` });
  const interrupt = h('select', { id: `${id}-ifb-interrupt` });
  const dip = h('select', { id: `${id}-ifb-dip` });
  const field = (label, control) => h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
  const details = h(
    'div',
    { class: 'form-grid ifb-fields', hidden: !ifb },
    field('Program', program),
    field('Interrupted by', interrupt),
    field('Program under talk', dip),
  );
  on.addEventListener('change', () => {
    details.hidden = !on.checked;
  });
  const element = h(
    'div',
    { class: 'field ifb' },
    h('label', { class: 'toggle toggle-inline', for: on.id }, on, ' ', h('span', {}, 'IFB on the output')),
    h(
      'p',
      { id: `${id}-ifb-hint`, class: 'field-hint' },
      "For a presenter's earpiece: the output plays the program, which dips while the interrupt group talks.",
    ),
    details,
  );

  function sync() {
    const list = groups.current();
    const keep = (select, fill) => {
      const value = select.value;
      fill();
      if ([...select.options].some((o) => o.value === value)) select.value = value;
    };
    keep(program, () =>
      setOptions(program, [
        ...Array.from({ length: 8 }, (_, i) => ({ value: `in:${i}`, label: `Input ${inputLabel(i)}` })),
        ...list.map((g) => ({ value: `group:${g.id}`, label: `Group ${g.name}` })),
      ]),
    );
    keep(interrupt, () =>
      setOptions(
        interrupt,
        list.map((g) => ({ value: g.id, label: g.name })),
      ),
    );
    const dips =
      ifb && ifb.dimDb !== 'cut' && !DIPS.includes(ifb.dimDb) ? [...DIPS, ifb.dimDb].sort((a, b) => b - a) : DIPS;
    keep(dip, () =>
      setOptions(dip, [...dips.map((d) => ({ value: d, label: dipLabel(d) })), { value: 'cut', label: 'Cut' }]),
    );
  }

  function read() {
    if (!on.checked) return null;
    const [kind, value] = program.value.split(/:(.*)/s);
    return {
      program: kind === 'in' ? Number(value) : value,
      interrupt: interrupt.value,
      dimDb: dip.value === 'cut' ? 'cut' : Number(dip.value),
    };
  }

  function show(next) {
    on.checked = Boolean(next);
    details.hidden = !next;
    program.value = next ? programValue(next.program) : 'in:0';
    interrupt.value = next?.interrupt ?? interrupt.options[0]?.value ?? '';
    dip.value = String(next?.dimDb ?? DEFAULT_DIP);
  }

  sync();
  show(ifb);
  return { element, sync, read, reset: () => show(null) };
}

/** One line for a row: what the IFB plays, who interrupts it, and the dip. */
export function ifbSummary(ifb, inputLabel) {
  const program = typeof ifb.program === 'number' ? `input ${inputLabel(ifb.program)}` : groups.nameOf(ifb.program);
  return `IFB: ${program}, under ${groups.nameOf(ifb.interrupt)} (${dipLabel(ifb.dimDb)})`;
}
