// The network side of the module: one partyline panel, worked through its panel key
// (`/api/panel/{key}`, see partyline's docs/api.md, "Remote control of a panel"). Plain Node, no
// Companion import, so that partyline's browser tests drive this very class against the real
// server.
//
// It follows the panel's event stream (Server-Sent Events) and reconnects with a growing delay
// when the stream fails or ends, sends the commands and, while a talk key is held through it,
// keeps talking to the server: control lets a surface's talk go after
// `maxRemoteTalkSeconds` without a request with the key, so that a crashed surface never
// leaves a live microphone.

import { EventEmitter } from 'node:events'
import { TLSSocket } from 'node:tls'
import { createParser } from 'eventsource-parser'
import { Agent, buildConnector, fetch } from 'undici'

/** How long a call flashes a line (the panels' own call lasts 5 s). */
export const CALL_MS = 5000

/** Where a user finds the SHA-256 of partyline's certificate, for the messages. */
const WHERE_SHOWN =
	'partyline shows it in its admin UI (Stats, \u201cTLS\u201d) and on the panel under \u201cRemote control\u201d'

/** The error code of a server certificate that is not the one pinned. */
const NOT_PINNED = 'CERT_NOT_PINNED'

/** Why a TLS connection refused the server's certificate (OpenSSL's and Node's codes). */
const CERTIFICATE_ERRORS = new Set([
	'DEPTH_ZERO_SELF_SIGNED_CERT',
	'SELF_SIGNED_CERT_IN_CHAIN',
	'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
	'UNABLE_TO_GET_ISSUER_CERT',
	'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
	'CERT_HAS_EXPIRED',
	'CERT_NOT_YET_VALID',
	'ERR_TLS_CERT_ALTNAME_INVALID',
])

/** A refused or failed request: `status` (HTTP, 0 for none) and partyline's error `code`. */
export class PanelError extends Error {
	/**
	 * @param {string} message
	 * @param {{ status?: number, code?: string, cause?: unknown }} [details]
	 */
	constructor(message, { status = 0, code = 'unreachable', cause } = {}) {
		super(message, { cause })
		this.name = 'PanelError'
		this.status = status
		this.code = code
	}
}

/**
 * A certificate's SHA-256 as Node and the browsers show it (`AB:CD:…`) from what a user pastes:
 * with or without colons, any case. Throws a PanelError (`bad_config`) unless it is 64 hex
 * digits.
 */
export function certificateFingerprint(text) {
	const hex = String(text).replace(/[\s:]/g, '')
	if (!/^[0-9a-f]{64}$/i.test(hex)) {
		throw new PanelError(`not a SHA-256 fingerprint (64 hex digits): "${text}"`, { code: 'bad_config' })
	}
	return hex.toUpperCase().match(/../g).join(':')
}

/**
 * The panel's API root from what a user pastes: the panel link the panel shows
 * (`https://host:8443/api/panel/KEY`, key included), or the server's address and the key apart.
 * Throws a PanelError (`bad_config`) when neither gives both.
 */
export function panelBase(url, key = '') {
	let parsed
	try {
		parsed = new URL(String(url).trim())
	} catch {
		throw new PanelError(`not a URL: "${url}"`, { code: 'bad_config' })
	}
	if (!['http:', 'https:'].includes(parsed.protocol)) {
		throw new PanelError(`not an http(s) URL: "${url}"`, { code: 'bad_config' })
	}
	const inLink = parsed.pathname.match(/\/api\/panel\/([^/]+)\/?$/)
	const chosen = String(key).trim() || inLink?.[1]
	if (!chosen) throw new PanelError('no panel key: paste the panel link or give the key', { code: 'bad_config' })
	const root = inLink ? parsed.pathname.slice(0, inLink.index) : parsed.pathname.replace(/\/+$/, '')
	return `${parsed.origin}${root}/api/panel/${encodeURIComponent(chosen)}`
}

/**
 * One panel seen and worked through its key.
 *
 * Events: `change` (anything a button shows changed: the panel, a call starting or ending, the
 * connection), `state` (the panel, as the server sent it), `call` (a call on one of its lines:
 * `{groupId, from, identity, at}`), `status` (`{status, message}`, see `status`).
 */
