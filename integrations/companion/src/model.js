// What the module's buttons show, from a PartylineClient: the feedbacks' conditions, the
// variables and the presets. Plain data and functions, no Companion import: the glue
// (main.js) hands them to Companion, and partyline's browser tests evaluate the very same
// functions (and draw the presets) against the real server.

// Types only (JSDoc, for `npm run typecheck`): nothing of Companion is loaded here.
/**
 * @typedef {import('@companion-module/base').CompanionButtonStyleProps} Style
 * @typedef {import('@companion-module/base').CompanionSimplePresetDefinition & { grid: [number, number] }} Preset
 * @typedef {import('@companion-module/base').CompanionPresetSection} Section
 */

/** A Companion colour number (as `combineRgb` of @companion-module/base makes it). */
export const rgb = (r, g, b) => ((r & 0xff) << 16) | ((g & 0xff) << 8) | (b & 0xff)

export const COLOURS = {
	black: rgb(0, 0, 0),
	white: rgb(255, 255, 255),
	idle: rgb(40, 40, 40),
	talk: rgb(204, 0, 0),
	latched: rgb(230, 110, 0),
	listen: rgb(0, 110, 40),
	active: rgb(240, 200, 0),
	call: rgb(0, 90, 220),
	ok: rgb(0, 140, 60),
	down: rgb(120, 0, 0),
}

/** How often a calling line's keys flash (on and off in turn). */
export const BLINK_MS = 400

/** The `talk` states of a line that the talk feedback can look for. */
export const TALK_STATES = [
	{ id: 'on', label: 'On (any way)' },
	{ id: 'momentary', label: 'Held on the panel' },
	{ id: 'latched', label: 'Latched' },
	{ id: 'remote', label: 'Held by a surface' },
]

/** The talk key of the line is in `which` state (`on`: any but off). */
export function talkIs(client, groupId, which = 'on') {
	const talk = client.line(groupId)?.talk
	if (!talk) return false
	return which === 'on' ? talk !== 'off' : talk === which
}

/** Someone is talking on the line. */
export const lineActive = (client, groupId) => client.line(groupId)?.active === true

/** The line's listen switch is on. */
export const listening = (client, groupId) => client.line(groupId)?.listen === true

/** The line is being called, in the flash's on phase (`blinkOn`). */
export const callFlashing = (client, groupId, blinkOn) => blinkOn && client.calling(groupId)

/** The panel's announce is on: every talk line the admin does not hold talks. */
export const announcing = (client) => client.panel?.announcing === true

/** The talk key of a person key's direct line is on (`position`: the key's position). */
export function personTalking(client, position) {
	const groupId = client.personOf({ position })?.groupId
	return groupId ? talkIs(client, groupId, 'on') : false
}

/** Someone is online for a person key. */
export const personOnline = (client, position) => Boolean(client.personOf({ position })?.identity)

/** The reply key reaches someone; with `talking`, its line's talk key is on. */
export function replyIs(client, talking = false) {
	const reply = client.replyTo
	return reply ? !talking || talkIs(client, reply.groupId, 'on') : false
}

/** The stream is open and the panel connected. */
export const connected = (client) => client.connected

/** A line's id as it may stand in a variable's name. */
export const varId = (groupId) => String(groupId).replace(/[^A-Za-z0-9_]/g, '_')

/** The variables' definitions for the panel's lines: `{ id: { name } }`. */
export function variableDefinitions(panel) {
	const defs = {
		username: { name: 'The panel\u2019s user' },
		status: { name: 'Connection: connected, connecting, retrying, unknown_key, stopped' },
		reply_to: { name: 'Whom the reply key reaches (empty: nobody)' },
	}
	for (const person of panel?.people?.keys ?? []) {
		defs[`person_${varId(person.position)}`] = { name: `${person.name}: who is at the position (empty: nobody)` }
	}
	for (const line of panel?.lines ?? []) {
		const id = varId(line.groupId)
		defs[`talkers_${id}`] = { name: `${line.name}: who is talking (comma-separated)` }
		defs[`talk_${id}`] = { name: `${line.name}: talk key (off, momentary, latched, remote)` }
		defs[`volume_${id}`] = { name: `${line.name}: volume (0\u2013100)` }
		defs[`name_${id}`] = { name: `${line.name}: the line\u2019s name` }
		if (line.program) defs[`dimmed_${id}`] = { name: `${line.name}: program line dimmed now (true, false)` }
	}
	return defs
}

/** The variables' values now. */
export function variableValues(client) {
	const values = { username: client.panel?.username ?? '', status: client.status, reply_to: client.replyTo?.name ?? '' }
	for (const person of client.panel?.people?.keys ?? []) {
		values[`person_${varId(person.position)}`] = person.who ?? ''
	}
	for (const line of client.panel?.lines ?? []) {
		const id = varId(line.groupId)
		values[`talkers_${id}`] = line.talkers.join(', ')
		values[`talk_${id}`] = line.talk
		values[`volume_${id}`] = line.volume
		values[`name_${id}`] = line.name
		if (line.program) values[`dimmed_${id}`] = line.dimmed
	}
	return values
}

