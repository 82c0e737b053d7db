// Keys by address: IPv4, IPv4-mapped IPv6, IPv6 grouped by prefix; no
// address is an error, never one key for all.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { byIp, byUser, ipKey } from '../src/index.js';

test('IPv4 and IPv4-mapped IPv6 are the same client', () => {
  assert.equal(ipKey('203.0.113.7'), 'ip:203.0.113.7');
  assert.equal(ipKey('::ffff:203.0.113.7'), 'ip:203.0.113.7');
});

test('IPv6 grouped by /56 by default, configurable', () => {
  assert.equal(ipKey('2001:db8:0:12ab:1::1'), 'ip6:2001:db8:0:1200::/56');
  assert.equal(ipKey('2001:db8:0:12ff:ffff:ffff:ffff:ffff'), 'ip6:2001:db8:0:1200::/56');
  assert.equal(ipKey('2001:db8:0:1300::1'), 'ip6:2001:db8:0:1300::/56');
  assert.equal(ipKey('2001:db8:0:12ab:1::1', 64), 'ip6:2001:db8:0:12ab::/64');
  assert.equal(ipKey('2001:db8:ffff:12ab:1::1', 48), 'ip6:2001:db8:ffff::/48');
  assert.equal(ipKey('2001:db8:0:12ab:1::1', 60), 'ip6:2001:db8:0:12a0::/60');
  assert.equal(ipKey('2001:db8:0:12ab:1::1', 128), 'ip6:2001:db8:0:12ab:1::1/128');
  assert.equal(ipKey('2001:DB8::1', false), 'ip6:2001:db8::1');
});

test('byIp reads req.ip, then the socket; byUser prefers the signed-in user', () => {
  assert.equal(byIp()({ ip: '2001:db8:0:12ab::9' }), 'ip6:2001:db8:0:1200::/56');
  assert.equal(byIp(false)({ ip: '2001:db8:0:12ab::9' }), 'ip6:2001:db8:0:12ab::9');
  assert.equal(byIp()({ socket: { remoteAddress: '::ffff:10.1.2.3' } }), 'ip:10.1.2.3');
  assert.equal(byUser()({ ip: '10.1.2.3', user: { id: 42 } }), 'user:42');
  assert.equal(byUser()({ ip: '10.1.2.3' }), 'ip:10.1.2.3');
});

test('no request or no address: an error, never one key for every caller', () => {
  const noRequest = /^TypeError: byIp: no request to key by \(check\(\) was called without one\): pass the request, or give the limiter a key function$/;
  const noAddress = /^TypeError: byIp: the request carries no client address: give the limiter a key function that names the caller$/;
  assert.throws(() => byIp()(undefined as never), noRequest);
  assert.throws(() => byUser()(undefined as never), noRequest);
  assert.throws(() => byIp()({}), noAddress);
  assert.throws(() => byIp()({ ip: '', socket: {} }), noAddress);
  assert.throws(() => byUser()({ socket: { remoteAddress: undefined } }), noAddress);
});
