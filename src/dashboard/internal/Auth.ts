/**
 * Who may redrive from the dashboard. Pages are read-only for everyone who can reach them; a
 * redrive needs the operator token, presented either once through the login form (which sets an
 * HttpOnly, SameSite=Strict session cookie) or on each request as `Authorization: Bearer`. A
 * POST made with the cookie must also carry the session's CSRF token (a form field): the cookie
 * is ambient, a bearer header is not.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"

/** The session cookie's name. */
export const CookieName = "fair_relay_dashboard"

/** How long a login lasts. */
export const SessionMillis = 8 * 60 * 60 * 1000

// A bound on remembered sessions: logins beyond it evict the oldest (memory cannot grow forever).
const MaxSessions = 1000

interface Session {
  readonly csrf: string
  readonly expiresAt: number
}

/** Who the request is, for the redrive form. */
export type Principal =
  | { readonly _tag: "Anonymous" }
  | { readonly _tag: "Session"; readonly id: string; readonly csrf: string }
  | { readonly _tag: "Bearer" }

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest()

/** Compares secrets in time independent of where they differ. */
export const sameSecret = (given: string, expected: string): boolean => timingSafeEqual(digest(given), digest(expected))

const newSecret = () => randomBytes(32).toString("base64url")

/** The sessions of one dashboard (in memory: a restart logs everyone out). */
export class Sessions {
  private readonly sessions = new Map<string, Session>()

  constructor(private readonly token: string) {}

  /** Checks a token given at login and opens a session for it. */
  login(given: string, now: number): { readonly id: string; readonly csrf: string } | undefined {
    if (!sameSecret(given, this.token)) return undefined
    this.sweep(now)
    while (this.sessions.size >= MaxSessions) {
      const oldest = this.sessions.keys().next()
      if (oldest.done === true) break
      this.sessions.delete(oldest.value)
    }
    const id = newSecret()
    const csrf = newSecret()
    this.sessions.set(id, { csrf, expiresAt: now + SessionMillis })
    return { id, csrf }
  }

  /** Ends a session. */
  logout(id: string): void {
    this.sessions.delete(id)
  }

  /** Who a request is: a live session from its cookie, the bearer token, or nobody. */
  identify(cookie: string | undefined, authorization: string | undefined, now: number): Principal {
    if (authorization !== undefined) {
      const match = /^Bearer\s+(.+)$/i.exec(authorization.trim())
      if (match !== null && sameSecret(match[1]!, this.token)) return { _tag: "Bearer" }
    }
    if (cookie !== undefined) {
      const session = this.sessions.get(cookie)
      if (session !== undefined && session.expiresAt > now) return { _tag: "Session", id: cookie, csrf: session.csrf }
      if (session !== undefined) this.sessions.delete(cookie)
    }
    return { _tag: "Anonymous" }
  }

  private sweep(now: number) {
    for (const [id, session] of this.sessions) if (session.expiresAt <= now) this.sessions.delete(id)
  }
}

/**
 * Whether a POST by `principal` with form field `csrf` may act: a bearer request always, a
 * session only with its own CSRF token, nobody else.
 */
export const mayPost = (principal: Principal, csrf: string | undefined): boolean =>
  principal._tag === "Bearer" ||
  (principal._tag === "Session" && csrf !== undefined && sameSecret(csrf, principal.csrf))

/**
 * A cross-site POST is refused before anything else: when the browser says where the request
 * comes from (`Origin`), it must be this host.
 */
export const sameOrigin = (origin: string | undefined, host: string | undefined): boolean => {
  if (origin === undefined) return true
  if (host === undefined) return false
  try {
    return new URL(origin).host === host
  } catch {
    return false
  }
}

/** Failed attempts at the operator token a client may make in a burst. */
export const AttemptBurst = 5

/** How often a client regains one attempt. */
export const AttemptRefillMillis = 12_000

// A bound on remembered clients: beyond it the oldest entries are forgotten.
const MaxClients = 10_000

/**
 * Guesses at the operator token, limited per client address by a token bucket: `AttemptBurst`
 * failures in a row, then one per `AttemptRefillMillis`. Only failures spend attempts, so an
 * operator who types the token right is never slowed; a guesser is, whatever the parallelism.
 */
export class Attempts {
  private readonly buckets = new Map<string, { readonly left: number; readonly at: number }>()

  constructor(
    private readonly burst: number = AttemptBurst,
    private readonly refillMillis: number = AttemptRefillMillis
  ) {}

  private left(client: string, now: number): number {
    const bucket = this.buckets.get(client)
    if (bucket === undefined) return this.burst
    return Math.min(this.burst, bucket.left + Math.max(0, now - bucket.at) / this.refillMillis)
  }

  /** Whether `client` may present the token now. */
  allowed(client: string, now: number): boolean {
    return this.left(client, now) >= 1
  }

  /** Milliseconds until `client` may present the token again (0: now). */
  retryAfter(client: string, now: number): number {
    return Math.ceil(Math.max(0, 1 - this.left(client, now)) * this.refillMillis)
  }

  /** Spends one of `client`'s attempts on a failure; returns how many are left. */
  failed(client: string, now: number): number {
    const left = Math.max(0, this.left(client, now) - 1)
    this.buckets.delete(client)
    this.buckets.set(client, { left, at: now })
    while (this.buckets.size > MaxClients) {
      const oldest = this.buckets.keys().next()
      if (oldest.done === true) break
      this.buckets.delete(oldest.value)
    }
    return left
  }
}

/**
 * The host name of a `Host` header, lower case, without port, brackets or a trailing dot
 * (`[::1]:8080` → `::1`), or undefined when it is missing or malformed.
 */
export const hostName = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/@]+))(?::\d{1,5})?$/.exec(header.trim())
  if (match === null) return undefined
  return (match[1] ?? match[2]!).toLowerCase().replace(/\.$/, "")
}

/** An allow-list entry as compared with `hostName`: lower case, without brackets or trailing dot. */
export const normalizeHost = (name: string): string => name.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "")

/**
 * Where the login may send the browser afterwards: a path of this dashboard — absolute, printable
 * ASCII (a header value), no `//` and no backslash anywhere (which browsers read as another
 * origin) — else the overview.
 */
export const safeNext = (next: string | undefined): string =>
  next !== undefined && /^\/[\x21-\x5b\x5d-\x7e]*$/.test(next) && !next.includes("//") ? next : "/"