/**
 * The presets: a status key (and the announce keys, on a panel with one; a person key per
 * position of its talkTo and the reply keys, on a panel with person keys), then per line its name with who talks, talk (hold), talk (latch),
 * listen, volume down and up, and call. `label` is the connection's label in Companion (the
 * prefix of its variables). Returns `{ structure, presets }` for setPresetDefinitions; each
 * preset's `grid` is its place in the layout (row, column).
 */
export function presetDefinitions(panel, label) {
	const v = (name) => `$(${label}:${name})`
	/** @type {Record<string, Preset>} */
	const presets = {
		status: {
			type: 'simple',
			name: 'Connection',
			grid: [0, 0],
			style: key(`partyline\\n${v('username')}`, COLOURS.white, COLOURS.down, '14'),
			steps: [{ down: [], up: [] }],
			feedbacks: [{ feedbackId: 'connected', options: {}, style: { bgcolor: COLOURS.ok } }],
		},
	}
	if (panel?.announce) {
		const on = [{ feedbackId: 'announcing', options: {}, style: { bgcolor: COLOURS.talk } }]
		presets.announce = {
			type: 'simple',
			name: 'Announce (hold)',
			grid: [0, 1],
			style: key('ANNOUNCE', COLOURS.white, COLOURS.idle),
			steps: [
				{
					down: [{ actionId: 'announce', options: { mode: 'press' } }],
					up: [{ actionId: 'announce', options: { mode: 'release' } }],
				},
			],
			feedbacks: on,
		}
		presets.announce_latch = {
			type: 'simple',
			name: 'Announce (latch)',
			grid: [0, 2],
			style: key('ANNOUNCE\\nlatch', COLOURS.white, COLOURS.idle, '14'),
			steps: [{ down: [{ actionId: 'announce', options: { mode: 'toggle' } }], up: [] }],
			feedbacks: on,
		}
	}
	// The people: a person key (hold) per position of the panel's talkTo, and reply (hold, latch).
	const people = panel?.people?.keys ?? []
	for (const [column, person] of people.entries()) {
		const position = person.position
		presets[`person_${varId(position)}`] = {
			type: 'simple',
			name: `Talk to ${person.name} (hold)`,
			grid: [0, 3 + column],
			style: key(`TO ${person.name}\n${v(`person_${varId(position)}`)}`, COLOURS.white, COLOURS.idle, '14'),
			steps: [
				{
					down: [{ actionId: 'person', options: { position, mode: 'press' } }],
					up: [{ actionId: 'person', options: { position, mode: 'release' } }],
				},
			],
			feedbacks: [
				{ feedbackId: 'person_online', options: { position }, style: { bgcolor: COLOURS.listen } },
				{ feedbackId: 'person_talk', options: { position }, style: { bgcolor: COLOURS.talk } },
			],
		}
	}
	if (people.length > 0 || panel?.people?.directCalls === 'all') {
		const reachable = [{ feedbackId: 'reply', options: { talking: false }, style: { bgcolor: COLOURS.listen } }]
		const talking = [{ feedbackId: 'reply', options: { talking: true }, style: { bgcolor: COLOURS.talk } }]
		presets.reply = {
			type: 'simple',
			name: 'Reply (hold)',
			grid: [0, 3 + people.length],
			style: key(`REPLY\n${v('reply_to')}`, COLOURS.white, COLOURS.idle, '14'),
			steps: [
				{
					down: [{ actionId: 'reply', options: { mode: 'press' } }],
					up: [{ actionId: 'reply', options: { mode: 'release' } }],
				},
			],
			feedbacks: [...reachable, ...talking],
		}
		presets.reply_latch = {
			type: 'simple',
			name: 'Reply (latch)',
			grid: [0, 4 + people.length],
			style: key(`REPLY\nlatch`, COLOURS.white, COLOURS.idle, '14'),
			steps: [{ down: [{ actionId: 'reply', options: { mode: 'toggle' } }], up: [] }],
			feedbacks: [...reachable, ...talking],
		}
	}
	/** @type {Section[]} */
	const sections = [{ id: 'panel', name: 'Panel', definitions: Object.keys(presets) }]
	// A direct line comes and goes: its keys are the person keys and reply, not presets of its own.
	for (const [row, line] of (panel?.lines ?? []).filter((l) => !l.directWith).entries()) {
		const g = line.groupId
		const id = varId(g)
		const on = { line: g }
		/** @type {Record<string, Omit<Preset, 'type' | 'grid'>>} */
		const defs = {
			[`line_${id}`]: {
				name: `${line.name}: who is talking`,
				style: key(`${line.name}\\n${v(`talkers_${id}`)}`, COLOURS.white, COLOURS.black, '14'),
				steps: [{ down: [], up: [] }],
				feedbacks: [{ feedbackId: 'active', options: on, style: { bgcolor: COLOURS.active, color: COLOURS.black } }],
			},
			[`talk_${id}`]: {
				name: `${line.name}: talk (hold)`,
				style: key(`TALK\\n${line.name}`, COLOURS.white, COLOURS.idle),
				steps: [
					{
						down: [{ actionId: 'talk', options: { line: g, mode: 'press' } }],
						up: [{ actionId: 'talk', options: { line: g, mode: 'release' } }],
					},
				],
				feedbacks: talkFeedbacks(on),
			},
			[`latch_${id}`]: {
				name: `${line.name}: talk (latch)`,
				style: key(`LATCH\\n${line.name}`, COLOURS.white, COLOURS.idle),
				steps: [{ down: [{ actionId: 'talk', options: { line: g, mode: 'toggle' } }], up: [] }],
				feedbacks: talkFeedbacks(on),
			},
			[`listen_${id}`]: {
				name: `${line.name}: listen on/off`,
				style: key(`LISTEN\\n${line.name}`, COLOURS.white, COLOURS.idle),
				steps: [{ down: [{ actionId: 'listen', options: { line: g, state: 'toggle' } }], up: [] }],
				feedbacks: [{ feedbackId: 'listening', options: on, style: { bgcolor: COLOURS.listen } }],
			},
			[`voldown_${id}`]: {
				name: `${line.name}: volume down`,
				style: key(`VOL \u2212\\n${v(`volume_${id}`)}`, COLOURS.white, COLOURS.idle),
				steps: [{ down: [{ actionId: 'volume_step', options: { line: g, delta: -10 } }], up: [] }],
				feedbacks: [],
			},
			[`volup_${id}`]: {
				name: `${line.name}: volume up`,
				style: key(`VOL +\\n${v(`volume_${id}`)}`, COLOURS.white, COLOURS.idle),
				steps: [{ down: [{ actionId: 'volume_step', options: { line: g, delta: 10 } }], up: [] }],
				feedbacks: [],
			},
			[`call_${id}`]: {
				name: `${line.name}: call`,
				style: key(`CALL\\n${line.name}`, COLOURS.white, COLOURS.idle),
				steps: [{ down: [{ actionId: 'call', options: { line: g } }], up: [] }],
				feedbacks: [{ feedbackId: 'calling', options: on, style: { bgcolor: COLOURS.call } }],
			},
		}
		for (const [column, [presetId, preset]] of Object.entries(defs).entries()) {
			presets[presetId] = { type: 'simple', grid: [row + 1, column], ...preset }
		}
		sections.push({ id: `line_${id}`, name: line.name, definitions: Object.keys(defs) })
	}
	return { structure: sections, presets }
}

