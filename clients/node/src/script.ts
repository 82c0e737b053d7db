// Script mode: a module call sent to the Lua library lua/ratelimit.lua
// instead, for a Redis without the module (managed Redis). The call is
// translated mechanically: the module command's keys become KEYS, its name
// ARGV[1], its other arguments the rest of ARGV. EVALSHA first; EVAL when
// the node has not cached the script (NOSCRIPT: another node, a failover,
// SCRIPT FLUSH, a restart).

import { createHash } from 'node:crypto';

import { RATELIMIT_LUA } from './ratelimit-lua.js';
import { RateLimitModeError, replyCode, type Connection } from './redis.js';

const RATELIMIT_LUA_SHA1 = createHash('sha1').update(RATELIMIT_LUA).digest('hex');

/** A module call's parts: `RL.MULTI numkeys key... args...` or `RL.X key args...`. */
export function splitCall([command, ...rest]: string[]): { command: string; keys: string[]; args: string[] } {
  const count = command.toUpperCase() === 'RL.MULTI' ? Number(rest.shift()) : 1;
  return { command, keys: rest.slice(0, count), args: rest.slice(count) };
}

/** The script's arguments for a module call: `numkeys key... COMMAND args...`. */
export function scriptArgs(call: string[]): string[] {
  const { command, keys, args } = splitCall(call);
  return [String(keys.length), ...keys, command, ...args];
}

/** Runs a module call as the script on the node that gets `key`. */
export async function callScript(connection: Connection, key: string, call: string[]): Promise<unknown> {
  const args = scriptArgs(call);
  try {
    return await connection.send(key, ['EVALSHA', RATELIMIT_LUA_SHA1, ...args]);
  } catch (error) {
    if (replyCode(error) !== 'NOSCRIPT') throw explainAcl(error);
  }
  try {
    return await connection.send(key, ['EVAL', RATELIMIT_LUA, ...args]); // caches it on that node too
  } catch (error) {
    throw explainAcl(error);
  }
}

/** A user whose ACL forbids EVALSHA or EVAL cannot use script mode: say so, and what to do instead. */
function explainAcl(error: unknown): unknown {
  if (replyCode(error) !== 'NOPERM' || !/'eval(sha)?'/i.test(String((error as Error).message))) return error;
  return new RateLimitModeError(
    'NOPERM this Redis user\'s ACL forbids EVALSHA/EVAL, which script mode needs (it runs lua/ratelimit.lua where the ' +
      'redis-ratelimit module is not loaded): allow them (ACL SETUSER <user> +evalsha +eval), or load the module',
    error,
  );
}