export class PartylineClient extends EventEmitter {
	/**
	 * `url` and `key`: see panelBase. `certificateSha256`: the SHA-256 of the server's TLS
	 * certificate (see certificateFingerprint); given, the client accepts exactly that certificate
	 * (partyline's own self-signed one included) and no other; empty, the server's certificate
	 * must be valid for the system's certificate authorities. `retry`: the reconnect delays,
	 * doubling from `firstMs` to `maxMs`. `silenceMs`: a stream with nothing (not even the
	 * server's keep-alive comments) for that long is taken as dead and reopened.
	 */
	constructor({
		url,
		key,
		certificateSha256 = '',
		retry = { firstMs: 250, maxMs: 10_000 },
		silenceMs = 45_000,
		timeoutMs = 5000,
	}) {
		super()
		this.base = panelBase(url, key)
		const pinned = String(certificateSha256 ?? '').trim() ? certificateFingerprint(certificateSha256) : null
		if (pinned && !this.base.startsWith('https:')) {
			throw new PanelError('a certificate SHA-256 is for an https:// server', { code: 'bad_config' })
		}
		this.retry = retry
		this.silenceMs = silenceMs
		this.timeoutMs = timeoutMs
		// One pool for the stream and the commands.
		this.dispatcher = pinned ? pinnedAgent(pinned) : new Agent()
		/** The panel as last heard (`GET /api/panel/{key}`'s shape), or null. */
		this.panel = null
		/**
		 * `connecting`, `connected` (stream open, panel heard), `retrying`, `unknown_key`,
		 * `untrusted_certificate` (the server's certificate refused), `stopped`.
		 */
		this.status = 'stopped'
		this.message = ''
		this.calls = new Map() // groupId → end of its flash (ms, performance.now())
		this.callTimers = new Map()
		this.callStarts = new Map() // groupId → when its last flash started
		this.held = new Map() // groupId → true while a press through this client holds its talk
		this.holdTimer = null
		this.stopped = true
	}

	/** Opens the event stream (and keeps it open until `stop`). */
	start() {
		if (!this.stopped) return
		this.stopped = false
		this.#setStatus('connecting', '')
		this.running = this.#follow()
	}