/** @returns {Preset['feedbacks']} */
function talkFeedbacks(on) {
	return [
		{ feedbackId: 'talk', options: { ...on, state: 'latched' }, style: { bgcolor: COLOURS.latched } },
		{ feedbackId: 'talk', options: { ...on, state: 'momentary' }, style: { bgcolor: COLOURS.talk } },
		{ feedbackId: 'talk', options: { ...on, state: 'remote' }, style: { bgcolor: COLOURS.talk } },
	]
}

/**
 * @param {string} text
 * @param {number} color
 * @param {number} bgcolor
 * @param {Style['size']} size
 * @returns {Style}
 */
function key(text, color, bgcolor, size = '18') {
	return { text, size, color, bgcolor, alignment: 'center:center' }
}

/**
 * A boolean feedback's condition, by its id and options: the glue's feedback callbacks and
 * the presets' drawing in the tests both ask this.
 */
export function feedbackValue(client, feedbackId, options, blinkOn) {
	switch (feedbackId) {
		case 'talk':
			return talkIs(client, options.line, options.state)
		case 'active':
			return lineActive(client, options.line)
		case 'listening':
			return listening(client, options.line)
		case 'calling':
			return callFlashing(client, options.line, blinkOn)
		case 'announcing':
			return announcing(client)
		case 'person_talk':
			return personTalking(client, options.position)
		case 'person_online':
			return personOnline(client, options.position)
		case 'reply':
			return replyIs(client, options.talking === true)
		case 'connected':
			return connected(client)
		default:
			return false
	}
}

/**
 * A preset's button as Companion would show it now: its style with each true feedback's
 * style laid over it in order, and the variables in its text replaced by their values.
 */
export function buttonNow(client, preset, label, blinkOn = true) {
	const style = { ...preset.style }
	for (const feedback of preset.feedbacks) {
		if (feedbackValue(client, feedback.feedbackId, feedback.options, blinkOn)) Object.assign(style, feedback.style)
	}
	const values = variableValues(client)
	style.text = style.text
		.replaceAll(`$(${label}:`, '$(')
		.replace(/\$\(([A-Za-z0-9_]+)\)/g, (_, name) => String(values[name] ?? ''))
		.replaceAll('\\n', '\n')
	return style
}
