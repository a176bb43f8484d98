// The Companion side of the module: the connection's config, the actions, feedbacks, variables
// and presets, all on one PartylineClient (client.js, the network side) and the conditions of
// model.js.

import { InstanceBase, InstanceStatus } from '@companion-module/base'
import { PartylineClient } from './client.js'
import {
	BLINK_MS,
	COLOURS,
	TALK_STATES,
	feedbackValue,
	presetDefinitions,
	variableDefinitions,
	variableValues,
} from './model.js'

/**
 * @typedef {import('@companion-module/base').SomeCompanionConfigField} ConfigField
 * @typedef {import('@companion-module/base').SomeCompanionActionInputField} ActionField
 * @typedef {import('@companion-module/base').CompanionBooleanFeedbackDefinition} BooleanFeedback
 */

/** @type {import('@companion-module/base').CompanionStaticUpgradeScript<any>[]} */
export const UpgradeScripts = [
	// Drops `verifyTls`, a setting of earlier versions that could turn the TLS check off (the
	// certificate is pinned instead). A connection saved with the check off is checked, and its
	// status says to pin the certificate.
	(_context, { config }) => {
		if (!config || !('verifyTls' in config)) return { updatedConfig: null, updatedActions: [], updatedFeedbacks: [] }
		const { verifyTls: _verifyTls, ...updatedConfig } = config
		return { updatedConfig, updatedActions: [], updatedFeedbacks: [] }
	},
]

const STATUS = {
	connected: InstanceStatus.Ok,
	connecting: InstanceStatus.Connecting,
	retrying: InstanceStatus.ConnectionFailure,
	unknown_key: InstanceStatus.AuthenticationFailure,
	untrusted_certificate: InstanceStatus.BadConfig,
	stopped: InstanceStatus.Disconnected,
}

export default class PartylineInstance extends InstanceBase {
	async init(config, _isFirstInit, secrets) {
		this.blinkOn = true
		await this.configUpdated(config, secrets)
	}

	async configUpdated(config, secrets) {
		await this.#disconnect()
		// Defined again without lines, then with the lines of the first state heard.
		this.linesSeen = ''
		this.define()
		let client
		try {
			client = new PartylineClient({ url: config.url, key: secrets?.key, certificateSha256: config.certificateSha256 })
		} catch (error) {
			this.updateStatus(InstanceStatus.BadConfig, error.message)
			return
		}
		this.client = client
		client.on('status', ({ status, message }) => {
			if (client !== this.client) return
			this.updateStatus(STATUS[status] ?? InstanceStatus.UnknownWarning, message || null)
			if (message) this.log(status === 'connected' ? 'info' : 'warn', message)
		})
		client.on('change', () => this.#changed())
		client.start()
	}

	async destroy() {
		await this.#disconnect()
	}

	/** @returns {ConfigField[]} */
	getConfigFields() {
		return [
			{
				type: 'static-text',
				id: 'about',
				width: 12,
				label: 'A partyline panel',
				value:
					'Paste the panel link that the partyline panel shows under \u201cRemote control\u201d ' +
					'(https://host:8443/api/panel/\u2026): it carries the panel key. Or give the server\u2019s address here and the key below.',
			},
			{ type: 'textinput', id: 'url', label: 'Panel link or server URL', width: 12, default: 'https://localhost:8443' },
			{ type: 'secret-text', id: 'key', label: 'Panel key (when not in the link)', width: 12 },
			{
				type: 'textinput',
				id: 'certificateSha256',
				label: 'Server certificate SHA-256',
				description:
					'For partyline\u2019s own (self-signed) certificate: its SHA-256, shown in partyline\u2019s admin UI ' +
					'(Stats, \u201cTLS\u201d) and on the panel under \u201cRemote control\u201d. Only that certificate is ' +
					'then accepted. Empty: the certificate must be signed by an authority this computer trusts.',
				width: 12,
				default: '',
				// As the client takes it: nothing, or 64 hex digits with or without colons.
				regex: '/^\\s*$|^[\\s:]*(?:[0-9a-fA-F][\\s:]*){64}$/',
			},
		]
	}

	async #disconnect() {
		clearInterval(this.blinkTimer)
		this.blinkTimer = null
		const client = this.client
		this.client = null
		await client?.stop()
	}