	/** Closes the stream, stops every timer; a held talk is let go. */
	async stop() {
		if (this.stopped) return
		this.stopped = true
		const held = [...this.held.keys()]
		this.held.clear()
		this.#holdCheck()
		this.abort?.abort()
		this.wake?.()
		for (const timer of this.callTimers.values()) clearTimeout(timer)
		this.callTimers.clear()
		await Promise.allSettled(held.map((group) => this.#command(group, 'talk', { state: 'off' })))
		await this.running
		this.#setStatus('stopped', '')
		await this.dispatcher.close()
	}

	/** The stream is open and the panel connected: commands can be applied. */
	get connected() {
		return this.status === 'connected' && this.panel?.online === true
	}

	/** A line of the panel as last heard, or undefined. */
	line(groupId) {
		return this.panel?.lines.find((l) => l.groupId === groupId)
	}

	/** The line was called in the last CALL_MS. */
	calling(groupId) {
		return (this.calls.get(groupId) ?? 0) > performance.now()
	}

	/** `GET /api/panel/{key}`: the panel (also kept as `panel`). */
	async refresh() {
		const panel = await this.#request('GET', '')
		this.#takePanel(panel)
		return panel
	}

	/**
	 * Holds the line's talk key, as a finger on a panel's key: `on`, and requests every third of
	 * the server's `maxRemoteTalkSeconds` until `talkRelease`. Resolves with the line.
	 */
	async talkPress(groupId) {
		const line = await this.#command(groupId, 'talk', { state: 'on' })
		// A key the panel had on already (a latch) stays as it is on release: the press did not make it.
		if (line.talk === 'remote') {
			this.held.set(groupId, true)
			this.#holdCheck()
		}
		return line
	}

	/** Lets go of a talk key held by `talkPress`; a key the press found on is left as it is. */
	async talkRelease(groupId) {
		if (!this.held.delete(groupId)) return this.line(groupId)
		this.#holdCheck()
		return this.#command(groupId, 'talk', { state: 'off' })
	}

	/** `on`, `off` or `toggle` (a latch) of the line's talk key. */
	talk(groupId, state) {
		this.held.delete(groupId)
		this.#holdCheck()
		return this.#command(groupId, 'talk', { state })
	}

	/**
	 * Holds the panel's announce key (a panel that has one): every talk line the admin does not
	 * hold goes `on`, kept as `talkPress` keeps a line, until `announceRelease`. Resolves with the
	 * panel.
	 */
	async announcePress() {
		const before = new Set(this.panel?.lines.filter((l) => l.talk !== 'off').map((l) => l.groupId))
		const panel = await this.#announce('on')
		// Released: the lines this press turned on (a latch found on stays as it is).
		this.announceHeld = panel.lines.filter((l) => l.talk === 'remote' && !before.has(l.groupId)).map((l) => l.groupId)
		for (const group of this.announceHeld) this.held.set(group, true)
		this.#holdCheck()
		return panel
	}

	/** Lets go of the lines `announcePress` turned on. */
	async announceRelease() {
		const held = this.announceHeld ?? []
		this.announceHeld = null
		for (const group of held) this.held.delete(group)
		this.#holdCheck()
		await Promise.all(held.map((group) => this.#command(group, 'talk', { state: 'off' })))
		return this.panel
	}

	/** `on`, `off` or `toggle` of the announce key (`toggle`: a latch, or all off when all talk). */
	announce(state) {
		return this.#announce(state)
	}

	async #announce(state) {
		const panel = await this.#request('POST', '/announce', { state })
		this.#takePanel(panel)
		return panel
	}

	/**
	 * Holds a person key (a position of the panel's `talkTo`, or with `crew.directCalls: all`
	 * a crew member online by `{ identity }`): opens the direct line to that person when none is
	 * open, then holds its talk key as `talkPress` holds a line's, until `personRelease`.
	 * Resolves with the direct line.
	 */
	async personPress(person) {
		const line = await this.#person(person, 'on')
		if (line.talk === 'remote') {
			this.held.set(line.groupId, true)
			this.#holdCheck()
		}
		return line
	}

	/** Lets go of a person key held by `personPress`. */
	personRelease(person) {
		const groupId = this.#personLine(person)?.groupId
		return groupId ? this.talkRelease(groupId) : Promise.resolve(undefined)
	}

	/** `on`, `off` or `toggle` (a latch) of a person key. */
	person(person, state) {
		const groupId = this.#personLine(person)?.groupId
		if (groupId) this.held.delete(groupId)
		this.#holdCheck()
		return this.#person(person, state)
	}

	/** The person of a person key, as the panel's people list it (`{ position }` or `{ identity }`). */
	personOf(person) {
		const people = this.panel?.people
		const all = [...(people?.keys ?? []), ...(people?.online ?? [])]
		return all.find((p) => (person.position ? p.position === person.position : p.identity === person.identity))
	}

	#personLine(person) {
		const groupId = this.personOf(person)?.groupId
		return groupId ? this.line(groupId) : undefined
	}

	async #person(person, state) {
		const to = person.position ? { position: person.position } : { identity: person.identity }
		const line = await this.#request('POST', '/direct', { ...to, state })
		if (this.panel && line?.groupId) {
			const known = this.panel.lines.some((l) => l.groupId === line.groupId)
			const lines = known
				? this.panel.lines.map((l) => (l.groupId === line.groupId ? line : l))
				: [...this.panel.lines, line]
			this.#takePanel({ ...this.panel, lines })
		}
		return line
	}

	/** The direct line the reply key talks on (whoever last spoke to the panel on one), or null. */
	get replyTo() {
		return this.panel?.people?.reply ?? null
	}

	/** Holds the reply key, as `talkPress` holds a line, until `replyRelease`. Resolves with the line. */
	async replyPress() {
		const line = await this.#request('POST', '/reply', { state: 'on' })
		// Released on the line it pressed, whoever speaks to the panel meanwhile.
		this.replyHeld = line?.groupId
		if (line?.talk === 'remote') {
			this.held.set(line.groupId, true)
			this.#holdCheck()
		}
		return line
	}

	/** Lets go of the reply key held by `replyPress`. */
	replyRelease() {
		const groupId = this.replyHeld
		this.replyHeld = null
		return groupId ? this.talkRelease(groupId) : Promise.resolve(undefined)
	}

	/** `on`, `off` or `toggle` (a latch) of the reply key. */
	reply(state) {
		return this.#request('POST', '/reply', { state })
	}

	/** `on`, `off` or `toggle` of the line's listen switch. */
	listen(groupId, state) {
		return this.#command(groupId, 'listen', { state })
	}

	/** The line's volume, 0–100. */
	volume(groupId, value) {
		return this.#command(groupId, 'volume', { value: clampVolume(value) })
	}

	/** The line's volume moved by `delta` from its last known value (clamped to 0–100). */
	volumeStep(groupId, delta) {
		const now = this.line(groupId)?.volume
		if (now === undefined)
			return Promise.reject(new PanelError(`no line "${groupId}" on the panel`, { code: 'not_found', status: 404 }))
		return this.volume(groupId, now + Number(delta))
	}

	/** Calls the line, as the panel's Call button. */
	call(groupId) {
		return this.#command(groupId, 'call')
	}

	async #command(groupId, action, body) {
		const line = await this.#request('POST', `/lines/${encodeURIComponent(groupId)}/${action}`, body)
		// The answer is the line as the panel now reports it: shown at once, the stream follows.
		if (this.panel && line?.groupId) {
			const lines = this.panel.lines.map((l) => (l.groupId === line.groupId ? line : l))
			this.#takePanel({ ...this.panel, lines })
		}
		return line
	}

