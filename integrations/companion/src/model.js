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

/** The stream is open and the panel connected. */
export const connected = (client) => client.connected

/** A line's id as it may stand in a variable's name. */
export const varId = (groupId) => String(groupId).replace(/[^A-Za-z0-9_]/g, '_')

/** The variables' definitions for the panel's lines: `{ id: { name } }`. */
export function variableDefinitions(panel) {
	const defs = {
		username: { name: 'The panel\u2019s user' },
		status: { name: 'Connection: connected, connecting, retrying, unknown_key, stopped' },
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
	const values = { username: client.panel?.username ?? '', status: client.status }
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
 * The presets: a status key (and the announce keys, on a panel with one), then per line its name with who talks, talk (hold), talk (latch),
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
	/** @type {Section[]} */
	const sections = [{ id: 'panel', name: 'Panel', definitions: Object.keys(presets) }]
	for (const [row, line] of (panel?.lines ?? []).entries()) {
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
