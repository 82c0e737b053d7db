// Whom a request counts against: its client address, or its signed-in user.

import ipaddr from 'ipaddr.js';

/** What these key functions read: Express, Fastify and Node's own requests all have it. */
export interface RequestWithAddress {
  ip?: string | undefined;
  socket?: { remoteAddress?: string | undefined } | undefined;
}

/**
 * The key of an address. IPv4-mapped IPv6 counts as IPv4; other IPv6
 * addresses are grouped by their first `ipv6Subnet` bits (a customer
 * usually gets a whole /56 and could rotate through it), or kept whole
 * with `false`.
 */
export function ipKey(address: string, ipv6Subnet: number | false = 56): string {
  if (!ipaddr.isValid(address)) return `ip:${address}`;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return `ip:${parsed.toString()}`;
  if (ipv6Subnet === false) return `ip6:${parsed.toString()}`;
  const bytes = parsed.toByteArray().map((byte, i) => {
    const bits = Math.min(8, Math.max(0, ipv6Subnet - i * 8));
    return byte & ((0xff << (8 - bits)) & 0xff);
  });
  return `ip6:${ipaddr.fromByteArray(bytes).toString()}/${ipv6Subnet}`;
}

/** Checks `ipv6Subnet` (option name in errors). */
export function isIpv6Subnet(value: unknown): value is number | false {
  return value === false || (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 128);
}

/**
 * Keys by client address, IPv6 by /`ipv6Subnet` (56 by default). A
 * request without an address is an error: keying all such requests alike
 * would give every caller one budget.
 */
export function byIp(ipv6Subnet: number | false = 56) {
  const keyOf = rememberedIpKey(ipv6Subnet);
  return (req: RequestWithAddress): string => {
    if (req === undefined || req === null) {
      throw new TypeError('byIp: no request to key by (check() was called without one): pass the request, or give the limiter a key function');
    }
    const address = req.ip || req.socket?.remoteAddress;
    if (!address) throw new TypeError('byIp: the request carries no client address: give the limiter a key function that names the caller');
    return keyOf(address);
  };
}

/** Addresses remembered per byIp(): emptied when this many are kept. */
const REMEMBERED = 10_000;

/**
 * ipKey, remembered per address: parsing an address with ipaddr.js was a
 * third of the limiter's own time per request, and a client sends many.
 */
function rememberedIpKey(ipv6Subnet: number | false): (address: string) => string {
  const keys = new Map<string, string>();
  return (address) => {
    let key = keys.get(address);
    if (key === undefined) {
      if (keys.size >= REMEMBERED) keys.clear();
      key = ipKey(address, ipv6Subnet);
      keys.set(address, key);
    }
    return key;
  };
}

/**
 * Keys by the authenticated user (`req.user.id`, as Passport and most auth
 * middleware set it), and by address for anonymous requests.
 */
export function byUser(ipv6Subnet: number | false = 56) {
  const ip = byIp(ipv6Subnet);
  return (req: RequestWithAddress & { user?: { id?: string | number } }): string =>
    req?.user?.id === undefined ? ip(req) : `user:${req.user.id}`;
}