	async #request(method, path, body) {
		let response
		try {
			response = await fetch(`${this.base}${path}`, {
				method,
				dispatcher: this.dispatcher,
				headers: body ? { 'Content-Type': 'application/json' } : {},
				body: body ? JSON.stringify(body) : undefined,
				signal: AbortSignal.timeout(this.timeoutMs),
			})
		} catch (error) {
			throw unreachable(`${method} ${this.#where(path)}`, error)
		}
		const text = await response.text()
		let answer = null
		try {
			answer = text ? JSON.parse(text) : null
		} catch {
			// Not JSON (a proxy's error page): the status says enough.
		}
		if (!response.ok) {
			throw new PanelError(answer?.error ?? `${method} ${this.#where(path)}: HTTP ${response.status}`, {
				status: response.status,
				code: answer?.code ?? `http_${response.status}`,
			})
		}
		return answer
	}

	/** The path without the key, for messages (the key is a secret). */
	#where(path) {
		return `/api/panel/…${path}`
	}

	/** Follows the event stream until `stop`, reopening it with a growing delay. */
	async #follow() {
		let delay = this.retry.firstMs
		while (!this.stopped) {
			const heard = await this.#stream().catch((error) => {
				if (!this.stopped) this.#setStatus(statusAfter(error), error.message)
				return false
			})
			if (this.stopped) break
			if (heard) delay = this.retry.firstMs
			// A little jitter: surfaces that lost the same server do not all come back at once.
			await this.#sleep(delay * (0.8 + 0.4 * Math.random()))
			delay = Math.min(delay * 2, this.retry.maxMs)
		}
	}

	/** One stream: resolves true if it brought the panel, when it ends (the session ended). */
	async #stream() {
		const abort = new AbortController()
		this.abort = abort
		let heard = false
		let watchdog
		const fed = () => {
			clearTimeout(watchdog)
			watchdog = setTimeout(() => abort.abort(new Error(`nothing heard for ${this.silenceMs} ms`)), this.silenceMs)
		}
		try {
			let response
			// Until the answer's head, the request's timeout; then the watchdog (a signal given to
			// fetch also ends the body, so no timeout signal there).
			const late = setTimeout(() => abort.abort(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs)
			try {
				response = await fetch(`${this.base}/events`, {
					dispatcher: this.dispatcher,
					headers: { Accept: 'text/event-stream' },
					signal: abort.signal,
				})
			} catch (error) {
				throw unreachable('event stream', abort.signal.reason ?? error)
			} finally {
				clearTimeout(late)
			}
			if (!response.ok) {
				const answer = /** @type {{ error?: string, code?: string } | null} */ (await response.json().catch(() => null))
				throw new PanelError(answer?.error ?? `event stream: HTTP ${response.status}`, {
					status: response.status,
					code: answer?.code ?? `http_${response.status}`,
				})
			}
			const parser = createParser({
				onEvent: (message) => {
					heard = true
					this.#onMessage(message)
				},
			})
			fed()
			const reader = response.body.getReader()
			const text = new TextDecoder()
			abort.signal.addEventListener('abort', () => reader.cancel().catch(() => {}), { once: true })
			for (;;) {
				let read
				try {
					read = await reader.read()
				} catch (error) {
					throw new PanelError(`event stream: ${describe(abort.signal.reason ?? error)}`, { cause: error })
				}
				if (read.done) break
				fed()
				parser.feed(text.decode(read.value, { stream: true }))
			}
			if (!this.stopped) this.#setStatus('retrying', 'the event stream ended (the panel left?)')
			return heard
		} finally {
			clearTimeout(watchdog)
		}
	}

	/** @param {import('eventsource-parser').EventSourceMessage} message */
	#onMessage({ event, data }) {
		let body
		try {
			body = JSON.parse(data)
		} catch {
			return
		}
		if (event === 'state') {
			this.#takePanel(body)
			this.#setStatus('connected', '')
			this.emit('state', body)
		} else if (event === 'call') {
			this.#flash(body.groupId, CALL_MS)
			this.emit('call', body)
		}
	}

	#takePanel(panel) {
		this.panel = panel
		// A panel first heard mid-call (a reconnect) flashes too, for at most a call's length;
		// the same call's `call: true` is not taken again once its flash is over.
		for (const line of panel.lines) {
			const started = this.callStarts.get(line.groupId) ?? -Infinity
			if (line.call && performance.now() - started > 2 * CALL_MS) this.#flash(line.groupId, CALL_MS)
		}
		this.#holdCheck()
		this.emit('change')
	}

	#flash(groupId, ms) {
		this.callStarts.set(groupId, performance.now())
		this.calls.set(groupId, performance.now() + ms)
		clearTimeout(this.callTimers.get(groupId))
		this.callTimers.set(
			groupId,
			setTimeout(() => {
				// Over, whatever the clocks say (a timer may fire a fraction of a ms early).
				this.callTimers.delete(groupId)
				this.calls.delete(groupId)
				this.emit('change')
			}, ms),
		)
		this.emit('change')
	}

	/** Starts or stops the requests that keep a held talk on (a third of the server's limit). */
	#holdCheck() {
		const want = this.held.size > 0 && !this.stopped
		if (!want) {
			clearInterval(this.holdTimer)
			this.holdTimer = null
			return
		}
		const every = Math.max(250, ((this.panel?.maxRemoteTalkSeconds ?? 30) * 1000) / 3)
		if (this.holdTimer && this.holdEvery === every) return
		clearInterval(this.holdTimer)
		this.holdEvery = every
		this.holdTimer = setInterval(() => {
			this.refresh().catch((error) => this.emit('status', { status: this.status, message: error.message }))
		}, every)
	}

	#setStatus(status, message) {
		if (this.status === status && this.message === message) return
		this.status = status
		this.message = message
		this.emit('status', { status, message })
		this.emit('change')
	}

	#sleep(ms) {
		return new Promise((resolve) => {
			const timer = setTimeout(resolve, ms)
			this.wake = () => {
				clearTimeout(timer)
				resolve()
			}
		})
	}
}