	/** Actions, feedbacks, variables and presets for the lines known now. */
	define() {
		const panel = this.client?.panel
		const choices = (panel?.lines ?? []).map((l) => ({ id: l.groupId, label: l.name }))
		/** @type {ActionField} */
		const line = {
			type: 'dropdown',
			id: 'line',
			label: 'Line',
			choices,
			default: choices[0]?.id ?? '',
			allowCustom: true,
		}
		/** @type {ActionField} A person key's position (its panel's talkTo). */
		const position = {
			type: 'dropdown',
			id: 'position',
			label: 'Position',
			choices: (panel?.people?.keys ?? []).map((p) => ({ id: p.position, label: p.name })),
			default: panel?.people?.keys?.[0]?.position ?? '',
			allowCustom: true,
		}
		const run = (fn) => async (event) => {
			const client = this.client
			if (!client) return
			try {
				await fn(client, event.options)
			} catch (error) {
				this.log('warn', `${event.actionId} on ${event.options.line}: ${error.message}`)
			}
		}
		/** @type {ActionField} How a talk or announce key is worked: held (press, release) or latched. */
		const mode = {
			type: 'dropdown',
			id: 'mode',
			label: 'Mode',
			default: 'toggle',
			choices: [
				{ id: 'press', label: 'Press (hold until Release)' },
				{ id: 'release', label: 'Release' },
				{ id: 'toggle', label: 'Toggle (latch)' },
			],
		}
		this.setActionDefinitions({
			talk: {
				name: 'Talk',
				description: 'Press (held until release), release, or toggle (latch) the line\u2019s talk key',
				options: [line, mode],
				callback: run((client, o) => {
					if (o.mode === 'press') return client.talkPress(o.line)
					if (o.mode === 'release') return client.talkRelease(o.line)
					return client.talk(o.line, 'toggle')
				}),
			},
			announce: {
				name: 'Announce',
				description:
					'Press (held until release), release, or toggle (latch) the panel\u2019s announce key: every talk line at once',
				options: [mode],
				callback: run((client, o) => {
					if (o.mode === 'press') return client.announcePress()
					if (o.mode === 'release') return client.announceRelease()
					return client.announce('toggle')
				}),
			},
			person: {
				name: 'Person key',
				description:
					'Press (held until release), release, or toggle (latch) a person key: a direct line to whoever is at the position, opened on the first press',
				options: [position, mode],
				callback: run((client, o) => {
					const person = { position: o.position }
					if (o.mode === 'press') return client.personPress(person)
					if (o.mode === 'release') return client.personRelease(person)
					return client.person(person, 'toggle')
				}),
			},
			reply: {
				name: 'Reply',
				description:
					'Press (held until release), release, or toggle (latch) the reply key: talks to whoever last spoke to the panel on a direct line',
				options: [mode],
				callback: run((client, o) => {
					if (o.mode === 'press') return client.replyPress()
					if (o.mode === 'release') return client.replyRelease()
					return client.reply('toggle')
				}),
			},
			listen: {
				name: 'Listen',
				options: [line, onOff('state')],
				callback: run((client, o) => client.listen(o.line, o.state)),
			},
			volume_set: {
				name: 'Volume: set',
				options: [line, { type: 'number', id: 'value', label: 'Volume', default: 80, min: 0, max: 100, range: true }],
				callback: run((client, o) => client.volume(o.line, o.value)),
			},
			volume_step: {
				name: 'Volume: step',
				options: [line, { type: 'number', id: 'delta', label: 'Step', default: 10, min: -100, max: 100 }],
				callback: run((client, o) => client.volumeStep(o.line, o.delta)),
			},
			call: {
				name: 'Call',
				description: 'Flash the line on every panel on it, as the panel\u2019s Call button',
				options: [line],
				callback: run((client, o) => client.call(o.line)),
			},
		})
		/** @returns {BooleanFeedback} */
		const flag = (name, description, options, bgcolor, color = COLOURS.white) => ({
			type: 'boolean',
			name,
			description,
			options,
			defaultStyle: { bgcolor, color },
			callback: (feedback) =>
				this.client ? feedbackValue(this.client, feedback.feedbackId, feedback.options, this.blinkOn) : false,
		})
		this.setFeedbackDefinitions({
			talk: flag(
				'Talk key',
				'The line\u2019s talk key is on',
				[line, { type: 'dropdown', id: 'state', label: 'State', default: 'on', choices: TALK_STATES }],
				COLOURS.talk,
			),
			announcing: flag('Announcing', 'Every talk line of the panel talks (its announce key is on)', [], COLOURS.talk),
			person_talk: flag('Person key talking', 'The person key\u2019s direct line talks', [position], COLOURS.talk),
			person_online: flag('Person online', 'Someone is at the person key\u2019s position', [position], COLOURS.listen),
			reply: flag(
				'Reply',
				'The reply key reaches someone (with \u201ctalking\u201d: and talks now)',
				[{ type: 'checkbox', id: 'talking', label: 'Talking', default: false }],
				COLOURS.listen,
			),
			active: flag('Line active', 'Someone is talking on the line', [line], COLOURS.active, COLOURS.black),
			listening: flag('Listening', 'The line\u2019s listen switch is on', [line], COLOURS.listen),
			calling: flag('Call', 'The line is being called (flashes)', [line], COLOURS.call),
			connected: flag('Connected', 'Connected to partyline, and the panel is online', [], COLOURS.ok),
		})
		this.setVariableDefinitions(variableDefinitions(panel))
		const { structure, presets } = presetDefinitions(panel, this.label)
		// `grid` is model.js's own (the layout of the rendered presets), not Companion's.
		const forCompanion = Object.fromEntries(Object.entries(presets).map(([id, { grid: _grid, ...p }]) => [id, p]))
		this.setPresetDefinitions(structure, forCompanion)
	}

	#changed() {
		const client = this.client
		if (!client) return
		// New or renamed lines: new choices, variables and presets.
		const lines = JSON.stringify([
			client.panel?.lines.map((l) => [l.groupId, l.name]) ?? [],
			client.panel?.people?.keys.map((p) => [p.position, p.name]) ?? [],
		])
		if (lines !== this.linesSeen) {
			this.linesSeen = lines
			this.define()
		}
		this.setVariableValues(variableValues(client))
		// A calling line flashes: its feedback is checked on every blink while any line calls.
		const anyCall = client.panel?.lines.some((l) => client.calling(l.groupId)) ?? false
		if (anyCall && !this.blinkTimer) {
			this.blinkTimer = setInterval(() => {
				this.blinkOn = !this.blinkOn
				this.checkFeedbacks('calling')
			}, BLINK_MS)
		} else if (!anyCall && this.blinkTimer) {
			clearInterval(this.blinkTimer)
			this.blinkTimer = null
			this.blinkOn = true
		}
		this.checkAllFeedbacks()
	}
}

/** @returns {ActionField} */
function onOff(id) {
	return {
		type: 'dropdown',
		id,
		label: 'State',
		default: 'toggle',
		choices: [
			{ id: 'toggle', label: 'Toggle' },
			{ id: 'on', label: 'On' },
			{ id: 'off', label: 'Off' },
		],
	}
}