/**
 * An Agent that accepts exactly the server certificate whose SHA-256 is `fingerprint`
 * (`AB:CD:…`), self-signed or not, and refuses any other before a byte of a request is sent.
 * The certificate is checked on the socket once its handshake is done, before undici has it:
 * Node calls no `checkServerIdentity` for a certificate whose chain does not verify (a
 * self-signed one never does) when the chain check is off. No TLS session is resumed: a
 * resumed session does not show the server's certificate.
 */
function pinnedAgent(fingerprint) {
	const connect = buildConnector({ rejectUnauthorized: false, maxCachedSessions: 0 })
	return new Agent({
		connect: (options, callback) =>
			connect(options, (error, socket) => {
				if (error) return callback(error, null)
				const presented = socket instanceof TLSSocket ? socket.getPeerCertificate().fingerprint256 : undefined
				if (presented === fingerprint) return callback(null, socket)
				socket.destroy()
				const notPinned = new Error(
					`the server's TLS certificate (SHA-256 ${presented ?? 'none'}) is not the one pinned: ` +
						`another server, or partyline has a new certificate (${WHERE_SHOWN})`,
				)
				callback(Object.assign(notPinned, { code: NOT_PINNED }), null)
			}),
	})
}

/**
 * A request that got no answer, as a PanelError. One refused for the server's certificate
 * (`untrusted_certificate`) says what the user can do about it.
 */
function unreachable(what, error) {
	const cause = error?.cause ?? error
	if (cause?.code === NOT_PINNED) {
		return new PanelError(`${what}: ${cause.message}`, { code: 'untrusted_certificate', cause })
	}
	if (CERTIFICATE_ERRORS.has(cause?.code)) {
		const message =
			`${what}: the server's TLS certificate is not trusted (${cause.message}); for partyline's own ` +
			`certificate, paste its SHA-256 into \u201cServer certificate SHA-256\u201d (${WHERE_SHOWN})`
		return new PanelError(message, { code: 'untrusted_certificate', cause })
	}
	return new PanelError(`${what}: ${describe(error)}`, { cause: error })
}

/** The client's status after its event stream failed with `error`. */
function statusAfter(error) {
	if (error instanceof PanelError && error.status === 404) return 'unknown_key'
	return error?.code === 'untrusted_certificate' ? 'untrusted_certificate' : 'retrying'
}

function clampVolume(value) {
	const n = Math.round(Number(value))
	if (!Number.isFinite(n)) throw new PanelError(`not a volume: ${value}`, { code: 'bad_request', status: 400 })
	return Math.min(100, Math.max(0, n))
}

/** What went wrong with a request, without undici's nesting. */
function describe(error) {
	const cause = error?.cause
	return cause?.code ? `${error.message} (${cause.code}: ${cause.message})` : (error?.message ?? String(error))
}
